package plugin

import (
	"errors"
	"testing"
	"time"
)

// An error the lifecycle loop meets at every pass is a line when it is new or changed, and
// again once a minute, not at every pass.
func TestLogOnce(t *testing.T) {
	var l logOnce
	t0 := time.Unix(1000, 0)
	unread, down := errors.New("node watcher: 503"), errors.New("slurmrestd: connection refused")
	for _, step := range []struct {
		err  error
		at   time.Duration
		want bool
	}{
		{unread, 0, true},
		{unread, 200 * time.Millisecond, false},
		{unread, 59 * time.Second, false},
		{down, 59*time.Second + 200*time.Millisecond, true},
		{unread, 60 * time.Second, true},
		{unread, 119 * time.Second, false},
		{unread, 120 * time.Second, true},
	} {
		if got := l.due(step.err, t0.Add(step.at)); got != step.want {
			t.Errorf("at %v, %v: due %v, want %v", step.at, step.err, got, step.want)
		}
	}
}
