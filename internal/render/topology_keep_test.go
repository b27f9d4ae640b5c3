package render

import (
	"reflect"
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// A topology.yaml read back gives the places RenderTopology computed, and the places a
// topology_str may name.
func TestReadTopologyYAML(t *testing.T) {
	tree, err := RenderTopology(&sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}}, awsNodes())
	if err != nil {
		t.Fatal(err)
	}
	_, y, err := TopologyFile(tree, true)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := ReadTopologyYAML(y)
	if err != nil {
		t.Fatal(err)
	}
	if ft.Name != "tree" || !reflect.DeepEqual(ft.Places, tree.Places) {
		t.Errorf("read %s %v, rendered %v", ft.Name, ft.Places, tree.Places)
	}
	for node, place := range tree.Places {
		if !ft.Units[PlaceKey(place)] || !tree.HasPlace(place) {
			t.Errorf("%s: place %v missing", node, place)
		}
	}
	if n := len(ft.Units); n != len(tree.Switches)-3 { // every leaf: all but the two level-1 switches and the top
		t.Errorf("%d units: %v", n, ft.Units)
	}

	block := &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{LabelKey: "r"}}
	blocks, err := RenderTopology(block, []TopologyNode{{Name: "g-0", Labels: map[string]string{"r": "a"}}, {Name: "g-1", Labels: map[string]string{"r": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, y, _ = TopologyFile(blocks, true)
	if ft, err = ReadTopologyYAML(y); err != nil || ft.Name != "block" || PlaceKey(ft.Places["g-1"]) != "b" || len(ft.Units) != 2 {
		t.Errorf("blocks read as %+v, %v", ft, err)
	}
	for _, bad := range []string{"", "- topology: tree\n  cluster_default: false\n", "{"} {
		if _, err := ReadTopologyYAML(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// KeepPlaces writes a place a node's topology_str names back into the file, without nodes,
// under switches the file has or adds; slurmctld then finds every switch of the string.
func TestKeepPlaces(t *testing.T) {
	spec := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"s", "l"}}}
	node := func(n, s, l string) TopologyNode {
		return TopologyNode{Name: n, Labels: map[string]string{"s": s, "l": l}}
	}
	for _, tc := range []struct {
		name    string
		keep    []string
		want    []string // lines the file must have (a kept leaf has no nodes line: read back below)
		wantErr string
	}{
		{name: "a leaf under a switch the file has", keep: []string{"s-1-sw", "l-old"},
			want: []string{"- switch: \"l-old\"\n", "- switch: \"s-1-sw\"\n        children: \"l-a,l-old\""}},
		{name: "a leaf under a switch the file lost", keep: []string{"s-2-sw", "l-b"},
			want: []string{"- switch: \"l-b\"\n", "- switch: \"s-2-sw\"\n        children: \"l-b\""}},
		{name: "a place the file has", keep: []string{"s-1-sw", "l-a"}},
		{name: "unknown", keep: []string{"unknown"}, want: []string{"- switch: \"unknown\"\n"}},
		{name: "a leaf that is a parent now", keep: []string{"s-1-sw"}, wantErr: "another level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := RenderTopology(spec, []TopologyNode{node("n-0", "s-1", "l-a")})
			if err != nil {
				t.Fatal(err)
			}
			before := len(topo.Switches)
			err = topo.KeepPlaces([][]string{tc.keep}, []string{"n-1's topology_str"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, y, err := TopologyFile(topo, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(y, w) {
					t.Errorf("topology.yaml lacks %q:\n%s", w, y)
				}
			}
			if len(tc.want) == 0 && len(topo.Switches) != before {
				t.Errorf("kept a place the file had:\n%s", y)
			}
			ft, err := ReadTopologyYAML(y)
			if err != nil {
				t.Fatal(err)
			}
			if !ft.Units[PlaceKey(tc.keep)] || !topo.HasPlace(tc.keep) || PlaceKey(ft.Places["n-0"]) != "s-1-sw:l-a" {
				t.Errorf("read back: %+v", ft)
			}
		})
	}

	blocks, err := RenderTopology(&sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{LabelKey: "r"}}, []TopologyNode{{Name: "g-0", Labels: map[string]string{"r": "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := blocks.KeepPlaces([][]string{{"old-blk"}}, []string{"g-1's topology_str"}); err != nil {
		t.Fatal(err)
	}
	_, y, _ := TopologyFile(blocks, true)
	if !strings.Contains(y, "      - block: \"old-blk\"\n") || !strings.Contains(y, "# old-blk kept without nodes: g-1's topology_str") {
		t.Errorf("the kept block:\n%s", y)
	}
}
