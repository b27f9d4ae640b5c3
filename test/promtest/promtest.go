// Package promtest runs a real Prometheus (Debian's prometheus package, which hack/provision.sh
// host installs) for the tests that check what sunk's metrics look like once scraped: the
// integration test of the exporter and the dashboards (test/integration/prometheus) and the
// end-to-end test that scrapes a live cluster through the chart's ServiceMonitors
// (test/e2e). It listens on 127.0.0.1 only and is stopped when the test ends.
package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// Server is a running Prometheus.
type Server struct {
	URL string
	out *syncBuffer
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

func (s Sample) String() string { return fmt.Sprintf("%v %v", s.Labels, s.Value) }

// Start runs Prometheus with scrapeConfigs (Prometheus's scrape_config objects), the rule files
// ruleFiles (paths) and a one-second default scrape and evaluation interval, and returns once
// it answers queries.
func Start(t *testing.T, scrapeConfigs []any, ruleFiles ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary (hack/provision.sh host installs Debian's prometheus package): %v", err)
	}
	dir := t.TempDir()
	// JSON is YAML.
	config, err := json.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": scrapeConfigs,
		"rule_files":     append([]string{}, ruleFiles...),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t, "127.0.0.1")
	out := &syncBuffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once the process has been waited for, so that both the readiness check
	// and the cleanup can see it.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
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
	s := &Server{URL: "http://" + addr, out: out}
	wait.For(t, "prometheus answers queries", time.Minute, 200*time.Millisecond, func() error {
		select {
		case <-exited:
			t.Fatalf("prometheus exited: %v\n%s", waitErr, out.String())
		default:
		}
		_, err := s.Query("vector(1)")
		return err
	})
	return s
}

// WaitUp waits until job has targets and Prometheus scrapes every one of them successfully.
func (s *Server) WaitUp(t *testing.T, job string, timeout time.Duration) {
	t.Helper()
	wait.For(t, "prometheus scrapes every target of job "+job, timeout, 500*time.Millisecond, func() error {
		up, err := s.Query(fmt.Sprintf("up{job=%q}", job))
		if err != nil {
			return err
		}
		n := 0
		for _, u := range up {
			if u.Value == 1 {
				n++
			}
		}
		if len(up) == 0 || n != len(up) {
			return fmt.Errorf("up = %v; targets: %s", up, s.targetErrors())
		}
		return nil
	})
}

// targetErrors is Prometheus's own account of its failing targets, for a failure message.
func (s *Server) targetErrors() string {
	resp, err := http.Get(s.URL + "/api/v1/targets?state=active")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err.Error()
	}
	var b bytes.Buffer
	for _, a := range r.Data.ActiveTargets {
		fmt.Fprintf(&b, "\n  %s %s %s", a.ScrapeURL, a.Health, a.LastError)
	}
	return b.String()
}

// Query runs an instant query; an expression Prometheus refuses is an error.
func (s *Server) Query(expr string) ([]Sample, error) {
	resp, err := http.PostForm(s.URL+"/api/v1/query", url.Values{"query": {expr}})
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
	out := make([]Sample, 0, len(series))
	for _, se := range series {
		str, _ := se.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v: %w", expr, se.Value[1], err)
		}
		out = append(out, Sample{Labels: se.Metric, Value: v})
	}
	return out, nil
}

// RuleFile writes rules, the content of a Prometheus rule file ({groups: [...]}), to a file
// of the test's temporary directory and returns its path, for Start or promtool.
func RuleFile(t *testing.T, rules any) string {
	t.Helper()
	out, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Firing is the firing alerts named alertname, each with its labels (Prometheus's ALERTS series).
func (s *Server) Firing(alertname string) ([]Sample, error) {
	return s.Query(fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, alertname))
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
