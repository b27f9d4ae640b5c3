// Kubernetes to Slurm: drains and resumes from Kubernetes causes (and from GRES that differ
// from what the pod registered), and removal of the records of dynamic nodes whose pods are
// gone.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurm"
)

// toSlurm applies the Kubernetes → Slurm rule (Decide) within the drain budget (HeldBy).
// The cache shows a change only after the next poll, so a change just sent is not sent again
// until then.
func (s *Syncer) toSlurm(ctx context.Context, pod *corev1.Pod, node *corev1.Node, sn *slurm.Node, since time.Time) error {
	k8sCauses, recheck := Causes(node, pod, time.Now(), s.cfg.NotReadyGrace)
	if recheck > 0 {
		// The pod's grace ends then: decide again, whatever else happens meanwhile.
		s.queue.AddAfter(sn.Name, recheck)
	}
	var reg Registered
	if pod != nil {
		reg.Gres, reg.Known = clusternames.RegisteredGres(pod)
	}
	causes := WithGres(k8sCauses, reg, sn)
	a := Decide(causes, sn)
	log.FromContext(ctx).V(2).Info("decided", "node", sn.Name, "cluster", s.cfg.Cluster, "causes", causes,
		"state", sn.State, "reason", sn.Reason, "action", a)
	s.mu.Lock()
	prev, sent := s.inflight[sn.Name]
	if a.Kind == Nothing {
		delete(s.inflight, sn.Name)
	}
	s.mu.Unlock()
	if a.Kind == Nothing {
		s.budget.forget(sn.Name)
		return nil
	}
	// Sent already, and the cache still shows the node it was decided on: wait for the
	// next polls to show it; decide again afterwards in case the change was lost or undone.
	if sent && prev.action == a && prev.before == snapshot(sn) {
		if wait := resendAfter(s.cfg.PollInterval) - time.Since(prev.at); wait > 0 {
			s.queue.AddAfter(sn.Name, wait)
			return nil
		}
	}
	if cause, newly, b := s.budget.admit(a, sn, causes); cause != "" {
		// Held back until a drain for the same cause ends (the node cache's handler queues
		// it then) or a resync; reported once per hold.
		if newly {
			s.cfg.Metrics.drainHeld(s.cfg.Namespace, s.cfg.Cluster, cause)
			s.event(pod, corev1.EventTypeWarning, sunkv1.ReasonDrainHeld, "drain",
				"not draining Slurm node %s for %q: %d other nodes are drained for it, the most the drain budget allows "+
					"(%d%% of %d Slurm nodes, at least 1); it drains once one of them is resumed",
				sn.Name, cause, b.DrainedFor[cause], b.Percent, b.Nodes)
			log.FromContext(ctx).Info("drain held back by the drain budget", "node", sn.Name, "cluster", s.cfg.Cluster,
				"cause", cause, "drained", b.DrainedFor[cause], "limit", b.Limit())
		}
		return nil
	}
	// The cache may be polls old while slurmctld is slow: the writer decides again on the
	// node as Slurm has it now, so that a stale view never overwrites a person's drain or
	// lifts a drain that is no longer the syncer's.
	what := "resume"
	if a.Kind == Drain {
		what = "drain"
	}
	switch err := s.writer.apply(ctx, sn.Name, a, k8sCauses, reg); {
	case errors.Is(err, errChanged):
		s.budget.release(sn.Name)
		s.queue.AddAfter(sn.Name, resendAfter(s.cfg.PollInterval))
		log.FromContext(ctx).V(1).Info("the node changed in Slurm since the last poll; deciding again after the next",
			"node", sn.Name, "cluster", s.cfg.Cluster, "cached", a)
		return nil
	case errors.Is(err, slurm.ErrNotFound):
		s.budget.release(sn.Name)
		return nil // the record is gone; the cache will say so
	case errors.Is(err, errRead):
		s.budget.release(sn.Name)
		return err
	case err != nil:
		s.budget.release(sn.Name)
		s.cfg.Metrics.syncError(s.cfg.Namespace, s.cfg.Cluster, errSlurmWrite)
		s.event(pod, corev1.EventTypeWarning, sunkv1.ReasonSlurmUpdateFailed, what, "%s of Slurm node %s failed: %v", what, sn.Name, err)
		return fmt.Errorf("%s Slurm node %s: %w", what, sn.Name, err)
	}
	s.mu.Lock()
	s.inflight[sn.Name] = inflight{action: a, at: time.Now(), before: snapshot(sn)}
	s.mu.Unlock()
	s.cfg.Metrics.corrected(s.cfg.Namespace, s.cfg.Cluster, DirectionToSlurm, what, since)
	if a.Kind == Drain {
		s.event(pod, corev1.EventTypeNormal, sunkv1.ReasonSlurmNodeDrained, what, "drained Slurm node %s: %s", sn.Name, a.Reason)
	} else {
		s.event(pod, corev1.EventTypeNormal, sunkv1.ReasonSlurmNodeResumed, what, "resumed Slurm node %s: no Kubernetes cause left (was %q)", sn.Name, sn.Reason)
	}
	return nil
}

// removeOrphan removes the record of a Slurm node whose pod is gone, once it has been gone
// for the grace period by the cache and is gone by a live read too.
func (s *Syncer) removeOrphan(ctx context.Context, sn *slurm.Node) error {
	s.mu.Lock()
	first, known := s.orphans[sn.Name]
	if !known {
		first = time.Now()
		s.orphans[sn.Name] = first
	}
	s.mu.Unlock()
	if wait := s.cfg.OrphanGrace - time.Since(first); wait > 0 {
		s.queue.AddAfter(sn.Name, wait)
		return nil
	}
	if sn.Busy() {
		// The node's slurmd left with its pod; Slurm fails the jobs once it stops
		// responding, and the record goes after that.
		s.queue.AddAfter(sn.Name, s.cfg.OrphanGrace)
		return nil
	}
	err := s.live.Get(ctx, types.NamespacedName{Namespace: s.cfg.Namespace, Name: sn.Name}, &corev1.Pod{})
	if err == nil {
		return nil // the cache lags: the pod exists
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	if err := s.cfg.Slurm.DeleteNode(ctx, sn.Name); err != nil && !errors.Is(err, slurm.ErrNotFound) {
		s.cfg.Metrics.syncError(s.cfg.Namespace, s.cfg.Cluster, errSlurmWrite)
		return fmt.Errorf("removing Slurm node %s without a pod: %w", sn.Name, err)
	}
	s.forgetOrphan(sn.Name)
	s.cfg.Metrics.corrected(s.cfg.Namespace, s.cfg.Cluster, DirectionToSlurm, "remove", first)
	log.FromContext(ctx).Info("removed Slurm node without a pod", "node", sn.Name, "cluster", s.cfg.Cluster, "state", sn.State)
	return nil
}

func (s *Syncer) forgetOrphan(name string) {
	s.mu.Lock()
	delete(s.orphans, name)
	s.mu.Unlock()
}
