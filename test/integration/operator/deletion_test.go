//go:build integration

package operator

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// TestSlurmClusterDeletedWaitsForItsNodeSets: deleting a SlurmCluster deletes its NodeSets and
// holds the cluster, slurmctld with it, until they are gone the protected way: the idle pod goes
// at once, the busy one when its job ends, and only then the cluster.
func TestSlurmClusterDeletedWaitsForItsNodeSets(t *testing.T) {
	h := start(t)
	h.startKubelet(t)
	ctx := context.Background()
	h.slurmCluster(t, "c6")
	h.node(t, "m1", nil)
	ns := newNodeSet(h.ns, "work", "c6")
	ns.Spec.Mode, ns.Spec.Replicas = sunkv1.NodeSetReplicas, ptr.To(int32(2))
	if err := h.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	h.readyNodeSet(t, "work", "work-0", "work-1")
	eventually(t, "the cluster's finalizer", func() error {
		if f := h.cluster(t, "c6").Finalizers; !slices.Contains(f, wellknown.FinalizerClusterDrain) {
			return fmt.Errorf("finalizers %v", f)
		}
		return nil
	})
	h.setSlurmState(t, "work-1", "ALLOCATED")
	eventually(t, "busy counted", func() error {
		if s := h.nodeSet(t, "work").Status; s.Busy != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	if err := h.c.Delete(ctx, h.cluster(t, "c6")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NodeSet deleted, idle pod gone, busy pod drained and kept, cluster held", func() error {
		if ns := h.nodeSet(t, "work"); ns.DeletionTimestamp.IsZero() {
			return fmt.Errorf("NodeSet not deleted")
		}
		if got := h.allPods(t, "work"); !slices.Equal(got, []string{"work-1"}) {
			return fmt.Errorf("pods %v", got)
		}
		if n, err := h.slurmNode(t, "work-1"); err != nil || !n.Drained() {
			return fmt.Errorf("work-1 in Slurm: %+v %v", n, err)
		}
		if sc := h.cluster(t, "c6"); sc.DeletionTimestamp.IsZero() {
			return fmt.Errorf("cluster not being deleted")
		}
		return nil
	})

	h.setSlurmState(t, "work-1", "IDLE")
	eventually(t, "the NodeSet, then the cluster, gone", func() error {
		if err := h.get(t, "work", &sunkv1.NodeSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeSet: %v", err)
		}
		if err := h.get(t, "c6", &sunkv1.SlurmCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("SlurmCluster: %v", err)
		}
		return nil
	})
}
