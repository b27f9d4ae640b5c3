//go:build integration

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// BenchmarkSlurmRESTCost measures what each kind of slurmrestd call sunk-scheduler makes per pod
// costs Slurm's daemons in CPU, through the project's own client on the test Slurm, one call at
// a time (SUNK_BENCH_CALLS of each, default 300): ping (the cost of any call), an immediate
// allocation like a pod's, reading that job back, and cancelling it (with slurmd's share until
// it is done completing). It prints one line, milliseconds per call by daemon. Their sum for one
// pod (allocate + get + cancel) is the least CPU Slurm needs per pod, whatever the scheduler
// does: the floor BenchmarkThousandPods's ratio is to be read against on a machine where Slurm
// shares the cores with the apiserver.
func BenchmarkSlurmRESTCost(b *testing.B) {
	n := 300
	if v, err := strconv.Atoi(os.Getenv("SUNK_BENCH_CALLS")); err == nil && v > 0 {
		n = v
	}
	e := setup(b)
	job := slurm.JobSubmit{Name: "sunk-bench-rest-cost", Partition: "bench", Tasks: 1, CPUsPerTask: 1, MinNodes: 1, MaxNodes: 1,
		MemoryPerNodeMB: 10, Comment: "sunk-bench-rest-cost"}
	ids := make([]uint32, 0, n)
	line, floor := "bench: rest_cpu_ms_per_call", 0.0
	measure := func(call string, do func(i int)) {
		before := cpuTicks(b)
		for i := range n {
			do(i)
		}
		after := cpuTicks(b)
		for _, p := range []string{"slurmctld", "slurmrestd", "slurmd"} {
			ms := float64(after[p]-before[p]) * 10 / float64(n) // ticks of 10 ms
			line += fmt.Sprintf(" %s_%s=%.2f", call, p, ms)
			if call != "ping" {
				floor += ms
			}
		}
	}
	measure("ping", func(int) {
		if _, err := e.sc.Ping(e.ctx); err != nil {
			b.Fatal(err)
		}
	})
	measure("allocate", func(int) {
		res, err := e.sc.AllocateJob(e.ctx, job)
		if err != nil {
			b.Fatalf("allocation %d of %d: %v", len(ids)+1, n, err)
		}
		ids = append(ids, res.JobID)
	})
	measure("get", func(i int) {
		if _, err := e.sc.GetJob(e.ctx, ids[i]); err != nil {
			b.Fatal(err)
		}
	})
	measure("cancel", func(i int) {
		if _, err := e.sc.CancelJobs(e.ctx, []uint32{ids[i]}); err != nil {
			b.Fatal(err)
		}
		if i == n-1 {
			e.waitCompleted(ids)
		}
	})
	fmt.Printf("%s pod_floor=%.2f\n", line, floor)
}

// waitCompleted waits until none of ids is live or completing in Slurm's state list.
func (e *env) waitCompleted(ids []uint32) {
	e.t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[strconv.FormatUint(uint64(id), 10)] = true
	}
	e.eventually("cancelled jobs done completing", time.Minute, func() (bool, string) {
		states, err := e.sc.ListJobStates(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range states {
			if want[s.ID] && (strings.Join(s.State, ",") != "CANCELLED") {
				return false, fmt.Sprintf("job %s %v", s.ID, s.State)
			}
		}
		return true, ""
	})
}
