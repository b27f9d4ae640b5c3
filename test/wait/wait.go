// Package wait is the tests' one way to wait for something: call a condition until it holds or
// a deadline passes, then fail with its last answer. It depends on the standard library only,
// so that both Go modules (sunk and the scheduler's, which pins other Kubernetes versions) use it.
package wait

import (
	"testing"
	"time"
)

// For calls cond every `every` until it returns nil, and fails tb with what and cond's last
// error once timeout has passed. The last call starts before the deadline, so a condition that
// holds at the deadline passes.
func For(tb testing.TB, what string, timeout, every time.Duration, cond func() error) {
	tb.Helper()
	if err := Until(timeout, every, cond); err != nil {
		if what != "" {
			tb.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		tb.Fatalf("not within %v: %v", timeout, err)
	}
}

// Until is For without a test: it returns cond's last error after timeout, nil once it holds.
func Until(timeout, every time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(every)
	}
}
