package plugin

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// lockNode adds the node lock taint for job id. A gang's members on one node lock it once: the
// writes of one node are serialised in this process, and a member that finds the taint (in the
// informer's copy, else in a fresh read) writes nothing. Other writers of the node (the kubelet's
// status, labels) are outwaited by lockBackoff: a member whose lock fails is unbound while the
// others are bound, which breaks the gang's all-or-nothing binding.
func (p *Plugin) lockNode(ctx context.Context, node, id string) error {
	if n, err := p.h.SharedInformerFactory().Core().V1().Nodes().Lister().Get(node); err == nil && slices.Contains(n.Spec.Taints, lockTaint(id)) {
		return nil
	}
	mu := p.nodeMutex(node)
	mu.Lock()
	defer mu.Unlock()
	return updateNode(ctx, p.h.ClientSet(), node, func(n *v1.Node) bool {
		if slices.Contains(n.Spec.Taints, lockTaint(id)) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, lockTaint(id))
		return true
	})
}

func lockTaint(id string) v1.Taint {
	return v1.Taint{Key: wellknown.TaintJob, Value: id, Effect: v1.TaintEffectNoSchedule}
}

// ownLockToleration lets a pod of job id onto a node its own job locked: a member whose binding
// failed after another member locked the node must still get there.
func ownLockToleration(id string) v1.Toleration {
	return v1.Toleration{Key: wellknown.TaintJob, Operator: v1.TolerationOpEqual, Value: id, Effect: v1.TaintEffectNoSchedule}
}

func (p *Plugin) nodeMutex(node string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	mu, ok := p.nodeLocks[node]
	if !ok {
		mu = &sync.Mutex{}
		p.nodeLocks[node] = mu
	}
	return mu
}

// lockedJobs are the jobs whose lock taint is on a node.
func (p *Plugin) lockedJobs() map[uint32]bool {
	nodes, _ := p.h.SharedInformerFactory().Core().V1().Nodes().Lister().List(labels.Everything())
	out := map[uint32]bool{}
	for _, n := range nodes {
		for _, t := range n.Spec.Taints {
			if id, err := strconv.ParseUint(t.Value, 10, 32); t.Key == wellknown.TaintJob && err == nil {
				out[uint32(id)] = true
			}
		}
	}
	return out
}

// tolerateOwnLock gives the toleration of their job's lock to the members of a running, locked
// job that wait unbound without it: PreBind writes it before it locks, but a member whose
// PreBind failed on that write would otherwise be kept out by its own job's lock for good.
func (p *Plugin) tolerateOwnLock(ctx context.Context, logger klog.Logger, j *slurm.Job, members []*v1.Pod) {
	id := strconv.FormatUint(uint64(j.ID), 10)
	for _, m := range members {
		if m == nil || m.Spec.NodeName != "" || !alive(m) || slices.Contains(m.Spec.Tolerations, ownLockToleration(id)) {
			continue
		}
		if err := p.markPod(ctx, m, id, true); err != nil {
			logger.Error(err, "letting a pod tolerate its job's node lock", "pod", klog.KObj(m), "job", j.ID)
		}
	}
}

// unlockNodes removes node lock taints whose job does not run any more. A job this process
// does not know at all (another cluster's scheduler would use another key) is unlocked too.
func (p *Plugin) unlockNodes(ctx context.Context, live map[uint32]bool) error {
	nodes, err := p.h.SharedInformerFactory().Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	for _, n := range nodes {
		stale := func(t v1.Taint) bool {
			if t.Key != wellknown.TaintJob {
				return false
			}
			id, err := strconv.ParseUint(t.Value, 10, 32)
			_, known := live[uint32(id)]
			return err != nil || !known
		}
		if !slices.ContainsFunc(n.Spec.Taints, stale) {
			continue
		}
		mu := p.nodeMutex(n.Name)
		mu.Lock()
		err := updateNode(ctx, p.h.ClientSet(), n.Name, func(n *v1.Node) bool {
			before := len(n.Spec.Taints)
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, stale)
			return len(n.Spec.Taints) != before
		})
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// lockBackoff spaces the retries of a node write that met a conflict: about 5 s in all (the
// client's default, five tries within 50 ms, was exhausted by a node's other writers).
var lockBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 2 * time.Second}

// updateNode reads the node afresh and writes it if mutate changed it, again on a conflict.
func updateNode(ctx context.Context, cs kubernetes.Interface, name string, mutate func(*v1.Node) bool) error {
	return retry.RetryOnConflict(lockBackoff, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !mutate(n) {
			return nil
		}
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
