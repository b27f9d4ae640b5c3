package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/test/wait"
)

// A pod's job is first asked for as an immediate allocation. Slurm's refusals decide what
// follows: busy resources and a job of higher priority waiting are asked again (in a burst they
// are mostly the scheduler's own placeholders, which end as their pods do), then queued;
// no answer at all submits nothing (the pod asks again later, as for a failed submission), and
// a request no node can ever satisfy is refused as it is (a batch job would be refused too).
// slurmfake refuses allocations as slurmctld does for a job that is not top priority.
func TestAllocationFirst(t *testing.T) {
	busy := slurmfake.AllocationRefused(2016, "Requested nodes are busy")
	down := &slurm.SlurmError{Endpoint: "slurmfake allocate", HTTPStatus: 502, Kind: slurm.ErrUnavailable}
	for _, tc := range []struct {
		name             string
		refusal          error // nil: slurmfake's own (not top priority)
		allocs, submits  int
		wantEventMessage string
	}{
		{name: "not top priority: asked again, then queued", allocs: notTopTries, submits: 1, wantEventMessage: "to Slurm's queue"},
		{name: "busy, nothing freed: asked again, then queued", refusal: busy, allocs: notTopTries, submits: 1, wantEventMessage: "to Slurm's queue"},
		{name: "no answer: nothing submitted", refusal: down, allocs: 1, submits: 0},
		{name: "never satisfiable: refused, nothing queued", refusal: slurmfake.AllocationRefused(2014, "Requested node configuration is not available"), allocs: 1, submits: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fk := slurmfake.New()
			if tc.refusal != nil {
				fk.SetError("AllocateJob", tc.refusal)
			}
			b := newTestBed(t, 2, nil, fk)
			b.p.allocationRetry = time.Millisecond
			pod := b.addPod(pod(nil, nil))
			if st := b.p.PreEnqueue(ctx, pod); st.IsSuccess() {
				t.Fatalf("a new pod: %v, want held while its job is asked for", st)
			}
			wait.For(t, "the request answered", 5*time.Second, time.Millisecond, func() error {
				b.p.mu.Lock()
				defer b.p.mu.Unlock()
				if b.p.inflight[pod.UID] {
					return fmt.Errorf("still asking")
				}
				return nil
			})
			if a, s := fk.Calls("AllocateJob"), fk.Calls("SubmitJob"); a != tc.allocs || s != tc.submits {
				t.Fatalf("%d allocations and %d submissions asked for, want %d and %d", a, s, tc.allocs, tc.submits)
			}
			if tc.wantEventMessage == "" {
				return
			}
			job := waitForJob(t, b, fk, pod)
			if job.BaseState() != "PENDING" || job.Comment == "" {
				t.Fatalf("job %d: %v comment %q, want the queued placeholder", job.ID, job.State, job.Comment)
			}
			var seen []string
			wait.For(t, "the SlurmJobSubmitted event", 5*time.Second, time.Millisecond, func() error {
				for len(b.h.rec.Events) > 0 {
					seen = append(seen, <-b.h.rec.Events)
				}
				for _, e := range seen {
					if strings.Contains(e, "Normal SlurmJobSubmitted") && strings.Contains(e, tc.wantEventMessage) {
						return nil
					}
				}
				return fmt.Errorf("events %q, none SlurmJobSubmitted saying %q", seen, tc.wantEventMessage)
			})
		})
	}
}
