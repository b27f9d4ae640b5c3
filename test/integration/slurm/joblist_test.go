//go:build integration

package slurm_test

import (
	"context"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
)

// TestIncrementalJobListIsFull pins down what the Informer's deletions rest on: an
// incremental job list (update_time) that reports a change holds every job, also those that
// did not change; a job missing from it is gone.
func TestIncrementalJobListIsFull(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			var ids []uint32
			for _, name := range []string{"sunk-it-a", "sunk-it-b"} {
				r, err := c.SubmitJob(ctx, slurm.JobSubmit{Name: name, Script: "#!/bin/sh\nsleep 60\n", Hold: true,
					Partition: "all", TimeLimit: time.Minute, StdOut: "/dev/null"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.JobID)
				t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
			}
			full, err := c.ListJobs(ctx, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			// update_time has one-second granularity: let a full second pass, then change A.
			time.Sleep(2100 * time.Millisecond)
			if err := c.UpdateJob(ctx, ids[0], slurm.JobUpdate{Comment: ptr("changed")}); err != nil {
				t.Fatal(err)
			}
			inc, err := c.ListJobs(ctx, full.LastUpdate)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[uint32]bool{}
			for _, j := range inc.Jobs {
				seen[j.ID] = true
			}
			t.Logf("%s: full list %d jobs; incremental list NotModified=%v, %d jobs, A in it: %v, B in it: %v",
				v, len(full.Jobs), inc.NotModified, len(inc.Jobs), seen[ids[0]], seen[ids[1]])
			if inc.NotModified || !seen[ids[0]] || !seen[ids[1]] {
				t.Fatalf("the incremental list is not a full list")
			}
		})
	}
}
