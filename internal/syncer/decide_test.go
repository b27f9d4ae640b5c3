package syncer

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
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
			n.Annotations = map[string]string{wellknown.AnnotationCordonReason: reason}
		}
	}
}

func notReadyNode(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }

// t0 is when the tests' compute pods started their containers.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// kubeletPod is a compute pod as kubelet reports it: container slurmd running since
// started, and the Ready condition with its status and last transition.
func kubeletPod(started time.Time, ready bool, transition time.Time) *corev1.Pod {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"},
		Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: s, LastTransitionTime: metav1.NewTime(transition)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "slurmd",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}},
		}}
}

// readyPod is a pod that started at t0 and was Ready 10s later; not ready, it turned not
// Ready at t0+10m, a minute before now (past the grace).
func readyPod(ready bool) *corev1.Pod {
	if ready {
		return kubeletPod(t0, true, t0.Add(10*time.Second))
	}
	return kubeletPod(t0, false, t0.Add(10*time.Minute))
}

var now = t0.Add(11 * time.Minute)

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
		name    string
		node    *corev1.Node
		pod     *corev1.Pod
		want    string
		recheck time.Duration
	}{
		{"all well", k8sNode(), readyPod(true), "", 0},
		{"cordon with the annotation's reason", k8sNode(cordoned("bad GPU 3")), readyPod(true), "node cordoned (bad GPU 3)", 0},
		{"cordon without a reason", k8sNode(cordoned("")), readyPod(true), "node cordoned", 0},
		{"node NotReady", k8sNode(notReadyNode), readyPod(true), "node NotReady", 0},
		{"pod not Ready past the grace", k8sNode(), readyPod(false), "pod not Ready", 0},
		{"pod not Ready within the grace: no cause yet, look again when it ends", k8sNode(),
			kubeletPod(t0, false, now.Add(-10*time.Second)), "", 20 * time.Second},
		{"a starting pod is no cause", k8sNode(), kubeletPod(now.Add(-5*time.Minute), false, now.Add(-6*time.Minute)), "", 0},
		{"pod being deleted", k8sNode(), deletingPod(), "pod being deleted", 0},
		{"several, in a stable order", k8sNode(cordoned("x"), notReadyNode), deletingPod(), "node cordoned (x); node NotReady; pod being deleted", 0},
		{"node unknown", nil, readyPod(true), "", 0},
	}
	for _, c := range cases {
		causes, recheck := Causes(c.node, c.pod, now, 30*time.Second)
		if got := strings.Join(causes, "; "); got != c.want || recheck != c.recheck {
			t.Errorf("%s: causes %q, recheck %v; want %q, %v", c.name, got, recheck, c.want, c.recheck)
		}
	}
}

func TestPodNotReady(t *testing.T) {
	const grace = 30 * time.Second
	start := t0
	ready := start.Add(20 * time.Second)    // went Ready
	notReady := start.Add(10 * time.Minute) // went not Ready again
	with := func(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod { f(p); return p }
	cases := []struct {
		name  string
		pod   *corev1.Pod
		now   time.Time
		cause bool
		wait  time.Duration
	}{
		{"Ready", kubeletPod(start, true, ready), notReady, false, 0},
		{"no Ready condition yet", with(kubeletPod(start, false, start), func(p *corev1.Pod) { p.Status.Conditions = nil }), notReady, false, 0},
		{"never Ready: kubelet set False before the container started", kubeletPod(start, false, start.Add(-3*time.Second)), notReady, false, 0},
		{"never Ready, long after the start (a slow slurmctld)", kubeletPod(start, false, start.Add(-3*time.Second)), start.Add(time.Hour), false, 0},
		{"never Ready, transition in the start's second: startup", kubeletPod(start, false, start), notReady, false, 0},
		{"was Ready, within the grace: look again when it ends", kubeletPod(start, false, notReady), notReady.Add(10 * time.Second), false, 20 * time.Second},
		{"was Ready, just now", kubeletPod(start, false, notReady), notReady, false, grace},
		{"was Ready, the grace over", kubeletPod(start, false, notReady), notReady.Add(grace), true, 0},
		{"was Ready, long ago", kubeletPod(start, false, notReady), notReady.Add(time.Hour), true, 0},
		{"container restarted after it went not Ready: starting again", kubeletPod(notReady.Add(2*time.Second), false, notReady), notReady.Add(time.Hour), false, 0},
		{"container not running (crash loop back-off): starting", with(kubeletPod(start, false, notReady), func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}), notReady.Add(time.Hour), false, 0},
		{"no container status yet", with(kubeletPod(start, false, notReady), func(p *corev1.Pod) { p.Status.ContainerStatuses = nil }), notReady.Add(time.Hour), false, 0},
		{"a sidecar container that started after the transition: starting", with(kubeletPod(start, false, notReady), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "exporter",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(notReady.Add(time.Second))}}})
		}), notReady.Add(time.Hour), false, 0},
		{"a restartable init container restarted after the transition: starting", with(kubeletPod(start, false, notReady), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "log-shipper",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(notReady.Add(time.Second))}}}}
		}), notReady.Add(time.Hour), false, 0},
		{"a finished init container does not count", with(kubeletPod(start, false, notReady), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(start.Add(-time.Minute))}}}}
		}), notReady.Add(time.Hour), true, 0},
		{"transition ahead of this clock (skew): waits at most the grace", kubeletPod(start, false, notReady.Add(5*time.Second)), notReady, false, grace},
	}
	for _, c := range cases {
		cause, wait := PodNotReady(c.pod, c.now, grace)
		if cause != c.cause || wait != c.wait {
			t.Errorf("%s: cause %v, wait %v; want %v, %v", c.name, cause, wait, c.cause, c.wait)
		}
	}
}

func TestDecide(t *testing.T) {
	cordon := []string{"node cordoned (bad GPU 3)"}
	ours := DrainReason(cordon)
	parked := snode("", "FUTURE", "DYNAMIC_NORM")
	parked.Comment = wellknown.ParkedPrefix + "abc"
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
		{"a record the autoscaler parked is left alone", []string{"pod being deleted"}, parked, Action{}},
		{"a FUTURE record that nobody parked drains", []string{"pod being deleted"}, snode("", "FUTURE"), Action{Drain, "k8s: pod being deleted"}},
	}
	for _, c := range cases {
		if got := Decide(c.causes, c.node); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDrainReasonIsBounded(t *testing.T) {
	r := DrainReason([]string{"node cordoned (" + strings.Repeat("x", 500) + ")"})
	if len(r) != maxReasonLength || !strings.HasPrefix(r, wellknown.DrainPrefix) || !strings.HasSuffix(r, "...") {
		t.Errorf("reason of %d bytes: %q", len(r), r)
	}
	// Multi-byte text is cut between characters, never inside one.
	r = DrainReason([]string{"node cordoned (" + strings.Repeat("ü", 300) + ")"})
	if len(r) > maxReasonLength || !utf8.ValidString(r) || !strings.HasSuffix(r, "...") {
		t.Errorf("reason of %d bytes, valid UTF-8 %v: %q", len(r), utf8.ValidString(r), r)
	}
}

func TestMirrorOf(t *testing.T) {
	cases := []struct {
		node      *slurm.Node
		state     string
		available bool
		why       string
		evictable bool
	}{
		{snode("", "IDLE"), "idle", true, "Idle", false},
		{snode("", "MIXED"), "mixed", true, "Mixed", false},
		{snode("", "ALLOCATED"), "allocated", true, "Allocated", false},
		{snode("k8s: node cordoned", "ALLOCATED", "DRAIN"), "allocated+drain", false, "Draining", false},
		{snode("bad DIMM", "IDLE", "DRAIN"), "idle+drain", false, "Drained", true},
		{snode("", "IDLE", "DYNAMIC_NORM"), "idle", true, "Idle", false},
		{snode("", "DOWN", "NOT_RESPONDING"), "down+not_responding", false, "Down", true},
		{snode("", "IDLE", "NOT_RESPONDING"), "idle+not_responding", false, "NotResponding", false},
		{snode("", "IDLE", "FAIL"), "idle+fail", false, "Fail", false},
		{snode("", "IDLE", "POWERED_DOWN", "DRAIN"), "idle+drain+powered_down", false, "Drained", true},
		{snode("", "COMPLETING", "DRAIN"), "completing+drain", false, "Draining", false},
		// Busy decides between Drained and Draining, as it decides Evictable: a base state
		// not known to hold no job, or CPUs still allocated, is Draining (Slurm itself would
		// print DRAINED for both).
		{snode("", "UNKNOWN", "DRAIN"), "unknown+drain", false, "Draining", false},
		{&slurm.Node{State: []string{"IDLE", "DRAIN"}, AllocCPUs: 2}, "idle+drain", false, "Draining", false},
		{snode("", "DOWN", "COMPLETING"), "down+completing", false, "Down", false},
	}
	for _, c := range cases {
		m := MirrorOf(c.node)
		if m.State != c.state || m.Available != c.available || m.Why != c.why || m.Reason != c.node.Reason || m.Evictable != c.evictable {
			t.Errorf("%v: %+v, want state %q available %v why %q evictable %v", c.node.State, m, c.state, c.available, c.why, c.evictable)
		}
	}
}

func TestBudgetedDrainOf(t *testing.T) {
	cases := []struct {
		node *slurm.Node
		want string
	}{
		{snode("k8s: pod not Ready", "IDLE", "DRAIN"), "pod not Ready"},
		{snode("k8s: node NotReady; pod not Ready", "ALLOCATED", "DRAIN"), "node NotReady; pod not Ready"},
		{snode("k8s: pod not Ready", "IDLE"), ""},                                                                       // resumed: the old reason stays
		{snode("k8s: node cordoned; pod not Ready", "IDLE", "DRAIN"), ""},                                               // a cordon: exempt
		{snode("k8s: node NotReady; pod being deleted", "IDLE", "DRAIN"), ""},                                           // a deletion: exempt
		{snode("k8s: nodeset scale-in", "IDLE", "DRAIN"), ""},                                                           // the NodeSet controller's
		{snode("pod not Ready", "IDLE", "DRAIN"), ""},                                                                   // a person's
		{snode("k8s: GRES mismatch (Slurm has none, the pod registered gpu:h100:8)", "IDLE", "DRAIN"), "GRES mismatch"}, // by kind
	}
	for _, c := range cases {
		if got := strings.Join(BudgetedDrainOf(c.node), "; "); got != c.want {
			t.Errorf("%q %v: %q, want %q", c.node.Reason, c.node.State, got, c.want)
		}
	}
}

func TestHeldBy(t *testing.T) {
	notReady := []string{CausePodNotReady}
	both := []string{CauseNodeNotReady, CausePodNotReady}
	gres := []string{CauseGres + " (Slurm has gpu:h100:4, the pod registered gpu:h100:8)"}
	drain := func(causes []string) Action { return Action{Kind: Drain, Reason: DrainReason(causes)} }
	idle := snode("", "IDLE")
	budget := func(nodes int, drained map[string]int) Budget {
		return Budget{Nodes: nodes, Percent: DefaultDrainBudgetPercent, DrainedFor: drained}
	}
	cases := []struct {
		name   string
		a      Action
		node   *slurm.Node
		causes []string
		b      Budget
		want   string
	}{
		{"room left: 3 of 4 (10% of 40)", drain(notReady), idle, notReady, budget(40, map[string]int{CausePodNotReady: 3}), ""},
		{"budget spent: 4 of 4", drain(notReady), idle, notReady, budget(40, map[string]int{CausePodNotReady: 4}), CausePodNotReady},
		{"other causes' drains do not count", drain(notReady), idle, notReady, budget(40, map[string]int{CauseNodeNotReady: 4}), ""},
		{"each of its causes needs room", drain(both), idle, both, budget(40, map[string]int{CauseNodeNotReady: 4}), CauseNodeNotReady},
		{"rounded down: 10% of 19 is 1", drain(notReady), idle, notReady, budget(19, map[string]int{CausePodNotReady: 1}), CausePodNotReady},
		{"a small cluster still drains one node", drain(notReady), idle, notReady, budget(3, nil), ""},
		{"... but only one", drain(notReady), idle, notReady, budget(3, map[string]int{CausePodNotReady: 1}), CausePodNotReady},
		{"no nodes known: one", drain(notReady), idle, notReady, budget(0, nil), ""},
		{"100% lifts the limit", drain(notReady), idle, notReady,
			Budget{Nodes: 40, Percent: 100, DrainedFor: map[string]int{CausePodNotReady: 39}}, ""},
		{"a cordon is exempt", drain([]string{"node cordoned (bad GPU)"}), idle, []string{"node cordoned (bad GPU)"},
			budget(40, map[string]int{CausePodNotReady: 40, CauseNodeNotReady: 40}), ""},
		{"a cordon with budgeted causes is exempt", drain([]string{"node cordoned", CauseNodeNotReady}), idle,
			[]string{"node cordoned", CauseNodeNotReady}, budget(40, map[string]int{CauseNodeNotReady: 40}), ""},
		{"a deletion is exempt", drain([]string{CauseNodeNotReady, CausePodDeleted}), idle,
			[]string{CauseNodeNotReady, CausePodDeleted}, budget(40, map[string]int{CauseNodeNotReady: 40}), ""},
		{"a new reason for a drain that is on drains nothing new", drain(both), snode("k8s: node cordoned", "IDLE", "DRAIN"), both,
			budget(40, map[string]int{CauseNodeNotReady: 40, CausePodNotReady: 40}), ""},
		{"a resume is never held", Action{Kind: Resume}, snode("k8s: pod not Ready", "IDLE", "DRAIN"), nil,
			budget(40, map[string]int{CausePodNotReady: 40}), ""},
		{"resumed by someone while the cause persists: a new drain", drain(notReady), snode("k8s: pod not Ready", "IDLE"), notReady,
			budget(40, map[string]int{CausePodNotReady: 4}), CausePodNotReady},
		{"GRES mismatches count by kind", drain(gres), idle, gres, budget(40, map[string]int{CauseGres: 4}), CauseGres},
		{"GRES: room left", drain(gres), idle, gres, budget(40, map[string]int{CauseGres: 3}), ""},
	}
	for _, c := range cases {
		if got := HeldBy(c.a, c.node, c.causes, c.b); got != c.want {
			t.Errorf("%s: held by %q, want %q", c.name, got, c.want)
		}
	}
}
