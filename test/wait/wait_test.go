package wait

import (
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if err := Until(time.Second, time.Millisecond, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("Until: %v after %d calls", err, n)
	}
	calls := 0
	err := Until(20*time.Millisecond, 5*time.Millisecond, func() error { calls++; return errors.New("never") })
	if err == nil || err.Error() != "never" || calls < 2 {
		t.Fatalf("Until of a condition that never holds: %v after %d calls", err, calls)
	}
}
