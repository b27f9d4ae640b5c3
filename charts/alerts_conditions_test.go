//go:build integration

package charts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Reasons of a SlurmCluster's ConfigApplied=False (internal/controller/slurmcluster), by
// whether waiting cures them: SunkSlurmConfigNotApplied must fire for each of the first and
// for none of the second.
var (
	configNeedsAPerson = []string{sunkv1.ReasonInvalidSpec, sunkv1.ReasonNoImage, sunkv1.ReasonKeyMissing,
		sunkv1.ReasonScriptNotFound, sunkv1.ReasonInvalidScript, sunkv1.ReasonSlurmRejectedConfig, sunkv1.ReasonReconfigureFailed}
	configOnItsWay = []string{sunkv1.ReasonCheckingConfig, sunkv1.ReasonRollingRestart, sunkv1.ReasonWaitingForCtld,
		sunkv1.ReasonWaitingForKubelet, sunkv1.ReasonWaitingForRestAPI}
)

// TestConditionAlerts: `promtool test rules` evaluates the shipped rules (files/alerts.yaml as
// it is, `for` included) over synthetic sunk_slurmcluster_condition series, as the operator
// exports them with the Prometheus Operator's target labels:
//   - SunkSlurmctldBackupInCharge fires once the backup has served for the rule's `for`, across
//     a restart of the operator (a new pod label halfway), and not for a primary that serves
//     or a cluster whose backup has not taken over yet;
//   - SunkSlurmConfigNotApplied fires, once per cluster and reason, for every ConfigApplied
//     reason that needs a person, and never for the reasons of a configuration on its way,
//     one applied, or one refused and fixed before the `for` ran out.
//
// The expected annotations are the rules' own with their $labels filled in, so that a
// template naming a label the alert does not have fails here.
func TestConditionAlerts(t *testing.T) {
	rulesPath, err := filepath.Abs(filepath.Join("sunk", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := alertRules(t, rulesPath)
	const horizon = time.Hour

	series := func(cluster, typ, status, reason, pod, values string) map[string]any {
		return map[string]any{"values": values, "series": fmt.Sprintf(
			`sunk_slurmcluster_condition{cluster=%q,type=%q,status=%q,reason=%q,namespace="sunk-system",pod=%q,job="sunk-operator-metrics"}`,
			cluster, typ, status, reason, pod)}
	}
	steady := fmt.Sprintf("1x%d", int(horizon/time.Minute))
	input := []map[string]any{
		// The operator restarts at 5 minutes: pod a's series end, pod b's start a minute before.
		series("slurm/failover", sunkv1.ConditionControllerReady, "True", sunkv1.ReasonBackupInCharge, "sunk-operator-a", "1x5 stale"),
		series("slurm/failover", sunkv1.ConditionControllerReady, "True", sunkv1.ReasonBackupInCharge, "sunk-operator-b",
			fmt.Sprintf("_x4 1x%d", int(horizon/time.Minute)-4)),
		series("slurm/failover", sunkv1.ConditionReady, "True", sunkv1.ReasonBackupInCharge, "sunk-operator-a", steady),
		series("slurm/primary", sunkv1.ConditionControllerReady, "True", sunkv1.ReasonReady, "sunk-operator-a", steady),
		series("slurm/primary-down", sunkv1.ConditionControllerReady, "False", sunkv1.ReasonPrimaryDown, "sunk-operator-a", steady),
		series("slurm/applied", sunkv1.ConditionConfigApplied, "True", sunkv1.ReasonApplied, "sunk-operator-a", steady),
		// Refused, then fixed before the alert's `for` ran out.
		series("slurm/fixed", sunkv1.ConditionConfigApplied, "False", sunkv1.ReasonSlurmRejectedConfig, "sunk-operator-a", "1x3 stale"),
		series("slurm/fixed", sunkv1.ConditionConfigApplied, "True", sunkv1.ReasonApplied, "sunk-operator-a", "_x4 1x56"),
	}
	var notApplied []map[string]string
	for _, reason := range configNeedsAPerson {
		cluster := "slurm/" + strings.ToLower(reason)
		input = append(input,
			series(cluster, sunkv1.ConditionConfigApplied, "False", reason, "sunk-operator-a", steady),
			// Ready=False takes ConfigApplied's reason when that is the only blocker.
			series(cluster, sunkv1.ConditionReady, "False", reason, "sunk-operator-a", steady))
		notApplied = append(notApplied, map[string]string{"cluster": cluster, "reason": reason})
	}
	for _, reason := range configOnItsWay {
		input = append(input, series("slurm/"+strings.ToLower(reason), sunkv1.ConditionConfigApplied, "False", reason, "sunk-operator-a", steady))
	}

	var checks []any
	for alert, firing := range map[string][]map[string]string{
		"SunkSlurmctldBackupInCharge": {{"cluster": "slurm/failover"}},
		"SunkSlurmConfigNotApplied":   notApplied,
	} {
		rule := rules[alert]
		if rule == nil {
			t.Fatalf("files/alerts.yaml has no alert %s", alert)
		}
		hold, err := time.ParseDuration(rule.For)
		if err != nil || hold < 2*time.Minute || hold > horizon/2 {
			t.Fatalf("%s: for %q, which this test cannot evaluate around (%v)", alert, rule.For, err)
		}
		var exp []any
		for _, labels := range firing {
			labels["severity"] = rule.Labels["severity"]
			exp = append(exp, map[string]any{"exp_labels": labels, "exp_annotations": fillLabels(t, alert, rule.Annotations, labels)})
		}
		for _, at := range []time.Duration{hold - time.Minute, hold, horizon} {
			want := exp
			if at < hold {
				want = []any{}
			}
			checks = append(checks, map[string]any{"eval_time": at.String(), "alertname": alert, "exp_alerts": want})
		}
	}

	test, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{rulesPath},
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": input, "alert_rule_test": checks}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alerts_test.yaml")
	if err := os.WriteFile(path, test, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "test", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\ntest file:\n%s", err, out, test)
	}
}

var labelRef = regexp.MustCompile(`\{\{\s*\$labels\.(\w+)\s*\}\}`)

// fillLabels renders annotations whose only templates are {{ $labels.name }}, with labels.
func fillLabels(t *testing.T, alert string, annotations, labels map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, text := range annotations {
		v := labelRef.ReplaceAllStringFunc(text, func(ref string) string {
			name := labelRef.FindStringSubmatch(ref)[1]
			value, ok := labels[name]
			if !ok {
				t.Errorf("%s: annotation %s names label %s, which the alert does not have", alert, k, name)
			}
			return value
		})
		if strings.Contains(v, "{{") {
			t.Fatalf("%s: annotation %s has a template other than {{ $labels.name }}: %s", alert, k, text)
		}
		out[k] = v
	}
	return out
}
