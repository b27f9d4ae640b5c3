package nodeset

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

// A PerNode NodeSet parks a scaled-in member by its position in memberOrder, as a Replicas one
// does by its ordinal: a candidate below maxReplicas is parked; one at or above it, and a
// member whose node is no candidate any more (unselected, held, deleted), lose their record,
// at once (park) or at the next reconcile (unpark).
func TestPerNodeParking(t *testing.T) {
	ctx := context.Background()
	ns := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: sunkv1.NodeSetSpec{Mode: sunkv1.NodeSetPerNode, Autoscaling: &sunkv1.NodeSetAutoscaling{MaxReplicas: 2}}}
	// Node c has a pod: it comes first. Then a, b by name; node x is no longer selected.
	candidates, _ := perNodeOrder("gpu", []string{"a", "b", "c"}, nil, func(m string) bool { return m == "gpu-c" })
	order := perNodeMemberOrder("gpu", candidates)
	sl := slurmfake.New()
	for _, name := range []string{"gpu-a", "gpu-b", "gpu-c", "gpu-x", "gpu-a-0"} {
		sl.AddNode(slurm.Node{Name: name, State: []string{"IDLE", "DYNAMIC_NORM"}, Features: []string{"gpu"}})
	}
	r := &Reconciler{}
	for name, want := range map[string]bool{"gpu-a": true, "gpu-b": false, "gpu-x": false} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wellknown.LabelTemplateHash: current}}}
		if got, err := r.park(ctx, ns, order, sl, &member{name: name, pod: pod}); err != nil || got != want {
			t.Errorf("park %s = %v, %v; want %v", name, got, err, want)
		}
	}
	n, _ := sl.GetNode(ctx, "gpu-a")
	if !wellknown.Parked(n.BaseState(), n.Comment) || n.Comment != wellknown.ParkedPrefix+current {
		t.Fatalf("gpu-a after park: %v %q", n.State, n.Comment)
	}

	// Records parked by an earlier reconcile, when b and x were below maxReplicas, and
	// gpu-a-0 of a NodeSet gpu-a (its features would say gpu-a): unpark keeps a's only, and
	// leaves the record that is not the NodeSet's.
	comment := wellknown.ParkedPrefix + current
	for _, name := range []string{"gpu-b", "gpu-x", "gpu-a-0"} {
		if err := sl.UpdateNode(ctx, name, slurm.NodeUpdate{State: slurm.NodeStateFuture, Comment: &comment}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sl.UpdateNode(ctx, "gpu-a-0", slurm.NodeUpdate{Features: &[]string{"gpu-a", "gpu"}}); err != nil {
		t.Fatal(err)
	}
	list, _ := sl.ListNodes(ctx, time.Time{})
	st := newStatus(ns)
	w := &world{ns: ns, order: order, hash: current}
	if err := r.unpark(ctx, w, sl, memberRecords(ns, list.Nodes), map[string]time.Time{}, st); err != nil {
		t.Fatal(err)
	}
	list, _ = sl.ListNodes(ctx, time.Time{})
	var left []string
	for _, n := range list.Nodes {
		left = append(left, n.Name)
	}
	slices.Sort(left)
	if want := []string{"gpu-a", "gpu-a-0", "gpu-c"}; !slices.Equal(left, want) || st.counts.Parked != 1 {
		t.Errorf("records after unpark %v (parked %d), want %v (1)", left, st.counts.Parked, want)
	}
}

// A PerNode NodeSet has room for no more of a job than it has candidates, whatever its
// maxReplicas: a 4-node job asks the lighter PerNode NodeSet "a" (two nodes, maxReplicas 8)
// for 2 and the Replicas NodeSet "b" for the other 2, and both NodeSets' autoscalers count so.
func TestDemandForPerNodeRoomIsItsNodes(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = sunkv1.AddToScheme(scheme)
	a := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", CreationTimestamp: metav1.Unix(1, 0)},
		Spec: sunkv1.NodeSetSpec{ClusterRef: "slurm", Mode: sunkv1.NodeSetPerNode, Weight: ptr.To(int32(1)),
			NodeSelector: map[string]string{"pool": "a"}, Autoscaling: &sunkv1.NodeSetAutoscaling{MaxReplicas: 8}}}
	b := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", CreationTimestamp: metav1.Unix(2, 0)},
		Spec: sunkv1.NodeSetSpec{ClusterRef: "slurm", Mode: sunkv1.NodeSetReplicas, Weight: ptr.To(int32(5)),
			Autoscaling: &sunkv1.NodeSetAutoscaling{MaxReplicas: 4}}}
	nodes := map[string]*corev1.Node{}
	for name, pool := range map[string]string{"n1": "a", "n2": "a", "n3": "other"} {
		nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(a, b).Build()}
	sc := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "slurm"}}
	jobs := []slurm.Job{pending("Resources", "all", 4)}
	for _, tc := range []struct {
		ns   *sunkv1.NodeSet
		want demand
	}{{a, demand{jobs: 1, nodes: 2}}, {b, demand{jobs: 1, nodes: 2}}} {
		w := &world{ns: tc.ns, sc: sc, nodes: nodes}
		sel, err := newSelection(tc.ns)
		if err != nil {
			t.Fatal(err)
		}
		w.sel = sel
		if err := r.candidates(ctx, w); err != nil {
			t.Fatal(err)
		}
		got, err := r.demandFor(ctx, w, nil, jobs)
		if err != nil || got != tc.want {
			t.Errorf("%s: demand %+v, %v; want %+v", tc.ns.Name, got, err, tc.want)
		}
	}
}
