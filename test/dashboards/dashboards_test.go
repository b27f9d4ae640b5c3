package dashboards

import (
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (state) (slurm_nodes{cluster=~"$cluster"})`:                                            "slurm_nodes",
		`sum(rate(a_total{x="}"}[$__rate_interval])) by (job) / on (job) group_left(y) b or vector(0)`: "a_total b",
		`histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m]))) > bool 1e3`:                        "h_bucket",
		`time() - t offset 5m and count without (a, b) (u)`:                                            "t u",
	} {
		got, err := MetricNames(expr)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("MetricNames(%s) = %v, %v; want %s", expr, got, err, want)
		}
	}
	for _, bad := range []string{`sum(x`, `x{a="b}`, `x]`, `rate(x[$__rate_interval)`, `x + $y`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%s) = %v, want an error", bad, got)
		}
	}
}
