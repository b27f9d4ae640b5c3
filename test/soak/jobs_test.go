//go:build soak

// The job stream from the login pod, and waiting for it to drain.

package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"sunk.dev/sunk/test/testenv"
)

// jobStream submits a job every few seconds from the login pod, round robin: a batch job
// with steps, an array, an interactive srun; and every 36 s a job for the autoscaled NodeSet. Their time limits are a few times their length
// and no more: a job running while slurmctld is SIGKILLed can come back from its state save
// RUNNING after it ended, and then ends only at its limit (TIMEOUT, in a kill window), which
// the end of the soak waits for. With 5 minutes that wait was 200 of a run's 530 s.
func (s *soak) jobStream(ctx context.Context) {
	tick := time.NewTicker(4 * time.Second)
	defer tick.Stop()
	sruns := make(chan struct{}, 2) // at most two interactive sruns at a time
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if i%9 == 4 {
			// For the autoscaled NodeSet alone: parked when idle, it grows for each.
			s.submit(ctx, "burst", "sbatch --parsable -J soak-burst --constraint=burst -N1 -t 2 -o /dev/null --wrap 'sleep 5'")
		}
		switch i % 3 {
		case 0:
			n, secs := 1+rand.IntN(3), 5+rand.IntN(20)
			s.submit(ctx, "batch", fmt.Sprintf("sbatch --parsable -J soak-batch -N%d -t 2 -o /dev/null --wrap 'srun hostname >/dev/null; sleep %d'", n, secs))
		case 1:
			s.submit(ctx, "array", fmt.Sprintf("sbatch --parsable -J soak-array --array=0-5%%3 -t 2 -o /dev/null --wrap 'sleep %d'", 3+rand.IntN(10)))
		case 2:
			select {
			case sruns <- struct{}{}:
			default:
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sruns }()
				s.submit(context.Background(), "srun", "srun -J soak-srun -N2 -t 2 sh -c 'echo $SLURM_JOB_ID; sleep 2'")
			}()
		}
	}
}

// resumeDuplicateJobidDrains resumes the nodes Slurm drained for a duplicate job id, as an
// admin would. slurmctld drains them when it restarts from state saved before its last job ids
// (the soak's SIGSTOP, then the liveness probe's SIGKILL) and hands out an id a node still runs:
// not sunk's drain to lift, but the soak's jobs pinned to those nodes (--constraint=burst)
// could not end otherwise. The report lists each.
func (s *soak) resumeDuplicateJobidDrains() {
	out, err := s.login("sinfo -h -N -t drain -o '%N|%E'")
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		node, reason, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok || !strings.Contains(reason, "Duplicate jobid") {
			continue
		}
		if _, err := s.login("scontrol update nodename=" + node + " state=resume"); err != nil {
			continue
		}
		s.mu.Lock()
		s.resumed = append(s.resumed, fmt.Sprintf("%s at %.0fs", node, time.Since(s.start).Seconds()))
		s.mu.Unlock()
	}
}

var leadingID = regexp.MustCompile(`^(\d+)`)

// submit runs a job's sbatch or srun line as a user (testenv.AsUser): the cluster refuses
// root's jobs (DisableRootJobs=YES), as sunk's clusters do by default.
func (s *soak) submit(ctx context.Context, kind, script string) {
	out, err := s.loginCtx(ctx, 6*time.Minute, testenv.AsUser(script))
	m := leadingID.FindStringSubmatch(strings.TrimSpace(out))
	s.mu.Lock()
	defer s.mu.Unlock()
	if m != nil {
		s.submitted[m[1]] = kind
	}
	if err != nil && ctx.Err() == nil {
		s.submitErrs = append(s.submitErrs, fmt.Sprintf("%s at %.0fs: %v", kind, time.Since(s.start).Seconds(), oneLine(err.Error())))
	}
}

func oneLine(v string) string {
	v = strings.Join(strings.Fields(v), " ")
	if len(v) > 200 {
		v = v[:200] + "…"
	}
	return v
}

// waitJobsEnded waits until every job of the soak has ended, or is held by Slurm (HeldBySlurm),
// which the report counts as a bad end.
func (s *soak) waitJobsEnded(timeout time.Duration) {
	s.poll(timeout, 2*time.Second, "every soak job ended", func() error {
		s.resumeDuplicateJobidDrains()
		out, err := s.login("scontrol -o show job")
		if err != nil {
			return err
		}
		s.trackTable(ParseJobs(out), time.Now())
		s.mu.Lock()
		defer s.mu.Unlock()
		var live []string
		for id, j := range s.jobs {
			if !j.Terminal() && !j.HeldBySlurm() {
				live = append(live, id+":"+j.State)
			}
		}
		// An array's own JobId is its last task's, which shows only when that task starts:
		// until then the submitted ID is pending, not missing.
		for id := range s.submitted {
			if _, seen := s.jobs[id]; !seen {
				live = append(live, id+":not started")
			}
		}
		if len(live) > 0 {
			sort.Strings(live)
			return fmt.Errorf("%d jobs not ended: %v", len(live), live)
		}
		return nil
	})
}
