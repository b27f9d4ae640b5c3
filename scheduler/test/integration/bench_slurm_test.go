//go:build integration

package integration

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// slurmOnly is the benchmark's Slurm-side peer: n jobs like the plugin's placeholders (one CPU,
// 10 MB, partition bench, not exclusive, the same batch script) submitted through slurmrestd by
// 8 goroutines, each cancelled as soon as a 200 ms poll of the state list shows it running, as
// the benchmark deletes a pod as soon as it is bound. No Kubernetes is involved: its rate is
// what Slurm itself and slurmrestd allow on this machine for one job per pod, the bound
// sunk-scheduler's rate is to be read against.
func (e *env) slurmOnly(n int) benchResult {
	e.t.Helper()
	job := slurm.JobSubmit{
		Name: "sunk-bench-slurm-only", Partition: "bench", Tasks: 1, CPUsPerTask: 1, MinNodes: 1, MaxNodes: 1,
		MemoryPerNodeMB: 10, StdOut: "/dev/null", StdErr: "/dev/null",
		Script: "#!/bin/sh\n# sunk-scheduler placeholder: holds the allocation while the pod runs\nexec sleep infinity\n",
	}
	var mu sync.Mutex
	submitted := make(map[string]time.Time, n)
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
				t0 := time.Now()
				res, err := e.sc.SubmitJob(e.ctx, job)
				if err != nil {
					e.t.Errorf("slurm-only submit: %v", err)
					continue
				}
				mu.Lock()
				submitted[strconv.FormatUint(uint64(res.JobID), 10)] = t0
				mu.Unlock()
			}
		}()
	}
	cancels := make(chan uint32, n)
	var cwg sync.WaitGroup
	for range 8 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for id := range cancels {
				if err := e.sc.CancelJob(e.ctx, id); err != nil {
					e.t.Errorf("slurm-only cancel %d: %v", id, err)
				}
			}
		}()
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Minute)
	poll := time.NewTicker(200 * time.Millisecond) // the poll interval the plugin runs with here
	defer poll.Stop()
	for ; len(seen) < n && time.Now().Before(deadline) && !e.t.Failed(); <-poll.C {
		states, err := e.sc.ListJobStates(e.ctx)
		if err != nil {
			e.t.Fatalf("slurm-only state list: %v", err)
		}
		now := time.Now()
		mu.Lock()
		for _, s := range states {
			t0, ours := submitted[s.ID]
			if !ours || seen[s.ID] || len(s.State) == 0 || s.State[0] != "RUNNING" {
				continue
			}
			seen[s.ID] = true
			latencies = append(latencies, now.Sub(t0))
			id, _ := strconv.ParseUint(s.ID, 10, 32)
			cancels <- uint32(id)
		}
		mu.Unlock()
	}
	wg.Wait()
	close(cancels)
	cwg.Wait()
	if len(seen) < n {
		e.t.Fatalf("slurm-only: %d of %d jobs seen running", len(seen), n)
	}
	total := time.Since(start)
	slices.Sort(latencies)
	q := func(f float64) time.Duration { return latencies[min(len(latencies)-1, int(f*float64(len(latencies))))] }
	return benchResult{total: total, perSec: float64(n) / total.Seconds(), p50: q(0.50), p99: q(0.99)}
}
