//go:build integration

package exporter_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"sunk.dev/sunk/internal/exporter"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
)

// BenchmarkExporter (issue 42) runs the exporter against the test bed's real Slurm with N more
// node records (FUTURE nodes, `scontrol create ... state=future`, as BenchmarkSyncer makes
// them: this machine cannot run thousands of slurmd) and J held jobs (pending, submitted over
// REST). Beside it, in the same run, the floor: one full node list and one full job list
// through the same client, what any exporter reading Slurm over REST pays. It prints one line:
//
//	bench: name=exporter nodes= jobs= floor_lists_ms= refresh_cold_ms= refresh_warm_ms=
//	       scrape_p50_ms= scrape_p99_ms= series= exposition_kb= heap_mb=
//
// refresh_cold is the first refresh (every list read whole), refresh_warm the median of the
// next five (nothing changed: the informers' small answers), a scrape is a Gather and its text
// encoding, as Prometheus' GET /metrics costs the syncer; heap is the process's in use after a
// collection, the exporter's snapshot held. SUNK_BENCH_NODES (default 5000) and
// SUNK_BENCH_JOBS (default 9000: the bed's MaxJobCount is Slurm's default 10,000, and other
// tests' jobs share it) set the sizes.
//
// Run: go test -tags integration -run '^$' -bench Exporter -benchtime 1x -timeout 30m ./test/integration/exporter/
func BenchmarkExporter(b *testing.B) {
	nodes := testenv.BenchInt(b, "SUNK_BENCH_NODES", 5000, 10, 50000)
	jobs := testenv.BenchInt(b, "SUNK_BENCH_JOBS", 9000, 10, 9500)
	env := testenv.Slurm(b)
	ctx := context.Background()
	spec := fmt.Sprintf("nodename=eb[00000-%05d]", nodes-1)
	if out, err := env.Exec("scontrol", "create", spec, "state=future", "cpus=1", "realmemory=100", "features=sunk-bench"); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	b.Cleanup(func() {
		if out, err := env.Exec("scontrol", "delete", spec); err != nil {
			b.Errorf("removing the bench's nodes: %v: %s", err, out)
		}
	})
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(b), slurm.WithLifetime(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	c, err := slurm.New(slurm.Config{URL: env.RESTURL, Tokens: tokens, Cluster: name})
	if err != nil {
		b.Fatal(err)
	}
	const jobName = "sunk-bench-exporter"
	b.Cleanup(func() {
		if out, err := env.Exec("scancel", "--name="+jobName); err != nil {
			b.Errorf("cancelling the bench's jobs: %v: %s", err, out)
		}
	})
	// slurmctld keeps ended jobs for MinJobAge (300 s) and refuses jobs past MaxJobCount
	// ("Resource temporarily unavailable"): a run right after another finds its jobs there.
	if held, err := c.ListJobStates(ctx); err != nil {
		b.Fatal(err)
	} else if limit := maxJobCount(b, env); len(held)+jobs > limit {
		b.Fatalf("slurmctld holds %d jobs and refuses more than MaxJobCount=%d: %d more do not fit (ended jobs leave after MinJobAge; run again later or set SUNK_BENCH_JOBS)", len(held), limit, jobs)
	}
	submitted := time.Now()
	testenv.SubmitHeldJobs(b, ctx, c, jobName, jobs)
	b.Logf("%d held jobs submitted in %s", jobs, time.Since(submitted).Round(100*time.Millisecond))

	// The floor: both lists whole, the median of three.
	var floor []time.Duration
	for range 3 {
		t0 := time.Now()
		nl, err := c.ListNodes(ctx, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		jl, err := c.ListJobs(ctx, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t0))
		if len(nl.Nodes) < nodes || len(jl.Jobs) < jobs {
			b.Fatalf("Slurm lists %d nodes and %d jobs, want at least %d and %d", len(nl.Nodes), len(jl.Jobs), nodes, jobs)
		}
	}

	e := exporter.New(func() []exporter.Target { return []exporter.Target{{Name: name, Slurm: c}} }, exporter.Options{})
	t0 := time.Now()
	e.Refresh(ctx)
	cold := time.Since(t0)
	if err := e.Err(name); err != nil {
		b.Fatal(err)
	}
	var warm []time.Duration
	for range 5 {
		t0 := time.Now()
		e.Refresh(ctx)
		warm = append(warm, time.Since(t0))
		if err := e.Err(name); err != nil {
			b.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	var scrapes []time.Duration
	series, size := 0, 0
	for range 20 {
		t0 := time.Now()
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		series = 0
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
			series += len(mf.Metric)
		}
		scrapes = append(scrapes, time.Since(t0))
		size = buf.Len()
	}
	if v, ok := value(b, e, "slurm_nodes", map[string]string{"state": "future"}); !ok || v < float64(nodes) {
		b.Fatalf("slurm_nodes{state=future} = %v (%v), want at least %d", v, ok, nodes)
	}
	heap := testenv.HeapInUseMB()
	runtime.KeepAlive(e) // its snapshot is the heap measured
	b.Logf("bench: name=exporter nodes=%d jobs=%d floor_lists_ms=%.0f refresh_cold_ms=%.0f refresh_warm_ms=%.0f scrape_p50_ms=%.1f scrape_p99_ms=%.1f series=%d exposition_kb=%.0f heap_mb=%.0f",
		nodes, jobs, testenv.PercentileMS(floor, 50), cold.Seconds()*1000, testenv.PercentileMS(warm, 50), testenv.PercentileMS(scrapes, 50), testenv.PercentileMS(scrapes, 99),
		series, float64(size)/1024, heap)
}

// maxJobCount is slurmctld's MaxJobCount.
func maxJobCount(b *testing.B, env *testenv.SlurmEnv) int {
	out, err := env.Exec("scontrol", "show", "config")
	if err != nil {
		b.Fatalf("scontrol show config: %v: %s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "MaxJobCount" {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	b.Fatalf("no MaxJobCount in scontrol show config")
	return 0
}
