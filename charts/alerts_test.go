//go:build integration

package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/test/promtest"
)

// checkAlerts: the chart's PrometheusRule carries files/alerts.yaml's rules, with the values'
// overrides of the monitoring case (SunkSlurmNodeDown's `for` 1h, SunkReconcileErrors left
// out) and nothing else changed, and promtool (Debian's prometheus package) accepts the rules
// as rendered. test/integration/prometheus has a real Prometheus evaluate them.
func checkAlerts(t *testing.T, docs []map[string]any) {
	t.Helper()
	var rules []map[string]any
	for _, d := range docs {
		if d["kind"] == "PrometheusRule" {
			rules = append(rules, d)
		}
	}
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(rules))
	}
	spec := rules[0]["spec"].(map[string]any)

	raw, err := os.ReadFile(filepath.Join("sunk", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, g := range file["groups"].([]any) {
		group := g.(map[string]any)
		var kept []any
		for _, r := range group["rules"].([]any) {
			rule := r.(map[string]any)
			switch rule["alert"] {
			case "SunkReconcileErrors":
				continue
			case "SunkSlurmNodeDown":
				rule["for"] = "1h"
			}
			kept = append(kept, rule)
		}
		group["rules"] = kept
	}
	if !reflect.DeepEqual(spec["groups"], file["groups"]) {
		got, _ := yaml.Marshal(spec["groups"])
		want, _ := yaml.Marshal(file["groups"])
		t.Fatalf("PrometheusRule groups:\n%s\nwant files/alerts.yaml with the overrides:\n%s", got, want)
	}

	path := promtest.RuleFile(t, spec)
	if msg, err := exec.Command(promtool(t), "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, msg)
	}
}

// promtool is the path of promtool, which every host that runs these tests has.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("no promtool (hack/provision.sh host installs Debian's prometheus package): %v", err)
	}
	return path
}
