// Package syncer keeps Slurm node state and Kubernetes node/pod state in agreement, both
// ways. This file is its decision core: pure functions from what both worlds say about one
// compute pod to what must change, so that every rule of the protocol (docs/syncer.md) is
// unit-tested apart from the loops that feed it.
package syncer

import (
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// maxReasonLength keeps reasons readable in sinfo.
const maxReasonLength = 200

// The causes of a syncer drain, as they appear in the reason.
const (
	CauseCordoned     = "node cordoned"
	CauseNodeNotReady = "node NotReady"
	CausePodDeleted   = "pod being deleted"
	CausePodNotReady  = "pod not Ready"
	// CauseGres: Slurm's GRES for the node are not those its pod registered (GresCause).
	CauseGres = "GRES mismatch"
)

// allCauseKinds are the causes without their details: what the drain metrics count by.
var allCauseKinds = []string{CauseCordoned, CauseNodeNotReady, CausePodDeleted, CausePodNotReady, CauseGres}

// causeKind is a cause without the details in parentheses that Causes and GresCause append:
// "node cordoned (kernel upgrade)" is of kind "node cordoned".
func causeKind(cause string) string {
	kind, _, _ := strings.Cut(cause, " (")
	return kind
}

// DefaultNotReadyGrace is Config.NotReadyGrace's default: long enough that a probe that
// fails a few times in a row (a busy node, a kubelet restart) does not drain the node, short
// next to how long a broken node would otherwise keep getting jobs.
const DefaultNotReadyGrace = 30 * time.Second

// Causes lists why Kubernetes says the Slurm node of pod (on node) must not take jobs, in
// a stable order. Either argument may be nil (a pod not yet scheduled, a node gone).
// recheck, when not zero, says when to decide again: the pod is not Ready and becomes the
// cause CausePodNotReady then unless it is Ready again (PodNotReady).
func Causes(node *corev1.Node, pod *corev1.Pod, now time.Time, grace time.Duration) (causes []string, recheck time.Duration) {
	if node != nil {
		if node.Spec.Unschedulable {
			c := CauseCordoned
			if r := strings.TrimSpace(node.Annotations[wellknown.AnnotationCordonReason]); r != "" {
				c += " (" + r + ")"
			}
			causes = append(causes, c)
		}
		if !nodeReady(node) {
			causes = append(causes, CauseNodeNotReady)
		}
	}
	if pod != nil {
		if !pod.DeletionTimestamp.IsZero() {
			causes = append(causes, CausePodDeleted)
		} else {
			cause, wait := PodNotReady(pod, now, grace)
			if cause {
				causes = append(causes, CausePodNotReady)
			}
			recheck = wait
		}
	}
	return causes, recheck
}

// PodNotReady is the rule for CausePodNotReady: the pod was Ready since its containers
// started, is not Ready now, and has not been Ready for grace. A pod that has not been Ready
// since its containers (re)started is starting, and startup is no cause: slurmd may wait
// for a busy slurmctld for minutes, and a slurmd that never comes up is one Slurm itself
// marks NOT_RESPONDING. When the pod will become a cause unless it is Ready again, wait says
// how long until then.
//
// "Was Ready" comes from the pod's status alone, so that it survives a syncer restart and
// costs no write: kubelet's Ready condition is only ever True or False, and its
// lastTransitionTime is when it last changed. A pod that is not Ready and whose condition
// changed after its last container started must have been Ready in between. Kubelet sets
// the condition (False) before it starts the containers, so a pod that never was Ready
// keeps a transition time at or before their start, and so does one whose container
// restarted (the transition to False came before the restart). Both times have whole
// seconds; a Ready pod takes a few failed probes (15 s with sunk's probe) to turn not
// Ready, so "after" is never lost to the rounding, and a tie counts as startup.
func PodNotReady(pod *corev1.Pod, now time.Time, grace time.Duration) (cause bool, wait time.Duration) {
	var ready *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			ready = &pod.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return false, 0 // Ready, or kubelet has not reported it yet (starting)
	}
	started, running := containersStarted(pod)
	if !running || !ready.LastTransitionTime.After(started) {
		return false, 0
	}
	notReady := now.Sub(ready.LastTransitionTime.Time)
	if notReady >= grace {
		return true, 0
	}
	// A transition time ahead of this clock (skew between the node and the syncer) waits
	// no longer than the grace itself; the next look measures again.
	return false, min(grace-notReady, grace)
}

// containersStarted is when the last of the pod's containers (and restartable init
// containers, which count for Ready too) started. running is false while one of its
// containers is not running: it is starting, or restarting after a crash, which for slurmd
// Slurm notices itself.
func containersStarted(pod *corev1.Pod) (last time.Time, running bool) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return time.Time{}, false
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if r := cs.State.Running; r != nil && r.StartedAt.After(last) {
			last = r.StartedAt.Time // a sidecar; finished init containers do not count
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		r := cs.State.Running
		if r == nil {
			return time.Time{}, false
		}
		if r.StartedAt.After(last) {
			last = r.StartedAt.Time
		}
	}
	return last, true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DrainReason is the Slurm drain reason for a set of causes.
func DrainReason(causes []string) string {
	r := wellknown.DrainPrefix + " " + strings.Join(causes, "; ")
	if len(r) > maxReasonLength {
		// Cut at a rune boundary: a cordon reason may be any UTF-8 text.
		cut := maxReasonLength - 3
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut] + "..."
	}
	return r
}

// ActionKind is what the syncer does to a Slurm node.
type ActionKind int

const (
	// Nothing: both worlds agree.
	Nothing ActionKind = iota
	// Drain the node with Action.Reason (also to refresh the reason of the syncer's own drain).
	Drain
	// Resume lifts the syncer's own drain: every cause cleared.
	Resume
)

// Action is one change to a Slurm node.
type Action struct {
	Kind   ActionKind
	Reason string
}

// Decide is the Kubernetes → Slurm rule for one node. Level-triggered: it depends only
// on the current state of both worlds, so repeating it (a restart, a resync) is harmless.
//   - causes and not drained: drain with the causes (also when someone resumed it while a
//     cause persists);
//   - causes and drained by the syncer with other causes: refresh the reason;
//   - causes and drained by anyone else: leave it (a person's reason is theirs; the
//     NodeSet controller lifts its own);
//   - no causes and drained by the syncer: resume;
//   - otherwise nothing.
func Decide(causes []string, n *slurm.Node) Action {
	if wellknown.Parked(n.BaseState(), n.Comment) {
		// The NodeSet autoscaler's record waits for its next pod: a drain for the pod that
		// went would stick to it, and Slurm 26.05 then refuses to park it again (error 2180).
		return Action{}
	}
	drained := n.Drained()
	if len(causes) > 0 {
		want := DrainReason(causes)
		switch {
		case !drained:
			return Action{Kind: Drain, Reason: want}
		case wellknown.DrainBySyncer(n.Reason) && n.Reason != want:
			return Action{Kind: Drain, Reason: want}
		}
		return Action{}
	}
	if drained && wellknown.DrainBySyncer(n.Reason) {
		return Action{Kind: Resume}
	}
	return Action{}
}

// DefaultDrainBudgetPercent is Config.DrainBudgetPercent's default.
const DefaultDrainBudgetPercent = 10

// budgetedCause reports a cause that one fault outside the nodes can raise on every node at
// once: an apiserver or network outage makes every node NotReady, a slow slurmctld made
// every compute pod not Ready, and a Slurm that writes GRES in a form sunk reads otherwise
// would make every GPU node a GRES mismatch. Cordons and deletions are exempt: a person or
// the system asked for each of them.
func budgetedCause(c string) bool {
	k := causeKind(c)
	return k == CauseNodeNotReady || k == CausePodNotReady || k == CauseGres
}

// Budgeted reports a drain whose causes are all budgeted ones (and there is at least one).
func Budgeted(causes []string) bool {
	for _, c := range causes {
		if !budgetedCause(c) {
			return false
		}
	}
	return len(causes) > 0
}

// BudgetedDrainOf returns the kinds of the causes of n's drain when it is a budgeted drain by the syncer
// (drained, with a reason the syncer wrote from budgeted causes only), else nil.
func BudgetedDrainOf(n *slurm.Node) []string {
	if !n.Drained() || !wellknown.DrainBySyncer(n.Reason) {
		return nil
	}
	rest, _ := strings.CutPrefix(n.Reason, wellknown.DrainPrefix+" ")
	causes := strings.Split(rest, "; ")
	if !Budgeted(causes) {
		return nil
	}
	return causeKinds(causes)
}

// causeKinds are the kinds of causes (causeKind), what the drain budget counts by: each
// node's GRES mismatch has its own details.
func causeKinds(causes []string) []string {
	kinds := make([]string, len(causes))
	for i, c := range causes {
		kinds[i] = causeKind(c)
	}
	return kinds
}

// Budget is what the drain budget looks at: the cluster's Slurm nodes, the share of them
// that one cause may hold drained, and for each budgeted cause (by kind) how many other nodes are
// drained by the syncer for it.
type Budget struct {
	Nodes      int
	Percent    int
	DrainedFor map[string]int
}

// Limit is how many nodes one cause may hold drained: Percent of the nodes, rounded down,
// and at least 1, so that a small cluster still drains a broken node.
func (b Budget) Limit() int { return max(1, b.Nodes*b.Percent/100) }

// HeldBy is the drain budget's rule for the action Decide chose for n. Only a new drain (n
// not drained) whose causes are all budgeted is limited: it is held when, for one of its
// causes, Limit nodes are drained for that cause already. HeldBy returns that cause's kind, or ""
// when the action goes ahead. Changing the reason of a drain that is on already drains
// nothing new and is never held.
func HeldBy(a Action, n *slurm.Node, causes []string, b Budget) string {
	if a.Kind != Drain || n.Drained() || !Budgeted(causes) {
		return ""
	}
	for _, k := range causeKinds(causes) {
		if b.DrainedFor[k] >= b.Limit() {
			return k
		}
	}
	return ""
}

// Mirror is the Slurm → Kubernetes view of one Slurm node: the annotations and the
// condition to put on its pod and its Kubernetes node.
type Mirror struct {
	State     string // e.g. "idle", "allocated+drain", "down+not_responding"
	Reason    string
	Available bool   // the condition's status
	Why       string // the condition's reason, CamelCase
	// Evictable: the node can neither run a job now nor start one (wellknown.LabelEvictable).
	Evictable bool
}

// MirrorOf derives the mirror of a Slurm node.
func MirrorOf(n *slurm.Node) Mirror {
	flags := make([]string, 0, len(n.State))
	for _, s := range n.State {
		if s != "DYNAMIC_NORM" { // every compute pod's node is dynamic: noise in the mirror
			flags = append(flags, strings.ToLower(s))
		}
	}
	if len(flags) > 1 {
		sort.Strings(flags[1:])
	}
	m := Mirror{State: strings.Join(flags, "+"), Reason: n.Reason, Available: true, Why: camel(n.BaseState()),
		Evictable: !n.Busy() && (n.HasState("DRAIN") || n.BaseState() == "DOWN")}
	for _, bad := range []string{"DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "FUTURE", "MAINTENANCE", "REBOOT_REQUESTED", "POWERED_DOWN"} {
		if n.HasState(bad) {
			m.Available, m.Why = false, camel(bad)
			if bad == "DRAIN" {
				// Drained says the node is empty, so it takes sunk's one answer to that
				// (Busy), which the exporter's draining and Evictable use too: a state
				// sunk cannot tell is empty (UNKNOWN, CPUs still allocated) is Draining.
				m.Why = sunkv1.ReasonMirrorDrained
				if n.Busy() {
					m.Why = sunkv1.ReasonMirrorDraining
				}
			}
			break
		}
	}
	return m
}

func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(strings.ToLower(s), "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	if b.Len() == 0 {
		return sunkv1.ReasonMirrorUnknown
	}
	return b.String()
}
