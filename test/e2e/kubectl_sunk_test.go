//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/internal/kubectlsunk"
	"sunk.dev/sunk/test/testenv"
)

// kubectlSunk is the real plugin binary, built from this checkout once per test.
type kubectlSunk struct {
	bin, kubeconfig, ns string
}

func (e *operatorEnv) kubectlSunk(t *testing.T) *kubectlSunk {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-sunk")
	start := time.Now()
	testenv.GoBinary(t, filepath.Join(testenv.RepoRoot(), "cmd", "kubectl-sunk"), bin)
	t.Logf("go build ./cmd/kubectl-sunk: %s", time.Since(start).Round(100*time.Millisecond))
	return &kubectlSunk{bin: bin, kubeconfig: e.Kubeconfig, ns: e.ns}
}

// run runs kubectl-sunk with args in the test's namespace and returns its output.
func (k *kubectlSunk) run(args ...string) (string, error) {
	cmd := exec.Command(k.bin, append([]string{"-n", k.ns}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// nodes is `kubectl sunk nodes -o json`, by Slurm node.
func (k *kubectlSunk) nodes(cluster string) (map[string]kubectlsunk.NodeRow, string, error) {
	out, err := k.run("nodes", "--cluster", cluster, "-o", "json")
	if err != nil {
		return nil, out, err
	}
	var doc struct{ Items []kubectlsunk.NodeRow }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, out, err
	}
	rows := map[string]kubectlsunk.NodeRow{}
	for _, r := range doc.Items {
		rows[r.SlurmNode] = r
	}
	return rows, out, nil
}

// jobs is `kubectl sunk jobs -o json`, by job id.
func (k *kubectlSunk) jobs(cluster string) (map[string]kubectlsunk.JobRow, string, error) {
	out, err := k.run("jobs", "--cluster", cluster, "-o", "json")
	if err != nil {
		return nil, out, err
	}
	var doc struct{ Items []kubectlsunk.JobRow }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, out, err
	}
	rows := map[string]kubectlsunk.JobRow{}
	for _, r := range doc.Items {
		rows[r.JobID] = r
	}
	return rows, out, nil
}

// checkKubectlSunk runs the real plugin against cluster "evc" of TestKubectlDrainWaitsForTheJob,
// whose NodeSet cpu has cpu-0 idle and cpu-1 running job (a short one): nodes shows both states
// beside their pods and Kubernetes node, jobs shows the job on cpu-1, and `kubectl sunk drain
// --reason` drains both with the person's reason through the syncer's protocol, which the
// syncer keeps as it is when the job ends and the node turns from draining to drained. resume
// lifts it.
func (e *operatorEnv) checkKubectlSunk(t *testing.T, k *kubectlSunk, login, job string) {
	t.Helper()
	const cluster = "evc"
	start := time.Now()
	poll(t, 30*time.Second, "kubectl sunk nodes shows cpu-0 idle and cpu-1 allocated", func() error {
		rows, out, err := k.nodes(cluster)
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		if rows["cpu-0"].SlurmState != "idle" || rows["cpu-1"].SlurmState != "allocated" {
			return fmt.Errorf("states %q %q", rows["cpu-0"].SlurmState, rows["cpu-1"].SlurmState)
		}
		for _, n := range []string{"cpu-0", "cpu-1"} {
			if r := rows[n]; r.Pod != n || r.Node != e.NodeName || r.PodPhase != "Running" || r.Available != "True" {
				return fmt.Errorf("%s: %+v", n, r)
			}
		}
		return nil
	})
	table, err := k.run("nodes", "--cluster", cluster)
	if err != nil || !regexp.MustCompile(`(?m)^`+cluster+`\s+cpu-0\s+idle\s+-\s+cpu-0\s+`+e.NodeName+`$`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^`+cluster+`\s+cpu-1\s+allocated\s+-\s+cpu-1\s+`+e.NodeName+`$`).MatchString(table) {
		t.Fatalf("kubectl sunk nodes: %v\n%s", err, table)
	}
	t.Logf("kubectl sunk nodes:\n%s", table)
	poll(t, 30*time.Second, "kubectl sunk jobs shows the job on cpu-1", func() error {
		rows, out, err := k.jobs(cluster)
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		r, ok := rows[job]
		if !ok || strings.Join(r.SlurmNodes, ",") != "cpu-1" || strings.Join(r.Nodes, ",") != e.NodeName || len(rows) != 1 {
			return fmt.Errorf("job %s: %+v (all: %s)", job, r, out)
		}
		return nil
	})
	out, _ := k.run("jobs", "--cluster", cluster, "-o", "wide")
	t.Logf("kubectl sunk jobs -o wide (%s after the submission):\n%s", time.Since(start).Round(time.Second), out)

	// The node is shared with every other test: it is uncordoned whatever happens.
	t.Cleanup(func() { e.cordon(t, false, "") })
	const reason = "e2e: bad DIMM"
	if out, err := k.run("drain", e.NodeName, "--reason", reason); err != nil {
		t.Fatalf("kubectl sunk drain: %v\n%s", err, out)
	}
	want := "k8s: node cordoned (" + reason + ")"
	drained := func(states map[string]string) error {
		rows, out, err := k.nodes(cluster)
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		for n, st := range states {
			if rows[n].SlurmState != st || rows[n].SlurmReason != want {
				return fmt.Errorf("%s: %q %q, want %q %q", n, rows[n].SlurmState, rows[n].SlurmReason, st, want)
			}
		}
		sinfo, err := e.sh(t, login, "login", "sinfo -h -N -o '%N|%T|%E'")
		for n, st := range states {
			slurmState := map[string]string{"idle+drain": "drained", "allocated+drain": "draining"}[st]
			if err != nil || !strings.Contains(sinfo, n+"|"+slurmState+"|"+want) {
				return fmt.Errorf("sinfo: %v %q", err, sinfo)
			}
		}
		return nil
	}
	poll(t, time.Minute, "kubectl sunk drain drains cpu-0 and cpu-1 with the reason", func() error {
		return drained(map[string]string{"cpu-0": "idle+drain", "cpu-1": "allocated+drain"})
	})
	e.release(t, login, job)
	if state, exit, _ := e.jobEnd(t, login, job, 2*time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("the job on the drained node ended %s (exit %s)", state, exit)
	}
	// The node's state changed under the drain, and the syncer, deciding again, keeps the
	// person's drain as it is.
	poll(t, time.Minute, "cpu-1 drained with the same reason after its job", func() error {
		if err := drained(map[string]string{"cpu-0": "idle+drain", "cpu-1": "idle+drain"}); err != nil {
			return err
		}
		rows, out, err := k.jobs(cluster)
		if err != nil || len(rows) != 0 {
			return fmt.Errorf("kubectl sunk jobs: %v\n%s", err, out)
		}
		return nil
	})
	if out, err := k.run("resume", e.NodeName); err != nil {
		t.Fatalf("kubectl sunk resume: %v\n%s", err, out)
	}
	e.waitIdle(t, login, 2*time.Minute, "kubectl sunk resume: cpu-0 and cpu-1 idle", "cpu-0", "cpu-1")
	t.Logf("kubectl sunk drain → both drained, job ended, resume → idle: %s", time.Since(start).Round(time.Second))
}
