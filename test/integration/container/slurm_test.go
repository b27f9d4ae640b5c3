//go:build integration

package container_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sunk.dev/sunk/test/registry"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// TestSlurmSteps runs Pyxis's flags through real Slurm 24.11 daemons: a private slurmctld and
// slurmd (testdata/node.sh) in the test bed's cached root filesystem, with the plugin in
// plugstack.conf and the helper pulling from a real registry. It does not use the shared test
// bed: its daemons live in namespaces of their own and end with the test.
func TestSlurmSteps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("a private Slurm node needs root (namespaces, overlayfs, chroot)")
	}
	n := startNode(t)
	const image = "127.0.0.1:5000/test/os:1"
	n.pushImage(t, image)
	plantedLinks(t, n, image)

	// srun: the step's file system is the image's; its user is the job's.
	out := n.user(t, "srun --container-image="+image+" cat /etc/os-release")
	if !strings.Contains(out, `PRETTY_NAME="sunk test image 1"`) || strings.Contains(out, "Debian") {
		t.Errorf("srun --container-image cat /etc/os-release printed %q, want the image's file", out)
	}
	out = n.user(t, "srun --container-image="+image+" sh -c 'id -u; id -g; id -un'")
	if out != "1000\n1000\nalice\n" {
		t.Errorf("id in the container printed %q, want the job's user: 1000, 1000, alice", out)
	}

	// The image's environment: its PATH finds its programs; --container-env keeps the job's
	// value of a name.
	out = n.user(t, "SHARED=job srun --container-image="+image+" sh -c 'tool; echo $FROM_IMAGE $SHARED'")
	if out != "tool-ran\nyes image\n" {
		t.Errorf("the image's environment: printed %q, want tool-ran and \"yes image\"", out)
	}
	out = n.user(t, "SHARED=job srun --container-env=SHARED --container-image="+image+" sh -c 'echo $FROM_IMAGE $SHARED'")
	if out != "yes job\n" {
		t.Errorf("--container-env=SHARED printed %q, want \"yes job\"", out)
	}

	// --container-remap-root: uid 0 inside, mapped from the user's alone; no power over the
	// image's files, which belong to the node's root.
	out = n.user(t, "srun --container-remap-root --container-image="+image+" sh -c 'id -u; cat /proc/self/uid_map; touch /etc/x 2>/dev/null || echo refused'")
	if f := strings.Fields(out); len(f) != 5 || f[0] != "0" || strings.Join(f[1:4], " ") != "0 1000 1" || f[4] != "refused" {
		t.Errorf("--container-remap-root printed %q, want uid 0, the map 0 1000 1 and a refused write to /etc", out)
	}

	// Enroot's REGISTRY#IMAGE form, a read-only host file, the working directory.
	n.write(t, "/home/alice/hostfile", "from the node\n")
	out = n.user(t, "srun --container-image=127.0.0.1:5000#test/os:1 --container-mounts=/home/alice/hostfile:/data/hostfile:ro "+
		"--container-workdir=/data sh -c 'cat hostfile; pwd; echo x >> hostfile 2>&1 || echo refused'")
	if out != "from the node\n/data\nrefused\n" {
		t.Errorf("--container-mounts step printed %q, want the host file, /data and a refused write", out)
	}

	// --container-mount-home: the home directory at its path, so a job started there starts
	// there in the container too. The entrypoint is refused, not ignored.
	out = n.user(t, "cd /home/alice && srun --container-mount-home --container-image="+image+" sh -c 'pwd; cat hostfile'")
	if out != "/home/alice\nfrom the node\n" {
		t.Errorf("--container-mount-home printed %q, want /home/alice and the host file", out)
	}
	// MPI: the tasks of an srun --mpi=pmi2 step talk to slurmstepd from inside their
	// containers (test/e2e/pmi2probe: init, fullinit, kvs-put, kvs-fence, kvs-get of every
	// rank, finalize over PMI_FD), and slurmd's spool directory is there at its path.
	client := filepath.Join(n.dir, "pmi2probe")
	build := exec.Command("go", "build", "-o", client, "sunk.dev/sunk/test/e2e/pmi2probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build pmi2probe: %v\n%s", err, b)
	}
	data, err := os.ReadFile(client)
	must(t, err)
	n.write(t, "/home/alice/pmi2probe", string(data))
	out = n.user(t, "srun -n2 --mpi=pmi2 --container-image="+image+" --container-mounts=/home/alice/pmi2probe:/usr/bin/pmi2probe:ro "+
		"sh -c 'test -d /var/spool/slurmd && echo spool-$PMI_RANK; pmi2probe'")
	for _, want := range []string{"spool-0\n", "spool-1\n", "pmi2probe: rank=0 size=2 host=c1 hosts=c1,c1\n", "pmi2probe: rank=1 size=2 host=c1 hosts=c1,c1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("srun -n2 --mpi=pmi2 in containers printed %q, want %q", out, want)
		}
	}
	// mpi/pmix: the server's directory (PMIX_SERVER_TMPDIR, in slurmd's spool directory) is
	// in the container, and its variables reach the task (PMIx 5 serves its clients over
	// loopback TCP, PMIX_SERVER_URI*: the container shares the node's network).
	out = n.user(t, "srun --mpi=pmix --container-image="+image+" sh -c "+
		"'test -d \"$PMIX_SERVER_TMPDIR\" && echo tmpdir=$PMIX_SERVER_TMPDIR; echo rank=$PMIX_RANK; env | grep ^PMIX_SERVER_URI41='")
	for _, want := range []string{"tmpdir=/var/spool/slurmd/pmix.", "rank=0\n", "PMIX_SERVER_URI41=pmix-server."} {
		if !strings.Contains(out, want) {
			t.Errorf("srun --mpi=pmix in a container printed %q, want %q", out, want)
		}
	}

	// GPUs: a step Slurm gave the GPU (gres/gpu set SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES)
	// gets the node's driver files in its container; a step without GPUs does not.
	probe := "sh -c 'echo gpus=$CUDA_VISIBLE_DEVICES; test -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 && echo has-libcuda; test -e /usr/bin/nvidia-smi && nvidia-smi; true'"
	out = n.user(t, "srun --gres=gpu:1 --container-image="+image+" "+probe)
	if out != "gpus=0\nhas-libcuda\nfake nvidia-smi: driver 550.1\n" {
		t.Errorf("srun --gres=gpu:1 in a container printed %q, want its GPU, libcuda.so.1 and the node's nvidia-smi", out)
	}
	out = n.user(t, "srun --container-image="+image+" "+probe)
	if out != "gpus=\n" {
		t.Errorf("srun without GPUs in a container printed %q, want no GPU and none of the driver's files", out)
	}

	// --container-entrypoint: the image's entrypoint ran once, as the user, before the
	// tasks (two of them here); without the flag it does not run.
	out = n.user(t, "srun -n2 --container-entrypoint --container-image="+image+" sh -c 'cat /scratch/entry'")
	if out != "entry ran as 1000\nentry ran as 1000\n" {
		t.Errorf("srun -n2 --container-entrypoint: each task printed %q, want the entrypoint's one line (twice: one per task)", out)
	}
	out = n.user(t, "srun --container-image="+image+" sh -c 'cat /scratch/entry 2>/dev/null || echo no-entry'")
	if out != "no-entry\n" {
		t.Errorf("srun without --container-entrypoint printed %q, want no-entry", out)
	}

	// --container-name: steps of one job share the container's writable layer.
	n.write(t, "/home/alice/named.sh", "#!/bin/sh\n"+
		"srun --container-name=keep --container-image="+image+" sh -c 'echo kept-$SLURM_STEP_ID > /scratch/f'\n"+
		"srun --container-name=keep cat /scratch/f\n"+
		"srun --container-image="+image+" cat /scratch/f 2>&1 || echo unnamed-is-fresh\n")
	out = n.user(t, "sbatch --wait -o /home/alice/named.out /home/alice/named.sh >/dev/null; cat /home/alice/named.out")
	if !strings.Contains(out, "kept-0\n") || !strings.Contains(out, "unnamed-is-fresh") {
		t.Errorf("a batch job's steps with --container-name printed %q, want step 1's file in step 2 (kept-0) and not in an unnamed container", out)
	}

	// sbatch: #SBATCH --container-image runs the batch script itself in the image.
	n.write(t, "/home/alice/batch.sh", "#!/bin/sh\n#SBATCH --container-image="+image+"\ncat /etc/os-release\nid -u\n")
	out = n.user(t, "sbatch --wait -o /home/alice/batch.out /home/alice/batch.sh >/dev/null; cat /home/alice/batch.out")
	if !strings.Contains(out, `PRETTY_NAME="sunk test image 1"`) || !strings.Contains(out, "\n1000\n") {
		t.Errorf("#SBATCH --container-image printed %q, want the image's os-release and uid 1000", out)
	}

	// The flag on sbatch's command line does the same.
	n.write(t, "/home/alice/plain.sh", "#!/bin/sh\ncat /etc/os-release\n")
	out = n.user(t, "sbatch --wait --container-image="+image+" -o /home/alice/plain.out /home/alice/plain.sh >/dev/null; cat /home/alice/plain.out")
	if !strings.Contains(out, `PRETTY_NAME="sunk test image 1"`) {
		t.Errorf("sbatch --container-image printed %q, want the image's os-release", out)
	}

	// Bad input fails the step with the helper's one line and leaves the node as it was.
	out, err = n.userErr("srun --container-image=" + image + " --container-mounts=data:/x true")
	if err == nil || !strings.Contains(out, "sunk-container: --container-mounts: ") || strings.Contains(out, "job ") {
		t.Errorf("srun with a malformed mount: err = %v, output %q; want srun to refuse it before any job", err, out)
	}
	out, err = n.userErr("srun --container-image=127.0.0.1:5000/test/nothing:1 true")
	if err == nil || !strings.Contains(out, "sunk-container: --container-image: 127.0.0.1:5000/test/nothing:1: ") {
		t.Errorf("srun with a missing image: err = %v, output %q; want a failure naming --container-image", err, out)
	}
	wait.For(t, "the node idle after the steps", 30*time.Second, 200*time.Millisecond, n.idle)
	// Every container is gone once its job ended: unnamed ones when their steps end (a
	// reaper, after srun returned), named ones in the job's epilog.
	wait.For(t, "every job's containers removed", 30*time.Second, 200*time.Millisecond, func() error {
		if left, _ := filepath.Glob(filepath.Join(n.dir, "sunk/containers/*")); len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}

// node is a private Slurm node started by startNode.
type node struct {
	dir string
	pid int // PID 1 of the node's namespaces, as this process sees it
}

// startNode starts testdata/node.sh and waits until slurmd registered idle. Everything it
// started ends with the test.
func startNode(t *testing.T) *node {
	t.Helper()
	cache := testenv.CacheDir()
	rootfs, layer := filepath.Join(cache, "rootfs/slurm"), filepath.Join(cache, "rootfs/slurm-containers")
	for _, d := range []string{rootfs + "/usr/sbin/slurmd", layer + "/usr/bin/skopeo", layer + "/usr/include/slurm/spank.h"} {
		if _, err := os.Lstat(d); err != nil {
			t.Fatalf("%v: run hack/provision.sh rootfs containers", err)
		}
	}
	for _, tool := range []string{"docker-registry", "skopeo", "umoci", "busybox", "cc", "curl", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (a host package of hack/provision.sh)", tool)
		}
	}
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	files := filepath.Join(dir, "files")
	install := func(path string, data []byte, mode os.FileMode) {
		p := filepath.Join(files, path)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, data, mode))
	}
	// The helper and the plugin, built for this node: the plugin against 24.11's spank.h.
	helper := filepath.Join(dir, "sunk-container")
	build := exec.Command("go", "build", "-o", helper, "sunk.dev/sunk/cmd/sunk-container")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command("make", "-s", "-C", filepath.Join(testenv.RepoRoot(), "images/slurm/spank"),
		"SLURM_INCLUDE="+layer+"/usr/include", "OUT="+dir).CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	for src, dst := range map[string]string{helper: "usr/local/bin/sunk-container", filepath.Join(dir, "sunk_container.so"): "usr/local/lib/sunk/spank/sunk_container.so"} {
		data, err := os.ReadFile(src)
		must(t, err)
		install(dst, data, 0o755)
	}
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	install("etc/slurm/slurm.key", key, 0o600)
	install("etc/slurm/slurm.conf", []byte(slurmConf), 0o644)
	install("etc/slurm/cgroup.conf", []byte("CgroupPlugin=autodetect\n"), 0o644)
	install("etc/slurm/plugstack.conf", []byte("required /usr/local/lib/sunk/spank/sunk_container.so arg=--insecure-registry=127.0.0.1:5000 arg=--driver-root=/opt/fake-driver\n"), 0o644)
	// One GPU for Slurm's gres/gpu (a character device stands for it: nothing opens it) and
	// a fake NVIDIA driver (TestGPUDriver's) where the helper is told to find the node's.
	install("etc/slurm/gres.conf", []byte("Name=gpu File=/dev/zero\n"), 0o644)
	fakeDriver(t, filepath.Join(files, "opt/fake-driver"))
	must(t, os.WriteFile(filepath.Join(dir, "registry.yml"), []byte(fmt.Sprintf(
		"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:5000\n", filepath.Join(dir, "registry"))), 0o644))

	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--net", "--propagation", "private",
		"bash", filepath.Join(testenv.RepoRoot(), "test/integration/container/testdata/node.sh"), dir, rootfs, layer)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	n := &node{dir: dir}
	t.Cleanup(func() { // runs once the node has ended (StartLogged's cleanup is registered later)
		if t.Failed() {
			for _, f := range []string{"node.log", "upper/var/log/slurm/slurmd.log", "upper/var/log/slurm/slurmctld.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("%s:\n%s", f, tail(string(b), 40))
			}
		}
	})
	// Killing unshare (--kill-child) ends PID 1 of the node's namespaces, and with it every
	// process of the node: daemons, steps, containers' holders.
	testenv.StartLogged(t, cmd, filepath.Join(dir, "node.log"))
	wait.For(t, "the node's namespaces", 10*time.Second, 50*time.Millisecond, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if err != nil {
			return err
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return fmt.Errorf("unshare has no child yet")
		}
		n.pid, err = strconv.Atoi(f[0])
		return err
	})
	wait.For(t, "slurmd registered idle", 60*time.Second, 200*time.Millisecond, func() error {
		if _, err := os.Stat(filepath.Join(dir, "logs/node.started")); err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "node.log"))
			return fmt.Errorf("node.sh: %s", b)
		}
		out, err := n.run("sinfo", "-h", "-n", "c1", "-o", "%T")
		if strings.TrimSpace(out) != "idle" {
			return fmt.Errorf("sinfo: %q %v", out, err)
		}
		return nil
	})
	return n
}

// slurmConf is the private node's slurm.conf: one node that is also the controller, the
// test bed's plugins (no cgroups needed).
const slurmConf = `ClusterName=ctrtest
SlurmctldHost=c1(10.77.9.1)
SlurmUser=root
AuthType=auth/slurm
CredType=cred/slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000
MessageTimeout=10
GresTypes=gpu
NodeName=c1 NodeAddr=10.77.9.1 CPUs=2 Gres=gpu:1 State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`

// run runs a command as root in the node's root file system and returns its combined output.
func (n *node) run(args ...string) (string, error) {
	return n.runIn("", args...)
}

// runIn is run with stdin. Its output is stdout alone (srun's and slurmstepd's messages go to
// stderr), unless the command failed.
func (n *node) runIn(stdin string, args ...string) (string, error) {
	base := []string{"--target", strconv.Itoa(n.pid), "--mount", "--uts", "--net", "--pid", "--", "chroot", filepath.Join(n.dir, "root")}
	cmd := exec.Command("nsenter", append(base, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// userErr runs a shell script as alice (uid 1000) on the node, in /tmp: a job's working
// directory that the image lacks would make slurmstepd say it went to /tmp instead.
func (n *node) userErr(script string) (string, error) {
	return n.run("setpriv", "--reuid=1000", "--regid=1000", "--init-groups", "--reset-env", "sh", "-c", "cd /tmp && "+script)
}

// user is userErr that fails the test when the script fails.
func (n *node) user(t *testing.T, script string) string {
	t.Helper()
	out, err := n.userErr(script)
	if err != nil {
		t.Errorf("%s: %v\n%s", script, err, out)
	}
	return out
}

// write writes a file of alice's on the node.
func (n *node) write(t *testing.T, path, data string) {
	t.Helper()
	if out, err := n.runIn(data, "setpriv", "--reuid=1000", "--regid=1000", "--init-groups", "sh", "-c", `cat > "$0" && chmod +x "$0"`, path); err != nil {
		t.Fatalf("write %s: %v\n%s", path, err, out)
	}
}

// pushImage builds the test image (registry.BusyboxRootFS, plus a directory anyone may write and a user of
// the image's own at uid 1000) and pushes it to the node's registry.
func (n *node) pushImage(t *testing.T, ref string) {
	t.Helper()
	rootfs := registry.BusyboxRootFS(t, n.dir)
	must(t, os.MkdirAll(filepath.Join(rootfs, "scratch"), 0o777))
	must(t, os.Chmod(filepath.Join(rootfs, "scratch"), 0o777|os.ModeSticky))
	must(t, os.WriteFile(filepath.Join(rootfs, "etc/passwd"), []byte("root:x:0:0:root:/:/bin/sh\nimageuser:x:1000:1000::/:/bin/sh\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(rootfs, "etc/group"), []byte("root:x:0:\nimageuser:x:1000:\n"), 0o644))
	// Commands in /usr/bin as well: a job's PATH may not have /bin (merged-/usr systems).
	must(t, os.MkdirAll(filepath.Join(rootfs, "usr/bin"), 0o755))
	for _, a := range []string{"sh", "cat", "id", "touch", "grep", "pwd", "echo"} {
		_ = os.Symlink("busybox", filepath.Join(rootfs, "bin", a))
		must(t, os.Symlink("../../bin/busybox", filepath.Join(rootfs, "usr/bin", a)))
	}
	// A program only the image's PATH finds, as in images that install under /opt.
	must(t, os.MkdirAll(filepath.Join(rootfs, "opt/tool/bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(rootfs, "opt/tool/bin/tool"), []byte("#!/bin/sh\necho tool-ran\n"), 0o755))
	layout := filepath.Join(n.dir, "layout")
	wait.For(t, "the node's registry", 30*time.Second, 100*time.Millisecond, func() error {
		out, err := exec.Command("nsenter", "--target", strconv.Itoa(n.pid), "--net", "curl", "-sf", "http://127.0.0.1:5000/v2/").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	// An entrypoint, run only with --container-entrypoint: it leaves a file for the tasks.
	must(t, os.WriteFile(filepath.Join(rootfs, "opt/tool/bin/entry"), []byte("#!/bin/sh\necho \"entry ran as $(id -u)\" >> /scratch/entry\n"), 0o755))
	registry.PushConfig(t, "", layout, rootfs, ref, []string{"--config.env=PATH=/opt/tool/bin:/usr/bin:/bin",
		"--config.env=FROM_IMAGE=yes", "--config.env=SHARED=image", "--config.entrypoint=entry"},
		"nsenter", "--target", strconv.Itoa(n.pid), "--net")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
