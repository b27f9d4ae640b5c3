package syncer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"sunk.dev/sunk/pkg/slurm"
)

func TestFailureIsError(t *testing.T) {
	conflict := errors.New("patching node n1: the object has been modified")
	for _, c := range []struct {
		name     string
		requeues int
		err      error
		stopping bool
		want     bool
	}{
		{"first failure", 0, conflict, false, true},
		{"a retry", 3, conflict, false, false},
		{"every tenth retry", 10, conflict, false, true},
		{"Slurm unreachable: the health change reports it", 0, fmt.Errorf("listing: %w", slurm.ErrUnavailable), false, false},
		{"cut short as the syncer stops", 0, fmt.Errorf("unlabelling node n1: %w", context.Canceled), true, false},
		{"a cancelled request while the syncer runs on", 0, fmt.Errorf("unlabelling node n1: %w", context.Canceled), false, true},
	} {
		if got := failureIsError(c.requeues, c.err, c.stopping); got != c.want {
			t.Errorf("%s: failureIsError = %v, want %v", c.name, got, c.want)
		}
	}
}
