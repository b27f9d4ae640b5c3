// The scheduling cycle: the framework extension points from PreFilter to PostBind.

package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

const stateKey framework.StateKey = Name

// cycle is what one scheduling cycle learns about its pod.
type cycle struct {
	spec      *podSpec
	topo      *topology
	job       *slurm.Job // nil: no job yet
	slurmNode string     // the Slurm node the pod belongs on, when the job runs
	mu        sync.Mutex
	feasible  sets.Set[string] // Kubernetes nodes that passed every filter (this plugin's is last)
}

func (c *cycle) Clone() framework.StateData { return c }

func cycleOf(state *framework.CycleState) (*cycle, *framework.Status) {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	return d.(*cycle), nil
}

// cycleJob is the cycle's state for a step that needs the pod's job (PreBind, Bind): a pod
// gets there only after PreFilter found its job running.
func cycleJob(state *framework.CycleState, pod *v1.Pod, step string) (*cycle, *framework.Status) {
	c, st := cycleOf(state)
	if st != nil {
		return nil, st
	}
	if c.job == nil {
		return nil, framework.AsStatus(fmt.Errorf("pod %s/%s reached %s without a Slurm job", pod.Namespace, pod.Name, step))
	}
	return c, nil
}

func unresolvable(format string, a ...any) *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf(format, a...))
}

// PreFilter parses the pod, finds its job and narrows the nodes: every node hosting a compute
// pod before the job exists, the node hosting the job's Slurm node once it runs.
func (p *Plugin) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	spec, err := p.specOf(pod)
	if we := (*workloadError)(nil); errors.As(err, &we) && we.Waiting {
		// Not the pod's fault, so no event; and no preemption of Kubernetes pods helps. It is let
		// in again when its Job is cached (activateJobPods).
		return nil, unresolvable("%v", err)
	}
	if err != nil {
		p.lc.badSpec(p, pod, err)
		return nil, unresolvable("%v", err)
	}
	// Waiting on Slurm is unresolvable for Kubernetes: no preemption of Kubernetes pods helps.
	// (With PreEnqueue enabled such pods do not get here.)
	if !p.jobs.HasSynced() || !p.nodes.HasSynced() || !p.policy.hasSynced() {
		return nil, unresolvable("waiting for the first list of Slurm jobs and nodes, and for the SlurmCluster")
	}
	// Waits, as a member of an incomplete gang does, without an event: let in again when a pod
	// of its PodGroup goes (podGroupMemberGone).
	if spec.GangFrom == gangFromPodGroup {
		if msg := p.beyondMinMember(pod, spec.Gang); msg != "" {
			return nil, unresolvable("%s", msg)
		}
	}
	topo, err := p.topology()
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	c := &cycle{spec: spec, topo: topo, feasible: sets.New[string]()}
	state.Write(stateKey, c)
	p.mu.Lock()
	inflight := p.inflight[pod.UID]
	p.mu.Unlock()
	if inflight {
		return nil, unresolvable("submitting the Slurm job")
	}
	// Shown on every attempt while it stands: the same job would be refused again.
	if refused := p.standingRefusal(pod, spec, topo); refused != "" {
		return nil, unresolvable("Slurm refused the job: %s", refused)
	}
	job, ok := p.currentJob(pod)
	if !ok || !isLive(job) {
		// Outside its namespace's policy: no job, and unresolvable, so that DefaultPreemption
		// does not run for it either (PreEnqueue refuses such pods first).
		if msg := p.refusal(pod); msg != "" {
			return nil, unresolvable("%s", msg)
		}
	}
	if !ok {
		if len(topo.onNode) == 0 {
			return nil, unresolvable("no compute pod of SlurmCluster %s is running", p.args.Cluster)
		}
		return &framework.PreFilterResult{NodeNames: sets.KeySet(topo.onNode)}, nil
	}
	c.job = job
	switch {
	case isRunning(job):
		if !p.claimForBinding(job.ID) {
			return nil, unresolvable("Slurm job %d is being cancelled", job.ID)
		}
		node, err := p.slurmNodeFor(pod, job, spec)
		if err != nil {
			return nil, unresolvable("Slurm job %d: %v", job.ID, err)
		}
		host, ok := topo.hostOf[node]
		if !ok {
			return nil, unresolvable("Slurm job %d runs on %s, which no compute pod of SlurmCluster %s hosts", job.ID, node, p.args.Cluster)
		}
		c.slurmNode = node
		return &framework.PreFilterResult{NodeNames: sets.New(host)}, nil
	case isLive(job):
		return nil, unresolvable("%s", pendingMessage(job))
	}
	return nil, unresolvable("Slurm job %d ended (%s)", job.ID, job.BaseState())
}

// pendingMessage is Slurm's pending reason in words.
func pendingMessage(j *slurm.Job) string {
	reason := j.StateReason
	if reason == "" || reason == "None" {
		reason = j.BaseState()
	}
	msg := fmt.Sprintf("Slurm job %d is %s: %s", j.ID, j.BaseState(), reason)
	if j.StateDescription != "" {
		msg += " (" + j.StateDescription + ")"
	}
	return msg
}

// slurmNodeFor is the Slurm node of a pod in its running job: the job's i-th node for its i-th
// member (gang members in name order; a single pod is the first), or for a packed gang the node
// whose share of the job's CPUs holds the i-th member (packedNode).
func (p *Plugin) slurmNodeFor(pod *v1.Pod, job *slurm.Job, spec *podSpec) (string, error) {
	i := p.memberIndex(pod, job)
	nodes, err := slurm.ExpandHostlist(job.Nodes)
	if err != nil {
		return "", err
	}
	// A job with a node per member was submitted before gangs were packed (or packs one to a
	// task): the i-th node either way.
	if spec.Pack > 0 && i >= 0 && len(nodes) < spec.Gang.Size {
		return packedNode(job.Allocation, i, spec.Pack, spec.Job.CPUsPerTask)
	}
	if i < 0 || i >= len(nodes) {
		return "", fmt.Errorf("pod %s is member %d of a job on %d nodes (%s)", pod.UID, i, len(nodes), job.Nodes)
	}
	return nodes[i], nil
}

// excludedNodes are the Slurm nodes a job may not use: every one not in allowed.
func (p *Plugin) excludedNodes(allowed sets.Set[string]) []string {
	var excluded []string
	for n := range p.nodes.All() {
		if !allowed.Has(n.Name) {
			excluded = append(excluded, n.Name)
		}
	}
	sort.Strings(excluded)
	return excluded
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (p *Plugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter admits nodes that host a compute pod of the cluster (the job's, once it runs). It is
// configured last among the filters, so a node it sees has passed all the others: it records
// them, and Reserve tells Slurm to avoid every other node.
func (p *Plugin) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	c, st := cycleOf(state)
	if st != nil {
		return st
	}
	node := ni.Node().Name
	slurmNodes := c.topo.onNode[node]
	if len(slurmNodes) == 0 {
		return unresolvable("node hosts no compute pod of SlurmCluster %s", p.args.Cluster)
	}
	if c.slurmNode != "" && !slices.Contains(slurmNodes, c.slurmNode) {
		return unresolvable("Slurm job %d runs on %s, not on this node", c.job.ID, c.slurmNode)
	}
	c.mu.Lock()
	c.feasible.Insert(node)
	c.mu.Unlock()
	return nil
}

// Reserve submits the job when the pod has none (asynchronously, see submit): Slurm may use the
// Slurm nodes hosted on the nodes that passed the filters and no other. The pod then waits
// (Unschedulable) until the lifecycle loop sees the job run and activates it.
func (p *Plugin) Reserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	c, st := cycleOf(state)
	if st != nil {
		return st
	}
	if c.job != nil {
		return nil
	}
	members := []*v1.Pod{pod}
	key := podJobKey(pod.UID)
	if c.spec.Gang.Size > 0 {
		members = p.gangMembers(pod, c.spec.Gang, c.spec.GangFrom)
		switch {
		case len(members) < c.spec.Gang.Size:
			return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("gang %s has %d of %d pods", c.spec.Gang.Name, len(members), c.spec.Gang.Size))
		case len(members) > c.spec.Gang.Size:
			return unresolvable("gang %s has %d pods, more than its size %d", c.spec.Gang.Name, len(members), c.spec.Gang.Size)
		}
		key = gangJobKey(pod.Namespace, c.spec.Gang.Name, members)
		keys := []string{key}
		p.mu.Lock()
		for _, m := range members {
			if p.inflight[m.UID] {
				p.mu.Unlock()
				return framework.NewStatus(framework.Unschedulable, "submitting the gang's Slurm job")
			}
			keys = append(keys, podJobKey(m.UID)) // a job of the first comment format
		}
		p.mu.Unlock()
		if j, ok := p.jobFor(keys...); ok && isLive(j) {
			return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("gang %s has Slurm job %d", c.spec.Gang.Name, j.ID))
		}
		// A bound member holds the allocation it was bound in (its job ended, or the gang's
		// members changed: it is evicted) and cannot move into a new one: no job until it is gone.
		for _, m := range members {
			if m.Spec.NodeName != "" {
				return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("gang %s: member %s is still bound to node %s", c.spec.Gang.Name, m.Name, m.Spec.NodeName))
			}
		}
	}
	c.mu.Lock()
	allowed := sets.New[string]()
	for node := range c.feasible {
		allowed.Insert(c.topo.onNode[node]...)
	}
	c.mu.Unlock()
	js := c.spec.Job
	p.chargeTo(pod.Namespace, &js)
	js.Comment = p.mark.comment(key)
	js.ExcludedNodes = p.excludedNodes(allowed)
	asks := map[types.UID]string{}
	for _, m := range members {
		if spec, err := p.specOf(m); err == nil {
			asks[m.UID] = p.refusalAsk(m, spec, c.topo)
		}
	}
	p.mu.Lock()
	for _, m := range members {
		p.inflight[m.UID] = true
	}
	p.mu.Unlock()
	go p.submit(js, key, members, asks)
	return framework.NewStatus(framework.Unschedulable, "submitting the Slurm job")
}

// Permit binds a gang all or nothing: each member waits until every member has reached Permit
// (or is bound already); then all are let through together. A member that does not get there
// within GangTimeout sends the waiting ones back to the queue.
func (p *Plugin) Permit(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (*framework.Status, time.Duration) {
	c, st := cycleOf(state)
	if st != nil {
		return st, 0
	}
	g := c.spec.Gang
	if g.Size == 0 {
		return nil, 0
	}
	var waiting []framework.WaitingPod
	p.h.IterateOverWaitingPods(func(wp framework.WaitingPod) {
		wpod := wp.GetPod()
		if wpod.Namespace == pod.Namespace && wpod.UID != pod.UID && p.inGang(wpod, g, c.spec.GangFrom) {
			waiting = append(waiting, wp)
		}
	})
	ready := len(waiting) + 1
	for _, m := range p.gangMembers(pod, g, c.spec.GangFrom) {
		if m.Spec.NodeName != "" && m.UID != pod.UID {
			ready++
		}
	}
	if ready < g.Size {
		return framework.NewStatus(framework.Wait, fmt.Sprintf("gang %s: %d of %d pods ready to bind", g.Name, ready, g.Size)), p.args.GangTimeout.Duration
	}
	for _, wp := range waiting {
		wp.Allow(Name)
	}
	return nil, 0
}

// PreBind, for an exclusive job, records the job on the pod and locks the node. The pod is
// given a toleration of its own job's lock first: if its binding fails after another member
// of its gang locked the node, the lock must not keep it out on the next attempt.
func (p *Plugin) PreBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	c, st := cycleJob(state, pod, "PreBind")
	if st != nil {
		return st
	}
	if !c.spec.Job.Exclusive {
		return nil // Bind records the job with the binding
	}
	id := strconv.FormatUint(uint64(c.job.ID), 10)
	if err := p.markPod(ctx, pod, id, true); err != nil {
		return framework.AsStatus(err)
	}
	if err := p.lockNode(ctx, nodeName, id); err != nil {
		return framework.AsStatus(err)
	}
	return nil
}

// Bind binds the pod as DefaultBinder does, with its job's annotation in the same write (the
// binding subresource copies a Binding's annotations onto the pod): a bound pod always names
// its job, and a pod costs the API server one write to bind, not two.
func (p *Plugin) Bind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	c, st := cycleJob(state, pod, "Bind")
	if st != nil {
		return st
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			Annotations: map[string]string{wellknown.AnnotationJob: strconv.FormatUint(uint64(c.job.ID), 10)}},
		Target: v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := p.h.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return framework.AsStatus(err)
	}
	return nil
}

// markPod writes the job annotation on the pod and, with tolerate, the toleration of the job's
// own node lock (tolerations may be added to a pod, not removed: the list sent keeps the pod's).
func (p *Plugin) markPod(ctx context.Context, pod *v1.Pod, id string, tolerate bool) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{wellknown.AnnotationJob: id}}}
	if tol := ownLockToleration(id); tolerate && !slices.Contains(pod.Spec.Tolerations, tol) {
		patch["spec"] = map[string]any{"tolerations": append(slices.Clone(pod.Spec.Tolerations), tol)}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = p.h.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	return err
}

// PostBind records the bind latency and, for a job that waited in Slurm's queue, says where
// Slurm put the pod. A job Slurm started at once gets no event: the pod's binding named the job
// (sunk.dev/slurm-job) and kube-scheduler's Scheduled event names the node, and an event is one
// more API write per pod than kube-scheduler makes (BenchmarkThousandPods: 2,034 events for
// 1,000 pods, against 1,131 for default-scheduler).
func (p *Plugin) PostBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
	bindLatency.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
	if c, st := cycleOf(state); st == nil && c.job != nil {
		p.lc.mu.Lock()
		since, ok := p.lc.running[c.job.ID]
		p.lc.mu.Unlock()
		if ok {
			phaseSeconds.WithLabelValues("bind").Observe(time.Since(since).Seconds())
		}
		p.mu.Lock()
		quiet := p.immediate[c.job.ID]
		p.mu.Unlock()
		if !quiet {
			p.lc.event(p, pod, v1.EventTypeNormal, sunkv1.ReasonSlurmAllocated, "Slurm job %d runs on Slurm node %s, hosted by node %s", c.job.ID, c.slurmNode, nodeName)
		}
	}
}
