package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// lifecycle is the state of the loop that keeps pods and jobs together. It is level-triggered:
// everything it acts on is read again from the pod and job lists on each pass, so a restarted
// scheduler adopts pods with live jobs, cancels jobs without pods and evicts pods without jobs.
// The maps only keep it from repeating an action or an event.
type lifecycle struct {
	mu        sync.Mutex
	seen      map[uint32]string    // job → the state+reason last acted on
	again     map[uint32]bool      // jobs whose pods are activated once more on the next pass
	cancelled map[uint32]time.Time // jobs this process cancelled (retried after a minute)
	binding   map[uint32]time.Time // jobs a scheduling cycle chose to bind a pod to (claimForBinding)
	evicted   map[types.UID]time.Time
	badSpecs  map[types.UID]string // the last annotation error reported per pod
	running   map[uint32]time.Time // when the loop first saw each job run
	listed    map[uint32]time.Time // when the job list first showed each job running
}

// sawJob records when the job list first shows one of the plugin's jobs running, and how long
// after its start in Slurm that was (phase detect).
func (l *lifecycle) sawJob(p *Plugin, j *slurm.Job) {
	if !isRunning(j) {
		return
	}
	l.mu.Lock()
	_, seen := l.listed[j.ID]
	l.mu.Unlock()
	if seen || p.placeholderKeys(j) == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	l.listed[j.ID] = now
	l.mu.Unlock()
	if !j.StartTime.IsZero() {
		phaseSeconds.WithLabelValues("detect").Observe(max(now.Sub(j.StartTime).Seconds(), 0))
		if !j.SubmitTime.IsZero() {
			phaseSeconds.WithLabelValues("pending").Observe(max(j.StartTime.Sub(j.SubmitTime).Seconds(), 0))
		}
	}
}

func newLifecycle() lifecycle {
	return lifecycle{seen: map[uint32]string{}, again: map[uint32]bool{}, cancelled: map[uint32]time.Time{},
		binding: map[uint32]time.Time{},
		evicted: map[types.UID]time.Time{}, badSpecs: map[types.UID]string{},
		running: map[uint32]time.Time{}, listed: map[uint32]time.Time{}}
}

func (l *lifecycle) event(p *Plugin, pod *v1.Pod, typ, reason, format string, a ...any) {
	p.h.EventRecorder().Eventf(pod, nil, typ, reason, "Scheduling", format, a...)
}

// run starts the Slurm informers once the pod informer has synced, then reconciles after each
// job list. The SlurmCluster (the policy) is watched alongside; only new submissions wait for
// it: pods and jobs are kept together even while it cannot be read.
func (p *Plugin) run(ctx context.Context, podsSynced cache.InformerSynced) {
	logger := klog.FromContext(ctx).WithName(Name)
	go p.policy.run(ctx, p.policyChanged)
	if !cache.WaitForCacheSync(ctx.Done(), podsSynced) {
		return
	}
	go func() { _ = p.nodes.Run(ctx) }()
	go func() { _ = p.jobs.Run(ctx) }()
	t := time.NewTicker(p.args.PollInterval.Duration)
	defer t.Stop()
	firstPasses := 2
	var waitLog logOnce
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.jobsChanged:
		}
		if !p.jobs.HasSynced() || !p.nodes.HasSynced() {
			if err := errors.Join(p.jobs.LastError(), p.nodes.LastError()); err != nil && waitLog.due(err, time.Now()) {
				logger.Error(err, "waiting for the first Slurm job and node lists")
			}
			continue
		}
		if firstPasses > 0 && p.policy.hasSynced() {
			// Pods that were turned away while the lists (and the policy) were loading (twice:
			// see reconcileLive).
			p.activate(logger, p.ourPods(func(pod *v1.Pod) bool { return pod.Spec.NodeName == "" && alive(pod) }))
			firstPasses--
		}
		start := time.Now()
		if err := p.reconcile(ctx, logger); err != nil {
			logger.Error(err, "lifecycle pass")
		}
		lifecyclePassSeconds.Observe(time.Since(start).Seconds())
	}
}

// logOnce says when an error that repeats at every pass is worth a line: when it changed, or
// once a minute. The loop waits for the first lists at every poll (200 ms by default), and a
// node watcher that has not read its first table answers 503 meanwhile: five error lines a
// second at every start.
type logOnce struct {
	msg string
	at  time.Time
}

func (l *logOnce) due(err error, now time.Time) bool {
	if msg := err.Error(); msg != l.msg || now.Sub(l.at) >= time.Minute {
		l.msg, l.at = msg, now
		return true
	}
	return false
}

// wakeLifecycle asks the lifecycle loop for a pass now; a pass already asked for covers it.
func (p *Plugin) wakeLifecycle() {
	select {
	case p.jobsChanged <- struct{}{}:
	default:
	}
}

func (p *Plugin) ourPods(keep func(*v1.Pod) bool) []*v1.Pod {
	all, _ := p.pods.List(labels.Everything())
	var out []*v1.Pod
	for _, pod := range all {
		if pod.Spec.SchedulerName == p.scheduler && keep(pod) {
			out = append(out, pod)
		}
	}
	return out
}

func (p *Plugin) activate(logger klog.Logger, pods []*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	m := make(map[string]*v1.Pod, len(pods))
	for _, pod := range pods {
		m[pod.Namespace+"/"+pod.Name] = pod
	}
	p.h.Activate(logger, m)
}

// reconcile is one pass over jobs and pods.
func (p *Plugin) reconcile(ctx context.Context, logger klog.Logger) error {
	byUID := map[types.UID]*v1.Pod{}
	pending := 0
	for _, pod := range p.ourPods(func(*v1.Pod) bool { return true }) {
		byUID[pod.UID] = pod
		if pod.Spec.NodeName == "" && alive(pod) {
			pending++
		}
	}
	pendingPods.Set(float64(pending))
	p.expireSubmissions()
	exists := func(uid types.UID) bool { _, ok := byUID[uid]; return ok }
	p.denied.keepOnly(exists)
	p.forgetRefusals(exists)

	running := map[uint32]bool{}
	known := map[uint32]bool{}
	var groups map[string][]*v1.Pod // the gangs in the pod cache, by key: built when first needed
	gangs := func() map[string][]*v1.Pod {
		if groups == nil {
			all := make([]*v1.Pod, 0, len(byUID))
			for _, pod := range byUID {
				all = append(all, pod)
			}
			groups = p.gangGroups(all)
		}
		return groups
	}
	handled := map[types.UID]bool{}
	locked := p.lockedJobs()
	for _, j := range p.jobs.ListWhere(func(id uint32) bool { return !p.settled.has(id) }) {
		keys := p.placeholderKeys(&j)
		if keys == nil {
			p.settled.settle(j.ID) // not a placeholder: a pass has nothing to do with it
			continue
		}
		known[j.ID] = true
		members := p.membersOf(&j, keys, byUID, gangs)
		for _, m := range members {
			if m != nil {
				handled[m.UID] = true
			}
		}
		if isLive(&j) {
			running[j.ID] = isRunning(&j)
			if running[j.ID] && locked[j.ID] {
				p.tolerateOwnLock(ctx, logger, &j, members)
			}
			p.reconcileLive(ctx, logger, &j, members)
		} else {
			p.reconcileEnded(ctx, logger, &j, members, keys)
			p.settled.settleIfDone(&j, keys, members)
		}
	}
	p.mu.Lock()
	for id := range p.submitted {
		known[id] = true
		running[id] = false
	}
	p.mu.Unlock()
	p.untrusted.forget(func(id uint32) bool { _, ok := p.jobs.Get(id); return ok })

	// Bound pods whose job Slurm no longer knows (purged after it ended while no scheduler ran).
	// A job missing from the list is asked for by id before anything is done: only Slurm's
	// "not found" counts. A bound pod whose job ended and named no pod (a gang job whose
	// members changed while no scheduler ran) is found through its job annotation.
	for _, pod := range byUID {
		id, err := strconv.ParseUint(pod.Annotations[wellknown.AnnotationJob], 10, 32)
		if err != nil || pod.Spec.NodeName == "" || !alive(pod) {
			continue
		}
		if known[uint32(id)] || p.settled.has(uint32(id)) {
			if j, ok := p.jobs.Get(uint32(id)); ok && !isLive(&j) && !handled[pod.UID] {
				p.reconcileEnded(ctx, logger, &j, []*v1.Pod{pod}, nil)
			}
			continue
		}
		j, err := p.slurm.GetJob(ctx, uint32(id))
		switch {
		case errors.Is(err, slurm.ErrNotFound):
			p.evict(ctx, logger, pod, fmt.Sprintf("Slurm job %d no longer exists", id), sunkv1.ReasonSlurmJobGone)
		case err == nil && !isLive(j):
			p.reconcileEnded(ctx, logger, j, []*v1.Pod{pod}, nil)
		}
	}
	p.cancelDuplicates(logger, byUID)
	return p.unlockNodes(ctx, running)
}

// reconcileLive cancels a job whose pods are gone or finished, and otherwise tells its pods
// about a change: the pending reason as an event, a start as an activation (the pod is then
// scheduled onto the job's node).
func (p *Plugin) reconcileLive(ctx context.Context, logger klog.Logger, j *slurm.Job, members []*v1.Pod) {
	for _, m := range members {
		reason := ""
		switch {
		case m == nil:
			reason = "pod-deleted"
		case m.DeletionTimestamp != nil:
			reason = "pod-deleted"
		case !alive(m):
			reason = "pod-finished"
		}
		if reason == "" {
			continue
		}
		p.lc.mu.Lock()
		send := p.lc.markCancelling(j.ID)
		p.lc.mu.Unlock()
		if !send {
			return
		}
		go p.cancel(logger, j.ID, reason, members)
		return
	}
	if !isRunning(j) {
		// A bound pod whose job no longer runs (requeued by PreemptMode=REQUEUE or by hand,
		// suspended) has lost its allocation: it is evicted, and the job cancelled once it is gone.
		// Only pods bound to this job: a second job of a pod (cancelDuplicates) pends while
		// the pod runs on its first.
		for _, m := range members {
			if m.Spec.NodeName != "" && m.Annotations[wellknown.AnnotationJob] == strconv.FormatUint(uint64(j.ID), 10) {
				if p.evict(ctx, logger, m, fmt.Sprintf("Slurm job %d no longer runs: %s (%s)", j.ID, j.BaseState(), j.StateReason), sunkv1.ReasonSlurmJobStopped) {
					jobsEnded.WithLabelValues(j.BaseState()).Inc()
				}
			}
		}
	}
	// A change activates the job's waiting pods, and so does the next pass once more: a pod
	// that PreEnqueue turned away on the old state just as the activation came (it was not in
	// the queue yet) would otherwise wait for the queue's five-minute flush.
	mark := j.BaseState() + "/" + j.StateReason
	p.lc.mu.Lock()
	changed := p.lc.seen[j.ID] != mark
	p.lc.seen[j.ID] = mark
	if _, ok := p.lc.running[j.ID]; !ok && isRunning(j) {
		now := time.Now()
		p.lc.running[j.ID] = now
		if listed, ok := p.lc.listed[j.ID]; ok {
			phaseSeconds.WithLabelValues("activate").Observe(now.Sub(listed).Seconds())
		}
	}
	again := p.lc.again[j.ID]
	delete(p.lc.again, j.ID)
	if changed {
		p.lc.again[j.ID] = true
	}
	p.lc.mu.Unlock()
	if !changed && !again {
		return
	}
	var wake []*v1.Pod
	for _, m := range members {
		if m.Spec.NodeName != "" {
			continue
		}
		wake = append(wake, m)
		if changed && !isRunning(j) && j.StateReason != "None" {
			p.lc.event(p, m, v1.EventTypeNormal, sunkv1.ReasonSlurmPending, "%s", pendingMessage(j))
			p.showPending(logger, m, j)
		}
	}
	if changed && isRunning(j) && len(wake) > 0 {
		logger.V(1).Info("Slurm job runs; activating its pods", "job", j.ID, "nodes", j.Nodes, "pods", len(wake))
	}
	p.activate(logger, wake)
}

// reconcileEnded evicts the pods of a job that ended while they live: preempted, cancelled by
// someone else, timed out, its node failed. With keys (the job's), a pod whose key has a newer
// job is left alone: the ended one was an older attempt's.
func (p *Plugin) reconcileEnded(ctx context.Context, logger klog.Logger, j *slurm.Job, members []*v1.Pod, keys []string) {
	p.lc.mu.Lock()
	delete(p.lc.seen, j.ID)
	delete(p.lc.again, j.ID)
	delete(p.lc.running, j.ID)
	delete(p.lc.listed, j.ID)
	delete(p.lc.binding, j.ID)
	p.lc.mu.Unlock()
	state := j.BaseState()
	for _, m := range members {
		if m == nil || !alive(m) {
			continue
		}
		// A pod that never had this job's allocation loses nothing: its next scheduling
		// attempt submits again (PreFilter), where an eviction would delete a plain pod for
		// a refusal it can do nothing about.
		if m.Spec.NodeName == "" && neverRan(j) {
			continue
		}
		// A job of an older attempt of this pod (it has a newer live one) is not its job.
		if cur, ok := p.jobFor(keys...); ok && keys != nil && cur.ID != j.ID {
			continue
		}
		msg := fmt.Sprintf("Slurm job %d ended: %s", j.ID, state)
		if j.StateReason != "" && j.StateReason != "None" {
			msg += " (" + j.StateReason + ")"
		}
		if p.evict(ctx, logger, m, msg, endReason(state)) {
			jobsEnded.WithLabelValues(state).Inc()
		}
	}
}

func endReason(state string) string {
	switch state {
	case "PREEMPTED":
		return sunkv1.ReasonSlurmPreempted
	case "TIMEOUT", "DEADLINE":
		return sunkv1.ReasonSlurmTimeout
	case "NODE_FAIL", "BOOT_FAIL":
		return sunkv1.ReasonSlurmNodeFailed
	case "CANCELLED":
		return sunkv1.ReasonSlurmCancelled
	}
	return sunkv1.ReasonSlurmJobEnded
}

func slurmGone(err error) bool { return errors.Is(err, slurm.ErrNotFound) }

// expireSubmissions forgets submissions the job list never showed (a job purged within a poll).
func (p *Plugin) expireSubmissions() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, s := range p.submitted {
		if time.Since(s.at) > 2*time.Minute {
			delete(p.submitted, id)
		}
	}
}
