//go:build integration

package operator

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// privateSlurm is a slurmctld, a slurmrestd and dynamic slurmd of their own, in the Slurm root
// filesystem of the test bed (hack/slurm-chroot.sh) on ports of their own, each daemon in its
// own mount and UTS namespace: a topology and its reconfigures would change how the shared test
// bed places every other test's jobs. The test writes etc/topology.yaml from the operator's
// ConfigMap, as kubelet would. (test/integration/slurm runs the same daemons without REST.)
type privateSlurm struct {
	dir     string
	restURL string
	jwtKey  []byte
}

// startPrivateSlurm starts slurmctld with topologyYAML and slurmrestd, then a dynamic slurmd
// (slurmd -Z, as a compute pod's) per node, and waits until they are idle.
func startPrivateSlurm(t *testing.T, topologyYAML string, nodes []string) *privateSlurm {
	t.Helper()
	p := &privateSlurm{dir: t.TempDir(), jwtKey: make([]byte, 32)}
	for _, d := range []string{"etc", "spool/slurmctld", "logs", "shared", "run"} {
		must(t, os.MkdirAll(filepath.Join(p.dir, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(p.dir, "shared"), 0o1777))
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	_, _ = rand.Read(p.jwtKey)
	must(t, os.WriteFile(filepath.Join(p.dir, "etc", "slurm.key"), key, 0o600))
	must(t, os.WriteFile(filepath.Join(p.dir, "etc", "jwt.key"), p.jwtKey, 0o600))
	t.Cleanup(func() { // runs before the daemons stop
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(p.dir, "logs", "*"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s (last 3000 bytes)\n%s", filepath.Base(l), b[max(0, len(b)-3000):])
			}
		}
	})
	ports := freePorts(t, 2+len(nodes))
	hosts := "127.0.0.1 localhost privctld\n"
	for i, n := range nodes {
		hosts += fmt.Sprintf("127.0.0.%d %s\n", 10+i, n)
		must(t, os.MkdirAll(filepath.Join(p.dir, "spool", "slurmd-"+n), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(p.dir, "hosts"), []byte(hosts), 0o644))
	must(t, os.WriteFile(filepath.Join(p.dir, "etc", "slurm.conf"), []byte(fmt.Sprintf(`ClusterName=privtest
SlurmctldHost=privctld(127.0.0.1)
SlurmctldPort=%d
SlurmUser=root
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd-%%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MaxNodeCount=8
PartitionName=all Nodes=ALL Default=YES State=UP
`, ports[0])), 0o644))
	p.writeTopology(t, topologyYAML)
	p.start(t, "privctld", "slurmctld", "-D", "-i")
	wait.For(t, "private slurmctld", 30*time.Second, 200*time.Millisecond, func() error {
		_, err := p.scontrol("ping")
		return err
	})
	p.restURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p.start(t, "privrestd", "env", "SLURM_JWT=daemon", "slurmrestd", "-u", "slurmrestd", "-g", "slurmrestd",
		"-a", "rest_auth/jwt", "-s", "openapi/slurmctld", strings.TrimPrefix(p.restURL, "http://"))
	for i, n := range nodes {
		p.start(t, n, "slurmd", "-D", "-Z", "--conf", fmt.Sprintf("CPUs=1 RealMemory=100 Port=%d", ports[2+i]))
	}
	wait.For(t, "private nodes idle", 60*time.Second, 500*time.Millisecond, func() error {
		out, err := p.run("sinfo", "-h", "-N", "-o", "%N %t")
		if err != nil || strings.Count(out+"\n", " idle\n") < len(nodes) {
			return fmt.Errorf("sinfo: %s %v", out, err)
		}
		return nil
	})
	return p
}

// client is a REST client of slurmrestd, as root, in the newest data version.
func (p *privateSlurm) client(t *testing.T) slurm.Client {
	t.Helper()
	src, err := slurm.NewJWTSource("root", p.jwtKey, slurm.WithLifetime(time.Hour))
	must(t, err)
	c, err := slurm.New(slurm.Config{URL: p.restURL, APIVersion: slurm.Versions()[len(slurm.Versions())-1], Tokens: src})
	must(t, err)
	return c
}

func (p *privateSlurm) writeTopology(t *testing.T, topologyYAML string) {
	t.Helper()
	f := filepath.Join(p.dir, "etc", "topology.yaml")
	must(t, os.WriteFile(f+".tmp", []byte(topologyYAML), 0o644))
	must(t, os.Rename(f+".tmp", f))
}

func (p *privateSlurm) chroot(host string, args ...string) *exec.Cmd {
	all := append([]string{"--mount", "--uts", "--propagation", "private",
		filepath.Join(testenv.RepoRoot(), "hack", "slurm-chroot.sh"), p.dir, host, filepath.Join(p.dir, "etc"), filepath.Join(p.dir, "spool")}, args...)
	return exec.Command("unshare", all...)
}

// start runs a daemon, stopped when the test ends.
func (p *privateSlurm) start(t *testing.T, host string, args ...string) {
	t.Helper()
	cmd := p.chroot(host, args...)
	log, err := os.Create(filepath.Join(p.dir, "logs", host+".out"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
}

func (p *privateSlurm) run(args ...string) (string, error) {
	out, err := p.chroot("privctld", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *privateSlurm) scontrol(args ...string) (string, error) {
	return p.run(append([]string{"scontrol"}, args...)...)
}

func freePorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
