package plugin

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
)

// maxConditionWrites bounds the pending-reason writes in flight.
const maxConditionWrites = 8

// showPending writes Slurm's pending reason into the pod's PodScheduled condition: PreEnqueue
// keeps the pod out of scheduling cycles while its job pends, so no cycle's failure says it.
// The write is made off the loop, a few at a time: one API write per pod made in the loop held
// up every activation behind it (a burst of 300 pods took 4 s of writes before the first bind).
// A job Slurm has not considered yet (reason None) is not reported: most start at the next
// scheduling pass, and the write would be for nothing.
func (p *Plugin) showPending(logger klog.Logger, pod *v1.Pod, j *slurm.Job) {
	if j.StateReason == "" || j.StateReason == "None" {
		return
	}
	msg := pendingMessage(j)
	go func() {
		p.conditionSlots <- struct{}{}
		defer func() { <-p.conditionSlots }()
		// Bound meanwhile: the binding made PodScheduled True, and a pending reason would lie.
		if cur, err := p.pods.Pods(pod.Namespace).Get(pod.Name); err != nil || cur.UID != pod.UID || cur.Spec.NodeName != "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.writeCondition(ctx, pod, v1.PodReasonUnschedulable, msg); err != nil {
			logger.Error(err, "showing the pending reason", "pod", klog.KObj(pod))
		}
	}()
}

// writeCondition sets the pod's PodScheduled condition to False with this reason and message,
// unless it says that already.
func (p *Plugin) writeCondition(ctx context.Context, pod *v1.Pod, reason, msg string) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Reason == reason && c.Message == msg {
			return nil
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{{
		Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.Now(),
	}}}})
	if err == nil {
		_, err = p.h.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// evict evicts a pod through the Eviction API (disruption budgets apply), with an event that
// says why; true when the eviction was made now.
func (p *Plugin) evict(ctx context.Context, logger klog.Logger, pod *v1.Pod, why, reason string) bool {
	p.lc.mu.Lock()
	at, done := p.lc.evicted[pod.UID]
	p.lc.mu.Unlock()
	if done && time.Since(at) < 30*time.Second {
		return false
	}
	err := p.h.ClientSet().PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "evicting pod", "pod", klog.KObj(pod), "why", why)
		return false
	}
	p.lc.mu.Lock()
	p.lc.evicted[pod.UID] = time.Now()
	p.lc.mu.Unlock()
	p.lc.event(p, pod, v1.EventTypeWarning, reason, "%s; evicting the pod", why)
	logger.Info("evicted pod", "pod", klog.KObj(pod), "why", why)
	return true
}
