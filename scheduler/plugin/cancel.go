// Cancelling Slurm jobs: off the lifecycle loop, once per cancelRetry per job, and many in one
// request when they come in a burst.

package plugin

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// cancelRetry is how long a cancellation this process sent stands: the job is not cancelled
// again, nor bound to, until then; a cancellation that failed is forgotten at once (cancel).
const cancelRetry = time.Minute

// cancelling reports whether this process sent a cancellation of job id within cancelRetry.
// l.mu is held.
func (l *lifecycle) cancelling(id uint32) bool {
	at, ok := l.cancelled[id]
	return ok && time.Since(at) < cancelRetry
}

// markCancelling records a cancellation of job id about to be sent, unless one was sent within
// cancelRetry: then it returns false and nothing is to be sent. l.mu is held.
func (l *lifecycle) markCancelling(id uint32) bool {
	if l.cancelling(id) {
		return false
	}
	l.cancelled[id] = time.Now()
	return true
}

// cancel cancels a job off the loop (a Slurm round trip per job must not delay the others); a
// failure is retried by a later pass.
func (p *Plugin) cancel(logger klog.Logger, id uint32, reason string, members []*v1.Pod) {
	p.lc.mu.Lock()
	decided := p.lc.cancelled[id]
	p.lc.mu.Unlock()
	err := p.cancels.cancel(id)
	if err != nil && !slurmGone(err) {
		logger.Error(err, "cancelling Slurm job", "job", id)
		p.lc.mu.Lock()
		delete(p.lc.cancelled, id)
		p.lc.mu.Unlock()
		return
	}
	jobsCancelled.WithLabelValues(reason).Inc()
	p.releases.cancelled(id, decided, time.Now())
	logger.Info("cancelled Slurm job", "job", id, "reason", reason)
	var waiting []*v1.Pod
	for _, o := range members {
		if o != nil && alive(o) {
			p.lc.event(p, o, v1.EventTypeNormal, sunkv1.ReasonSlurmJobCancelled, "cancelled Slurm job %d: a pod of it was %s", id, strings.TrimPrefix(reason, "pod-"))
			if o.Spec.NodeName == "" {
				waiting = append(waiting, o)
			}
		}
	}
	// The gang's members that waited for the job wait out of the queue: let them in once, so
	// that their condition says what they wait for now (a complete gang), not the cancelled job.
	p.activate(logger, waiting)
}

// maxCancelBatch bounds the jobs one DELETE /jobs names. slurmctld signals them under one lock,
// as it does for `scancel` with as many ids.
const maxCancelBatch = 64

// cancelQueue sends cancellations with at most len(slots) requests in flight. A cancellation
// that finds them all busy waits, and the next free request takes every waiting one (up to
// maxCancelBatch): a burst of deleted pods costs a few requests, not one each, and a lone
// cancellation is sent at once.
type cancelQueue struct {
	send  func(ctx context.Context, ids []uint32) (map[uint32]error, error)
	slots chan struct{}

	mu      sync.Mutex
	waiting []*cancelOrder
	// idleTurns counts the slots taken with nothing left to send: each caller's at most once.
	idleTurns atomic.Int64
}

// cancelOrder is one job to cancel and, once done is closed, how that went. taken (under the
// queue's mu) says a request carries it.
type cancelOrder struct {
	id    uint32
	err   error
	taken bool
	done  chan struct{}
}

func newCancelQueue(send func(ctx context.Context, ids []uint32) (map[uint32]error, error), inFlight int) *cancelQueue {
	return &cancelQueue{send: send, slots: make(chan struct{}, inFlight)}
}

// cancel cancels job id, in a request of its own or in one with other waiting jobs, and returns
// Slurm's answer for it.
func (q *cancelQueue) cancel(id uint32) error {
	o := &cancelOrder{id: id, done: make(chan struct{})}
	q.mu.Lock()
	q.waiting = append(q.waiting, o)
	q.mu.Unlock()
	for {
		select {
		case <-o.done:
			return o.err
		case q.slots <- struct{}{}:
			q.sendWaiting()
			<-q.slots
			// Once a request carries the order, its answer is all there is to wait for: taking
			// free slots again until then spun (BenchmarkThousandPods: 0.9 s of the scheduler's
			// CPU a run in select).
			q.mu.Lock()
			taken := o.taken
			q.mu.Unlock()
			if taken {
				<-o.done
				return o.err
			}
		}
	}
}

// sendWaiting sends the waiting cancellations (up to maxCancelBatch) in one request. A failed
// request fails each of them; otherwise each gets its own job's answer.
func (q *cancelQueue) sendWaiting() {
	q.mu.Lock()
	n := min(len(q.waiting), maxCancelBatch)
	batch := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	for _, o := range batch {
		o.taken = true
	}
	q.mu.Unlock()
	if n == 0 {
		q.idleTurns.Add(1)
		return
	}
	ids := make([]uint32, n)
	for i, o := range batch {
		ids[i] = o.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	failed, err := q.send(ctx, ids)
	cancel()
	cancelBatchJobs.Observe(float64(n))
	for _, o := range batch {
		o.err = err
		if err == nil {
			o.err = failed[o.id]
		}
		close(o.done)
	}
}
