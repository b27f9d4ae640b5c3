//go:build integration

// Package prometheus_test scrapes the Slurm exporter (internal/exporter) and the Slurm REST
// client's metrics with a real Prometheus (Debian's prometheus package, which
// hack/provision.sh host installs) while jobs run on the real Slurm 24.11 of the test bed
// (hack/env-slurm.sh), then asks Prometheus's HTTP API: the expected values are there, and
// every PromQL expression of the dashboards the sunk chart ships parses and returns data.
// Everything listens on 127.0.0.1 only.
package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sunk.dev/sunk/internal/exporter"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/promtest"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

const (
	cluster = "it/prometheus" // the exporter's cluster label
	job     = "sunk-syncer-metrics"
	// rateInterval stands for Grafana's $__rate_interval: at least four scrape intervals.
	rateInterval = "10s"
)

// notRunHere are metrics of components this test does not run, by name prefix, with why.
// A dashboard query that reads only such metrics must be accepted by Prometheus but cannot
// return data here; charts' TestDashboards checks that each name is registered by its
// component.
var notRunHere = map[string]string{
	"sunk_syncer_":        "the syncer's sync metrics need a syncer with a Kubernetes API and compute pods (test/integration/syncer)",
	"controller_runtime_": "the operator's and the syncer's controllers need a Kubernetes API",
	"workqueue_":          "the controllers' work queues need a Kubernetes API",
	"sunk_scheduler_":     "sunk-scheduler runs inside kube-scheduler (another Go module, scheduler/)",
}

// scraped runs what sunk-syncer serves on its metrics port (the exporter of the test bed's
// Slurm and the REST client's metrics) and a real Prometheus scraping it every second, with
// ruleFiles; it returns once Prometheus scrapes it.
func scraped(t *testing.T, env *testenv.SlurmEnv, ruleFiles ...string) (slurm.Client, *promtest.Server) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := slurm.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(t), slurm.WithLifetime(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c, err := slurm.New(slurm.Config{URL: env.RESTURL, Tokens: tokens, Metrics: m, Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	e := exporter.New(func() []exporter.Target { return []exporter.Target{{Name: cluster, Slurm: c}} },
		exporter.Options{Interval: 2 * time.Second, Timeout: 10 * time.Second, UserSeries: true})
	reg.MustRegister(e)
	exporterDone := make(chan error, 1)
	exporterCtx, stopExporter := context.WithCancel(context.Background())
	go func() { exporterDone <- e.Run(exporterCtx) }()
	t.Cleanup(func() { stopExporter(); <-exporterDone })
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	p := promtest.Start(t, []any{map[string]any{
		"job_name":       job,
		"static_configs": []any{map[string]any{"targets": []string{strings.TrimPrefix(srv.URL, "http://")}}},
	}}, ruleFiles...)
	p.WaitUp(t, job, time.Minute)
	return c, p
}

func TestDashboardsOnRealPrometheus(t *testing.T) {
	env := testenv.Slurm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, p := scraped(t, env)

	// The state the dashboards show: a job running on a node of its own, a held job pending,
	// a job completed, and a REST request that failed (a node that does not exist).
	running := submit(ctx, t, c, slurm.JobSubmit{Name: "sunk-it-prom-run", Script: "#!/bin/sh\nsleep 300\n", Exclusive: true})
	held := submit(ctx, t, c, slurm.JobSubmit{Name: "sunk-it-prom-held", Script: "#!/bin/sh\ntrue\n", Hold: true})
	done := submit(ctx, t, c, slurm.JobSubmit{Name: "sunk-it-prom-done", Script: "#!/bin/sh\ntrue\n"})
	var node string
	wait.For(t, "one job runs, one is held, one completed", 2*time.Minute, 500*time.Millisecond, func() error {
		for id, want := range map[uint32]string{running: "RUNNING", held: "PENDING", done: "COMPLETED"} {
			j, err := c.GetJob(ctx, id)
			if err != nil {
				return err
			}
			if j.BaseState() != want {
				return fmt.Errorf("job %d is %v (%s), want %s", id, j.State, j.StateReason, want)
			}
			if id == running {
				node = j.Nodes
			}
		}
		return nil
	})
	n, err := c.GetNode(ctx, node)
	if err != nil {
		t.Fatalf("the running job's node %q: %v", node, err)
	}
	if _, err := c.GetNode(ctx, "sunk-it-no-such-node"); !errors.Is(err, slurm.ErrNotFound) {
		t.Fatalf("GetNode of a node that does not exist: %v, want ErrNotFound", err)
	}

	sel := fmt.Sprintf(`cluster=%q`, cluster)
	expected := []struct {
		expr string
		ok   func(float64) bool
		want string
	}{
		{`slurm_up{` + sel + `}`, eq(1), "1"},
		{fmt.Sprintf(`slurm_node_info{%s,node=%q,state="allocated"}`, sel, node), eq(1), "1: the running job's node is allocated"},
		{fmt.Sprintf(`slurm_node_cpus_allocated{%s,node=%q}`, sel, node), eq(float64(n.CPUs)), fmt.Sprintf("%d: every CPU of the exclusive job's node", n.CPUs)},
		{`sum(slurm_jobs{` + sel + `,state="running"})`, atLeast(1), ">= 1"},
		{`sum(slurm_jobs_pending{` + sel + `,reason=~"JobHeld.*"})`, atLeast(1), ">= 1: the held job"},
		{`sum(slurm_jobs{` + sel + `,state="completed"})`, atLeast(1), ">= 1: the completed job"},
		{`sum(slurm_user_jobs{` + sel + `,state="pending"})`, atLeast(1), ">= 1: per-user series"},
		{`sum(sunk_slurm_rest_requests_total{` + sel + `,job="` + job + `",outcome="not_found"})`, atLeast(1), ">= 1: the failed GET of a node"},
	}
	wait.For(t, "Prometheus has the expected values", time.Minute, time.Second, func() error {
		for _, x := range expected {
			s, err := p.Query(x.expr)
			if err != nil {
				return err
			}
			if len(s) != 1 || !x.ok(s[0].Value) {
				return fmt.Errorf("%s = %v, want %s", x.expr, s, x.want)
			}
		}
		return nil
	})

	// Every dashboard query: Prometheus parses it, and it returns data unless it reads only
	// metrics of components that do not run here.
	promtest.CheckDashboards(t, p, rateInterval, notRunHere, time.Minute)
}

func eq(want float64) func(float64) bool   { return func(v float64) bool { return v == want } }
func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }

// submit submits a one-node job to partition "all" and cancels it when the test ends.
func submit(ctx context.Context, t *testing.T, c slurm.Client, js slurm.JobSubmit) uint32 {
	t.Helper()
	js.Partition, js.MinNodes, js.MaxNodes = "all", 1, 1
	js.TimeLimit, js.StdOut = 5*time.Minute, "/dev/null"
	r, err := c.SubmitJob(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
	return r.JobID
}
