package render

import (
	"reflect"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

func TestTopologyPlaces(t *testing.T) {
	tree, err := RenderTopology(&sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}, awsNodes())
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{
		"gpu-0": "tree:nn-1b2a3c4d5e6f70811-sw:nn-4f3e2d1c0b0a09182-sw:nn-9a8b7c6d5e4f30211-sw",
		"gpu-2": "tree:nn-1b2a3c4d5e6f70811-sw:nn-4f3e2d1c0b0a09182-sw:nn-0c1d2e3f4a5b6c7d8-sw",
		"gpu-4": "tree:unknown",
		"gpu-5": "tree:unknown", // a gap in its labels
	} {
		if got := TopologyStr("tree", tree.Places[node]); got != want {
			t.Errorf("%s: %q, want %q", node, got, want)
		}
	}
	// Every leaf of a placed node is a switch of the file with that node.
	for node, p := range tree.Places {
		found := false
		for _, sw := range tree.Switches {
			if sw.Name == p[len(p)-1] && sw.Nodes != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: leaf %q is no leaf switch of the rendering", node, p[len(p)-1])
		}
	}

	clique := wellknown.BlockPresetLabel[string(sunkv1.PresetNVIDIAGPUClique)]
	block, err := RenderTopology(&sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{2, 4}}},
		[]TopologyNode{{Name: "g-0", Labels: map[string]string{clique: "c.1"}}, {Name: "g-1", Labels: map[string]string{clique: "c.1"}},
			{Name: "g-2", Labels: map[string]string{clique: "c.2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := TopologyStr("nvl", block.Places["g-1"]); got != "nvl:c.1-blk" {
		t.Errorf("g-1: %q", got)
	}
	if p, ok := block.Places["g-2"]; ok { // an undersized block is left out
		t.Errorf("g-2, left out, has place %v", p)
	}
}

func TestTopologyMoves(t *testing.T) {
	spec := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}
	render := func(nodes ...TopologyNode) *Topology {
		t.Helper()
		topo, err := RenderTopology(spec, nodes)
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	a := func(n string) TopologyNode { return awsNode(n, "s", "m", "leaf-a") }
	b := func(n string) TopologyNode { return awsNode(n, "s", "m", "leaf-b") }
	c := func(n string) TopologyNode { return awsNode(n, "s", "m", "leaf-c") }
	none := func(n string) TopologyNode { return awsNode(n, "", "", "") }
	block := &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{LabelKey: awsL3}}
	blocks, err := RenderTopology(block, []TopologyNode{a("n0"), b("n1")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		running, desired *Topology
		want             []TopologyMove
	}{
		{"unchanged", render(a("n0"), b("n1")), render(a("n0"), b("n1")), nil},
		{"relabel to a leaf slurmctld has", render(a("n0"), b("n1")), render(b("n0"), b("n1")),
			[]TopologyMove{{"n0", "tree:s:m:leaf-b"}}},
		{"relabel to a new leaf waits for the file", render(a("n0"), b("n1")), render(c("n0"), b("n1")), nil},
		{"a node new to slurmctld waits for the file", render(a("n0")), render(a("n0"), a("n1")), nil},
		{"labels gone: to unknown, when it exists", render(a("n0"), none("n1")), render(none("n0"), none("n1")),
			[]TopologyMove{{"n0", "tree:unknown"}}},
		{"labels gone, no unknown switch yet", render(a("n0"), b("n1")), render(none("n0"), b("n1")), nil},
		{"swap, sorted", render(a("n0"), b("n1")), render(b("n0"), a("n1")),
			[]TopologyMove{{"n0", "tree:s:m:leaf-b"}, {"n1", "tree:s:m:leaf-a"}}},
		{"another plugin", blocks, render(b("n0"), a("n1")), nil},
		{"no running topology", nil, render(a("n0")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TopologyMoves("tree", tc.running, tc.desired); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
