//go:build integration

package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sunk.dev/sunk/test/testenv"
)

// TestPMI2WireUpAcrossThreeNodes runs test/e2e/pmi2probe as the tasks of
// `srun -N3 --mpi=pmi2` on the test bed: what an MPI library does at MPI_Init, over Slurm's
// real mpi/pmi2 (each slurmd in a network namespace of its own, so the kvs-fence crosses the
// step's slurmstepd tree and srun). Every rank must see all three, each on a node of its own.
func TestPMI2WireUpAcrossThreeNodes(t *testing.T) {
	env := testenv.Slurm(t)
	if len(env.Nodes) < 3 {
		t.Fatalf("the test bed has %d nodes, this test needs 3: %v", len(env.Nodes), env.Nodes)
	}
	// The shared directory is every node's /shared; a name of this run's own, so that test
	// beds used by several checkouts at once do not swap binaries under each other.
	f, err := os.CreateTemp(env.SharedDir, "pmi2probe-*")
	must(t, err)
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	build := exec.Command("go", "build", "-o", f.Name(), "sunk.dev/sunk/test/e2e/pmi2probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static: the Slurm root filesystem runs it
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build pmi2probe: %v\n%s", err, out)
	}
	must(t, os.Chmod(f.Name(), 0o755))

	// --immediate: a bed busy with other checkouts' jobs fails the test in 2 minutes rather
	// than holding it; -t bounds a step that hangs past the probe's own fence timeout.
	out, err := env.Exec("srun", "-N3", "--mpi=pmi2", "--immediate=120", "-t", "2", "-J", "pmi2probe",
		"/shared/"+filepath.Base(f.Name()), "-timeout", "60s")
	t.Logf("srun -N3 --mpi=pmi2 pmi2probe printed:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	ranks := map[int]string{} // rank -> the hosts it saw
	hostOf := map[int]string{}
	for _, line := range strings.Split(out, "\n") {
		var rank, size int
		var host, hosts string
		if _, err := fmt.Sscanf(line, "pmi2probe: rank=%d size=%d host=%s hosts=%s", &rank, &size, &host, &hosts); err != nil {
			continue
		}
		if size != 3 {
			t.Errorf("rank %d says size %d, want 3", rank, size)
		}
		if _, dup := ranks[rank]; dup {
			t.Errorf("rank %d printed twice", rank)
		}
		ranks[rank], hostOf[rank] = hosts, host
	}
	if len(ranks) != 3 || ranks[0] == "" || ranks[1] == "" || ranks[2] == "" {
		t.Fatalf("want one line from each of ranks 0, 1 and 2, got %v", ranks)
	}
	want := hostOf[0] + "," + hostOf[1] + "," + hostOf[2]
	for rank, hosts := range ranks {
		if hosts != want {
			t.Errorf("rank %d saw hosts %s, want every rank's own host in rank order: %s", rank, hosts, want)
		}
	}
	seen := map[string]bool{}
	for _, h := range hostOf {
		if !slices.Contains(env.Nodes, h) || seen[h] {
			t.Errorf("ranks ran on %v: want three distinct nodes of %v", hostOf, env.Nodes)
			break
		}
		seen[h] = true
	}
}
