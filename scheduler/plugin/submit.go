// Submitting placeholder jobs (one per pod or gang) off the scheduling cycle, bounded.

package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// maxSubmits and maxCancels bound the submissions and the cancellations in flight to
// slurmrestd, separately.
const (
	maxSubmits = 6
	maxCancels = 4
)

// submit submits a job off the scheduling cycle (a Slurm round trip must not hold up other pods).
// Until Slurm has answered, PreFilter holds the pods back, so a pod never gets two jobs. asks
// holds each member's refusalAsk, kept with a refusal.
func (p *Plugin) submit(js slurm.JobSubmit, key string, members []*v1.Pod, asks map[types.UID]string) {
	for _, m := range members {
		phaseSeconds.WithLabelValues("queue").Observe(max(time.Since(m.CreationTimestamp.Time).Seconds(), 0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	start := time.Now()
	res, existing, err := p.submitOnce(ctx, js, key)
	phaseSeconds.WithLabelValues("submit").Observe(time.Since(start).Seconds())
	cancel()
	p.mu.Lock()
	for _, m := range members {
		delete(p.inflight, m.UID)
	}
	switch {
	case err == nil:
		rec := slurm.Job{ID: res.JobID, State: []string{"PENDING"}, StateReason: "Submitted", Comment: js.Comment, UserName: p.args.SlurmUser}
		if existing != nil {
			rec = *existing
		}
		p.submitted[res.JobID] = submission{at: time.Now(), job: rec}
		if existing == nil && res.Allocated {
			p.immediate[res.JobID] = true
		}
		if p.byKey[key] == nil {
			p.byKey[key] = map[uint32]bool{}
		}
		p.byKey[key][res.JobID] = true
		if strings.HasPrefix(key, gangKey) {
			p.gangs[res.JobID] = uidsOf(members)
		}
	case !errors.Is(err, slurm.ErrUnavailable):
		for _, m := range members {
			p.refused[m.UID] = refusal{msg: err.Error(), ask: asks[m.UID], at: time.Now()}
		}
	}
	p.mu.Unlock()
	logger := klog.Background().WithName(Name)
	switch {
	case existing != nil:
		// The list had lost the job: take it back, and let the pods see it.
		logger.Info("kept the live Slurm job of a pod instead of submitting another", "job", res.JobID)
	case err == nil:
		// A job Slurm started at once is told by the binding alone (see PostBind).
		jobsSubmitted.Inc()
		if res.Allocated {
			p.seeAllocation(res.JobID)
		} else {
			for _, m := range members {
				p.lc.event(p, m, v1.EventTypeNormal, sunkv1.ReasonSlurmJobSubmitted, "submitted Slurm job %d (%s) to Slurm's queue", res.JobID, js.Name)
			}
		}
		return // the lifecycle loop activates the pods when the job list shows the job
	case errors.Is(err, slurm.ErrUnavailable):
		// Slurm did not answer: try again in a while.
		logger.Error(err, "submitting a Slurm job", "name", js.Name)
		time.AfterFunc(2*time.Second, func() { p.activate(logger, members) })
		return
	default:
		for _, m := range members {
			p.lc.event(p, m, v1.EventTypeWarning, sunkv1.ReasonSlurmSubmitFailed, "Slurm refused the job: %v", err)
		}
	}
	p.activate(logger, members)
}

// seeAllocation reads the job of an allocation Slurm has just granted into the job informer,
// whose handlers wake the lifecycle loop: the pods bind now, not after the informer's next poll
// (POST /job/allocate answers with the job id only, not its nodes). The informer takes the
// record as its own read, and skips the read when a poll has seen the job already or is under
// way (in a burst polls run back to back and read the new jobs themselves), so Slurm is asked
// for the job once either way. When the read is skipped or fails, a poll sees the job.
func (p *Plugin) seeAllocation(id uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.jobs.Fetch(id, func() (slurm.Job, error) {
		var j *slurm.Job
		err := p.slotted(func() (err error) { j, err = p.slurm.GetJob(ctx, id); return err })
		if err != nil {
			return slurm.Job{}, err
		}
		return *j, nil
	})
	if err != nil {
		klog.Background().WithName(Name).V(2).Info("reading an allocation just granted; the job list shows it at its next poll", "job", id, "err", err.Error())
	}
}

// submitOnce submits unless the key (the pod or the gang) already had a job that Slurm still
// runs or queues (the job list may lag behind, or miss a job): then that job is the answer. A
// pod never gets two.
func (p *Plugin) submitOnce(ctx context.Context, js slurm.JobSubmit, key string) (*slurm.SubmitResult, *slurm.Job, error) {
	p.mu.Lock()
	id, had := p.lastJob[key]
	p.mu.Unlock()
	if had {
		var j *slurm.Job
		err := p.slotted(func() (err error) { j, err = p.slurm.GetJob(ctx, id); return err })
		switch {
		case err == nil && isLive(j):
			return &slurm.SubmitResult{JobID: id}, j, nil
		case err != nil && !errors.Is(err, slurm.ErrNotFound):
			return nil, nil, err
		}
	}
	res, err := p.place(ctx, js)
	if err == nil {
		p.mu.Lock()
		p.lastJob[key] = res.JobID
		p.mu.Unlock()
	}
	return res, nil, err
}

// place asks Slurm for the job of a pod or gang: an allocation that starts at once if Slurm can
// start it now, else a batch job that waits in Slurm's queue.
//
// An allocation runs nothing on its nodes, so it costs slurmd nothing when it starts and ends.
// A batch placeholder costs a slurmstepd that runs its script and is killed at the end, and one
// cancelled while slurmd still launches it (a pod deleted just after it was bound) can keep its
// resources completing until UnkillableStepTimeout and then drain its node ("Kill task failed").
// Slurm grants an immediate allocation only to a job it would start now anyway (free
// resources, no job of higher priority waiting in the partition), so asking for one first takes
// no one's turn. A job that may preempt is queued without asking: slurmctld starts preempting
// for an immediate request it then refuses (the preempted jobs have yet to end), and the
// resources they free go to whichever job waits, which may then be preempted in turn.
//
// A refusal for the moment is asked again, as resources are freed (allocationQueue), before the
// job joins the queue: up to busyTries times while the resources are busy and being freed,
// notTopTries times (3.5 s) while a job of higher priority waits or nothing is freed. In a
// burst of pods the jobs ahead are mostly the scheduler's own, which end as soon as their pods
// do. A pod queued as a batch job makes every allocation behind it "not top priority" until it
// starts, so that the burst runs at the batch jobs' pace (BenchmarkThousandPods: 13.6 pods/s
// queueing at the first refusal, 53.1 with four tries); a pod waiting for busy resources
// therefore waits here, for the resources its own scheduler's jobs free, not in Slurm's queue.
// Each refusal leaves a FAILED record (reason BadConstraints) in Slurm's job list and
// accounting.
func (p *Plugin) place(ctx context.Context, js slurm.JobSubmit) (*slurm.SubmitResult, error) {
	if !p.mayPreempt(&js) {
		if res, err, answered := p.allocate(ctx, js); answered {
			return res, err
		}
	}
	var res *slurm.SubmitResult
	err := p.slotted(func() (err error) { res, err = p.slurm.SubmitJob(ctx, js); return err })
	return res, err
}

// allocate asks for an immediate allocation, again while Slurm refuses it for the moment:
// answered is false when Slurm refused it for now, and the job is to be queued. A request Slurm
// can never satisfy (slurm.Unsatisfiable) is answered with its refusal: a batch job of it would
// be refused too, and leave one more FAILED record.
//
// A request the node view shows no room for (viewHasRoom) is not sent: it waits its turn as a
// refused one does, and the view's opening (a node done completing, memory freed: nodeOpened)
// lets it ask. Each "nodes busy" refusal is a REST round trip, a FAILED job record read back
// and, as slurmrestd closes the connection on every error answer, a new connection
// (BenchmarkThousandPods on a loaded machine, runs alternated: 606 and 550 refusals before,
// 355 and 354 with the view). The view lags Slurm (the node watcher reads every 200 ms, and
// most windows in which a node completes a job are shorter): it catches the longer ones only,
// and Slurm stays the judge. A held request counts a wait that saw nothing freed as a stall, as
// a refused one does; the last request before the job would be queued is sent whatever the
// view shows, and so is every request once maxAllocationWait has passed. A view wrong for good
// (a state sunk misreads) delays a pod by the stalls' waits, never keeps it.
func (p *Plugin) allocate(ctx context.Context, js slurm.JobSubmit) (res *slurm.SubmitResult, err error, answered bool) {
	since, stalls, asked := time.Now(), 0, 0
	for round := 1; ; round++ {
		// The first round waits behind allocations refused or held before it, the others for
		// resources to be freed, at most allocationRetry doubled at each round.
		wait := p.allocationRetry << min(max(round-2, 0), 3)
		admitted, progressed := p.allocationQueue.turn(ctx, since, round > 1, wait)
		// A retry whose wait ended while resources were freed for the allocations ahead of it
		// waits on in its place instead of asking: the request was refused, each refusal leaving
		// a FAILED record, and a pod whose waits ran out was queued as a batch job, which made
		// every allocation behind it "not top priority" (BenchmarkThousandPods: 1 run in 3 fell
		// to that, 102 batch jobs and 415 such refusals).
		for round > 1 && !admitted && progressed && time.Since(since) < maxAllocationWait && ctx.Err() == nil {
			admitted, progressed = p.allocationQueue.turn(ctx, since, true, wait)
		}
		if round > 1 && !admitted {
			stalls++
		}
		if ctx.Err() != nil {
			// As the client reads a request that the context ended: Slurm did not answer (the
			// pod asks again later), not a refusal the pod would show.
			return nil, fmt.Errorf("slurm POST /job/allocate: %w: %w", slurm.ErrUnavailable, ctx.Err()), true
		}
		last := asked+1 >= busyTries || stalls >= notTopTries-1 || time.Since(since) >= maxAllocationWait
		if !last && !viewHasRoom(p.nodes.All(), &js) {
			allocations.WithLabelValues("held", "").Inc()
			if admitted {
				p.allocationQueue.held()
			}
			continue
		}
		asked++
		err = p.slotted(func() (err error) { res, err = p.slurm.AllocateJob(ctx, js); return err })
		var refused *slurm.SlurmError
		if err == nil || !errors.As(err, &refused) || refused.Kind != nil {
			allocations.WithLabelValues(allocationResult(err), "").Inc()
			return res, err, true
		}
		allocations.WithLabelValues("refused", strconv.Itoa(refused.Code)).Inc()
		switch {
		case slurm.Unsatisfiable(err):
			return nil, err, true
		case !slurm.NotNow(err), !slurm.Busy(err) && asked >= notTopTries, stalls >= notTopTries-1, asked >= busyTries:
			return nil, err, false
		}
	}
}

// How often an immediate allocation refused for the moment is asked for before the job is
// queued. Between tries it waits for resources to be freed, at most allocationRetry (500 ms),
// then 1, 2 and 4 s. A job of higher priority waiting, or busy resources that nothing frees,
// queue it after notTopTries (3.5 s); busy resources that are being freed, after busyTries.
const (
	notTopTries = 4
	busyTries   = 10
	// maxAllocationWait bounds how long an allocation waits in this process while resources are
	// freed for the ones ahead of it; then it asks, and is queued as its tries run out.
	maxAllocationWait = 30 * time.Second
)

func allocationResult(err error) string {
	if err == nil {
		return "started"
	}
	return "error"
}

// slotted makes one request to slurmrestd within the submissions' bound (maxSubmits); a wait
// between requests holds no slot.
func (p *Plugin) slotted(request func() error) error {
	p.submitSlots <- struct{}{}
	defer func() { <-p.submitSlots }()
	return request()
}

// Unreserve implements framework.ReservePlugin. A job outlives a failed cycle: the pod keeps it.
func (p *Plugin) Unreserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
}

func alive(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}
