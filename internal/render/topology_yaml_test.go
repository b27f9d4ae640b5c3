package render

import (
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
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
	conf, err := RenderConfig(sc, ConfigInputs{Names: NamesFor(sc, ""), Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	if conf.Files["topology.conf"] != topo.Conf || conf.Files[TopologyYAMLFile] != "" || !strings.Contains(conf.Files["slurm.conf"], "\nTopologyPlugin=topology/tree\n") {
		t.Errorf("default: want topology.conf and TopologyPlugin, no topology.yaml:\n%s", files(conf))
	}
	yml, err := RenderConfig(sc, ConfigInputs{Names: NamesFor(sc, ""), Topology: topo, TopologyYAML: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := RenderTopologyYAML([]NamedTopology{{Name: "tree", Default: true, Topology: topo}})
	if yml.Files[TopologyYAMLFile] != want || yml.Files["topology.conf"] != "" || strings.Contains(yml.Files["slurm.conf"], "TopologyPlugin") {
		t.Errorf("TopologyYAML: want topology.yaml only:\n%s", files(yml))
	}
}
