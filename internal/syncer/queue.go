package syncer

// The work queue: which pod and node events enqueue which Slurm node (a compute pod's name is
// its Slurm node's name), and the workers that take names off it, retry and log failures.

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

func (s *Syncer) podSelector() []client.ListOption {
	return []client.ListOption{client.InNamespace(s.cfg.Namespace),
		client.MatchingLabels{wellknown.LabelCluster: s.cfg.Cluster, wellknown.LabelComponent: wellknown.ComponentCompute}}
}

func (s *Syncer) ours(p *corev1.Pod) bool {
	return p.Namespace == s.cfg.Namespace && p.Labels[wellknown.LabelCluster] == s.cfg.Cluster &&
		p.Labels[wellknown.LabelComponent] == wellknown.ComponentCompute
}

func (s *Syncer) podEvent(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	if !s.ours(p) {
		// Another cluster's compute pod came or went: a node this cluster shares with it may
		// now be its alone, or shared (syncNode has its one pod mirror itself again).
		if p.Labels[wellknown.LabelComponent] == wellknown.ComponentCompute && p.Spec.NodeName != "" && s.trustedComputePod(p) {
			s.queue.Add(nodeKeyPrefix + p.Spec.NodeName)
		}
		return
	}
	s.enqueue(p.Name, true)
	if p.Spec.NodeName != "" {
		s.queue.Add(nodeKeyPrefix + p.Spec.NodeName) // the node may have lost its last pod
	}
}

func (s *Syncer) nodeEvent(ctx context.Context, o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	pods, err := s.podsOn(ctx, n.Name)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing compute pods by node", "node", n.Name)
		return
	}
	for _, p := range pods {
		s.enqueue(p.Name, true)
	}
	if len(pods) == 0 && n.Labels[wellknown.LabelCluster] == s.cfg.Cluster {
		s.queue.Add(nodeKeyPrefix + n.Name)
	}
}

func (s *Syncer) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := s.cache.List(ctx, l, append(s.podSelector(), client.MatchingFields{PodNodeIndex: node})...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// computePodsOn lists the compute pods of every cluster on a node that the cache holds (all
// of them when the syncer watches every namespace): whether a node is shared is not a
// question of one cluster.
func (s *Syncer) computePodsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := s.cache.List(ctx, l, client.MatchingLabels{wellknown.LabelComponent: wellknown.ComponentCompute},
		client.MatchingFields{PodNodeIndex: node}); err != nil {
		return nil, err
	}
	pods := l.Items[:0]
	for _, p := range l.Items {
		if s.trustedComputePod(&p) {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// trustedComputePod says whether a pod labelled as a compute pod is one: a pod of this
// cluster's namespace (whoever creates pods there holds the cluster's keys already), or one a
// NodeSet controls. Labels alone are anyone's to set: a pod any namespace user placed on a node
// (spec.nodeName) with the compute labels would otherwise make the node "shared" and take its
// Slurm mirror off it. A forged owner reference names no NodeSet of the pod's namespace, and
// the garbage collector deletes such a pod.
func (s *Syncer) trustedComputePod(p *corev1.Pod) bool {
	if p.Namespace == s.cfg.Namespace {
		return true
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "NodeSet" && ref.APIVersion == sunkv1.GroupVersion.String()
}

// enqueue queues a Slurm node and remembers when a change was first seen from each side,
// for the latency metric.
func (s *Syncer) enqueue(name string, fromKube bool) {
	now := time.Now()
	s.mu.Lock()
	o := s.seen[name]
	if fromKube && o.k8s.IsZero() {
		o.k8s = now
	}
	if !fromKube && o.slurm.IsZero() {
		o.slurm = now
	}
	s.seen[name] = o
	s.mu.Unlock()
	s.queue.Add(name)
}

func (s *Syncer) next(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	var err error
	if node, ok := strings.CutPrefix(key, nodeKeyPrefix); ok {
		err = s.syncNode(ctx, node)
	} else {
		err = s.sync(ctx, key)
	}
	if err != nil {
		l := log.FromContext(ctx).WithValues("key", key, "cluster", s.cfg.Cluster, "attempt", s.queue.NumRequeues(key)+1)
		if failureIsError(s.queue.NumRequeues(key), err, ctx.Err() != nil) {
			l.Error(err, "sync failed; retrying")
		} else {
			l.V(1).Info("sync failed; retrying", "error", err.Error())
		}
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// failureIsError says whether a failed sync, retried requeues times so far, is logged as an
// error (else debug). A retry loop must not flood the log: the first failure and every tenth
// are errors. An unreachable Slurm is reported once by the health change, and a write cut
// short because this syncer stops (its cluster deleted, the process ending) is no failure:
// e2e runs logged one "context canceled" error per deleted cluster.
func failureIsError(requeues int, err error, stopping bool) bool {
	return (requeues == 0 || requeues%10 == 0) && !errors.Is(err, slurm.ErrUnavailable) && !stopping
}
