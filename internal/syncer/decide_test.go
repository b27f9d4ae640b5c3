package syncer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/slurm"
)

func k8sNode(opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func cordoned(reason string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		if reason != "" {
			n.Annotations = map[string]string{AnnotationCordonReason: reason}
		}
	}
}

func notReadyNode(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }

func readyPod(ready bool) *corev1.Pod {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}}}
}

func deletingPod() *corev1.Pod {
	p := readyPod(true)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func snode(reason string, state ...string) *slurm.Node {
	return &slurm.Node{Name: "gpu-1", State: state, Reason: reason}
}

func TestCauses(t *testing.T) {
	cases := []struct {
		name string
		node *corev1.Node
		pod  *corev1.Pod
		want string
	}{
		{"all well", k8sNode(), readyPod(true), ""},
		{"cordon with the annotation's reason", k8sNode(cordoned("bad GPU 3")), readyPod(true), "node cordoned (bad GPU 3)"},
		{"cordon without a reason", k8sNode(cordoned("")), readyPod(true), "node cordoned"},
		{"node NotReady", k8sNode(notReadyNode), readyPod(true), "node NotReady"},
		{"pod not Ready", k8sNode(), readyPod(false), "pod not Ready"},
		{"pod being deleted", k8sNode(), deletingPod(), "pod being deleted"},
		{"several, in a stable order", k8sNode(cordoned("x"), notReadyNode), deletingPod(), "node cordoned (x); node NotReady; pod being deleted"},
		{"node unknown", nil, readyPod(true), ""},
	}
	for _, c := range cases {
		if got := strings.Join(Causes(c.node, c.pod), "; "); got != c.want {
			t.Errorf("%s: causes %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	cordon := []string{"node cordoned (bad GPU 3)"}
	ours := DrainReason(cordon)
	cases := []struct {
		name   string
		causes []string
		node   *slurm.Node
		want   Action
	}{
		{"cordon drains with the reason", cordon, snode("", "IDLE"), Action{Drain, "k8s: node cordoned (bad GPU 3)"}},
		{"already drained by us: nothing", cordon, snode(ours, "IDLE", "DRAIN"), Action{}},
		{"our drain with other causes: refresh", []string{"pod not Ready"}, snode(ours, "IDLE", "DRAIN"), Action{Drain, "k8s: pod not Ready"}},
		{"uncordon resumes our drain", nil, snode(ours, "IDLE", "DRAIN"), Action{Kind: Resume}},
		{"a human drain survives uncordon", nil, snode("bad DIMM", "IDLE", "DRAIN"), Action{}},
		{"a human drain is not overwritten", cordon, snode("bad DIMM", "IDLE", "DRAIN"), Action{}},
		{"the NodeSet's drain is the NodeSet's", nil, snode("k8s: nodeset update", "ALLOCATED", "DRAIN"), Action{}},
		{"the NodeSet's drain is not overwritten", cordon, snode("k8s: nodeset scale-in", "IDLE", "DRAIN"), Action{}},
		{"resumed by someone while cordoned: drain again", cordon, snode(ours, "IDLE"), Action{Drain, ours}},
		{"a stale reason without DRAIN is no drain", nil, snode(ours, "IDLE"), Action{}},
		{"a busy node drains the same (Slurm lets the job finish)", cordon, snode("", "ALLOCATED"), Action{Drain, ours}},
	}
	for _, c := range cases {
		if got := Decide(c.causes, c.node); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDrainReasonIsBounded(t *testing.T) {
	r := DrainReason([]string{"node cordoned (" + strings.Repeat("x", 500) + ")"})
	if len(r) != maxReasonLength || !strings.HasPrefix(r, ReasonPrefix) || !strings.HasSuffix(r, "...") {
		t.Errorf("reason of %d bytes: %q", len(r), r)
	}
}

func TestMirrorOf(t *testing.T) {
	cases := []struct {
		node      *slurm.Node
		state     string
		available bool
		why       string
	}{
		{snode("", "IDLE"), "idle", true, "Idle"},
		{snode("", "MIXED"), "mixed", true, "Mixed"},
		{snode("", "ALLOCATED"), "allocated", true, "Allocated"},
		{snode("k8s: node cordoned", "ALLOCATED", "DRAIN"), "allocated+drain", false, "Draining"},
		{snode("bad DIMM", "IDLE", "DRAIN"), "idle+drain", false, "Drained"},
		{snode("", "IDLE", "DYNAMIC_NORM"), "idle", true, "Idle"},
		{snode("", "DOWN", "NOT_RESPONDING"), "down+not_responding", false, "Down"},
		{snode("", "IDLE", "NOT_RESPONDING"), "idle+not_responding", false, "NotResponding"},
		{snode("", "IDLE", "FAIL"), "idle+fail", false, "Fail"},
		{snode("", "IDLE", "POWERED_DOWN", "DRAIN"), "idle+drain+powered_down", false, "Drained"},
	}
	for _, c := range cases {
		m := MirrorOf(c.node)
		if m.State != c.state || m.Available != c.available || m.Why != c.why || m.Reason != c.node.Reason {
			t.Errorf("%v: %+v, want state %q available %v why %q", c.node.State, m, c.state, c.available, c.why)
		}
	}
}
