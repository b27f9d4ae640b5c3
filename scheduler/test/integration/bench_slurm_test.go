//go:build integration

package integration

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// slurmOnly is the benchmark's Slurm-side peer: n allocations like the plugin's placeholders
// (one CPU, 10 MB, partition bench, not exclusive), asked for at once through slurmrestd (POST
// /job/allocate, as the plugin asks) by 8 goroutines, each read back (GET /job/{id}: slurmrestd's
// answer names the job alone, and where it runs is what a pod's binding needs) and cancelled at
// once, as the benchmark deletes a pod as soon as it is bound. The three calls are issue 42's
// floor: allocate, read back, cancel with completion. No Kubernetes is involved: its rate,
// and its daemons' CPU per job, are what Slurm and slurmrestd cost on this machine for one job
// per pod, the floor sunk-scheduler is read against. At most as many allocations are held at
// once as the partition has CPUs, so that Slurm is not asked for what it cannot give; one
// refused all the same (a cancelled job's CPUs not yet freed) is asked again after 50 ms, and
// counted.
func (e *env) slurmOnly(n int) (benchResult, int64) {
	e.t.Helper()
	job := slurm.JobSubmit{
		Name: "sunk-bench-slurm-only", Partition: "bench", Tasks: 1, CPUsPerTask: 1, MinNodes: 1, MaxNodes: 1,
		MemoryPerNodeMB: 10, StdOut: "/dev/null", StdErr: "/dev/null",
	}
	nodes, err := e.sc.ListNodes(e.ctx, time.Time{})
	if err != nil {
		e.t.Fatalf("slurm-only: listing nodes: %v", err)
	}
	cpus := 0
	for _, nd := range nodes.Nodes {
		if slices.Contains(nd.Partitions, job.Partition) {
			cpus += nd.CPUs
		}
	}
	if cpus == 0 {
		e.t.Fatalf("slurm-only: partition %s has no CPUs", job.Partition)
	}
	held := make(chan struct{}, cpus)
	var refused atomic.Int64
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, n)
	start := time.Now()
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				held <- struct{}{}
				t0 := time.Now()
				var res *slurm.SubmitResult
				var err error
				for {
					if res, err = e.sc.AllocateJob(e.ctx, job); !slurm.NotNow(err) {
						break
					}
					refused.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					e.t.Errorf("slurm-only allocate: %v", err)
					<-held
					continue
				}
				if j, err := e.sc.GetJob(e.ctx, res.JobID); err != nil {
					e.t.Errorf("slurm-only: reading back allocation %d: %v", res.JobID, err)
				} else if j.Nodes == "" {
					e.t.Errorf("slurm-only: allocation %d read back with no nodes", res.JobID)
				}
				mu.Lock()
				latencies = append(latencies, time.Since(t0))
				mu.Unlock()
				if err := e.sc.CancelJob(e.ctx, res.JobID); err != nil {
					e.t.Errorf("slurm-only cancel %d: %v", res.JobID, err)
				}
				<-held
			}
		}()
	}
	wg.Wait()
	if len(latencies) < n {
		e.t.Fatalf("slurm-only: %d of %d allocations made", len(latencies), n)
	}
	total := time.Since(start)
	slices.Sort(latencies)
	q := func(f float64) time.Duration { return latencies[min(len(latencies)-1, int(f*float64(len(latencies))))] }
	return benchResult{total: total, perSec: float64(n) / total.Seconds(), p50: q(0.50), p99: q(0.99)}, refused.Load()
}
