//go:build integration

package charts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/test/testenv"
)

// TestSchedulerAccount installs the sunk chart's RBAC, with the scheduler for SlurmCluster
// slurm/c1, in a real kube-apiserver. The scheduler's account, in sunk's namespace, reads its
// cluster's JWT key Secret the way the plugin does (a list and watch by metadata.name, then
// get) and no other Secret of the cluster's namespace; and an upgrade from a release that ran it
// in the cluster's namespace keeps the job mark key made there (helm's lookup, asked of this
// apiserver), since a new key would disown every running placeholder job.
func TestSchedulerAccount(t *testing.T) {
	env := testenv.APIEnv(t, testenv.APIOptions{})
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := []string{"--set", "scheduler.enabled=true", "--set", "scheduler.cluster.name=c1", "--set", "scheduler.cluster.namespace=slurm"}
	out, err := helm(t, append([]string{"template", "sunk", "sunk", "-n", "sunk-system"}, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	installRBACAndPolicies(t, env.Config, out)
	const oldMark = "a-mark-key-made-by-an-earlier-release-in-the-cluster-namespace"
	for name, data := range map[string]map[string][]byte{
		"c1-jwt-key":              {"jwt.key": []byte("k")},
		"c1-auth-key":             {"slurm.key": []byte("k")},
		"sunk-scheduler-job-mark": {"mark.key": []byte(oldMark)},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "slurm", Name: name}, Data: data}
		if _, err := admin.CoreV1().Secrets("slurm").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	scheduler := impersonate(t, env.Config, "sunk-system", "sunk-scheduler").CoreV1().Secrets("slurm")
	byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "c1-jwt-key").String()}
	if l, err := scheduler.List(ctx, byName); err != nil || len(l.Items) != 1 {
		t.Errorf("the scheduler lists its JWT key Secret by name: %v", err)
	}
	if w, err := scheduler.Watch(ctx, byName); err != nil {
		t.Errorf("the scheduler watches its JWT key Secret by name: %v", err)
	} else {
		w.Stop()
	}
	if _, err := scheduler.Get(ctx, "c1-jwt-key", metav1.GetOptions{}); err != nil {
		t.Errorf("the scheduler gets its JWT key Secret: %v", err)
	}
	if _, err := scheduler.Get(ctx, "c1-auth-key", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the scheduler gets the cluster's auth key: %v, want forbidden", err)
	}
	if _, err := scheduler.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the scheduler lists the cluster's Secrets: %v, want forbidden", err)
	}

	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = helm(t, append([]string{"template", "sunk", "sunk", "-n", "sunk-system", "--dry-run=server", "--kubeconfig", kubeconfig}, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		s := &corev1.Secret{}
		if err := yaml.Unmarshal([]byte(doc), s); err != nil || s.Kind != "Secret" || s.Name != "sunk-scheduler-job-mark" {
			continue
		}
		if s.Namespace != "sunk-system" || string(s.Data["mark.key"]) != oldMark {
			t.Errorf("the job mark key: %s/%s with %q, want sunk-system's with the key made in slurm", s.Namespace, s.Name, s.Data["mark.key"])
		}
		return
	}
	t.Error("the render has no job mark key Secret")
}
