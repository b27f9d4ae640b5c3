//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/registry"
	"sunk.dev/sunk/test/testenv"
)

// moreContainers is the rest of TestContainersForJobs on one cluster, on the NodeSet ctr (two
// pods, containers, the credentials of r.addr): the node's credentials, sbatch,
// --container-name, a shared volume, bad input, and two jobs pulling one image at once. Every
// command runs as nobody from the login pod; each bad input must fail its step in one line and
// leave the nodes idle (not drained).
func (e *operatorEnv) moreContainers(t *testing.T, login, ctr string, r ctrRegistries) {
	node0, node1 := ctr+"-0", ctr+"-1"
	runAsUser := func(cmd string) (string, error) {
		return e.sh(t, login, "login", testenv.AsUser(cmd+" 2>&1"))
	}
	// oneLine: the step failed, and the helper's (or the plugin's) error is one line.
	oneLine := func(what, out string, err error, want string) {
		t.Helper()
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "sunk-container:") {
				lines = append(lines, l)
			}
		}
		if err == nil || len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("%s: err = %v, output %q; want the step failed with one line containing %q", what, err, out, want)
		}
	}

	// The node's credentials: root's alone in slurmd's container, unreadable by a job.
	auth := render.RegistryAuthDir + "/00-registry-" + strings.TrimPrefix(ctr, "ctr-") + ".json"
	if out, err := e.sh(t, node0, "slurmd", "stat -L -c '%a %U' "+auth); err != nil || strings.TrimSpace(out) != "400 root" {
		t.Errorf("%s in %s: %v %q, want mode 400 and owner root", auth, node0, err, out)
	}
	if out, err := runAsUser("srun -p ctr -w " + node0 + " -D /tmp cat " + auth); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("a job reading the node's registry credentials: err = %v, output %q; want Permission denied", err, out)
	}
	// A registry the credentials do not name: refused in one line, no credentials sent there.
	out, err := runAsUser("srun -p ctr -w " + node0 + " -D /tmp --container-image=" + r.other + "/test/os:1 true")
	oneLine("a registry without the node's credentials", out, err, "sunk-container: --container-image: "+r.other+"/test/os:1: reading manifest 1 in "+r.other+"/test/os: authentication required")

	// sbatch: #SBATCH --container-image runs the batch script in the image, as the user.
	script := "#!/bin/sh\n#SBATCH --container-image=" + r.image + "\ncat /etc/os-release\nid -u\n"
	out = e.batch(t, login, node0, script)
	uid := strings.TrimSpace(e.mustSh(t, login, "login", "id -u nobody"))
	if !strings.Contains(out, `PRETTY_NAME="sunk test image 1"`) || !strings.Contains(out, "\n"+uid+"\n") {
		t.Errorf("#SBATCH --container-image wrote %q, want the image's os-release and uid %s", out, uid)
	}
	// --container-name: step 1's file in step 2 of the same job; not in an unnamed container.
	script = "#!/bin/sh\n" +
		"srun --container-name=keep --container-image=" + r.image + " sh -c 'echo kept-$SLURM_STEP_ID > /scratch/f'\n" +
		"srun --container-name=keep cat /scratch/f\n" +
		"srun --container-image=" + r.image + " cat /scratch/f 2>/dev/null || echo unnamed-is-fresh\n"
	if out := e.batch(t, login, node0, script); !strings.Contains(out, "kept-0\n") || !strings.Contains(out, "unnamed-is-fresh") {
		t.Errorf("a batch job's steps with --container-name wrote %q, want step 0's file in step 1 (kept-0) and not in an unnamed container", out)
	}

	// A shared volume's file, read-only, in the container of a step on the other node.
	stamp := fmt.Sprintf("shared-%d", time.Now().UnixNano())
	// The provisioner's directory is root's alone: the users of a real cluster's volume may enter it.
	e.mustSh(t, login, "login", "chmod 755 /shared && echo "+stamp+" > /shared/ctr-file && chmod 644 /shared/ctr-file")
	out, err = runAsUser("srun -p ctr -w " + node1 + " -D /tmp --container-image=" + r.image + " --container-mounts=/shared:/data:ro sh -c 'cat /data/ctr-file; touch /data/x || echo refused'")
	if err != nil || !strings.Contains(out, stamp+"\n") || !strings.Contains(out, "refused") {
		t.Errorf("--container-mounts of the shared volume: %v %q, want %s and a refused write", err, out, stamp)
	}

	// MPI across the two pods: srun --mpi=pmi2 tasks in containers exchange their host names
	// through slurmstepd (test/e2e/pmi2probe over PMI_FD), and see slurmd's spool directory.
	e.pmi2Across(t, login, r.image, node0, node1)

	// Bad input: a missing image, a malformed mount (srun refuses it itself), a mount source
	// that does not exist.
	out, err = runAsUser("srun -p ctr -w " + node0 + " -D /tmp --container-image=" + r.addr + "/test/nothing:1 true")
	oneLine("a missing image", out, err, "sunk-container: --container-image: "+r.addr+"/test/nothing:1: ")
	out, err = runAsUser("srun -p ctr -w " + node0 + " -D /tmp --container-image=" + r.image + " --container-mounts=data:/x true")
	oneLine("a malformed mount", out, err, "--container-mounts: ")
	if strings.Contains(out, "job ") {
		t.Errorf("a malformed mount made a job (%q): srun must refuse it before", out)
	}
	out, err = runAsUser("srun -p ctr -w " + node0 + " -D /tmp --container-image=" + r.image + " --container-mounts=/nonexistent:/x true")
	oneLine("a missing mount source", out, err, "sunk-container: --container-mounts: /nonexistent: no such file or directory")
	e.waitIdle(t, login, time.Minute, "the nodes idle after bad input (none drained)", node0, node1)

	// Two jobs pulling one image at once on one node: each blob is fetched once. The test holds
	// the image's digest lock in the pod (the helper's CACHE/locks/digest-HEX) until both jobs
	// have asked the registry for its manifest, so the two pulls do meet there.
	m0, b0 := registry.Requests(t, r.accessLog, "test/twice")
	marker := fmt.Sprintf("/tmp/twice-%d", time.Now().UnixNano())
	lock := render.ContainersDir + "/images/locks/digest-" + strings.TrimPrefix(r.twiceDigest, "sha256:")
	held := make(chan error, 1)
	go func() {
		_, err := e.sh(t, node0, "slurmd", "flock "+lock+" sh -c 'touch "+marker+".held; while [ ! -e "+marker+".release ]; do sleep 0.1; done'")
		held <- err
	}()
	// However the test ends, the lock is let go (a job waiting for it could not end).
	release := func() { _, _ = e.sh(t, node0, "slurmd", "touch "+marker+".release") }
	defer release()
	poll(t, time.Minute, "the test holds "+lock, func() error {
		_, err := e.sh(t, node0, "slurmd", "test -e "+marker+".held")
		return err
	})
	type result struct {
		out string
		err error
	}
	jobs := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := runAsUser(fmt.Sprintf("sh -c 'for i in 1 2; do srun -p ctr -w %s -n1 --mem=32M -D /tmp --container-image=%s/test/twice:1 cat /twice & done; wait'", node0, r.addr))
		jobs <- result{out, err}
	}()
	poll(t, time.Minute, "both jobs asked the registry for test/twice:1", func() error {
		if m, _ := registry.Requests(t, r.accessLog, "test/twice"); m-m0 < 2 {
			return fmt.Errorf("%d manifest GETs", m-m0)
		}
		return nil
	})
	release()
	if err := <-held; err != nil {
		t.Errorf("holding %s: %v", lock, err)
	}
	res := <-jobs
	took := time.Since(start)
	if res.err != nil || strings.Count(res.out, "twice\n") != 2 {
		t.Errorf("two jobs with test/twice:1: %v %q", res.err, res.out)
	}
	m1, b1 := registry.Requests(t, r.accessLog, "test/twice")
	if len(b1) == 0 {
		t.Errorf("no blob of test/twice fetched, says the registry's log")
	}
	for blob, n := range b1 {
		if n-b0[blob] != 1 {
			t.Errorf("blob %s fetched %d times by two jobs pulling one image on one node, want once", blob, n-b0[blob])
		}
	}
	t.Logf("bench: name=two-jobs-one-image manifest_gets=%d blob_gets=%d blobs=%d seconds=%.2f", m1-m0, sum(b1)-sum(b0), len(b1), took.Seconds())
}

// batch runs script with sbatch --wait on node as nobody, its output in /tmp of that node's
// pod, and returns the output.
func (e *operatorEnv) batch(t *testing.T, login, node, script string) string {
	t.Helper()
	name := fmt.Sprintf("/tmp/ctr-batch-%d", time.Now().UnixNano())
	e.mustSh(t, login, "login", fmt.Sprintf("cat > %s.sh <<'EOF'\n%sEOF\nchmod 755 %s.sh", name, script, name))
	if out, err := e.sh(t, login, "login", fmt.Sprintf(testenv.AsUser("sbatch --wait -p ctr -w %s -D /tmp -o %s.out %s.sh 2>&1"), node, name, name)); err != nil {
		t.Errorf("sbatch %s: %v %q", script, err, out)
	}
	out, err := e.sh(t, node, "slurmd", "cat "+name+".out")
	if err != nil {
		t.Errorf("the batch job's output on %s: %v %q", node, err, out)
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// pmi2Across copies test/e2e/pmi2probe (static) to the shared volume and runs it as nobody in
// containers of a two-node srun --mpi=pmi2 step: each rank prints every rank's host name,
// which it has only if slurmstepd's PMI2 exchange (kvs-fence across the nodes) worked.
func (e *operatorEnv) pmi2Across(t *testing.T, login, image, node0, node1 string) {
	t.Helper()
	e.copyPMI2Probe(t, login, "login", "/shared/pmi2probe")
	out, err := e.sh(t, login, "login", testenv.AsUser("srun -p ctr -N2 -n2 --mpi=pmi2 -D /tmp --container-image=")+image+
		" --container-mounts=/shared/pmi2probe:/usr/bin/pmi2probe:ro sh -c 'test -d /var/spool/slurmd && echo spool-$PMI_RANK; pmi2probe' 2>&1")
	t.Logf("srun -N2 -n2 --mpi=pmi2 in containers printed:\n%s", out)
	// Each rank prints every rank's host, in rank order, from the PMI2 key-value space: both the
	// same two pods, in the order Slurm laid the ranks out (its node order is the dynamic
	// nodes' registration order, so either pod may hold rank 0).
	h0, h1 := node0, node1
	if strings.Contains(out, " hosts="+node1+","+node0+"\n") {
		h0, h1 = node1, node0
	}
	hosts := h0 + "," + h1
	for _, want := range []string{"spool-0\n", "spool-1\n",
		"pmi2probe: rank=0 size=2 host=" + h0 + " hosts=" + hosts + "\n", "pmi2probe: rank=1 size=2 host=" + h1 + " hosts=" + hosts + "\n"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("srun -N2 --mpi=pmi2 in containers: %v %q, want %q", err, out, want)
		}
	}
}

// copyPMI2Probe builds test/e2e/pmi2probe (static) and copies it to path in a pod's container.
func (e *operatorEnv) copyPMI2Probe(t *testing.T, pod, container, path string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pmi2probe")
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "sunk.dev/sunk/test/e2e/pmi2probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build pmi2probe: %v\n%s", err, out)
	}
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := e.exec.ExecStdin(ctx, f, e.ns, pod, container, "sh", "-c", "cat > "+path+" && chmod 755 "+path); err != nil {
		t.Fatalf("copying pmi2probe to %s of %s: %v %s", path, pod, err, out)
	}
}
