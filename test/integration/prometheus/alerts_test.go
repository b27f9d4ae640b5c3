//go:build integration

package prometheus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"sunk.dev/sunk/internal/syncer"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/promtest"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestAlertsOnRealPrometheus: the alerting rules the sunk chart ships (charts/sunk/files/
// alerts.yaml), each with its `for` cut to nothing, evaluated by a real Prometheus over the
// exporter of the test bed's real Slurm. A node drained by sunk fires SunkSlurmNodeDrainedBySunk
// and a node a person drained does not, nor one the NodeSet controller drains for a scale-in;
// resumed, the alert ends. slurmrestd stopped fires SunkSlurmUnreachable.
func TestAlertsOnRealPrometheus(t *testing.T) {
	env := testenv.Slurm(t)
	if len(env.Nodes) < 3 {
		t.Fatalf("the test bed has %d nodes, this test drains three", len(env.Nodes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, p := scraped(t, env, immediateRules(t))

	bySunk, byPerson, byNodeSet := env.Nodes[0], env.Nodes[1], env.Nodes[2]
	reasons := map[string]string{
		bySunk:    syncer.DrainReason([]string{"Kubernetes node kube-1 cordoned (alerts test)"}),
		byPerson:  "disk replaced (alerts test)",
		byNodeSet: wellknown.DrainPrefixNodeSet + " scale-in (alerts test)",
	}
	for node, reason := range reasons {
		t.Cleanup(func() {
			_ = c.UpdateNode(context.Background(), node, slurm.NodeUpdate{State: slurm.NodeStateResume})
		})
		if err := c.UpdateNode(ctx, node, slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err != nil {
			t.Fatal(err)
		}
	}
	// The exporter has read all three drains once the person's shows; then only sunk's fires.
	waitAlert(t, p, "SunkSlurmNodeDrainedBySunk", "firing for the node sunk drained alone", func(firing []promtest.Sample) error {
		if s, err := p.Query(fmt.Sprintf(`slurm_node_info{node=%q,state=~"drained|draining"}`, byPerson)); err != nil || len(s) != 1 {
			return fmt.Errorf("the person's drain not scraped yet: %v %v", s, err)
		}
		return firingOnce(firing, "node", bySunk, "warning")
	})
	for _, node := range []string{bySunk, byPerson, byNodeSet} {
		if err := c.UpdateNode(ctx, node, slurm.NodeUpdate{State: slurm.NodeStateResume}); err != nil {
			t.Fatal(err)
		}
	}
	waitAlert(t, p, "SunkSlurmNodeDrainedBySunk", "over once the node is resumed", notFiring)

	if firing, err := p.Firing("SunkSlurmUnreachable"); err != nil || len(firing) != 0 {
		t.Fatalf("SunkSlurmUnreachable firing while Slurm answers: %v %v", firing, err)
	}
	if out, err := testenv.Hack("env-slurm.sh", "stop-restd"); err != nil {
		t.Fatalf("stop-restd: %v: %s", err, out)
	}
	restarted := false
	defer func() {
		if !restarted {
			_, _ = testenv.Hack("env-slurm.sh", "start-restd")
		}
	}()
	waitAlert(t, p, "SunkSlurmUnreachable", "firing with slurmrestd stopped", func(firing []promtest.Sample) error {
		return firingOnce(firing, "cluster", cluster, "critical")
	})
	if out, err := testenv.Hack("env-slurm.sh", "start-restd"); err != nil {
		t.Fatalf("start-restd: %v: %s", err, out)
	}
	restarted = true
	waitAlert(t, p, "SunkSlurmUnreachable", "over once slurmrestd is back", notFiring)
}

// waitAlert waits until check accepts the firing series of alert.
func waitAlert(t *testing.T, p *promtest.Server, alert, what string, check func([]promtest.Sample) error) {
	t.Helper()
	wait.For(t, alert+" "+what, time.Minute, 500*time.Millisecond, func() error {
		firing, err := p.Firing(alert)
		if err != nil {
			return err
		}
		return check(firing)
	})
}

// firingOnce accepts one firing series, whose label is value, of severity.
func firingOnce(firing []promtest.Sample, label, value, severity string) error {
	if len(firing) != 1 || firing[0].Labels[label] != value || firing[0].Labels["severity"] != severity {
		return fmt.Errorf("firing: %v; want one with %s=%q, severity %s", firing, label, value, severity)
	}
	return nil
}

func notFiring(firing []promtest.Sample) error {
	if len(firing) != 0 {
		return fmt.Errorf("firing: %v", firing)
	}
	return nil
}

// immediateRules writes the chart's alerting rules with every alert's `for` removed (as
// metrics.prometheusRule.for may set it), so that an alert fires at its first true evaluation,
// and returns the file's path.
func immediateRules(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "sunk", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		t.Fatalf("charts/sunk/files/alerts.yaml: %v", err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			r["for"] = "0s"
		}
	}
	return promtest.RuleFile(t, file)
}
