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

// An immediate allocation (what sunk-scheduler asks for first) runs at once on a free node, with
// no batch step; on a node it holds, a second one is refused for the moment (slurm.NotNow); one
// no node can satisfy is refused for good (slurm.Unsatisfiable), as a batch job would be.
func TestAllocateNowOrRefused(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, 2*time.Minute)
			job := slurm.JobSubmit{Name: "sunk-it-alloc", Partition: "all", Tasks: 1, CPUsPerTask: 1, MemoryPerNodeMB: 64,
				MinNodes: 1, MaxNodes: 1, TimeLimit: 5 * time.Minute, RequiredNodes: []string{env.Nodes[2]},
				Comment: "sunk integration allocation", Exclusive: true, StdOut: "/dev/null"}
			first := allocateOnceFree(t, ctx, c, job)
			t.Cleanup(func() { _ = c.CancelJob(context.Background(), first.JobID) })
			if !first.Allocated || first.JobID == 0 {
				t.Fatalf("answer %+v, want an allocated job", first)
			}
			j, err := c.GetJob(ctx, first.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if j.BaseState() != "RUNNING" || j.Nodes != env.Nodes[2] || j.Comment != job.Comment || j.Name != job.Name {
				t.Fatalf("allocated job: %+v", j)
			}

			second, err := c.AllocateJob(ctx, job)
			if second != nil || !slurm.NotNow(err) || !slurm.Busy(err) || slurm.Unsatisfiable(err) {
				t.Fatalf("a second exclusive allocation of %s: %+v, %v; want refused for now", env.Nodes[2], second, err)
			}
			t.Logf("refused for now: %v", err)

			huge := job
			huge.CPUsPerTask, huge.RequiredNodes = 512, nil
			if r, err := c.AllocateJob(ctx, huge); r != nil || !slurm.Unsatisfiable(err) || slurm.NotNow(err) {
				t.Fatalf("512 CPUs on 2-CPU nodes: %+v, %v; want refused for good", r, err)
			}

			// Nothing runs on the node, so the allocation is gone as soon as it is cancelled.
			if err := c.CancelJob(ctx, first.JobID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, func() error {
				j, err := c.GetJob(ctx, first.JobID)
				if err != nil && !errors.Is(err, slurm.ErrNotFound) {
					return err
				}
				if err == nil && (j.BaseState() != "CANCELLED" || j.HasState("COMPLETING")) {
					return fmt.Errorf("job %d is %v", j.ID, j.State)
				}
				return nil
			})
		})
	}
}

// allocateOnceFree asks for an immediate allocation until Slurm grants it: another test's job
// may still be leaving the nodes.
func allocateOnceFree(t *testing.T, ctx context.Context, c slurm.Client, job slurm.JobSubmit) *slurm.SubmitResult {
	t.Helper()
	var res *slurm.SubmitResult
	eventually(t, time.Minute, func() error {
		r, err := c.AllocateJob(ctx, job)
		if err != nil {
			if slurm.NotNow(err) {
				return err
			}
			t.Fatalf("allocation: %v", err)
		}
		res = r
		return nil
	})
	return res
}
