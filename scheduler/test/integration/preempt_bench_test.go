//go:build integration

package integration

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"sunk.dev/sunk/pkg/wellknown"
)

// BenchmarkPreemption is the seeds' scenario: a training job runs on every node of partition
// "all" (sbatch -N 3 --exclusive --wrap 'srun sleep 600'); an inference pod asks for partition
// "urgent" (tier 10; the test bed's PreemptMode=CANCEL, KillWait=30, no GraceTime). Slurm
// preempts the training job, which exits on SIGTERM, and starts the pod's job; the pod is
// bound. Each trial measures creation → bound and its phases, from sunk-scheduler's own
// sunk_scheduler_phase_seconds and Slurm's job timestamps (one-second resolution):
//
//	submit   the submission until Slurm accepted the pod's job (phase submit; the phase queue
//	         before it, from the pod's creationTimestamp, has whole seconds and is left out)
//	preempt  the job's submission until Slurm ended the training job (its EndTime: PREEMPTED)
//	start    the training job's end until the pod's job started (the nodes freed: SIGTERM,
//	         at most KillWait to SIGKILL, epilog; then a scheduling pass)
//	bind     the job's start until the pod was bound (phases detect + activate + bind)
//
// and prints, with means of the phases:
//
//	bench: preempt_trials=10 p50_s=… p99_s=… submit_s=… preempt_s=… start_s=… bind_s=…
//
// Run: go test -tags integration -run XXX -bench Preemption -benchtime 1x ./test/integration/
// SUNK_PREEMPT_TRIALS changes the number of trials, SUNK_PREEMPT_VICTIM the training job's
// script (default "srun sleep 600"; "trap ” TERM; sleep 600" ignores SIGTERM, so slurmd kills
// it KillWait later).
func BenchmarkPreemption(b *testing.B) {
	trials := 10
	if v := os.Getenv("SUNK_PREEMPT_TRIALS"); v != "" {
		var err error
		if trials, err = strconv.Atoi(v); err != nil || trials < 1 {
			b.Fatalf("SUNK_PREEMPT_TRIALS=%q: want a positive integer", v)
		}
	}
	victim := cmp.Or(os.Getenv("SUNK_PREEMPT_VICTIM"), "srun sleep 600")
	e := setup(b)
	e.startScheduler("")
	for range b.N {
		var totals []time.Duration
		var sum phaseSplit
		for i := range trials {
			total, split := e.preemptOnce(b, i, victim)
			totals = append(totals, total)
			sum.add(split)
			b.Logf("trial %d: %.2f s (submit %.2f, preempt %.0f, start %.0f, bind %.2f)", i, total.Seconds(),
				split.submit, split.preempt, split.start, split.bind)
		}
		slices.Sort(totals)
		n := float64(trials)
		b.Logf("training job: %q", victim)
		fmt.Printf("bench: preempt_trials=%d p50_s=%.3f p99_s=%.3f submit_s=%.3f preempt_s=%.3f start_s=%.3f bind_s=%.3f\n",
			trials, quantile(totals, 0.50).Seconds(), quantile(totals, 0.99).Seconds(),
			sum.submit/n, sum.preempt/n, sum.start/n, sum.bind/n)
	}
}

type phaseSplit struct{ submit, preempt, start, bind float64 }

func (s *phaseSplit) add(o phaseSplit) {
	s.submit += o.submit
	s.preempt += o.preempt
	s.start += o.start
	s.bind += o.bind
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// preemptOnce runs one trial: a training job on all nodes, then an urgent pod; it returns
// creation → bound and the phases, and leaves the test bed idle.
func (e *env) preemptOnce(b *testing.B, trial int, script string) (time.Duration, phaseSplit) {
	b.Helper()
	out := e.slurm.exec(b, "sbatch", "-J", "sunk-sched-test", "-o", "/dev/null", "--parsable", "-p", "all",
		"-N", strconv.Itoa(len(e.slurm.Nodes)), "--exclusive", "--wrap", script)
	id, err := strconv.ParseUint(out, 10, 32)
	if err != nil {
		b.Fatalf("sbatch printed %q", out)
	}
	training := uint32(id)
	b.Cleanup(func() { _ = e.sc.CancelJob(e.ctx, training) })
	e.waitJobState(training, 120*time.Second, "RUNNING")

	before := phaseTotals(b)
	var mu sync.Mutex
	boundAt := map[string]time.Duration{}
	nodeOf := map[string]string{}
	label := "trial-" + strconv.Itoa(trial)
	start := time.Now()
	e.watchBound("preempt="+label, start, &mu, boundAt, nodeOf)
	name := "infer-" + strconv.Itoa(trial)
	e.createPod(name, withAnnotations(wellknown.AnnotationPartition, "urgent"), func(p *v1.Pod) {
		p.Labels = map[string]string{"preempt": label}
	})
	e.eventually(name+" bound", 120*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		_, ok := boundAt[name]
		return ok, scheduledCondition(e.getPod(name))
	})
	mu.Lock()
	total := boundAt[name]
	mu.Unlock()
	after := phaseTotals(b)

	job := e.jobOfPod(e.getPod(name))
	// Whether the training job was still being killed (COMPLETING) when the pod's job started.
	b.Logf("trial %d: at the bind, training job %d is %v, the pod's job %d %v on %s", trial, training, e.job(training).State, job.ID, job.State, job.Nodes)
	victim := e.waitJobState(training, 30*time.Second, "PREEMPTED")
	sec := func(d time.Duration) float64 { return d.Seconds() }
	split := phaseSplit{
		submit:  after.delta(before, "submit"),
		preempt: sec(victim.EndTime.Sub(job.SubmitTime)),
		start:   sec(job.StartTime.Sub(victim.EndTime)),
		bind:    after.delta(before, "detect") + after.delta(before, "activate") + after.delta(before, "bind"),
	}

	// Idle again: the pod's job cancelled and ended.
	e.deletePod(name)
	e.waitJobState(job.ID, 60*time.Second, "CANCELLED", "COMPLETED")
	return total, split
}

// phaseSums is sunk_scheduler_phase_seconds: each phase's sum and count.
type phaseSums map[string][2]float64

// delta is the mean of a phase's observations between two readings (0 if none).
func (p phaseSums) delta(before phaseSums, phase string) float64 {
	n := p[phase][1] - before[phase][1]
	if n == 0 {
		return 0
	}
	return (p[phase][0] - before[phase][0]) / n
}

func phaseTotals(b *testing.B) phaseSums {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := phaseSums{}
	for _, mf := range mfs {
		if mf.GetName() != "sunk_scheduler_phase_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if h := m.Histogram; l.GetName() == "phase" {
					out[l.GetValue()] = [2]float64{h.GetSampleSum(), float64(h.GetSampleCount())}
				}
			}
		}
	}
	return out
}
