package render

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

func TestComputeDisruptionBudgetProtectsAllButEvictable(t *testing.T) {
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	ns := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gpu"}}
	pdb := ComputeDisruptionBudget(ns, clusternames.For(sc, "cluster.local"))
	if pdb.Name != "gpu-slurm-jobs" || pdb.Namespace != "ns" || pdb.Spec.MinAvailable.IntValue() != math.MaxInt32 || pdb.Spec.MaxUnavailable != nil {
		t.Fatalf("budget %s/%s maxUnavailable %v minAvailable %v", pdb.Namespace, pdb.Name, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	pod := map[string]string{wellknown.LabelCluster: "c", wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelNodeSet: "gpu"}
	with := func(k, v string) k8slabels.Set {
		l := k8slabels.Set{}
		for a, b := range pod {
			l[a] = b
		}
		l[k] = v
		return l
	}
	for _, c := range []struct {
		what      string
		set       k8slabels.Set
		protected bool
	}{
		{"a compute pod the syncer has not labelled", k8slabels.Set(pod), true},
		{"an evictable compute pod", with(wellknown.LabelEvictable, "true"), false},
		{"a pod with another value", with(wellknown.LabelEvictable, "false"), true},
		{"another NodeSet's pod", with(wellknown.LabelNodeSet, "cpu"), false},
		{"another cluster's pod", with(wellknown.LabelCluster, "d"), false},
		{"the cluster's controller", with(wellknown.LabelComponent, wellknown.ComponentController), false},
	} {
		if got := sel.Matches(c.set); got != c.protected {
			t.Errorf("%s: protected %v, want %v", c.what, got, c.protected)
		}
	}
}
