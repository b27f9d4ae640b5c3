//go:build integration

package slurm_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/testenv"
)

// TestTopologyYAMLOnRealSlurm: Slurm 25.05 and later read sunk's topology.yaml with a tree
// (the AWS labels of TestTopologyOnRealSlurm) and blocks (GFD cliques) together, each
// partition placing its jobs by its own: `scontrol show topology <name>` lists each as sunk
// wrote it, `sbatch -p tree --switches=1 -N2` lands inside one leaf and `sbatch -p nvlink
// --segment=2 -N2` inside one block. Run it on the 26.05 test bed
// (SUNK_SLURM_VERSION=26.05); 24.11 does not read topology.yaml.
var linkSpeed = regexp.MustCompile(` LinkSpeed=\d+`)

func TestTopologyYAMLOnRealSlurm(t *testing.T) {
	testenv.SlurmSince(t, "25.05", "reads no topology.yaml")
	names := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}
	leaves := map[string]string{"gpu-0": leafA, "gpu-1": leafA, "gpu-2": leafB, "gpu-3": leafB, "gpu-4": ""}
	var treeNodes, blockNodes []render.TopologyNode
	for i, n := range names {
		treeNodes = append(treeNodes, render.TopologyNode{Name: n, Labels: awsLabels(leaves[n])})
		// Cliques of two, crossing the leaves: gpu-1 and gpu-2 share one.
		blockNodes = append(blockNodes, render.TopologyNode{Name: n, Labels: map[string]string{clique: fmt.Sprintf("5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.%d", (i+1)/2)}})
	}
	tree, err := render.RenderTopology(&sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}, treeNodes)
	must(t, err)
	block, err := render.RenderTopology(&sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{2, 4}}}, blockNodes)
	must(t, err)
	empty, err := render.RenderTopology(&sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique}}, nil)
	must(t, err)
	y, err := render.RenderTopologyYAML([]render.NamedTopology{{Name: "tree", Default: true, Topology: tree},
		{Name: "nvlink", Topology: block}, {Name: "new", Topology: empty}})
	must(t, err)
	p := startPrivateSlurm(t, names, "", "", func(p *privateSlurm) {
		p.topologyYAML = y
		p.partitions = "PartitionName=tree Nodes=ALL Default=YES State=UP Topology=tree\n" +
			"PartitionName=nvlink Nodes=ALL State=UP Topology=nvlink\nPartitionName=new Nodes=ALL State=UP Topology=new\n"
	})

	for topo, wants := range map[string][]string{
		"tree": {
			"SwitchName=nn-9a8b7c6d5e4f30211-sw Level=0 Nodes=gpu-[0-1]",
			"SwitchName=nn-0c1d2e3f4a5b6c7d8-sw Level=0 Nodes=gpu-[2-3]",
			"SwitchName=nn-1b2a3c4d5e6f70811-sw Level=2 Nodes=gpu-[0-3] Switches=nn-4f3e2d1c0b0a09182-sw",
			"SwitchName=unknown Level=0 Nodes=gpu-4",
		},
		"nvlink": {
			"BlockName=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.1-blk BlockIndex=0 Nodes=gpu-[1-2] BlockSize=2",
			"BlockName=5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.2-blk BlockIndex=1 Nodes=gpu-[3-4] BlockSize=2",
		},
	} {
		out, err := p.Scontrol("show", "topology", topo)
		must(t, err)
		out = linkSpeed.ReplaceAllString(out, "") // 24.11 says 1, 26.05 0: not sunk's
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("scontrol show topology %s lacks %q:\n%s\ntopology.yaml:\n%s", topo, want, out, y)
			}
		}
	}
	if out, err := p.Scontrol("show", "topology"); err != nil || !strings.Contains(out, "SwitchName=") {
		t.Errorf("scontrol show topology (the default, tree): %s %v", out, err)
	}

	for range 3 {
		if got := p.jobNodes(t, "-p", "tree", "-N2", "--switches=1"); got != "gpu-[0-1]" && got != "gpu-[2-3]" {
			t.Errorf("sbatch -p tree --switches=1 -N2 ran on %s, across leaves", got)
		}
		if got := p.jobNodes(t, "-p", "nvlink", "-N2", "--segment=2"); got != "gpu-[1-2]" && got != "gpu-[3-4]" {
			t.Errorf("sbatch -p nvlink --segment=2 -N2 ran on %s, across blocks", got)
		}
	}
	if got := p.jobNodes(t, "-p", "new", "-N2"); got == "" {
		t.Errorf("sbatch -p new -N2 (a flat topology) ran nowhere")
	}
}
