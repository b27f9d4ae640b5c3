package plugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sunk.dev/sunk/test/wait"
)

// Allocations refused for the moment ask again in the order they first asked, one per job
// freed; a newcomer waits behind them, and asks at once when nothing waits or was refused.
func TestAllocationQueue(t *testing.T) {
	q := newAllocationQueue()
	ctx := context.Background()
	const long = time.Hour // a wait that would fail the test by its timeout
	returned := func(f func()) <-chan struct{} {
		done := make(chan struct{})
		go func() { f(); close(done) }()
		return done
	}
	receive(t, returned(func() { q.turn(ctx, time.Now(), false, long) }), "a first request's turn with nothing refused")

	t0 := time.Now()
	type waiter struct {
		name string
		done <-chan struct{}
	}
	var ws []waiter
	for i, name := range []string{"c", "a", "b"} { // a refused retry waits in the order of its first request
		since := map[string]time.Time{"a": t0, "b": t0.Add(time.Second), "c": t0.Add(2 * time.Second)}[name]
		ws = append(ws, waiter{name, returned(func() { q.turn(ctx, since, true, long) })})
		waitQueued(t, q.waitingCount, i+1) // the goroutine above queues itself
	}
	newcomer := returned(func() { q.turn(ctx, t0.Add(3*time.Second), false, long) })
	waitQueued(t, q.waitingCount, 4)
	byName := map[string]<-chan struct{}{}
	for _, w := range ws {
		byName[w.name] = w.done
	}
	for _, step := range []struct {
		freed, left int
		now         []string
	}{{1, 3, []string{"a"}}, {2, 1, []string{"b", "c"}}, {2, 0, []string{"newcomer"}}} {
		q.freed(step.freed)
		if n := q.waitingCount(); n != step.left {
			t.Fatalf("%d freed: %d left waiting, want %d", step.freed, n, step.left)
		}
		for _, name := range step.now {
			ch := byName[name]
			if name == "newcomer" {
				ch = newcomer
			}
			receive(t, ch, name+"'s turn")
		}
	}
	if n := q.waitingCount(); n != 0 {
		t.Fatalf("%d still waiting", n)
	}
	// More freed than waited: the refusal no longer holds a newcomer back.
	receive(t, returned(func() { q.turn(ctx, time.Now(), false, long) }), "a newcomer's turn once resources were freed")

	// A wait that ends while resources were freed for the allocation ahead says so.
	head := returned(func() { q.turn(ctx, t0, true, long) })
	waitQueued(t, q.waitingCount, 1)
	ctx2, cancel := context.WithCancel(ctx)
	var admitted, progressed bool
	behind := returned(func() { admitted, progressed = q.turn(ctx2, t0.Add(time.Second), true, long) })
	waitQueued(t, q.waitingCount, 2)
	q.freed(1)
	receive(t, head, "the head's turn")
	cancel()
	receive(t, behind, "the end of the wait behind it")
	if admitted || !progressed {
		t.Fatalf("the wait behind: admitted %v, progressed %v; want false, true", admitted, progressed)
	}

	// A newcomer just after a refusal waits at most its wait, then asks.
	q.turn(ctx, time.Now(), true, time.Millisecond)
	receive(t, returned(func() { q.turn(ctx, time.Now(), false, time.Millisecond) }), "a newcomer's turn after its wait")
	if n := q.waitingCount(); n != 0 {
		t.Fatalf("%d still waiting after their waits", n)
	}
}

// waitQueued waits until count says n wait: goroutines started by a test queue themselves.
func waitQueued(t *testing.T, count func() int, n int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d waiting", n), 30*time.Second, time.Millisecond, func() error {
		if got := count(); got != n {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

// waitingCount is how many allocations wait.
func (q *allocationQueue) waitingCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}
