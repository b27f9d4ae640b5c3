//go:build integration

package slurm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/privateslurm"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// The topology tests run their own slurmctld and five static slurmd (test/privateslurm): a
// topology plugin and its reconfigures would change how the shared test bed places every other
// test's jobs. The topology.conf and the TopologyPlugin are sunk's renderings; slurm.conf is
// the least a slurmctld with real nodes needs.

// privateSlurm is one private Slurm and how this package's tests configure it.
type privateSlurm struct {
	*privateslurm.Slurm
	ctldPort string // set by startPrivateSlurmConfigless
	// topologyYAML, when set, is written as topology.yaml instead of topology.conf, and
	// partitions replace the one partition "all" (Slurm 25.05 and later).
	topologyYAML, partitions string
	// extraConf is more of slurm.conf (MaxNodeCount for dynamic nodes).
	extraConf string
}

// newPrivateSlurm makes the directories and the key of a private Slurm in the root filesystem
// of the test bed (SUNK_SLURM_VERSION's); nothing runs yet.
func newPrivateSlurm(t *testing.T) *privateSlurm {
	t.Helper()
	testenv.Slurm(t) // the root filesystem, provisioned with the test bed
	return &privateSlurm{Slurm: privateslurm.New(t)}
}

// startPrivateSlurm starts slurmctld with sunk's topology (plugin, topology.conf) and a static
// slurmd per node, and waits until they are idle.
func startPrivateSlurm(t *testing.T, nodes []string, plugin, topologyConf string, opts ...func(*privateSlurm)) *privateSlurm {
	t.Helper()
	p := newPrivateSlurm(t)
	for _, o := range opts {
		o(p)
	}
	ports := privateslurm.FreePorts(t, 1+len(nodes))
	var nodeLines []string
	for i, n := range nodes {
		addr := fmt.Sprintf("127.0.0.%d", 10+i)
		p.AddHost(t, n, addr)
		p.NodeSpool(t, n)
		nodeLines = append(nodeLines, fmt.Sprintf("NodeName=%s NodeAddr=%s Port=%d CPUs=1 RealMemory=100", n, addr, ports[1+i]))
	}
	p.writeConf(t, plugin, topologyConf, fmt.Sprintf("SlurmctldPort=%d\n%s\n", ports[0], strings.Join(nodeLines, "\n")))
	p.StartCtld(t)
	for _, n := range nodes {
		p.Start(t, n, "slurmd", "-D")
	}
	p.WaitIdle(t, len(nodes))
	return p
}

// writeConf writes slurm.conf (static part, then the node lines kept in extra) and
// topology.conf.
func (p *privateSlurm) writeConf(t *testing.T, plugin, topologyConf, extra string) {
	t.Helper()
	if extra == "" {
		old, err := os.ReadFile(filepath.Join(p.Dir, "etc", "slurm.conf"))
		must(t, err)
		_, extra, _ = strings.Cut(string(old), "# --\n")
	}
	conf := p.Conf("topotest")
	if p.partitions != "" {
		conf += p.partitions
	} else {
		conf += "PartitionName=all Nodes=ALL Default=YES State=UP\n"
	}
	if plugin != "" { // sunk leaves the plugin out while there is no switch or block
		conf += "TopologyPlugin=" + plugin + "\n"
	}
	conf += p.extraConf + "# --\n" + extra
	p.WriteEtc(t, "slurm.conf", conf)
	if p.topologyYAML != "" {
		p.WriteEtc(t, render.TopologyYAMLFile, p.topologyYAML)
		return
	}
	p.WriteEtc(t, "topology.conf", topologyConf)
}

// jobNodes submits a batch job and returns the nodes it ran on once it completed.
func (p *privateSlurm) jobNodes(t *testing.T, args ...string) string {
	t.Helper()
	id, err := p.Run(append([]string{"sbatch", "--parsable", "-o", "/dev/null"}, append(args, "--wrap", "srun true")...)...)
	if err != nil {
		t.Fatalf("sbatch %v: %s", args, id)
	}
	var nodes string
	wait.For(t, "job "+id, 60*time.Second, 300*time.Millisecond, func() error {
		out, err := p.Scontrol("show", "job", id)
		if err != nil || !strings.Contains(out, "JobState=COMPLETED") {
			return fmt.Errorf("job %s: %s", id, out)
		}
		nodes = regexp.MustCompile(`(?m)^\s*NodeList=(\S+)`).FindStringSubmatch(out)[1]
		return nil
	})
	return nodes
}

// waitJob waits until slurmctld shows the job in state (its JobState= field).
func (p *privateSlurm) waitJob(t *testing.T, id, state string) {
	t.Helper()
	wait.For(t, "job "+id+" "+state, 60*time.Second, 200*time.Millisecond, func() error {
		if out, _ := p.Scontrol("show", "job", id); !strings.Contains(out, "JobState="+state+" ") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
}

func (p *privateSlurm) reconfigure(t *testing.T, plugin, topologyConf string) {
	t.Helper()
	p.writeConf(t, plugin, topologyConf, "")
	if out, err := p.Scontrol("reconfigure"); err != nil {
		t.Fatalf("scontrol reconfigure: %s", out)
	}
	wait.For(t, "slurmctld back after reconfigure", 30*time.Second, 300*time.Millisecond, func() error {
		out, err := p.Scontrol("ping")
		if err != nil || !strings.Contains(out, "is UP") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
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
// topologies as rendered, `sbatch --switches=1 -N2` lands inside one leaf, and so does a
// gang-shaped job without --switches beside a busy node, `--segment=2`
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
	out, err := p.Scontrol("show", "topology")
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

	// 2b. Without --switches, as sunk-scheduler asks for a gang (one job of N exclusive nodes,
	// allocated at once through POST /job/allocate, where a --switches wait would turn into a
	// refusal), Slurm's tree plugin still places it on the fewest switches: with gpu-0 busy,
	// leaf B whole, not gpu-[1-2] across two leaves, the best-fit run of consecutive free nodes
	// that Slurm picks without a topology.
	busy, err := p.Run("sbatch", "--parsable", "-o", "/dev/null", "-w", "gpu-0", "--wrap", "sleep 300")
	must(t, err)
	p.waitJob(t, busy, "RUNNING")
	if got := p.jobNodes(t, "-N2", "--exclusive"); got != "gpu-[2-3]" {
		t.Errorf("sbatch -N2 --exclusive (a gang's shape) ran on %s beside busy gpu-0, want leaf B's gpu-[2-3]", got)
	}
	if out, err := p.Run("scancel", busy); err != nil {
		t.Fatalf("scancel %s: %s", busy, out)
	}
	p.waitJob(t, busy, "CANCELLED")

	// 3. A relabel while a job runs: gpu-1 moves to the other leaf, the job finishes.
	id, err := p.Run("sbatch", "--parsable", "-o", "/dev/null", "-w", "gpu-1", "--wrap", "sleep 6")
	must(t, err)
	p.waitJob(t, id, "RUNNING")
	leaves["gpu-1"] = leafB
	topo = renderTree()
	p.reconfigure(t, topo.SlurmPlugin(), topo.Conf)
	out, _ = p.Scontrol("show", "topology")
	if !strings.Contains(out, "SwitchName=nn-0c1d2e3f4a5b6c7d8-sw Level=0 LinkSpeed=1 Nodes=gpu-[1-3]") {
		t.Errorf("after the relabel:\n%s", out)
	}
	p.waitJob(t, id, "COMPLETED")

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
	out, _ = p.Scontrol("show", "topology")
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
		out, err := p.Scontrol("show", "topology")
		if strings.Contains(out, "gpu-") {
			t.Errorf("%s without nodes: scontrol show topology places nodes: %s", empty.Plugin, out)
		}
		t.Logf("%s without nodes: scontrol show topology says %q (%v)", empty.Plugin, out, err)
	}

	// 6. The first block arrives by a reconfigure alone: slurmctld loads the plugin it had
	// not run and places the nodes, and --segment keeps to one block.
	p.reconfigure(t, btopo.SlurmPlugin(), btopo.Conf)
	wait.For(t, "blocks after a start without a plugin", 30*time.Second, 300*time.Millisecond, func() error {
		out, err := p.Scontrol("show", "topology")
		if err != nil || !strings.Contains(out, "BlockName=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.0-blk BlockIndex=0 Nodes=gpu-[0-1] BlockSize=2") {
			return fmt.Errorf("%s %v", out, err)
		}
		return nil
	})
	if got := p.jobNodes(t, "-N2", "--segment=2"); got != "gpu-[0-1]" && got != "gpu-[2-3]" {
		t.Errorf("sbatch --segment=2 -N2 ran on %s, across blocks", got)
	}
}
