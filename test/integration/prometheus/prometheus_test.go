//go:build integration

// Package prometheus_test scrapes the Slurm exporter (internal/exporter) and the Slurm REST
// client's metrics with a real Prometheus (Debian's prometheus package, which
// hack/provision.sh host installs) while jobs run on the real Slurm 24.11 of the test bed
// (hack/env-slurm.sh), then asks Prometheus's HTTP API: the expected values are there, and
// every PromQL expression of the dashboards the sunk chart ships parses and returns data.
// Everything listens on 127.0.0.1 only.
package prometheus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sunk.dev/sunk/internal/exporter"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/dashboards"
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

func TestDashboardsOnRealPrometheus(t *testing.T) {
	env := testenv.Slurm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// What sunk-syncer serves on its metrics port: the exporter and the REST client's metrics.
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
	exporterCtx, stopExporter := context.WithCancel(ctx)
	go func() { exporterDone <- e.Run(exporterCtx) }()
	t.Cleanup(func() { stopExporter(); <-exporterDone })
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	p := startPrometheus(t, strings.TrimPrefix(srv.URL, "http://"))

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
			s, err := p.query(x.expr)
			if err != nil {
				return err
			}
			if len(s) != 1 || !x.ok(s[0].value) {
				return fmt.Errorf("%s = %v, want %s", x.expr, s, x.want)
			}
		}
		return nil
	})

	// Every dashboard query: Prometheus parses it, and it returns data unless it reads only
	// metrics of components that do not run here.
	ds, err := dashboards.Load(filepath.Join(testenv.RepoRoot(), dashboards.Dir))
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]dashboards.Query{} // expanded expression → a query that has it
	exempt := 0
	for _, d := range ds {
		qs, err := d.Queries()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			expr := dashboards.Expand(q.Expr, rateInterval)
			if _, err := p.query(expr); err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			if reason := notRun(t, q.Expr); reason != "" {
				t.Logf("no data expected (%s): %s", reason, q)
				exempt++
				continue
			}
			pending[expr] = q
		}
	}
	t.Logf("%d dashboard queries to return data, %d that cannot here", len(pending), exempt)
	wait.For(t, "every dashboard query returns data", time.Minute, time.Second, func() error {
		var empty []string
		for expr, q := range pending {
			s, err := p.query(expr)
			if err != nil {
				return err
			}
			if len(s) == 0 {
				empty = append(empty, q.String())
				continue
			}
			delete(pending, expr)
		}
		if len(empty) > 0 {
			return fmt.Errorf("no data for %d queries:\n%s", len(empty), strings.Join(empty, "\n"))
		}
		return nil
	})
}

// notRun returns why expr cannot return data here, or "" when it must: the reason of the
// first notRunHere prefix, when every metric it reads has one.
func notRun(t *testing.T, expr string) string {
	t.Helper()
	names, err := dashboards.MetricNames(expr)
	if err != nil {
		t.Fatal(err)
	}
	reason := ""
	for _, n := range names {
		r := ""
		for prefix, why := range notRunHere {
			if strings.HasPrefix(n, prefix) {
				r = why
			}
		}
		if r == "" {
			return ""
		}
		reason = r
	}
	return reason
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

type prom struct{ url string }

type sample struct {
	labels map[string]string
	value  float64
}

func (s sample) String() string { return fmt.Sprintf("%v %v", s.labels, s.value) }

// startPrometheus runs Debian's prometheus on a free loopback port, scraping target
// (host:port) every second, and stops it when the test ends.
func startPrometheus(t *testing.T, target string) *prom {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary (hack/provision.sh host installs Debian's prometheus package): %v", err)
	}
	dir := t.TempDir()
	// JSON is YAML.
	config, err := json.Marshal(map[string]any{
		"global": map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{map[string]any{
			"job_name":       job,
			"static_configs": []any{map[string]any{"targets": []string{target}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	var out syncBuffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	p := &prom{url: "http://" + addr}
	wait.For(t, "prometheus is ready and scrapes the exporter", time.Minute, 200*time.Millisecond, func() error {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, out.String())
		default:
		}
		s, err := p.query(`up{job="` + job + `"}`)
		if err != nil {
			return err
		}
		if len(s) != 1 || s[0].value != 1 {
			return fmt.Errorf("up = %v", s)
		}
		return nil
	})
	return p
}

// freePort returns a loopback address that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// query runs an instant query; an expression Prometheus refuses is an error.
func (p *prom) query(expr string) ([]sample, error) {
	resp, err := http.PostForm(p.url+"/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %w", expr, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, r.Error)
	}
	var series []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"` // [time, "value"]
	}
	switch r.Data.ResultType {
	case "vector":
		if err := json.Unmarshal(r.Data.Result, &series); err != nil {
			return nil, err
		}
	case "scalar":
		// [time, "value"], as one series without labels
		if err := json.Unmarshal([]byte(`[{"value":`+string(r.Data.Result)+`}]`), &series); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: result type %s", expr, r.Data.ResultType)
	}
	out := make([]sample, 0, len(series))
	for _, s := range series {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v: %w", expr, s.Value[1], err)
		}
		out = append(out, sample{labels: s.Metric, value: v})
	}
	return out, nil
}

// syncBuffer is a bytes.Buffer for a process's output, read while the process writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
