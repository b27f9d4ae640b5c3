package slurmcluster

import (
	"reflect"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestForgetReleasesEveryClusterMap(t *testing.T) {
	m, reg := newTestMetrics(t)
	r := &Reconciler{Metrics: m}
	listed := map[uintptr]bool{}
	for _, m := range r.perCluster() {
		listed[reflect.ValueOf(m).Pointer()] = true
	}
	// Every sync.Map of the Reconciler but the name index is per cluster, and listed.
	v := reflect.ValueOf(r).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Type != reflect.TypeOf(sync.Map{}) || f.Name == "uids" {
			continue
		}
		if !listed[v.Field(i).Addr().Pointer()] {
			t.Errorf("Reconciler.%s is not in perCluster: a deleted cluster's entries would stay", f.Name)
		}
	}

	cluster := func(uid types.UID) *sunkv1.SlurmCluster {
		return &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: uid}}
	}
	remembers := func(uid types.UID) {
		for _, m := range r.perCluster() {
			m.Store(uid, "something")
		}
	}
	// The series are by name: the status a cluster's reconcile last wrote.
	exported := func(name string) {
		m.observe(types.NamespacedName{Namespace: "ns", Name: name}, []metav1.Condition{cond(sunkv1.ConditionReady, true, sunkv1.ReasonReady)})
	}
	series := func(name string) string {
		return `sunk_slurmcluster_condition{cluster="ns/` + name + `",reason="Ready",status="True",type="Ready"} 1`
	}
	holds := func(uid types.UID) (n int) {
		for _, m := range r.perCluster() {
			if _, ok := m.Load(uid); ok {
				n++
			}
		}
		return n
	}
	other := cluster("other")
	other.Name = "d"
	r.rememberUID(other)
	remembers("other")
	exported("d")

	r.rememberUID(cluster("u1"))
	remembers("u1")
	exported("c")
	r.rememberUID(cluster("u1"))
	if n := holds("u1"); n != len(r.perCluster()) {
		t.Fatalf("a reconcile of the same cluster dropped its memory: %d of %d maps hold it", n, len(r.perCluster()))
	}
	expectSeries(t, reg, series("c"), series("d"))
	// Deleted and created again under its name: another cluster, without the old one's
	// conditions until its own status is written.
	r.rememberUID(cluster("u2"))
	remembers("u2")
	if n := holds("u1"); n != 0 {
		t.Errorf("the cluster created again under the name still has the old one's memory in %d maps", n)
	}
	expectSeries(t, reg, series("d"))
	exported("c")
	// Gone: the reconcile finds only its name.
	r.forget(types.NamespacedName{Namespace: "ns", Name: "c"})
	if n := holds("u2"); n != 0 {
		t.Errorf("a deleted cluster is still remembered in %d maps", n)
	}
	expectSeries(t, reg, series("d"))
	if _, ok := r.uids.Load(types.NamespacedName{Namespace: "ns", Name: "c"}); ok {
		t.Error("a deleted cluster's name is still indexed")
	}
	if n := holds("other"); n != len(r.perCluster()) {
		t.Errorf("forgetting one cluster dropped another's memory: %d of %d maps hold it", n, len(r.perCluster()))
	}
}
