// Health: whether the Slurm node state is readable and fresh; the syncer changes nothing
// while it is not, and re-examines every node when it is again.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"sunk.dev/sunk/pkg/wellknown"
)

// watchHealth reports Slurm's readability as it changes, re-enqueues everything when it
// returns (changes skipped while failing closed are due now) and on the resync period.
func (s *Syncer) watchHealth(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	lastResync := time.Now()
	for {
		err := s.slurmUnreadable()
		ok := err == nil
		s.mu.Lock()
		changed := s.healthy == nil || *s.healthy != ok
		s.healthy = &ok
		s.mu.Unlock()
		if changed {
			s.cfg.Metrics.setReadable(s.cfg.Namespace, s.cfg.Cluster, ok)
			if ok {
				log.FromContext(ctx).Info("Slurm node state readable", "cluster", s.cfg.Cluster)
				s.resyncAll(ctx)
				lastResync = time.Now()
			} else {
				log.FromContext(ctx).Info("Slurm node state unreadable: changing nothing until it is", "cluster", s.cfg.Cluster, "err", err.Error())
			}
			if s.cfg.OnHealth != nil {
				s.cfg.OnHealth(ctx, err)
			}
		}
		if ok {
			s.requeueDeferred()
		}
		if ok && time.Since(lastResync) >= s.cfg.Resync {
			s.resyncAll(ctx)
			lastResync = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// slurmUnreadable is nil when the node cache holds a recent, complete answer from Slurm. Polls
// that keep failing make it unreadable within a few polls; one failed poll between good ones
// does not (the cache is then one poll older, and writes read their node afresh anyway), nor
// does a slow list until StaleAfter.
func (s *Syncer) slurmUnreadable() error {
	switch last := s.nodes.LastSuccess(); {
	case !s.nodes.HasSynced():
		if err := s.nodes.LastError(); err != nil {
			return fmt.Errorf("no node list from Slurm yet: %w", err)
		}
		return errors.New("no node list from Slurm yet")
	case s.nodes.LastError() != nil && time.Since(last) > failingFor(s.cfg.PollInterval):
		return s.nodes.LastError()
	case time.Since(last) > s.cfg.StaleAfter:
		return fmt.Errorf("no node list from Slurm for %s", time.Since(last).Round(time.Second))
	}
	return nil
}

// failingFor is how long polls must keep failing before Slurm counts as unreadable: two
// polls and a second, so that one lost answer is not an outage.
func failingFor(poll time.Duration) time.Duration { return 2*poll + time.Second }

// deferKey remembers a key whose sync was skipped because Slurm was unreadable. An unreadable
// spell can be shorter than watchHealth's tick (a list that timed out, then a good one), so
// "re-enqueue everything when Slurm is back" alone could miss it and lose the skipped change
// until the next event or resync (a soak's uncordon was lifted 68 s late that way).
func (s *Syncer) deferKey(key string) {
	s.mu.Lock()
	s.deferred[key] = struct{}{}
	s.mu.Unlock()
}

// requeueDeferred queues the keys skipped while Slurm was unreadable.
func (s *Syncer) requeueDeferred() {
	s.mu.Lock()
	keys := s.deferred
	if len(keys) > 0 {
		s.deferred = map[string]struct{}{}
	}
	s.mu.Unlock()
	for k := range keys {
		s.queue.Add(k)
	}
}

// Healthy reports whether Slurm's state was readable at the last check.
func (s *Syncer) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthy != nil && *s.healthy
}

func (s *Syncer) resyncAll(ctx context.Context) {
	pods := &corev1.PodList{}
	if err := s.cache.List(ctx, pods, s.podSelector()...); err == nil {
		for i := range pods.Items {
			s.queue.Add(pods.Items[i].Name)
		}
	}
	for _, n := range s.nodes.List() {
		s.queue.Add(n.Name)
	}
	nodes := &corev1.NodeList{}
	if err := s.cache.List(ctx, nodes, client.MatchingLabels{wellknown.LabelCluster: s.cfg.Cluster}); err == nil {
		for i := range nodes.Items {
			s.queue.Add(nodeKeyPrefix + nodes.Items[i].Name)
		}
	}
}
