//go:build integration

package slurm_test

import (
	"maps"
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/test/testenv"
)

// TestTopologyPerPartitionOnRealSlurm: a SlurmCluster with tree and block together (Slurm
// 25.05 and later) and a partition on each, rendered by RenderConfig as the operator does:
// slurmctld 26.05 reads the topology.yaml and the PartitionName lines as written, `scontrol
// show topology tree|block` lists each, and each partition places its jobs by its own
// topology. The leaves ({gpu-0,gpu-1}, {gpu-2,gpu-3}) and the NVLink domains ({gpu-1,gpu-2},
// {gpu-0,gpu-3}) cross, so a job inside one leaf is across domains and the other way round:
// `sbatch -p train --switches=1 -N2` lands inside one leaf, `sbatch -p nvl --segment=2 -N2`
// inside one domain, and the partition without a topology takes the tree, the default. Run
// it on the 26.05 test bed (SUNK_SLURM_VERSION=26.05); 24.11 reads no topology.yaml.
func TestTopologyPerPartitionOnRealSlurm(t *testing.T) {
	testenv.SlurmSince(t, "25.05", "reads no topology.yaml")
	sc := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{
		SlurmVersion: sunkv1.SlurmVersion2605,
		Topology: &sunkv1.TopologySpec{
			Tree:  &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS},
			Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{2, 4}},
		},
		Partitions: []sunkv1.PartitionSpec{
			{Name: "train", Topology: sunkv1.TopologyTree, Default: true},
			{Name: "nvl", Topology: sunkv1.TopologyBlock},
			{Name: "any"},
		},
	}}
	sc.Name, sc.Namespace = "topo", "slurm"
	names := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}
	leaves := map[string]string{"gpu-0": leafA, "gpu-1": leafA, "gpu-2": leafB, "gpu-3": leafB}
	domains := map[string]string{"gpu-0": "0", "gpu-1": "1", "gpu-2": "1", "gpu-3": "0"}
	var nodes []render.TopologyNode
	for _, n := range names {
		labels := maps.Clone(awsLabels(leaves[n]))
		labels[clique] = "5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c." + domains[n]
		nodes = append(nodes, render.TopologyNode{Name: n, Labels: labels})
	}
	topo, err := render.RenderTopology(sc.Spec.Topology, nodes)
	must(t, err)
	cfg, err := render.RenderConfig(sc, render.ConfigInputs{Names: clusternames.For(sc, ""), Topology: topo, TopologyYAML: true})
	must(t, err)
	var partitionLines []string
	for _, l := range strings.Split(cfg.Files["slurm.conf"], "\n") {
		if strings.HasPrefix(l, "PartitionName=") {
			partitionLines = append(partitionLines, l)
		}
	}
	y := cfg.Files[render.TopologyYAMLFile]
	if len(partitionLines) != 3 || y == "" {
		t.Fatalf("rendered %d partition lines and topology.yaml %q", len(partitionLines), y)
	}
	p := startPrivateSlurm(t, names, "", "", func(p *privateSlurm) {
		p.topologyYAML = y
		p.partitions = strings.Join(partitionLines, "\n") + "\n"
	})

	// slurmctld has what sunk wrote: every leaf switch and every block with its nodes.
	for name, units := range map[string][]render.TopologyUnit{"tree": topo.Switches, "block": topo.Also.Blocks} {
		out, err := p.Scontrol("show", "topology", name)
		must(t, err)
		kind := map[string]string{"tree": "SwitchName=", "block": "BlockName="}[name]
		for _, u := range units {
			want := kind + u.Name + " "
			if !strings.Contains(out, want) {
				t.Errorf("scontrol show topology %s lacks %s:\n%s", name, u.Name, out)
			} else if u.Nodes != "" && lineField(out, want, "Nodes=") != "Nodes="+u.Nodes {
				t.Errorf("scontrol show topology %s: %s has %s, sunk wrote Nodes=%s:\n%s", name, u.Name, lineField(out, want, "Nodes="), u.Nodes, out)
			}
		}
	}
	for part, want := range map[string]string{"train": "Topology=tree", "nvl": "Topology=block"} {
		if out, err := p.Scontrol("show", "partition", part); err != nil || !strings.Contains(out, want) {
			t.Errorf("scontrol show partition %s lacks %s: %s %v", part, want, out, err)
		}
	}

	inLeaf := map[string]bool{"gpu-[0-1]": true, "gpu-[2-3]": true}
	inDomain := map[string]bool{"gpu-[1-2]": true, "gpu-[0,3]": true}
	for range 3 {
		if got := p.jobNodes(t, "-p", "train", "-N2", "--switches=1"); !inLeaf[got] {
			t.Errorf("sbatch -p train --switches=1 -N2 ran on %s, across leaves", got)
		}
		if got := p.jobNodes(t, "-p", "nvl", "-N2", "--segment=2"); !inDomain[got] {
			t.Errorf("sbatch -p nvl --segment=2 -N2 ran on %s, across NVLink domains", got)
		}
		if got := p.jobNodes(t, "-p", "any", "-N2", "--switches=1"); !inLeaf[got] {
			t.Errorf("sbatch -p any --switches=1 -N2 (the default topology, the tree) ran on %s, across leaves", got)
		}
	}
}

// lineField is the field starting with key on the line of out that contains unit ("" when
// there is none).
func lineField(out, unit, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, unit) {
			continue
		}
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, key) {
				return f
			}
		}
	}
	return ""
}
