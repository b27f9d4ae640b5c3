package render

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
)

// TestTopologyYAMLGolden: one topology.yaml with the tree of real AWS network-node labels
// (the default), the blocks of real GFD cliques, and a block topology without nodes yet.
func TestTopologyYAMLGolden(t *testing.T) {
	tree, err := RenderTopology(&sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}, awsNodes())
	if err != nil {
		t.Fatal(err)
	}
	blockSpec := &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{4, 8, 16}}}
	block, err := RenderTopology(blockSpec, cliqueNodes())
	if err != nil {
		t.Fatal(err)
	}
	empty, err := RenderTopology(blockSpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := RenderTopologyYAML([]NamedTopology{{"tree", true, tree}, {"nvlink", false, block}, {"new", false, empty}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "topology.yaml.golden", y)
	// The same switches and blocks as topology.conf, by name.
	for _, u := range append(tree.Switches, block.Blocks...) {
		if !strings.Contains(tree.Conf+block.Conf, "Name="+u.Name+" ") || !strings.Contains(y, `: "`+u.Name+`"`) {
			t.Errorf("%s is not in both files", u.Name)
		}
	}
}

func TestTopologyYAMLRefuses(t *testing.T) {
	topo := &Topology{}
	for name, in := range map[string][]NamedTopology{
		"no default":        {{"a", false, topo}},
		"two defaults":      {{"a", true, topo}, {"b", true, topo}},
		"a name twice":      {{"a", true, topo}, {"a", false, topo}},
		"a name with space": {{"a b", true, topo}},
		"a name with colon": {{"a:b", true, topo}},
		"no rendering":      {{"a", true, nil}},
	} {
		if y, err := RenderTopologyYAML(in); err == nil {
			t.Errorf("%s: rendered\n%s", name, y)
		}
	}
}

// TestRenderConfigTopologyYAML: topology.conf and TopologyPlugin stay the default; the
// explicit input writes the same topology to topology.yaml instead, as the cluster default.
func TestRenderConfigTopologyYAML(t *testing.T) {
	sc := minimal()
	sc.Spec.Topology = &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	topo, err := RenderTopology(sc.Spec.Topology, awsNodes())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	if conf.Files["topology.conf"] != topo.Conf || conf.Files[TopologyYAMLFile] != "" || !strings.Contains(conf.Files["slurm.conf"], "\nTopologyPlugin=topology/tree\n") {
		t.Errorf("default: want topology.conf and TopologyPlugin, no topology.yaml:\n%s", files(conf))
	}
	yml, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), Topology: topo, TopologyYAML: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := RenderTopologyYAML([]NamedTopology{{Name: "tree", Default: true, Topology: topo}})
	if yml.Files[TopologyYAMLFile] != want || yml.Files["topology.conf"] != "" || strings.Contains(yml.Files["slurm.conf"], "TopologyPlugin") {
		t.Errorf("TopologyYAML: want topology.yaml only:\n%s", files(yml))
	}
}

// TestRenderConfigTreeAndBlock: a spec with tree and block together (Slurm 25.05 and later)
// renders both into topology.yaml, the tree as the cluster default, and each partition's
// Topology= names the one it chose; without topology.yaml (24.11) the tree alone.
func TestRenderConfigTreeAndBlock(t *testing.T) {
	sc := minimal()
	sc.Spec.SlurmVersion = sunkv1.SlurmVersion2605
	sc.Spec.Topology = &sunkv1.TopologySpec{
		Tree:  &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS},
		Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{2, 4}},
	}
	sc.Spec.Partitions = []sunkv1.PartitionSpec{
		{Name: "train", Topology: sunkv1.TopologyTree, Default: true},
		{Name: "nvl", Topology: sunkv1.TopologyBlock},
		{Name: "any"},
	}
	// The AWS nodes in NVLink domains of two (gpu-2 and gpu-3 share one across their
	// spines); gpu-4 has no domain, and gpu-5's has no other node up.
	var nodes []TopologyNode
	for i, n := range awsNodes() {
		labels := maps.Clone(n.Labels)
		if i != 4 {
			labels["nvidia.com/gpu.clique"] = fmt.Sprintf("5e7a1c2b-8f3d-4a6e-9b0c-1d2e3f4a5b6c.%d", i/2)
		}
		nodes = append(nodes, TopologyNode{Name: n.Name, Labels: labels})
	}
	topo, err := RenderTopology(sc.Spec.Topology, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Plugin != "topology/tree" || topo.Also == nil || topo.Also.Plugin != "topology/block" {
		t.Fatalf("want the tree with the blocks beside it, got %s and %+v", topo.Plugin, topo.Also)
	}
	// For 24.11 (while the cluster upgrades to 26.05, its configuration is for the oldest
	// release still running): topology.conf with the tree alone, no partition's Topology=.
	old, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	if old.Files["topology.conf"] != topo.Conf || old.Files[TopologyYAMLFile] != "" || strings.Contains(old.Files["slurm.conf"], " Topology=") ||
		!strings.Contains(old.Files["slurm.conf"], "\nTopologyPlugin=topology/tree\n") {
		t.Errorf("24.11: want topology.conf with the tree, no partition's Topology=:\n%s", files(old))
	}
	conf, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), Topology: topo, TopologyYAML: true})
	if err != nil {
		t.Fatal(err)
	}
	slurmConf := conf.Files["slurm.conf"]
	_, parts, _ := strings.Cut(slurmConf, "\n# Partitions\n")
	golden(t, "topology.tree-and-block.golden", "=== topology.yaml\n"+conf.Files[TopologyYAMLFile]+"=== slurm.conf partitions\n"+parts)
	if strings.Contains(slurmConf, "TopologyPlugin") || conf.Files["topology.conf"] != "" {
		t.Errorf("topology.yaml replaces TopologyPlugin and topology.conf:\n%s", files(conf))
	}
	// The file reads back: the tree is the default, with every node of the tree.
	ft, err := ReadTopologyYAML(conf.Files[TopologyYAMLFile])
	if err != nil || ft.Name != "tree" || len(ft.Places) != len(nodes) {
		t.Errorf("read back: %+v %v", ft, err)
	}
	// Without a topology yet (no Ready compute pod), both are in the file, flat.
	empty, err := RenderConfig(sc, ConfigInputs{Names: clusternames.For(sc, ""), TopologyYAML: true})
	if err != nil {
		t.Fatal(err)
	}
	if y := empty.Files[TopologyYAMLFile]; strings.Count(y, "flat: true") != 2 || !strings.Contains(y, `topology: "block"`) {
		t.Errorf("no nodes: want both topologies flat:\n%s", y)
	}
}
