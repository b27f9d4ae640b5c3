// Immediate allocations that Slurm refused for the moment, waiting for resources to be freed.

package plugin

import (
	"context"
	"slices"
	"sync"
	"time"
)

// allocationQueue holds the immediate allocations Slurm refused for the moment ("nodes busy",
// "not top priority") in the order they came, and lets them ask again as this process sees
// resources freed: a job that had nodes seen ended and done completing (freedResources). Not
// when a cancellation is answered: the job then completes, and slurmctld places no job on a
// node where one completes, so an allocation asked then was refused again (BenchmarkThousandPods:
// 485 refusals of 1,485 requests). Asking again on a timer alone sent
// most requests to be refused (BenchmarkThousandPods: 1,221 of 1,970), each leaving a FAILED
// record, and a pod that ran out of tries was queued as a batch job, which made every allocation
// behind it "not top priority" (1,002 of those refusals) until it started.
//
// A request that comes while others wait, or just after a refusal, waits its turn too (at most
// the first retry interval: the refusal may have been for other resources than it needs).
// Waiting here pays only while resources are being freed: a request whose waits end without
// any (resources held by jobs that do not end soon) is queued in Slurm after as many tries as
// before, where Slurm's priorities order it and its pending reason shows.
type allocationQueue struct {
	mu      sync.Mutex
	waiting []allocationWaiter // by since
	// refusedAt is the last refusal for the moment; zero once resources were freed after it.
	refusedAt time.Time
	// freedJobs counts the jobs ever freed: a wait that saw it grow saw resources freed, if
	// for others.
	freedJobs uint64
	// deferred counts the admissions that found no room in the node view (held): the view
	// lags the job list, and the room they were let in for shows when it opens (opened).
	deferred int
	now      func() time.Time
}

// allocationWaiter is an allocation waiting its turn since its first request.
type allocationWaiter struct {
	since time.Time
	admit chan struct{}
}

func newAllocationQueue() *allocationQueue { return &allocationQueue{now: time.Now} }

// turn waits until the caller may ask: at once when nobody waits and nothing was refused within
// wait; otherwise until resources are freed for it (freed), wait passes or ctx ends. since is
// when the caller first asked (the longest waiting go first); refused says its last request was
// refused for the moment. It reports whether resources were freed for the caller (admitted), and
// whether any were freed while it waited (progressed: for the allocations ahead of it).
func (q *allocationQueue) turn(ctx context.Context, since time.Time, refused bool, wait time.Duration) (admitted, progressed bool) {
	q.mu.Lock()
	if refused {
		q.refusedAt = q.now()
	} else if len(q.waiting) == 0 && (q.refusedAt.IsZero() || q.now().Sub(q.refusedAt) >= wait) {
		q.mu.Unlock()
		return false, false
	}
	freedBefore := q.freedJobs
	w := allocationWaiter{since: since, admit: make(chan struct{})}
	at, _ := slices.BinarySearchFunc(q.waiting, since, func(e allocationWaiter, t time.Time) int {
		if e.since.After(t) {
			return 1
		}
		return -1 // equal times: after those already waiting
	})
	q.waiting = slices.Insert(q.waiting, at, w)
	q.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.admit:
		return true, true
	case <-timer.C:
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.IndexFunc(q.waiting, func(e allocationWaiter) bool { return e.admit == w.admit })
	if i < 0 {
		return true, true // admitted as the wait ended
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return false, q.freedJobs != freedBefore
}

// held records that an allocation admitted by freed found no room in the node view and waits
// again: its admission is passed on when the view opens.
func (q *allocationQueue) held() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deferred++
}

// opened lets the allocations whose admissions were held ask again, at least one: a node of the
// view shows room it did not before. No more than that: one admission per job freed, as
// before, so that a node freed for one exclusive job does not let every waiting one ask.
func (q *allocationQueue) opened() {
	q.mu.Lock()
	n := max(q.deferred, 1)
	q.deferred = 0
	q.mu.Unlock()
	q.freed(n)
}

// freed lets up to n waiting allocations ask again, the longest waiting first: n jobs ended or
// were cancelled. With fewer waiting, the refusal no longer holds newcomers back.
func (q *allocationQueue) freed(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.freedJobs += uint64(n)
	k := min(n, len(q.waiting))
	for _, w := range q.waiting[:k] {
		close(w.admit)
	}
	q.waiting = q.waiting[k:]
	if n > k {
		q.refusedAt = time.Time{}
	}
}
