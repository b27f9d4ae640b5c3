//go:build integration

package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
)

// One DELETE /jobs cancels a running allocation and pending jobs together (what sunk-scheduler
// sends for a burst of deleted pods); a job that had ended counts as cancelled, and a job Slurm
// does not know is the only one reported, as not found.
func TestCancelJobsInOneRequest(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, 2*time.Minute)
			var ids []uint32
			t.Cleanup(func() {
				for _, id := range ids {
					_ = c.CancelJob(context.Background(), id)
				}
			})
			running := allocateOnceFree(t, ctx, c, slurm.JobSubmit{Name: "sunk-it-cancels", Partition: "all", Tasks: 1, CPUsPerTask: 1,
				MemoryPerNodeMB: 64, MinNodes: 1, MaxNodes: 1, TimeLimit: 5 * time.Minute, StdOut: "/dev/null"})
			ids = append(ids, running.JobID)
			for range 2 {
				r, err := c.SubmitJob(ctx, slurm.JobSubmit{Name: "sunk-it-cancels", Script: "#!/bin/sh\nsleep 60\n", Hold: true,
					Partition: "all", TimeLimit: time.Minute, StdOut: "/dev/null"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.JobID)
			}
			ended := ids[2]
			if err := c.CancelJob(ctx, ended); err != nil {
				t.Fatal(err)
			}
			const unknown = 2_000_000_000
			failed, err := c.CancelJobs(ctx, append(append([]uint32(nil), ids...), unknown))
			if err != nil {
				t.Fatal(err)
			}
			if len(failed) != 1 || !errors.Is(failed[unknown], slurm.ErrNotFound) {
				t.Fatalf("failures %v; want only job %d, not found", failed, uint32(unknown))
			}
			t.Logf("unknown job: %v", failed[unknown])
			eventually(t, 30*time.Second, func() error {
				for _, id := range ids {
					j, err := c.GetJob(ctx, id)
					if err != nil {
						return err
					}
					if j.BaseState() != "CANCELLED" {
						return fmt.Errorf("job %d is %v", id, j.State)
					}
				}
				return nil
			})
		})
	}
}
