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
	wait.For(t, "SunkSlurmNodeDrainedBySunk firing for the node sunk drained alone", time.Minute, 500*time.Millisecond, func() error {
		if s, err := p.Query(fmt.Sprintf(`slurm_node_info{node=%q,state=~"drained|draining"}`, byPerson)); err != nil || len(s) != 1 {
			return fmt.Errorf("the person's drain not scraped yet: %v %v", s, err)
		}
		firing, err := p.Firing("SunkSlurmNodeDrainedBySunk")
		if err != nil {
			return err
		}
		if len(firing) != 1 || firing[0].Labels["node"] != bySunk || firing[0].Labels["severity"] != "warning" {
			return fmt.Errorf("firing: %v", firing)
		}
		return nil
	})
	for _, node := range []string{bySunk, byPerson, byNodeSet} {
		if err := c.UpdateNode(ctx, node, slurm.NodeUpdate{State: slurm.NodeStateResume}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "SunkSlurmNodeDrainedBySunk over once the node is resumed", time.Minute, 500*time.Millisecond, func() error {
		if firing, err := p.Firing("SunkSlurmNodeDrainedBySunk"); err != nil || len(firing) != 0 {
			return fmt.Errorf("firing: %v %v", firing, err)
		}
		return nil
	})

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
	wait.For(t, "SunkSlurmUnreachable firing with slurmrestd stopped", time.Minute, 500*time.Millisecond, func() error {
		firing, err := p.Firing("SunkSlurmUnreachable")
		if err != nil {
			return err
		}
		if len(firing) != 1 || firing[0].Labels["cluster"] != cluster || firing[0].Labels["severity"] != "critical" {
			return fmt.Errorf("firing: %v", firing)
		}
		return nil
	})
	if out, err := testenv.Hack("env-slurm.sh", "start-restd"); err != nil {
		t.Fatalf("start-restd: %v: %s", err, out)
	}
	restarted = true
	wait.For(t, "SunkSlurmUnreachable over once slurmrestd is back", time.Minute, 500*time.Millisecond, func() error {
		if firing, err := p.Firing("SunkSlurmUnreachable"); err != nil || len(firing) != 0 {
			return fmt.Errorf("firing: %v %v", firing, err)
		}
		return nil
	})
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
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alerts.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
