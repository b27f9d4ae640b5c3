package nodeset

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

func TestDecideReplicas(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	idle := func(since time.Duration) *slurm.Node {
		return &slurm.Node{State: []string{"IDLE", "DYNAMIC_NORM"}, LastBusy: ago(since)}
	}
	busy := &slurm.Node{State: []string{"ALLOCATED", "DYNAMIC_NORM"}, LastBusy: now}
	parked := &slurm.Node{State: []string{"FUTURE", "DYNAMIC_NORM"}}
	bounds := sunkv1.NodeSetAutoscaling{MinReplicas: 0, MaxReplicas: 4, IdleAfter: &metav1.Duration{Duration: time.Minute}}
	running := func(r *slurm.Node) scaleNode { return scaleNode{record: r, pod: ago(time.Hour)} }
	away := func(r *slurm.Node) scaleNode { return scaleNode{record: r} }
	for _, tc := range []struct {
		name         string
		replicas     int32
		bounds       *sunkv1.NodeSetAutoscaling
		nodes        []scaleNode
		pendingNodes int32
		want         int32
		why          string
	}{
		{name: "new NodeSet: every node registers once", replicas: 0,
			nodes: []scaleNode{{}, {}, {}, {}}, want: 4, why: "started once to register"},
		{name: "all parked, nothing pends: stays at zero", replicas: 0,
			nodes: []scaleNode{away(parked), away(parked), away(parked), away(parked)}, want: 0},
		{name: "a 3-node job pends at zero: 3 at once", replicas: 0, pendingNodes: 3,
			nodes: []scaleNode{away(parked), away(parked), away(parked), away(parked)}, want: 3, why: "ask for 3 node(s)"},
		{name: "demand above max: max", replicas: 1, pendingNodes: 9,
			nodes: []scaleNode{running(busy), away(parked), away(parked), away(parked)}, want: 4},
		{name: "busy nodes and a pending one: one more", replicas: 2, pendingNodes: 1,
			nodes: []scaleNode{running(busy), running(busy), away(parked), away(parked)}, want: 3},
		{name: "idle past idleAfter: goes", replicas: 2,
			nodes: []scaleNode{running(busy), running(idle(2 * time.Minute)), away(parked), away(parked)}, want: 1, why: "idle for 1m0s"},
		{name: "idle not long enough: stays", replicas: 2,
			nodes: []scaleNode{running(busy), running(idle(30 * time.Second)), away(parked), away(parked)}, want: 2},
		{name: "a busy tail node stops the shrink: no busy node is drained to shrink", replicas: 3,
			nodes: []scaleNode{running(idle(time.Hour)), running(idle(time.Hour)), running(busy), away(parked)}, want: 3},
		{name: "min holds idle nodes", replicas: 3, bounds: &sunkv1.NodeSetAutoscaling{MinReplicas: 2, MaxReplicas: 4},
			nodes: []scaleNode{running(idle(time.Hour)), running(idle(time.Hour)), running(idle(time.Hour)), away(parked)}, want: 2},
		{name: "a pod that has not registered for idleAfter goes", replicas: 2,
			nodes: []scaleNode{running(busy), {record: parked, pod: ago(2 * time.Minute)}, away(parked), away(parked)}, want: 1},
		{name: "a pod still registering stays", replicas: 2,
			nodes: []scaleNode{running(busy), {pod: ago(10 * time.Second)}, away(parked), away(parked)}, want: 2},
		{name: "above a lowered max: goes, busy or not (drained first)", replicas: 5,
			nodes: []scaleNode{running(busy), running(busy), running(busy), running(busy), running(busy)}, want: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bounds
			if tc.bounds != nil {
				b = *tc.bounds
			}
			for i := range tc.nodes {
				tc.nodes[i].name = "cpu-" + string(rune('0'+i))
			}
			got, why := decideReplicas(scaleInput{replicas: tc.replicas, bounds: b, nodes: tc.nodes, pendingNodes: tc.pendingNodes, now: now})
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("decideReplicas = %d (%s), want %d (%q)", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestScaleInputCount(t *testing.T) {
	pod := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	in := scaleInput{replicas: 5, nodes: []scaleNode{
		{record: &slurm.Node{State: []string{"MIXED"}}, pod: pod},
		{record: &slurm.Node{State: []string{"IDLE", "COMPLETING"}}, pod: pod}, // Busy: a job still ends there
		{record: &slurm.Node{State: []string{"IDLE"}}, pod: pod},
		{record: &slurm.Node{State: []string{"FUTURE"}}, pod: pod}, // a new pod, not registered yet
		{pod: pod},
		{record: &slurm.Node{State: []string{"ALLOCATED"}}, pod: pod}, // above replicas: not counted
	}}
	if busy, idle := in.count(); busy != 2 || idle != 1 {
		t.Errorf("count = %d busy, %d idle; want 2 and 1", busy, idle)
	}
}

func TestMetricsForgetANodeSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a"}, Spec: sunkv1.NodeSetSpec{ClusterRef: "slurm"}}
	b := a.DeepCopy()
	b.Name = "b"
	m.observe(a, reading{pending: 3, replicas: 2, parked: 1, busy: 1, idle: 1})
	m.observe(b, reading{pending: 1, replicas: 1, busy: 1})
	m.decided(a, true)
	m.forget(a)
	if n := testutil.CollectAndCount(reg); n != 5 { // b's pending, replicas, parked, busy and idle
		t.Errorf("%d series after forgetting a, want b's 5", n)
	}
	if v := testutil.ToFloat64(m.pending.WithLabelValues("team/slurm", "b")); v != 1 {
		t.Errorf("b's pending nodes %v, want 1", v)
	}
}

// TestDecideReplicasPerNode: a PerNode NodeSet's members are its candidates (memberOrder: nodes
// with a pod first, then by node name), all of them listed (bounded): it grows to no more than
// the nodes it may run on, whatever maxReplicas says, and shrinks from its last candidate.
func TestDecideReplicasPerNode(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	idle := &slurm.Node{State: []string{"IDLE", "DYNAMIC_NORM"}, LastBusy: ago(time.Hour)}
	fresh := &slurm.Node{State: []string{"IDLE", "DYNAMIC_NORM"}, LastBusy: ago(10 * time.Second)}
	busy := &slurm.Node{State: []string{"ALLOCATED", "DYNAMIC_NORM"}, LastBusy: now}
	parked := &slurm.Node{State: []string{"FUTURE", "DYNAMIC_NORM"}}
	running := func(r *slurm.Node) scaleNode { return scaleNode{record: r, pod: ago(time.Hour)} }
	away := func(r *slurm.Node) scaleNode { return scaleNode{record: r} }
	for _, tc := range []struct {
		name         string
		replicas     int32
		max          int32
		nodes        []scaleNode
		pendingNodes int32
		want         int32
		why          string
	}{
		{name: "maxReplicas above the nodes: every node registers, no more", replicas: 0, max: 8,
			nodes: []scaleNode{{}, {}}, want: 2, why: "started once to register"},
		{name: "a job asks for more nodes than there are: all of them", replicas: 0, max: 8, pendingNodes: 5,
			nodes: []scaleNode{away(parked), away(parked), away(parked)}, want: 3, why: "ask for 5 node(s)"},
		{name: "one job, one node: the first parked candidate", replicas: 1, max: 3, pendingNodes: 1,
			nodes: []scaleNode{running(busy), away(parked), away(parked)}, want: 2},
		{name: "autoscaling turned on over running nodes: the idle tail goes, the busy head stays", replicas: 3, max: 3,
			nodes: []scaleNode{running(busy), running(fresh), running(idle)}, want: 2, why: "idle for 1m0s"},
		{name: "a busy last candidate holds the idle ones before it", replicas: 3, max: 4,
			nodes: []scaleNode{running(idle), running(idle), running(busy), away(parked)}, want: 3},
		{name: "all idle: back to zero, machines handed back", replicas: 2, max: 2,
			nodes: []scaleNode{running(idle), running(idle)}, want: 0},
		{name: "no nodes selected: zero", replicas: 0, max: 2, pendingNodes: 1, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.nodes {
				tc.nodes[i].name = "gpu-node" + string(rune('a'+i))
			}
			b := sunkv1.NodeSetAutoscaling{MaxReplicas: tc.max, IdleAfter: &metav1.Duration{Duration: time.Minute}}
			got, why := decideReplicas(scaleInput{replicas: tc.replicas, bounds: b, nodes: tc.nodes, bounded: true, pendingNodes: tc.pendingNodes, now: now})
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("decideReplicas = %d (%s), want %d (%q)", got, why, tc.want, tc.why)
			}
		})
	}
}
