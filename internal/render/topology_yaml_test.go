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
