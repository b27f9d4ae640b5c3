package nodeset

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// A release whose finalizer patch lost a conflict comes back after the record is gone: with the
// node list of this reconcile showing no record, it lets the pod go without a second DELETE
// (which slurmctld and slurmrestd log as an error). Without a list, it still deletes: the
// record may be there. A list is the node watchers' cache, a poll behind Slurm: a record it
// lacks that one read of the node finds (it registered meanwhile) is deleted.
func TestReleaseDeletesARecordOnce(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	for _, tc := range []struct {
		name       string
		listed     bool
		registered bool
		deletes    int
	}{
		{"the list has no record", true, false, 0},
		{"the list has no record, Slurm has one", true, true, 1},
		{"no list (a NodeSet that is gone)", false, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "compute-3", Finalizers: []string{wellknown.FinalizerSlurmNode}},
				Spec:       corev1.PodSpec{NodeName: "k8s-node"},
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, pod).Build()
			sl := slurmfake.New()
			if tc.registered {
				sl.AddNode(slurm.Node{Name: "compute-3", State: []string{"IDLE"}})
			}
			r := &Reconciler{Client: c}
			o := &outcome{}
			if err := r.release(context.Background(), nil, memberOrder{}, sl, nil, &member{name: "compute-3", pod: pod, listed: tc.listed}, o); err != nil {
				t.Fatal(err)
			}
			if got := sl.Calls("DeleteNode"); got != tc.deletes || len(o.slurmErrs) > 0 {
				t.Errorf("DeleteNode called %d times (want %d), errors %v", got, tc.deletes, o.slurmErrs)
			}
			got := &corev1.Pod{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(got.Finalizers, wellknown.FinalizerSlurmNode) {
				t.Error("the pod keeps its finalizer")
			}
		})
	}
}

// The pods a reconcile lists are the operator cache's own objects (candidates lists them
// without copying): removeFinalizer, the one write to a listed pod, patches a copy and leaves
// the pod it was given as it was, finalizers, resource version and labels alike.
func TestRemoveFinalizerLeavesTheListedPod(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "compute-3", Labels: map[string]string{"a": "b"},
		Finalizers: []string{wellknown.FinalizerSlurmNode, "other"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).Build()
	listed := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), listed); err != nil {
		t.Fatal(err)
	}
	before := listed.DeepCopy()
	if err := removeFinalizer(context.Background(), c, listed); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(listed, before) {
		t.Errorf("removeFinalizer changed the pod it was given:\n%+v\nwas\n%+v", listed.ObjectMeta, before.ObjectMeta)
	}
	got := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Finalizers, []string{"other"}) {
		t.Errorf("finalizers after removeFinalizer %v, want [other]", got.Finalizers)
	}
}
