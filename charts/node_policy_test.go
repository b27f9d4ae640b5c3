//go:build integration

package charts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestNodeWritePolicy installs the sunk chart's RBAC and its node ValidatingAdmissionPolicy in a
// real kube-apiserver and writes a node as the syncer and as the scheduler: what they write
// (sunk.dev labels and annotations, their condition, the lock taint) passes; any other label,
// annotation, taint, condition or field is denied; an admin is not concerned.
func TestNodeWritePolicy(t *testing.T) {
	cfg := testenv.API(t, testenv.APIOptions{})
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := helm(t, "template", "sunk", "sunk", "-n", "sunk-system", "--set", "scheduler.enabled=true",
		"--set", "scheduler.cluster.name=c1", "--set", "scheduler.cluster.namespace=slurm")
	if err != nil {
		t.Fatal(err)
	}
	installRBACAndPolicies(t, cfg, out)

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}}},
	}
	node, err = admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
	}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The API server's type check of the expressions reports through kube-controller-manager,
	// which this environment lacks; an expression that fails to compile fails every write
	// below instead (failurePolicy Fail), the allowed ones included.
	syncer := impersonate(t, cfg, "sunk-system", "sunk-syncer")
	scheduler := impersonate(t, cfg, "sunk-system", "sunk-scheduler")
	patch := func(cs kubernetes.Interface, subresource, body string) error {
		var sub []string
		if subresource != "" {
			sub = []string{subresource}
		}
		_, err := cs.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
		return err
	}
	taint := func(cs kubernetes.Interface, mutate func([]corev1.Taint) []corev1.Taint) error {
		n, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = mutate(n.Spec.Taints)
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
	denied := func(err error) error {
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "sunk-node-writes") {
			return fmt.Errorf("want the policy sunk-node-writes to deny it, got %v", err)
		}
		return nil
	}
	allowed := func(err error) error { return err }

	// The apiserver loads policies asynchronously: wait until the policy denies. Each try is a
	// new value: a write the policy let through before it was loaded would make the same write
	// again a no-op, which the policy allows.
	try := 0
	wait.For(t, "the node policy in force", 30*time.Second, 100*time.Millisecond, func() error {
		try++
		return denied(patch(syncer, "", fmt.Sprintf(`{"metadata":{"labels":{"team":"try-%d"}}}`, try)))
	})

	lock := corev1.Taint{Key: wellknown.TaintJob, Value: "42", Effect: corev1.TaintEffectNoSchedule}
	for _, c := range []struct {
		what  string
		write func() error
		check func(error) error
	}{
		{"syncer labels the node with its cluster", func() error {
			return patch(syncer, "", fmt.Sprintf(`{"metadata":{"labels":{%q:"c1"}}}`, wellknown.LabelCluster))
		}, allowed},
		{"syncer mirrors the Slurm state (status)", func() error {
			return patch(syncer, "status", fmt.Sprintf(`{"metadata":{"annotations":{%q:"idle"}},"status":{"conditions":[{"type":%q,"status":"True","reason":"Idle"}]}}`,
				wellknown.AnnotationSlurmState, wellknown.ConditionSlurmNode))
		}, allowed},
		{"syncer removes its label", func() error {
			return patch(syncer, "", fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, wellknown.LabelCluster))
		}, allowed},
		{"syncer changes another label", func() error {
			return patch(syncer, "", `{"metadata":{"labels":{"kubernetes.io/hostname":"n2"}}}`)
		}, denied},
		{"syncer removes another label", func() error {
			return patch(syncer, "", `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`)
		}, denied},
		{"syncer changes another annotation", func() error {
			return patch(syncer, "", `{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"30"}}}`)
		}, denied},
		{"syncer cordons the node", func() error { return patch(syncer, "", `{"spec":{"unschedulable":true}}`) }, denied},
		{"syncer marks the node not Ready", func() error {
			return patch(syncer, "status", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Forged"}]}}`)
		}, denied},
		{"syncer changes the node's addresses", func() error {
			return patch(syncer, "status", `{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.99"}]}}`)
		}, denied},
		{"scheduler locks the node", func() error {
			return taint(scheduler, func(ts []corev1.Taint) []corev1.Taint { return append(ts, lock) })
		}, allowed},
		{"scheduler unlocks the node", func() error {
			return taint(scheduler, func(ts []corev1.Taint) []corev1.Taint {
				return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == wellknown.TaintJob })
			})
		}, allowed},
		{"scheduler adds another taint", func() error {
			return taint(scheduler, func(ts []corev1.Taint) []corev1.Taint {
				return append(ts, corev1.Taint{Key: "evil", Effect: corev1.TaintEffectNoExecute})
			})
		}, denied},
		{"scheduler puts a NoExecute taint under sunk's key", func() error {
			return taint(scheduler, func(ts []corev1.Taint) []corev1.Taint {
				return append(ts, corev1.Taint{Key: wellknown.TaintJob, Value: "43", Effect: corev1.TaintEffectNoExecute})
			})
		}, denied},
		{"scheduler removes another taint", func() error {
			return taint(scheduler, func(ts []corev1.Taint) []corev1.Taint {
				return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == "team" })
			})
		}, denied},
		{"an admin changes a label", func() error {
			return patch(admin, "", `{"metadata":{"labels":{"team":"b"}}}`)
		}, allowed},
	} {
		if err := c.check(c.write()); err != nil {
			t.Errorf("%s: %v", c.what, err)
		}
	}
}

// impersonate is a clientset acting as ServiceAccount ns/name.
func impersonate(t *testing.T, cfg *rest.Config, ns, name string) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
