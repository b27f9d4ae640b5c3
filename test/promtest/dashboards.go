package promtest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/test/dashboards"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// CheckDashboards runs every PromQL expression of the dashboards the sunk chart ships against
// s: Prometheus must parse each, and each must return data within timeout, unless it reads
// only metrics whose name starts with a prefix of notRun (prefix → why that component does not
// run where the caller tests). rateInterval stands for Grafana's $__rate_interval.
func CheckDashboards(t *testing.T, s *Server, rateInterval string, notRun map[string]string, timeout time.Duration) {
	t.Helper()
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
			if _, err := s.Query(expr); err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			if reason := notRunReason(t, q.Expr, notRun); reason != "" {
				t.Logf("no data expected (%s): %s", reason, q)
				exempt++
				continue
			}
			pending[expr] = q
		}
	}
	t.Logf("%d dashboard queries to return data, %d that cannot here", len(pending), exempt)
	wait.For(t, "every dashboard query returns data", timeout, time.Second, func() error {
		var empty []string
		for expr, q := range pending {
			got, err := s.Query(expr)
			if err != nil {
				return err
			}
			if len(got) == 0 {
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

// notRunReason returns why expr cannot return data, or "" when it must: the reason of the
// first notRun prefix, when every metric it reads has one.
func notRunReason(t *testing.T, expr string, notRun map[string]string) string {
	t.Helper()
	names, err := dashboards.MetricNames(expr)
	if err != nil {
		t.Fatal(err)
	}
	reason := ""
	for _, n := range names {
		r := ""
		for prefix, why := range notRun {
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
