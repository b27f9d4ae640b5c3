package plugin

import (
	"context"
	"testing"

	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// stuckCancels is slurmfake whose cancellations hang until released.
type stuckCancels struct {
	*slurmfake.Fake
	started chan uint32
	release chan struct{}
}

func (s *stuckCancels) CancelJob(ctx context.Context, id uint32) error {
	s.started <- id
	<-s.release
	return s.Fake.CancelJob(ctx, id)
}

// Cancellations that hang (slurmctld busy with a burst of deleted pods) hold no submission back:
// each has its own slots. With one shared semaphore, the submission waited for them.
func TestCancelsDoNotHoldUpSubmits(t *testing.T) {
	fk := slurmfake.New()
	sc := &stuckCancels{Fake: fk, started: make(chan uint32, 100), release: make(chan struct{})}
	b := newTestBed(t, 1, sc, fk)
	for i := range maxSubmits + maxCancels {
		go b.p.cancel(klog.Background(), uint32(1000+i), "pod-deleted", nil)
	}
	for range maxCancels {
		receive(t, sc.started, "cancellation")
	}
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
	case id := <-sc.started:
		t.Fatalf("cancellation %d started beyond the %d slots", id, maxCancels)
	default:
	}
	close(sc.release)
}
