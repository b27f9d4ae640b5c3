package nodeset

import (
	"context"
	"fmt"
	"strings"

	"sunk.dev/sunk/internal/kube"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// status collects what one reconcile observed; updateStatus writes it once.
type status struct {
	generation int64
	previous   []metav1.Condition
	conditions []metav1.Condition
	counts     sunkv1.NodeSetStatus // the numbers only
	desired    int
	feasible   int
	hash       string
	selector   string
	conflicts  []string
}

func newStatus(ns *sunkv1.NodeSet) *status {
	s := &status{
		generation: ns.Generation,
		previous:   ns.Status.Conditions,
		conditions: append([]metav1.Condition(nil), ns.Status.Conditions...),
		hash:       ns.Status.TemplateHash,
		selector:   ns.Status.Selector,
	}
	// Until this reconcile counts, the last counts stand; the Slurm ones stay when Slurm
	// cannot be read.
	s.counts = ns.Status
	s.desired, s.feasible = int(ns.Status.Desired), int(ns.Status.Feasible)
	return s
}

func (s *status) set(typ string, ok bool, reason, msg string) {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: truncate(msg), ObservedGeneration: s.generation}
	if ok {
		c.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.conditions, c)
}

// becomes reports whether condition typ turns to want with this reconcile.
func (s *status) becomes(typ string, want metav1.ConditionStatus) bool {
	prev := meta.FindStatusCondition(s.previous, typ)
	now := meta.FindStatusCondition(s.conditions, typ)
	return now != nil && now.Status == want && (prev == nil || prev.Status != want)
}

func truncate(msg string) string {
	if len(msg) <= conditionMessageMaxSize {
		return msg
	}
	return msg[:conditionMessageMaxSize-3] + "..."
}

// list names a few items and counts the rest.
func list(items []string) string {
	if len(items) <= maxMessageItems {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxMessageItems], ", "), len(items)-maxMessageItems)
}

// count fills the numbers from the members: pods from Kubernetes, busy and drained from
// Slurm (kept from the last reconcile when Slurm could not be read).
func (r *Reconciler) count(w *world, st *status) {
	c := &st.counts
	c.Replicas, c.Scheduled, c.Ready, c.Updated, c.Misscheduled, c.Unavailable = 0, 0, 0, 0, 0, 0
	slurmKnown := w.slurmErr == nil
	if slurmKnown {
		c.Busy, c.Drained = 0, 0
	}
	for _, m := range w.members {
		p := m.pod
		if p != nil && !terminating(p) {
			c.Replicas++
			if p.Spec.NodeName != "" {
				c.Scheduled++
			}
			if kube.PodReady(p) {
				c.Ready++
			}
			if p.Labels[wellknown.LabelTemplateHash] == w.hash {
				c.Updated++
			}
			if misscheduled(w, p) {
				c.Misscheduled++
			}
		}
		if slurmKnown && p != nil && m.slurm != nil {
			if m.slurm.Busy() {
				c.Busy++
			}
			if m.slurm.Drained() {
				c.Drained++
			}
		}
		if m.desired && (!kube.PodReady(p) || (slurmKnown && m.slurm != nil && m.slurm.Drained())) {
			c.Unavailable++
		}
	}
	c.Desired, c.Feasible = int32(st.desired), int32(st.feasible)
}

// conclude sets the conditions from the counts and the outcome of the actions, emits the
// warnings of conditions that turn bad, and says when to look again.
func (r *Reconciler) conclude(w *world, st *status, o *outcome) ctrl.Result {
	c := st.counts
	slurmErrs := o.slurmErrs
	for _, err := range []error{w.autoscaleErr, w.slurmErr} {
		if err != nil {
			slurmErrs = append([]string{err.Error()}, slurmErrs...)
		}
	}
	if len(slurmErrs) == 0 {
		st.set(sunkv1.ConditionSlurmReachable, true, sunkv1.ReasonReachable, "slurmrestd answered")
	} else {
		st.set(sunkv1.ConditionSlurmReachable, false, sunkv1.ReasonSlurmUnreachable,
			"Slurm could not be read: every drain, resume, record removal and pod deletion that needs Slurm's answer waits until it can: "+list(slurmErrs))
	}
	if len(st.conflicts) > 0 {
		st.set(sunkv1.ConditionNodeConflict, true, sunkv1.ReasonNodeHeld, list(st.conflicts))
	} else {
		st.set(sunkv1.ConditionNodeConflict, false, sunkv1.ReasonNoConflict, "no selected node is held by another NodeSet")
	}

	updating := c.Updated < c.Replicas
	wasHeld := false
	if prev := meta.FindStatusCondition(st.previous, sunkv1.ConditionReady); prev != nil && (prev.Reason == sunkv1.ReasonWaitingForGPUConfig || prev.Reason == sunkv1.ReasonWaitingForContainersConfig) {
		wasHeld = true
	}
	switch {
	case len(slurmErrs) > 0:
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonSlurmUnreachable, "Slurm could not be read: "+list(slurmErrs))
	case len(o.waitingForJobs) > 0:
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonWaitingForJobs,
			"drained, waiting for running jobs to end before deleting the pods of "+list(o.waitingForJobs))
	case len(o.held) > 0:
		// The SlurmCluster's status change wakes the NodeSet: nothing to poll.
		st.set(sunkv1.ConditionReady, false, w.createWaitReason, fmt.Sprintf("%s; not created yet: %s", w.createWait, list(o.held)))
		if !wasHeld {
			r.event(w.ns, corev1.EventTypeNormal, w.createWaitReason, "%s", w.createWait)
		}
	case o.retiring > 0 && !updating:
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonScalingIn, fmt.Sprintf("%d pods to remove, %d of %d desired pods ready", c.Replicas-int32(st.desired), c.Ready, st.desired))
	case updating:
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonUpdating, fmt.Sprintf("%d of %d pods run the current template", c.Updated, c.Replicas))
	case c.Ready < int32(st.desired) || c.Replicas != int32(st.desired):
		st.set(sunkv1.ConditionReady, false, sunkv1.ReasonProgressing, fmt.Sprintf("%d of %d desired pods ready (%d exist)", c.Ready, st.desired, c.Replicas))
	default:
		st.set(sunkv1.ConditionReady, true, sunkv1.ReasonReady, fmt.Sprintf("%d of %d pods ready and current", c.Ready, st.desired))
	}
	if st.becomes(sunkv1.ConditionSlurmReachable, metav1.ConditionFalse) {
		r.event(w.ns, corev1.EventTypeWarning, sunkv1.ReasonSlurmUnreachable, "%s", meta.FindStatusCondition(st.conditions, sunkv1.ConditionSlurmReachable).Message)
	}
	if st.becomes(sunkv1.ConditionNodeConflict, metav1.ConditionTrue) {
		r.event(w.ns, corev1.EventTypeWarning, sunkv1.ReasonNodeHeld, "%s", list(st.conflicts))
	}

	// Pods report through the watch; Slurm does not, so anything waiting on Slurm polls.
	pending := len(slurmErrs) > 0 || len(o.waitingForJobs) > 0 || len(o.waiting) > 0 || o.retiring > 0 ||
		(updating && strategyOf(w.ns) == sunkv1.RollingUpdateNodeSetStrategy)
	if !pending {
		for _, m := range w.members {
			if terminating(m.pod) || ourDrain(m.slurm) {
				pending = true
				break
			}
		}
	}
	switch {
	case pending:
		return ctrl.Result{RequeueAfter: r.poll()}
	case len(w.members) > 0:
		return ctrl.Result{RequeueAfter: r.resync()}
	}
	return ctrl.Result{}
}

// updateStatus writes the status when it changed.
func (r *Reconciler) updateStatus(ctx context.Context, ns *sunkv1.NodeSet, st *status) error {
	next := st.counts
	next.ObservedGeneration = ns.Generation
	next.Conditions = st.conditions
	next.TemplateHash = st.hash
	next.Selector = st.selector
	if equality.Semantic.DeepEqual(ns.Status, next) {
		return nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Status = next
	return r.Status().Patch(ctx, ns, patch)
}
