// Package privateslurm gives a test a Slurm of its own: a private slurmctld, and the slurmd
// and slurmrestd the test starts, each in mount and UTS namespaces of its own (unshare) over the
// test bed's Slurm root filesystem (hack/slurm-chroot.sh, of SUNK_SLURM_VERSION), on ports of
// their own on the host's network. Tests run one where their configuration (a topology and its
// reconfigures, GRES) would change how the shared test bed serves every other test.
//
// The caller has the root filesystem provisioned (testenv.Slurm), writes slurm.conf from Conf
// and what is its own (ports, nodes, partitions, topology, gres), and starts the daemons.
package privateslurm

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

	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// CtldHost is slurmctld's host name, at 127.0.0.1; Run runs commands as on that host, where
// they reach slurmctld's socket in its /run.
const CtldHost = "privctld"

// Slurm is the directories of one private Slurm, removed when the test ends.
type Slurm struct {
	// Dir holds etc (/etc/slurm with slurm.key), spool (/var/spool: slurmctld and
	// slurmd-<node>), logs (/var/log/slurm and each daemon's output), shared (/shared on every
	// host), run (/run per host) and hosts (/etc/hosts).
	Dir string
	// Etc is a host's own /etc/slurm (OwnEtc); the others share Dir/etc.
	Etc map[string]string
}

// New makes the directories, a random slurm.key and the hosts file naming CtldHost; nothing
// runs yet. When the test fails, it logs the end of every daemon's log.
func New(t testing.TB) *Slurm {
	t.Helper()
	p := &Slurm{Dir: t.TempDir()}
	for _, d := range []string{"etc", "spool/slurmctld", "logs", "shared", "run"} {
		must(t, os.MkdirAll(filepath.Join(p.Dir, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(p.Dir, "shared"), 0o1777))
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	must(t, os.WriteFile(filepath.Join(p.Dir, "etc", "slurm.key"), key, 0o600))
	must(t, os.WriteFile(filepath.Join(p.Dir, "hosts"), []byte("127.0.0.1 localhost "+CtldHost+"\n"), 0o644))
	// Cleanups run last registered first: this one after the daemons have stopped (their logs
	// are whole) and before t.TempDir goes.
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(p.Dir, "logs", "*"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s (last 3000 bytes)\n%s", filepath.Base(l), b[max(0, len(b)-3000):])
			}
		}
	})
	return p
}

// Conf is the part of slurm.conf every private Slurm shares: cluster, slurmctld on CtldHost,
// root as SlurmUser, auth/slurm with the key New wrote, and the paths the root filesystem's
// mounts give. Without SlurmctldPort, partitions or nodes: those are the caller's.
func (p *Slurm) Conf(cluster string) string {
	return "ClusterName=" + cluster + "\nSlurmctldHost=" + CtldHost + `(127.0.0.1)
SlurmUser=root
AuthType=auth/slurm
CredType=cred/slurm
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd-%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
`
}

// WriteEtc writes name in the shared /etc/slurm by a rename, so that a slurmctld reading it
// meanwhile (a reconfigure) reads the old file or the new one, never a part.
func (p *Slurm) WriteEtc(t testing.TB, name, content string) {
	t.Helper()
	f := filepath.Join(p.Dir, "etc", name)
	must(t, os.WriteFile(f+".tmp", []byte(content), 0o644))
	must(t, os.Rename(f+".tmp", f))
}

// OwnEtc gives host an /etc/slurm of its own (Dir/etc-<host>) holding the key, for files only
// it reads (a node's gres.conf), and returns its path.
func (p *Slurm) OwnEtc(t testing.TB, host string) string {
	t.Helper()
	etc := filepath.Join(p.Dir, "etc-"+host)
	must(t, os.MkdirAll(etc, 0o755))
	key, err := os.ReadFile(filepath.Join(p.Dir, "etc", "slurm.key"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(etc, "slurm.key"), key, 0o600))
	if p.Etc == nil {
		p.Etc = map[string]string{}
	}
	p.Etc[host] = etc
	return etc
}

// AddHost names host addr in the hosts file every daemon reads.
func (p *Slurm) AddHost(t testing.TB, host, addr string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(p.Dir, "hosts"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "%s %s\n", addr, host)
	must(t, err)
	must(t, f.Close())
}

// NodeSpool makes node's slurmd spool directory (SlurmdSpoolDir of Conf).
func (p *Slurm) NodeSpool(t testing.TB, node string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(p.Dir, "spool", "slurmd-"+node), 0o755))
}

// StartCtld starts slurmctld (-i: ignoring state of an earlier run) and waits until it answers
// a ping.
func (p *Slurm) StartCtld(t testing.TB) {
	t.Helper()
	p.Start(t, CtldHost, "slurmctld", "-D", "-i")
	wait.For(t, "private slurmctld", 30*time.Second, 200*time.Millisecond, func() error {
		_, err := p.Scontrol("ping")
		return err
	})
}

// WaitIdle waits until sinfo lists n nodes idle.
func (p *Slurm) WaitIdle(t testing.TB, n int) {
	t.Helper()
	wait.For(t, "private nodes idle", 60*time.Second, 500*time.Millisecond, func() error {
		out, err := p.Run("sinfo", "-h", "-N", "-o", "%N %t")
		if err != nil || strings.Count(out+"\n", " idle\n") < n {
			return fmt.Errorf("sinfo: %s %v", out, err)
		}
		return nil
	})
}

// command runs args as on host, in mount and UTS namespaces of its own.
func (p *Slurm) command(host string, args ...string) *exec.Cmd {
	etc := filepath.Join(p.Dir, "etc")
	if e, ok := p.Etc[host]; ok {
		etc = e
	}
	all := append([]string{"--mount", "--uts", "--propagation", "private",
		filepath.Join(testenv.RepoRoot(), "hack", "slurm-chroot.sh"), p.Dir, host, etc, filepath.Join(p.Dir, "spool")}, args...)
	return exec.Command("unshare", all...)
}

// Command is the command line that runs args as on host (for pkg/nodewatch.Run, which kills
// its process group).
func (p *Slurm) Command(host string, args ...string) []string {
	return p.command(host, args...).Args
}

// Start runs a daemon as on host, its output in logs/<host>.out. unshare, the chroot script and
// chroot exec into it, so its process is the daemon, killed when the test ends.
func (p *Slurm) Start(t testing.TB, host string, args ...string) {
	t.Helper()
	testenv.StartLogged(t, p.command(host, args...), filepath.Join(p.Dir, "logs", host+".out"))
}

// Run runs a command as on CtldHost and returns its output, trimmed.
func (p *Slurm) Run(args ...string) (string, error) {
	out, err := p.command(CtldHost, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Scontrol runs scontrol as on CtldHost.
func (p *Slurm) Scontrol(args ...string) (string, error) {
	return p.Run(append([]string{"scontrol"}, args...)...)
}

// FreePorts are n ports of 127.0.0.1 where nothing listens (they did a moment ago), all
// different.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
