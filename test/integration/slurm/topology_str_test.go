//go:build integration

package slurm_test

import (
	"fmt"
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

// TestTopologyStrOnRealSlurm: Slurm 25.05 and later place a node by its topology_str, with no
// reconfigure. A dynamic slurmd registering with sunk's Topology=<topology>:<switches> on its
// --conf line lands in its leaf of the topology.yaml slurmctld runs, and a node update with
// the topology_str render.TopologyMoves computes for a relabel moves a node while a job runs
// on it, and the job finishes; a reconfigure with a file that does not list it keeps it there. The update is scontrol's: the private slurmctld has no
// slurmrestd; REST's POST /node sends slurmctld the same update_node message
// (pkg/slurm's TestUpdateNodeTopology shows topology_str in its body). Run it on the 26.05
// test bed (SUNK_SLURM_VERSION=26.05).
func TestTopologyStrOnRealSlurm(t *testing.T) {
	testenv.SlurmSince(t, "25.05", "places no node by topology_str")
	spec := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	names := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
	leaves := map[string]string{"gpu-0": leafA, "gpu-1": leafA, "gpu-2": leafB, "gpu-3": leafB}
	renderTree := func() *render.Topology {
		var nodes []render.TopologyNode
		for n, leaf := range leaves {
			nodes = append(nodes, render.TopologyNode{Name: n, Labels: awsLabels(leaf)})
		}
		topo, err := render.RenderTopology(spec, nodes)
		must(t, err)
		return topo
	}
	running := renderTree()
	y, err := render.RenderTopologyYAML([]render.NamedTopology{{Name: "tree", Default: true, Topology: running}})
	must(t, err)
	p := startPrivateSlurm(t, names, "", "", func(p *privateSlurm) {
		p.topologyYAML = y
		p.partitions = "PartitionName=all Nodes=ALL Default=YES State=UP\n"
		p.extraConf = "MaxNodeCount=8\n"
	})
	leafLine := func(leaf string) string {
		out, err := p.Scontrol("show", "topology", "tree")
		must(t, err)
		m := regexp.MustCompile(`(?m)^SwitchName=` + regexp.QuoteMeta(leaf) + ` .*Nodes=(\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("scontrol show topology tree has no switch %s:\n%s", leaf, out)
		}
		return m[1]
	}
	swA, swB := running.Places["gpu-0"][2], running.Places["gpu-2"][2]

	// 1. A new node registers with its place: in leaf B at once, no reconfigure.
	const dyn = "dyn-0"
	leaves[dyn] = leafB
	place := renderTree().Places[dyn]
	topoStr := render.TopologyStr("tree", place)
	ports := privateslurm.FreePorts(t, 1)
	p.AddHost(t, dyn, "127.0.0.30")
	p.NodeSpool(t, dyn)
	line := fmt.Sprintf("CPUs=1 RealMemory=100 Port=%d Topology=%s", ports[0], topoStr)
	p.Start(t, dyn, "slurmd", "-D", "-Z", "--conf", line)
	wait.For(t, dyn+" registered", 60*time.Second, 500*time.Millisecond, func() error {
		out, err := p.Run("sinfo", "-h", "-n", dyn, "-o", "%t")
		if err != nil || out != "idle" {
			return fmt.Errorf("sinfo: %q %v", out, err)
		}
		return nil
	})
	if got := leafLine(swB); !strings.Contains(got, dyn) {
		t.Errorf("leaf %s has %s after %s registered with Topology=%s", swB, got, dyn, topoStr)
	}
	if got := leafLine(swA); strings.Contains(got, dyn) {
		t.Errorf("leaf %s has %s", swA, got)
	}
	// The file slurmctld runs now knows dyn-0 by its place: the moves below start from here.
	running = renderTree()

	// 2. A relabel while a job runs on the node: dyn-0 moves to leaf A by a node update.
	id, err := p.Run("sbatch", "--parsable", "-o", "/dev/null", "-w", dyn, "--wrap", "sleep 6")
	must(t, err)
	wait.For(t, "job running", 30*time.Second, 200*time.Millisecond, func() error {
		if out, _ := p.Scontrol("show", "job", id); !strings.Contains(out, "JobState=RUNNING") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
	leaves[dyn] = leafA
	moves := render.TopologyMoves("tree", running, renderTree())
	if len(moves) != 1 || moves[0].Node != dyn {
		t.Fatalf("moves %v, want %s's", moves, dyn)
	}
	if out, err := p.Scontrol("update", "NodeName="+moves[0].Node, "Topology="+moves[0].TopologyStr); err != nil {
		t.Fatalf("scontrol update NodeName=%s Topology=%s: %s", moves[0].Node, moves[0].TopologyStr, out)
	}
	if got := leafLine(swA); !strings.Contains(got, dyn) {
		t.Errorf("after the move leaf %s has %s, want %s among them", swA, got, dyn)
	}
	if got := leafLine(swB); got != "gpu-[2-3]" {
		t.Errorf("after the move leaf %s has %s, want gpu-[2-3]", swB, got)
	}
	if out, _ := p.Scontrol("show", "node", dyn); !strings.Contains(out, "Topology="+moves[0].TopologyStr) {
		t.Errorf("scontrol show node %s does not say Topology=%s:\n%s", dyn, moves[0].TopologyStr, out)
	}
	wait.For(t, "the running job finishes", 60*time.Second, 300*time.Millisecond, func() error {
		if out, _ := p.Scontrol("show", "job", id); !strings.Contains(out, "JobState=COMPLETED") {
			return fmt.Errorf("%s", out)
		}
		return nil
	})

	// 3. A dynamic node's topology_str outlives the file: a reconfigure with a topology.yaml
	// that does not list dyn-0 leaves it in leaf A (slurmctld keeps a dynamic node's
	// topology_str in its state and applies it over the file: node_mgr.c, "Preserve dynamic
	// topology"). So a node placed by topology_str must be moved by topology_str, and the
	// file must keep every switch or block a node's topology_str names.
	p.reconfigure(t, "", "")
	if got := leafLine(swA); !strings.Contains(got, dyn) {
		t.Errorf("after a reconfigure with the old file leaf %s has %s, want %s still there", swA, got, dyn)
	}

	// Jobs asking for one switch and three nodes now find them in leaf A only.
	got := p.jobNodes(t, "-N3", "--switches=1")
	hostnames, err := p.Scontrol("show", "hostnames", got)
	must(t, err)
	if !strings.Contains("\n"+hostnames+"\n", "\n"+dyn+"\n") {
		t.Errorf("sbatch --switches=1 -N3 ran on %s, not in leaf %s", got, swA)
	}
}
