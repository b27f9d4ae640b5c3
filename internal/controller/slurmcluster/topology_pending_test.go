package slurmcluster

import (
	"reflect"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
)

// A pod made with a Topology= keeps its place in the file until its node has a topology_str.
func TestPendingPlaces(t *testing.T) {
	desired, err := render.RenderTopology(&sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"s", "l"}}},
		[]render.TopologyNode{{Name: "a", Labels: map[string]string{"s": "sp", "l": "la"}}})
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]string{
		"new":   "tree:sp:lb",   // not registered yet: its leaf is kept
		"in":    "tree:sp:la",   // the file has it anyway
		"reg":   "tree:sp:lc",   // registered with a string: planTopologyStr's business
		"other": "block:b1-blk", // another topology: not this file's
	}
	strs := map[string]string{"a": "", "reg": "tree:sp:lc"}
	keep, why := pendingPlaces(desired, strs, pending)
	if want := [][]string{{"sp", "lb"}}; !reflect.DeepEqual(keep, want) || !reflect.DeepEqual(why, []string{"new's registration"}) {
		t.Errorf("keep %v why %v, want %v", keep, why, want)
	}
	if keep, _ := pendingPlaces(desired, nil, pending); keep != nil {
		t.Errorf("Slurm unreadable: keep %v (planTopologyStr keeps every place then)", keep)
	}
}
