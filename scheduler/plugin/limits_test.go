package plugin

import (
	"context"
	"slices"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// stuckCancels is slurmfake whose cancellation requests report the jobs they name, then hang
// until released.
type stuckCancels struct {
	*slurmfake.Fake
	started chan []uint32
	release chan struct{}
}

func (s *stuckCancels) CancelJobs(ctx context.Context, ids []uint32) (map[uint32]error, error) {
	s.started <- slices.Clone(ids)
	<-s.release
	return s.Fake.CancelJobs(ctx, ids)
}

func newStuckCancels() (*stuckCancels, *slurmfake.Fake) {
	fk := slurmfake.New()
	return &stuckCancels{Fake: fk, started: make(chan []uint32, 100), release: make(chan struct{})}, fk
}

// Cancellations that hang (slurmctld busy with a burst of deleted pods) hold no submission back:
// each has its own slots. With one shared semaphore, the submission waited for them.
func TestCancelsDoNotHoldUpSubmits(t *testing.T) {
	sc, fk := newStuckCancels()
	b := newTestBed(t, 1, sc, fk)
	// Each cancellation, sent while a slot is free, is a request of its own.
	for i := range maxCancels {
		go b.p.cancel(klog.Background(), uint32(1000+i), "pod-deleted", nil)
		if got := receive(t, sc.started, "cancellation request"); !slices.Equal(got, []uint32{uint32(1000 + i)}) {
			t.Fatalf("request %d named %v", i, got)
		}
	}
	go b.p.cancel(klog.Background(), 2000, "pod-deleted", nil)
	p := b.addPod(pod(nil, nil))
	done := make(chan struct{})
	go func() {
		b.p.submit(slurm.JobSubmit{Name: "x", Script: "#!/bin/sh\n"}, podJobKey(p.UID), nil, nil)
		close(done)
	}()
	receive(t, done, "submission while cancellations hang")
	if got := fk.Calls("SubmitJob"); got != 1 {
		t.Fatalf("%d submissions", got)
	}
	select {
	case ids := <-sc.started:
		t.Fatalf("a cancellation request for %v started beyond the %d in flight", ids, maxCancels)
	default:
	}
	close(sc.release)
	if got := receive(t, sc.started, "the waiting cancellation's request"); !slices.Equal(got, []uint32{2000}) {
		t.Fatalf("the waiting cancellation went out as %v", got)
	}
}

// A burst of cancellations while every request hangs goes out in as few requests as
// maxCancelBatch allows once one returns, each job in exactly one of them, and each caller gets
// its own job's answer.
func TestCancelsBatchABurst(t *testing.T) {
	sc, fk := newStuckCancels()
	q := newCancelQueue(sc.CancelJobs, maxCancels)
	var ids []uint32
	for range maxCancels + 100 {
		r, err := fk.SubmitJob(context.Background(), slurm.JobSubmit{Name: "x", Script: "#!/bin/sh\n"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.JobID)
	}
	const unknown = 99999
	ids = append(ids, unknown)
	errs := make(chan error, len(ids))
	for _, id := range ids[:maxCancels] {
		go func() { errs <- q.cancel(id) }()
		receive(t, sc.started, "cancellation request")
	}
	for _, id := range ids[maxCancels:] {
		go func() { errs <- q.cancel(id) }()
	}
	waitQueued(t, q.waitingCount, len(ids)-maxCancels) // the goroutines above queue themselves
	close(sc.release)
	var failed []error
	for range ids {
		if err := receive(t, errs, "a cancellation's answer"); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 1 || !slurmGone(failed[0]) {
		t.Fatalf("errors %v; want only the unknown job's, not found", failed)
	}
	var sizes []int
	seen := map[uint32]int{}
	for len(sc.started) > 0 {
		batch := <-sc.started
		sizes = append(sizes, len(batch))
		for _, id := range batch {
			seen[id]++
		}
	}
	// Two requests take the burst at once: which of them reaches slurmctld first is up to them.
	slices.Sort(sizes)
	if rest := len(ids) - maxCancels - maxCancelBatch; !slices.Equal(sizes, []int{rest, maxCancelBatch}) {
		t.Fatalf("the burst went out as requests of %v jobs, want one of %d and one of %d", sizes, maxCancelBatch, rest)
	}
	for _, id := range ids[maxCancels:] {
		if seen[id] != 1 {
			t.Fatalf("job %d named in %d requests", id, seen[id])
		}
	}
	if got := fk.Calls("CancelJobs"); got != maxCancels+2 {
		t.Fatalf("%d requests, want %d", got, maxCancels+2)
	}
}

// waitingCount is how many cancellations wait for a request.
func (q *cancelQueue) waitingCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// A caller whose job a request of another caller carries waits for that request's answer: it
// takes no free slot again meanwhile. Before, it took every free slot in turn, found nothing to
// send and tried again, spinning until the answer came.
func TestCancelWaitsForTheRequestCarryingIt(t *testing.T) {
	started := make(chan []uint32, 10)
	var mu sync.Mutex
	releases := map[uint32]chan struct{}{} // a request's first job → what ends the request
	send := func(_ context.Context, ids []uint32) (map[uint32]error, error) {
		release := make(chan struct{})
		mu.Lock()
		releases[ids[0]] = release
		mu.Unlock()
		started <- slices.Clone(ids)
		<-release
		return nil, nil
	}
	answer := func(first uint32) {
		mu.Lock()
		defer mu.Unlock()
		close(releases[first])
	}
	q := newCancelQueue(send, 2)
	errs := make(chan error, 5)
	cancel := func(id uint32) { go func() { errs <- q.cancel(id) }() }
	cancel(1)
	receive(t, started, "request [1]")
	cancel(2)
	receive(t, started, "request [2]")
	cancel(3)
	cancel(4)
	waitQueued(t, q.waitingCount, 2)
	answer(1) // a slot frees: one of 3 and 4 sends both
	both := receive(t, started, "request [3 4]")
	first := both[0]
	slices.Sort(both)
	if !slices.Equal(both, []uint32{3, 4}) {
		t.Fatalf("request %v, want [3 4]", both)
	}
	answer(2) // another slot frees while [3 4] hangs: the other of 3 and 4 must not spin on it
	cancel(5)
	if got := receive(t, started, "request [5]"); !slices.Equal(got, []uint32{5}) {
		t.Fatalf("request %v, want [5]", got)
	}
	answer(first)
	answer(5)
	for range 5 {
		if err := receive(t, errs, "an answer"); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.idleTurns.Load(); n > 1 {
		t.Fatalf("%d turns taken with nothing to send, want at most 1 (the caller whose job [3 4] carries)", n)
	}
}
