package charts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	_ "sigs.k8s.io/controller-runtime/pkg/controller" // registers controller-runtime's reconcile and workqueue metrics
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sunk.dev/sunk/internal/controller/nodeset"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/exporter"
	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/dashboards"
)

// TestDashboards: the Grafana dashboards the sunk chart ships are well-formed (unique uids
// and panel ids, every panel on the dashboard's Prometheus variable and inside Grafana's
// 24-column grid), and every PromQL expression in them reads only metrics that sunk's
// components register. test/integration/prometheus runs the same expressions in a real
// Prometheus.
func TestDashboards(t *testing.T) {
	ds, err := dashboards.Load(filepath.Join("sunk", "files", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	exists := registeredMetrics(t)
	uids := map[string]string{}
	for _, d := range ds {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: no uid or title", d.File)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share the uid %q", d.File, other, d.UID)
		}
		uids[d.UID] = d.File
		hasDatasource := false
		for _, v := range d.Templating.List {
			hasDatasource = hasDatasource || v.Name == "datasource" && v.Type == "datasource"
		}
		if !hasDatasource {
			t.Errorf("%s: no datasource variable", d.File)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", d.File, p.ID)
			}
			ids[p.ID] = true
			if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s / %q: gridPos %+v outside Grafana's 24 columns", d.File, p.Title, g)
			}
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s / %q: no query", d.File, p.Title)
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s / %q: datasource %+v, want the prometheus ${datasource} variable", d.File, p.Title, p.Datasource)
			}
		}
		qs, err := d.Queries()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			names, err := dashboards.MetricNames(q.Expr)
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			if len(names) == 0 && !strings.Contains(q.Expr, "vector(") {
				t.Errorf("%s: reads no metric", q)
			}
			for _, n := range names {
				if !exists(n) {
					t.Errorf("%s: %s is no metric that sunk registers", q, n)
				}
			}
		}
	}
}

// TestAlertsReadRegisteredMetrics: every alerting rule the sunk chart ships reads only metrics
// that sunk's components register, so that a renamed metric cannot leave an alert that never
// fires. promtool evaluates the rules in the integration tests (alerts_test.go).
func TestAlertsReadRegisteredMetrics(t *testing.T) {
	rules := alertRules(t, filepath.Join("sunk", "files", "alerts.yaml"))
	if len(rules) == 0 {
		t.Fatal("files/alerts.yaml has no rules")
	}
	exists := registeredMetrics(t)
	for alert, r := range rules {
		names, err := dashboards.MetricNames(r.Expr)
		if err != nil || len(names) == 0 {
			t.Errorf("%s: %q reads no metric (%v)", alert, r.Expr, err)
		}
		for _, name := range names {
			if !exists(name) {
				t.Errorf("%s: %s is no metric that sunk registers", alert, name)
			}
		}
	}
}

// registeredMetrics reports whether a series name belongs to a metric that one of sunk's
// components registers: the Slurm exporter, pkg/slurm's REST metrics, the syncer's, the
// operator's (SlurmCluster conditions, the NodeSet autoscaler), controller-runtime's
// (reconciles, work queues, client-go) and sunk-scheduler's. A histogram's _bucket, _sum and
// _count series belong to its name.
func registeredMetrics(t *testing.T) func(string) bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.New(func() []exporter.Target { return nil }, exporter.Options{}))
	if _, err := slurm.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := syncer.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := slurmcluster.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeset.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	scheduler := schedulerMetrics(t)
	has := func(name string) bool {
		return scheduler[name] || inRegistry(reg, name) || inRegistry(crmetrics.Registry, name)
	}
	return func(series string) bool {
		if has(series) {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(series, suffix); ok && has(base) {
				return true
			}
		}
		return false
	}
}

// inRegistry: a registry refuses a collector whose metric name it already has (with any
// labels or help), so a probe that registers finds a name that is not there.
func inRegistry(reg prometheus.Registerer, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	if err := reg.Register(probe); err != nil {
		return true
	}
	reg.Unregister(probe)
	return false
}

// schedulerMetrics returns the metric names of sunk-scheduler's plugin, which lives in
// another Go module that this one cannot import: the Name of each prometheus.New…(…Opts{})
// in scheduler/plugin/metrics.go whose variable is passed to legacyregistry.RawMustRegister.
// (Its Slurm REST metrics are pkg/slurm's.)
func schedulerMetrics(t *testing.T) map[string]bool {
	t.Helper()
	const path = "../scheduler/plugin/metrics.go"
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // variable → metric name
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, v := range spec.Values {
			if name := optsName(v); name != "" {
				declared[spec.Names[i].Name] = name
			}
		}
		return true
	})
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "RawMustRegister" {
			return true
		}
		for _, a := range call.Args {
			if id, ok := a.(*ast.Ident); ok && declared[id.Name] != "" {
				out[declared[id.Name]] = true
			}
		}
		return true
	})
	if len(out) == 0 || len(out) != len(declared) {
		t.Fatalf("%s: declares metrics %v, registers %v", path, declared, out)
	}
	return out
}

// optsName returns the Name of the options literal passed to a prometheus.New… call.
func optsName(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	for _, a := range call.Args {
		lit, ok := a.(*ast.CompositeLit)
		if !ok {
			continue
		}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
				if v, ok := kv.Value.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(v.Value)
					return s
				}
			}
		}
	}
	return ""
}
