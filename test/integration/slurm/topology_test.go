//go:build integration

package slurm_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// The topology tests run their own slurmctld and five static slurmd in the test bed's Slurm
// root filesystem (hack/slurm-chroot.sh), on ports of their own: a topology plugin and its
// reconfigures would change how the shared test bed places every other test's jobs. The
// topology.conf and the TopologyPlugin are sunk's renderings; slurm.conf is the least a
// slurmctld with real nodes needs.

// privateSlurm is one slurmctld and its nodes, each its own process in its own mount and UTS
// namespace, on the host's network.
type privateSlurm struct {
	dir      string
	nodes    []string
	ctldPort string            // set by startPrivateSlurmConfigless
	etc      map[string]string // a host's own /etc/slurm, else the shared dir/etc
	// topologyYAML, when set, is written as topology.yaml instead of topology.conf, and
	// partitions replace the one partition "all" (Slurm 25.05 and later).
	topologyYAML, partitions string
	// extraConf is more of slurm.conf (MaxNodeCount for dynamic nodes).
	extraConf string
}

// newPrivateSlurm makes the directories and the key of a private Slurm; nothing runs yet.
func newPrivateSlurm(t *testing.T) *privateSlurm {
	t.Helper()
	testenv.Slurm(t) // the root filesystem, provisioned with the test bed
	p := &privateSlurm{dir: t.TempDir()}
	for _, d := range []string{"etc", "spool/slurmctld", "logs", "shared", "run"} {
		must(t, os.MkdirAll(filepath.Join(p.dir, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(p.dir, "shared"), 0o1777))
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	must(t, os.WriteFile(filepath.Join(p.dir, "etc", "slurm.key"), key, 0o600))
	t.Cleanup(func() { // runs before the daemons stop and t.TempDir goes
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(p.dir, "logs", "*"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s (last 3000 bytes)\n%s", filepath.Base(l), b[max(0, len(b)-3000):])
			}
		}
	})
	return p
}

func startPrivateSlurm(t *testing.T, nodes []string, plugin, topologyConf string, opts ...func(*privateSlurm)) *privateSlurm {
	t.Helper()
	p := newPrivateSlurm(t)
	p.nodes = nodes
	for _, o := range opts {
		o(p)
	}
	ports := freePorts(t, 1+len(nodes))
	hosts := "127.0.0.1 localhost topoctld\n"
	var nodeLines []string
	for i, n := range nodes {
		addr := fmt.Sprintf("127.0.0.%d", 10+i)
		hosts += addr + " " + n + "\n"
		nodeLines = append(nodeLines, fmt.Sprintf("NodeName=%s NodeAddr=%s Port=%d CPUs=1 RealMemory=100", n, addr, ports[1+i]))
		must(t, os.MkdirAll(filepath.Join(p.dir, "spool", "slurmd-"+n), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(p.dir, "hosts"), []byte(hosts), 0o644))
	p.writeConf(t, plugin, topologyConf, fmt.Sprintf("SlurmctldPort=%d\n%s\n", ports[0], strings.Join(nodeLines, "\n")))
	p.start(t, "topoctld", "slurmctld", "-D", "-i")
	wait.For(t, "private slurmctld", 30*time.Second, 200*time.Millisecond, func() error {
		_, err := p.scontrol("ping")
		return err
	})
	for _, n := range nodes {
		p.start(t, n, "slurmd", "-D")
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

// writeConf writes slurm.conf (static part, then the node lines kept in extra) and
// topology.conf.
func (p *privateSlurm) writeConf(t *testing.T, plugin, topologyConf, extra string) {
	t.Helper()
	if extra == "" {
		old, err := os.ReadFile(filepath.Join(p.dir, "etc", "slurm.conf"))
		must(t, err)
		_, extra, _ = strings.Cut(string(old), "# --\n")
	}
	conf := `ClusterName=topotest
SlurmctldHost=topoctld(127.0.0.1)
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
	if p.partitions != "" {
		conf += p.partitions
	} else {
		conf += "PartitionName=all Nodes=ALL Default=YES State=UP\n"
	}
	if plugin != "" { // sunk leaves the plugin out while there is no switch or block
		conf += "TopologyPlugin=" + plugin + "\n"
	}
	conf += p.extraConf + "# --\n" + extra
	must(t, os.WriteFile(filepath.Join(p.dir, "etc", "slurm.conf"), []byte(conf), 0o644))
	if p.topologyYAML != "" {
		must(t, os.WriteFile(filepath.Join(p.dir, "etc", render.TopologyYAMLFile), []byte(p.topologyYAML), 0o644))
		return
	}
	must(t, os.WriteFile(filepath.Join(p.dir, "etc", "topology.conf"), []byte(topologyConf), 0o644))
}

func (p *privateSlurm) chroot(host string, args ...string) *exec.Cmd {
	etc := filepath.Join(p.dir, "etc")
	if e, ok := p.etc[host]; ok {
		etc = e
	}
	all := append([]string{"--mount", "--uts", "--propagation", "private",
		filepath.Join(testenv.RepoRoot(), "hack", "slurm-chroot.sh"), p.dir, host, etc, filepath.Join(p.dir, "spool")}, args...)
	return exec.Command("unshare", all...)
}

// start runs a daemon; unshare, the chroot script and chroot exec into it, so its process
// is the daemon, stopped when the test ends.
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
	out, err := p.chroot("topoctld", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *privateSlurm) scontrol(args ...string) (string, error) {
	return p.run(append([]string{"scontrol"}, args...)...)
}

// jobNodes submits a batch job and returns the nodes it ran on once it completed.
func (p *privateSlurm) jobNodes(t *testing.T, args ...string) string {
	t.Helper()
	id, err := p.run(append([]string{"sbatch", "--parsable", "-o", "/dev/null"}, append(args, "--wrap", "srun true")...)...)
	if err != nil {
		t.Fatalf("sbatch %v: %s", args, id)
	}
	var nodes string
	wait.For(t, "job "+id, 60*time.Second, 300*time.Millisecond, func() error {
		out, err := p.scontrol("show", "job", id)
		if err != nil || !strings.Contains(out, "JobState=COMPLETED") {
			return fmt.Errorf("job %s: %s", id, out)
		}
		nodes = regexp.MustCompile(`(?m)^\s*NodeList=(\S+)`).FindStringSubmatch(out)[1]
		return nil
	})
	return nodes
}

func (p *privateSlurm) reconfigure(t *testing.T, plugin, topologyConf string) {
	t.Helper()
	p.writeConf(t, plugin, topologyConf, "")
	if out, err := p.scontrol("reconfigure"); err != nil {
		t.Fatalf("scontrol reconfigure: %s", out)
	}
	wait.For(t, "slurmctld back after reconfigure", 30*time.Second, 300*time.Millisecond, func() error {
		out, err := p.scontrol("ping")
		if err != nil || !strings.Contains(out, "is UP") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
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

// Real label values: AWS network nodes (ids ending in a digit) and GFD cliques.
const (
	awsL1, awsL2, awsL3 = "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3"
	leafA, leafB        = "nn-9a8b7c6d5e4f30211", "nn-0c1d2e3f4a5b6c7d8"
	clique              = "nvidia.com/gpu.clique"
)

func awsLabels(leaf string) map[string]string {
	if leaf == "" {
		return map[string]string{"kubernetes.io/arch": "amd64"}
	}
	return map[string]string{awsL1: "nn-1b2a3c4d5e6f70811", awsL2: "nn-4f3e2d1c0b0a09182", awsL3: leaf}
}

// TestTopologyOnRealSlurm: slurmctld (24.11 and 26.05) reads sunk's tree and block
// topologies as rendered, `sbatch --switches=1 -N2` lands inside one leaf, `--segment=2`
// inside one block, a relabel reaches slurmctld by a reconfigure while a job runs and the
// job finishes, the plugin changes from tree to block without a restart, slurmctld runs
// with the configuration of a cluster without nodes (no plugin), and the first block
// loads the plugin by a reconfigure.
func TestTopologyOnRealSlurm(t *testing.T) {
	names := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}
	leaves := map[string]string{"gpu-0": leafA, "gpu-1": leafA, "gpu-2": leafB, "gpu-3": leafB, "gpu-4": ""}
	tree := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	renderTree := func() *render.Topology {
		var nodes []render.TopologyNode
		for _, n := range names {
			nodes = append(nodes, render.TopologyNode{Name: n, Labels: awsLabels(leaves[n])})
		}
		topo, err := render.RenderTopology(tree, nodes)
		must(t, err)
		return topo
	}
	topo := renderTree()
	p := startPrivateSlurm(t, names, topo.SlurmPlugin(), topo.Conf)

	// 1. slurmctld lists the switches sunk wrote, by the names it wrote.
	out, err := p.scontrol("show", "topology")
	must(t, err)
	for _, want := range []string{
		"SwitchName=nn-9a8b7c6d5e4f30211-sw Level=0 LinkSpeed=1 Nodes=gpu-[0-1]",
		"SwitchName=nn-0c1d2e3f4a5b6c7d8-sw Level=0 LinkSpeed=1 Nodes=gpu-[2-3]",
		"SwitchName=nn-4f3e2d1c0b0a09182-sw Level=1 LinkSpeed=1 Nodes=gpu-[0-3] Switches=nn-0c1d2e3f4a5b6c7d8-sw,nn-9a8b7c6d5e4f30211-sw",
		"SwitchName=nn-1b2a3c4d5e6f70811-sw Level=2 LinkSpeed=1 Nodes=gpu-[0-3] Switches=nn-4f3e2d1c0b0a09182-sw",
		"SwitchName=unknown Level=0 LinkSpeed=1 Nodes=gpu-4",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scontrol show topology lacks %q:\n%s\ntopology.conf:\n%s", want, out, topo.Conf)
		}
	}

	// 2. Two-node jobs asking for one switch land inside one leaf.
	for range 3 {
		if got := p.jobNodes(t, "-N2", "--switches=1"); got != "gpu-[0-1]" && got != "gpu-[2-3]" {
			t.Errorf("sbatch --switches=1 -N2 ran on %s, across leaves", got)
		}
	}

	// 3. A relabel while a job runs: gpu-1 moves to the other leaf, the job finishes.
	id, err := p.run("sbatch", "--parsable", "-o", "/dev/null", "-w", "gpu-1", "--wrap", "sleep 6")
	must(t, err)
	wait.For(t, "job running", 30*time.Second, 200*time.Millisecond, func() error {
		if out, _ := p.scontrol("show", "job", id); !strings.Contains(out, "JobState=RUNNING") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	leaves["gpu-1"] = leafB
	topo = renderTree()
	p.reconfigure(t, topo.SlurmPlugin(), topo.Conf)
	out, _ = p.scontrol("show", "topology")
	if !strings.Contains(out, "SwitchName=nn-0c1d2e3f4a5b6c7d8-sw Level=0 LinkSpeed=1 Nodes=gpu-[1-3]") {
		t.Errorf("after the relabel:\n%s", out)
	}
	wait.For(t, "the running job finishes", 60*time.Second, 300*time.Millisecond, func() error {
		if out, _ := p.scontrol("show", "job", id); !strings.Contains(out, "JobState=COMPLETED") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})

	// 4. Blocks, by a reconfigure: gpu-4's block of one is below the base size 2, so sunk
	// leaves it out rather than let slurmctld stop on it.
	block := &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{2, 4}}}
	var nodes []render.TopologyNode
	for i, n := range names {
		nodes = append(nodes, render.TopologyNode{Name: n, Labels: map[string]string{clique: fmt.Sprintf("5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.%d", i/2)}})
	}
	btopo, err := render.RenderTopology(block, nodes)
	must(t, err)
	if btopo.Excluded != 1 {
		t.Errorf("excluded %d nodes, want gpu-4:\n%s", btopo.Excluded, btopo.Conf)
	}
	p.reconfigure(t, btopo.SlurmPlugin(), btopo.Conf)
	out, _ = p.scontrol("show", "topology")
	for _, want := range []string{
		"BlockName=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.0-blk BlockIndex=0 Nodes=gpu-[0-1] BlockSize=2",
		"BlockName=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.1-blk BlockIndex=1 Nodes=gpu-[2-3] BlockSize=2",
		"AggregatedBlock=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.0-blk,5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.1-blk BlockIndex=2 Nodes=gpu-[0-3] BlockSize=4",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scontrol show topology lacks %q:\n%s\ntopology.conf:\n%s", want, out, btopo.Conf)
		}
	}
	for range 3 {
		if got := p.jobNodes(t, "-N2", "--segment=2"); got != "gpu-[0-1]" && got != "gpu-[2-3]" {
			t.Errorf("sbatch --segment=2 -N2 ran on %s, across blocks", got)
		}
	}

	// 5. A new cluster, before any compute pod is Ready, renders a topology without nodes,
	// and slurm.conf without a TopologyPlugin: slurmctld 26.05 stops on a plugin with no
	// switch or block. slurmctld runs on (reconfigure waits for it to answer again) and
	// places nothing.
	for _, spec := range []*sunkv1.TopologySpec{block, tree} {
		empty, err := render.RenderTopology(spec, nil)
		must(t, err)
		if empty.SlurmPlugin() != "" {
			t.Fatalf("a topology without nodes names the plugin %q", empty.SlurmPlugin())
		}
		p.reconfigure(t, empty.SlurmPlugin(), empty.Conf)
		out, err := p.scontrol("show", "topology")
		if strings.Contains(out, "gpu-") {
			t.Errorf("%s without nodes: scontrol show topology places nodes: %s", empty.Plugin, out)
		}
		t.Logf("%s without nodes: scontrol show topology says %q (%v)", empty.Plugin, out, err)
	}

	// 6. The first block arrives by a reconfigure alone: slurmctld loads the plugin it had
	// not run and places the nodes, and --segment keeps to one block.
	p.reconfigure(t, btopo.SlurmPlugin(), btopo.Conf)
	wait.For(t, "blocks after a start without a plugin", 30*time.Second, 300*time.Millisecond, func() error {
		out, err := p.scontrol("show", "topology")
		if err != nil || !strings.Contains(out, "BlockName=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.0-blk BlockIndex=0 Nodes=gpu-[0-1] BlockSize=2") {
			return fmt.Errorf("%s %v", out, err)
		}
		return nil
	})
	if got := p.jobNodes(t, "-N2", "--segment=2"); got != "gpu-[0-1]" && got != "gpu-[2-3]" {
		t.Errorf("sbatch --segment=2 -N2 ran on %s, across blocks", got)
	}
}
