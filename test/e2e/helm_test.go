//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// helmEnv is the local cluster with both charts installed by the real helm.
type helmEnv struct {
	*operatorEnv
	sunkNS, sunkRelease string
	slurmRelease        string // the slurm chart's release in ns, which cleanup and uninstall remove
}

// helm runs the provisioned helm against the local cluster, in the repository's root.
func (e *operatorEnv) helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.CacheDir(), "bin", "helm"), args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// script runs a repository script and fails the test with its output.
func script(t *testing.T, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), path), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", path, args, err, out)
	}
}

// startCharts builds and imports sunk.dev/sunk:local, installs the sunk chart into a namespace
// of its own and makes the Slurm cluster's namespace. Cleanup uninstalls whatever is left.
func startCharts(t *testing.T) *helmEnv {
	t.Helper()
	h := newHelmEnv(t)
	stamp, err := os.ReadFile(filepath.Join(testenv.CacheDir(), "stamps", "image-sunk"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.helm(t, "upgrade", "--install", h.sunkRelease, "charts/sunk", "-n", h.sunkNS, "--create-namespace",
		"--wait", "--timeout", "3m", "--set", "operator.slurmConfigCheck=true",
		// Only the test's namespace: other tests' SlurmClusters (another checkout's, run at the
		// same time) are their own operators' to manage.
		"--set", "watchNamespaces={"+h.ns+"}",
		"--set-string", "operator.podAnnotations.sunk\\.dev/image-stamp="+strings.TrimSpace(string(stamp))); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}); err != nil {
		t.Fatal(err)
	}
	return h
}

// newHelmEnv builds and imports sunk.dev/sunk:local and names the test's releases and
// namespaces, installing nothing. Cleanup uninstalls whatever is left.
func newHelmEnv(t *testing.T) *helmEnv {
	t.Helper()
	script(t, "hack/images.sh", "sunk")
	cl := testenv.Cluster(t) // imports what images.sh rebuilt
	script(t, "hack/env-kube.sh", "images")
	// The client's warnings to stderr; unset, controller-runtime prints a stack trace about it.
	ctrllog.SetLogger(zap.New())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sunkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cl.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	execer, err := kube.NewPodExecer(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := rand.IntN(1e6)
	h := &helmEnv{
		operatorEnv: &operatorEnv{ClusterEnv: cl, c: c, exec: execer, ns: fmt.Sprintf("e2e-helm-%d", n)},
		sunkNS:      fmt.Sprintf("e2e-sunk-system-%d", n), sunkRelease: fmt.Sprintf("e2e-sunk-%d", n),
		slurmRelease: "journey",
	}
	// Idempotent: after a passing run there is nothing left to remove. sunk goes in a cleanup of
	// its own, which runs after the Slurm cluster's even when that one fails (its namespace not
	// gone in time): else sunk's cluster-wide objects, its webhooks among them, outlived the run.
	t.Cleanup(func() {
		_, _ = h.helm(t, "uninstall", h.sunkRelease, "-n", h.sunkNS, "--ignore-not-found", "--wait")
		_ = h.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.sunkNS}})
	})
	t.Cleanup(func() {
		if t.Failed() {
			h.dumpNamespace(t)
			(&operatorEnv{ClusterEnv: h.ClusterEnv, c: h.c, exec: h.exec, ns: h.sunkNS}).dumpNamespace(t)
		}
		_, _ = h.helm(t, "uninstall", h.slurmRelease, "-n", h.ns, "--ignore-not-found")
		h.removeNamespace(t, h.ns)
	})
	return h
}

// installSlurm installs the slurm chart as release in the test's namespace with values (YAML)
// and waits until its SlurmCluster is Ready and nodes are idle in Slurm; it returns the
// login pod's name.
func (h *helmEnv) installSlurm(t *testing.T, release, values string, nodes ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), release+".values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "slurm chart installed", func() error {
		_, err := h.helm(t, "upgrade", "--install", release, "charts/slurm", "-n", h.ns, "-f", f)
		return err
	})
	start := time.Now()
	poll(t, 6*time.Minute, "SlurmCluster Ready", func() error {
		c := meta.FindStatusCondition(h.cluster(t, release).Status.Conditions, sunkv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	login := h.podOf(t, release, wellknown.ComponentLogin).Name
	h.waitIdle(t, login, 3*time.Minute, strings.Join(nodes, ", ")+" idle", nodes...)
	t.Logf("Slurm cluster %s ready %s after helm install", release, time.Since(start).Round(time.Second))
	return login
}

func (h *helmEnv) mustSh(t *testing.T, pod, script string) string {
	t.Helper()
	out, err := h.sh(t, pod, "login", script)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// cordonDrains cordons the node of compute-0 and expects the syncer to drain the Slurm node
// with a reason that starts with "k8s:", and to lift that drain after the uncordon.
func (h *helmEnv) cordonDrains(t *testing.T, login string) {
	t.Helper()
	node := h.nodeOf(t, "compute-0")
	// The node is shared with every other test: it is uncordoned whatever happens.
	t.Cleanup(func() { h.setUnschedulable(t, node, false) })
	h.setUnschedulable(t, node, true)
	start := time.Now()
	poll(t, time.Minute, "compute-0 drained with a k8s: reason", func() error {
		out, err := h.sh(t, login, "login", "sinfo -h -N -n compute-0 -o '%t|%E'")
		state, reason, _ := strings.Cut(strings.TrimSpace(out), "|")
		if err != nil || !strings.HasPrefix(state, "drain") || !strings.HasPrefix(reason, "k8s:") {
			return fmt.Errorf("sinfo: %v %q", err, out)
		}
		return nil
	})
	t.Logf("cordon → Slurm drain in %s", time.Since(start).Round(100*time.Millisecond))
	h.setUnschedulable(t, node, false)
	h.waitIdle(t, login, time.Minute, "compute-0 idle after the uncordon", "compute-0")
}

// nodeOf is the Kubernetes node of the pod named name in the test's namespace.
func (h *helmEnv) nodeOf(t *testing.T, name string) string {
	t.Helper()
	pod := &corev1.Pod{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: h.ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	return pod.Spec.NodeName
}

// setUnschedulable cordons (true) or uncordons the Kubernetes node.
func (h *helmEnv) setUnschedulable(t *testing.T, node string, v bool) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v))
	if _, err := h.Clientset.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("setting %s unschedulable=%t: %v", node, v, err)
	}
}

// uninstall removes the Slurm release and its namespace (docs/user-guide.md), then sunk's, and
// checks that nothing is left (nothingLeft).
func (h *helmEnv) uninstall(t *testing.T) {
	t.Helper()
	volumes := h.claimedVolumes(t)
	// Without --wait: the SlurmCluster holds slurmctld while its NodeSet drains (finalizers);
	// removeNamespace waits for all of it.
	if _, err := h.helm(t, "uninstall", h.slurmRelease, "-n", h.ns); err != nil {
		t.Fatal(err)
	}
	h.removeNamespace(t, h.ns)
	if _, err := h.helm(t, "uninstall", h.sunkRelease, "-n", h.sunkNS, "--wait", "--timeout", "2m"); err != nil {
		t.Fatal(err)
	}
	h.removeNamespace(t, h.sunkNS)
	h.nothingLeft(t, volumes)
}

// claimedVolumes are the volumes of the Slurm namespace's claims: the shared volume and
// slurmctld's state at least.
func (h *helmEnv) claimedVolumes(t *testing.T) []string {
	t.Helper()
	var pvs corev1.PersistentVolumeList
	if err := h.c.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == h.ns {
			ours = append(ours, pv.Name)
		}
	}
	if len(ours) < 2 {
		t.Errorf("volumes of %s before uninstalling: %v, want the shared and the state volume", h.ns, ours)
	}
	return ours
}

// nothingLeft checks what both releases and their namespaces leave once removed: no volumes of
// the claims, no cluster-scoped RBAC or webhook. The CRDs stay (Helm never deletes a chart's
// crds/: deleting them would delete every SlurmCluster).
func (h *helmEnv) nothingLeft(t *testing.T, volumes []string) {
	t.Helper()
	ctx := context.Background()
	poll(t, 2*time.Minute, "volumes deleted", func() error {
		for _, name := range volumes {
			err := h.c.Get(ctx, types.NamespacedName{Name: name}, &corev1.PersistentVolume{})
			if err == nil {
				return fmt.Errorf("volume %s still exists", name)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	release := client.MatchingLabels{"app.kubernetes.io/instance": h.sunkRelease}
	var roles rbacv1.ClusterRoleList
	var bindings rbacv1.ClusterRoleBindingList
	if err := h.c.List(ctx, &roles, release); err != nil {
		t.Fatal(err)
	}
	if err := h.c.List(ctx, &bindings, release); err != nil {
		t.Fatal(err)
	}
	webhooks, err := h.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx,
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + h.sunkRelease})
	if err != nil {
		t.Fatal(err)
	}
	if len(roles.Items)+len(bindings.Items)+len(webhooks.Items) > 0 {
		t.Errorf("left behind: %d ClusterRoles, %d ClusterRoleBindings, %d webhook configurations",
			len(roles.Items), len(bindings.Items), len(webhooks.Items))
	}
	var crds sunkv1.SlurmClusterList
	if err := h.c.List(ctx, &crds); err != nil {
		t.Errorf("the SlurmCluster CRD should stay installed: %v", err)
	}
}
