// Package syncer keeps Slurm node state and Kubernetes node/pod state in agreement, both
// ways. This file is its decision core: pure functions from what both worlds say about one
// compute pod to what must change, so that every rule of the protocol (docs/syncer.md) is
// unit-tested apart from the loops that feed it.
package syncer

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"sunk.dev/sunk/internal/kube"
	"sunk.dev/sunk/pkg/slurm"
)

// Protocol names: annotations, labels and the condition type the syncer writes, and the
// drain reason prefix it owns.
const (
	// ReasonPrefix starts every drain reason a sunk component sets. A drain without it was
	// set by a person (or by Slurm itself) and is never lifted or overwritten.
	ReasonPrefix = "k8s:"
	// nodeSetReasonPrefix starts the NodeSet controller's drains (scale-in, update): the
	// NodeSet controller lifts them itself, the syncer leaves them alone.
	nodeSetReasonPrefix = "k8s: nodeset"

	// AnnotationCordonReason on a Kubernetes node says why it was cordoned; it becomes
	// part of the Slurm drain reason.
	AnnotationCordonReason = "sunk.dev/cordon-reason"
	// AnnotationSlurmState and AnnotationSlurmReason mirror the Slurm node on its pod and
	// its Kubernetes node.
	AnnotationSlurmState  = "slurm.sunk.dev/state"
	AnnotationSlurmReason = "slurm.sunk.dev/reason"
	// ConditionSlurmNode is the pod and node condition: True when Slurm may run jobs there.
	ConditionSlurmNode = "sunk.dev/SlurmNodeAvailable"

	// maxReasonLength keeps reasons readable in sinfo.
	maxReasonLength = 200
)

// Causes lists why Kubernetes says the Slurm node of pod (on node) must not take jobs, in
// a stable order. Either argument may be nil (a pod not yet scheduled, a node gone).
func Causes(node *corev1.Node, pod *corev1.Pod) []string {
	var causes []string
	if node != nil {
		if node.Spec.Unschedulable {
			c := "node cordoned"
			if r := strings.TrimSpace(node.Annotations[AnnotationCordonReason]); r != "" {
				c += " (" + r + ")"
			}
			causes = append(causes, c)
		}
		if !nodeReady(node) {
			causes = append(causes, "node NotReady")
		}
	}
	if pod != nil {
		switch {
		case !pod.DeletionTimestamp.IsZero():
			causes = append(causes, "pod being deleted")
		case !kube.PodReady(pod):
			causes = append(causes, "pod not Ready")
		}
	}
	return causes
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
	r := ReasonPrefix + " " + strings.Join(causes, "; ")
	if len(r) > maxReasonLength {
		r = r[:maxReasonLength-3] + "..."
	}
	return r
}

// ownDrain reports a drain the syncer set: ours by prefix, and not the NodeSet controller's.
func ownDrain(reason string) bool {
	return strings.HasPrefix(reason, ReasonPrefix) && !strings.HasPrefix(reason, nodeSetReasonPrefix)
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
	drained := n.Drained()
	if len(causes) > 0 {
		want := DrainReason(causes)
		switch {
		case !drained:
			return Action{Kind: Drain, Reason: want}
		case ownDrain(n.Reason) && n.Reason != want:
			return Action{Kind: Drain, Reason: want}
		}
		return Action{}
	}
	if drained && ownDrain(n.Reason) {
		return Action{Kind: Resume}
	}
	return Action{}
}

// Mirror is the Slurm → Kubernetes view of one Slurm node: the annotations and the
// condition to put on its pod and its Kubernetes node.
type Mirror struct {
	State     string // e.g. "idle", "allocated+drain", "down+not_responding"
	Reason    string
	Available bool   // the condition's status
	Why       string // the condition's reason, CamelCase
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
	m := Mirror{State: strings.Join(flags, "+"), Reason: n.Reason, Available: true, Why: camel(n.BaseState())}
	for _, bad := range []string{"DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "FUTURE", "MAINTENANCE", "REBOOT_REQUESTED", "POWERED_DOWN"} {
		if n.HasState(bad) {
			m.Available, m.Why = false, camel(bad)
			if bad == "DRAIN" {
				m.Why = "Drained"
				if n.HasState("ALLOCATED") || n.HasState("MIXED") || n.HasState("COMPLETING") {
					m.Why = "Draining"
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
		return "Unknown"
	}
	return b.String()
}
