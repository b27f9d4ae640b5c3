//go:build integration

package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// TestNodeSetContainerCredentials: a NodeSet whose spec.containers.imagePullSecrets names a
// Secret that does not exist (a typo) says so in its condition ContainerCredentials and a
// Warning event, naming that Secret; once the admin creates it (an unlabelled Secret, outside
// the operator's cache, whose creation wakes nothing) the condition turns True on its own.
func TestNodeSetContainerCredentials(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	h.slurmCluster(t, "c1")
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	}
	must(t, h.c.Create(ctx, secret("nvcr")))
	ns := newNodeSet(h.ns, "ctr", "c1")
	ns.Spec.Containers = &sunkv1.NodeSetContainers{Enabled: true, ImagePullSecrets: []sunkv1.SecretName{{Name: "nvcr"}, {Name: "ncvr"}}}
	must(t, h.c.Create(ctx, ns))

	credentials := func() metav1.Condition {
		if c := meta.FindStatusCondition(h.nodeSet(t, "ctr").Status.Conditions, sunkv1.ConditionContainerCredentials); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
	eventually(t, "ContainerCredentials False naming ncvr", func() error {
		c := credentials()
		if c.Status != metav1.ConditionFalse || c.Reason != sunkv1.ReasonSecretMissing ||
			!strings.Contains(c.Message, "Secret ncvr does not exist") || strings.Contains(c.Message, "Secret nvcr") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	eventually(t, "a Warning event naming ncvr", func() error {
		var list eventsv1.EventList
		if err := h.c.List(ctx, &list, client.InNamespace(h.ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "ctr" && e.Reason == sunkv1.ReasonSecretMissing && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "Secret ncvr does not exist") {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})

	must(t, h.c.Create(ctx, secret("ncvr")))
	eventually(t, "ContainerCredentials True once ncvr exists", func() error {
		if c := credentials(); c.Status != metav1.ConditionTrue || c.Reason != sunkv1.ReasonSecretsFound {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}
