//go:build integration

package syncer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
)

// TestSyncerGresMismatch: a compute pod made by render.ComputePod for a NodeSet granted two
// h100 GPUs, standing for slurm-n1, whose real slurmd 24.11 registered without GRES (the
// test bed's node line): Slurm reports none, so the syncer drains the node with a k8s:
// reason naming both sides, and leaves slurm-n2, whose pod registered no GRES either. Once
// slurm-n1's pod is one without GPUs, the syncer resumes it.
//
// The mismatch is Slurm's real answer, but from the other side than a missing device: the
// shared test bed has no gres.conf (sunk's GRES test runs its own slurmctld without REST),
// and giving its slurmd GPUs would reconfigure a bed other tests run on. What Slurm reports
// for a slurmd with fewer GPUs than its line, and what the syncer decides on it, is checked
// on a private slurmctld in test/integration/slurm (TestGPUsWithoutGPUs).
func TestSyncerGresMismatch(t *testing.T) {
	h := setup(t)
	n1, n2 := h.env.Nodes[0], h.env.Nodes[1]
	gpus := nodeSet(resource.MustParse("2"))
	// Replaced before the syncer starts, and replaced back while it is stopped: a pod that
	// is missing while a syncer runs has its Slurm node removed.
	h.replacePod(0, gpus, "h100")
	h.replacePod(1, nodeSet(resource.Quantity{}), "")
	h.start()

	want := "k8s: GRES mismatch (Slurm has none, the pod registered gpu:h100:2)"
	h.waitSlurm(n1, func(st, r string) bool { return strings.Contains(st, "DRAIN") && r == want }, "drained: "+want)
	h.watchNotDrained(n2, time.Now().Add(2*time.Second))

	h.stop()
	h.replacePod(0, nodeSet(resource.Quantity{}), "")
	h.start()
	h.waitSlurm(n1, notDrained, "resumed")
}

// nodeSet is a NodeSet of the test bed's nodes granted gpus nvidia.com/gpu (none when zero).
func nodeSet(gpus resource.Quantity) *sunkv1.NodeSet {
	s := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: ns},
		Spec: sunkv1.NodeSetSpec{ClusterRef: clusterName, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	if !gpus.IsZero() {
		s.Spec.Resources.Limits[render.ResourceGPU] = gpus
	}
	return s
}

// replacePod replaces the compute pod of test bed node i by the one sunk renders for set
// (render.ComputePod, its node line included), bound to the same Kubernetes node and Ready.
func (h *harness) replacePod(i int, set *sunkv1.NodeSet, gpuType string) {
	h.t.Helper()
	ctx := context.Background()
	name := h.env.Nodes[i]
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := h.c.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
		h.t.Fatal(err)
	}
	eventually(h.t, 10*time.Second, func() error {
		err := h.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s not gone yet: %v", name, err)
	})
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: ns},
		Spec: sunkv1.SlurmClusterSpec{Image: "sunk.dev/slurm:24.11-local"}}
	pod := render.ComputePod(set, sc, clusternames.For(sc, ""), render.ComputeMember{Name: name, NodeName: k8sNode(i), GPUType: gpuType})
	pod.Finalizers = nil // no NodeSet controller here to lift it
	pod.Spec.NodeName = k8sNode(i)
	if err := h.c.Create(ctx, pod); err != nil {
		h.t.Fatal(err)
	}
	h.startContainer(name, time.Now().Add(-time.Minute), time.Now().Add(-50*time.Second))
	h.setPodReady(name, true)
}
