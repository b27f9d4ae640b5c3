package render

import sunkv1 "sunk.dev/sunk/api/v1alpha1"

// On Slurm 25.05 and later a new dynamic node can register already placed: Topology= on its
// slurmd -Z --conf line. slurmctld refuses the registration when the string names a block, or
// a top switch, its topology lacks (docs/topology.md), and keeps the string in its state for
// good, so a compute pod gets one only when the place is certain to be in the file slurmctld
// runs; otherwise it registers without, as on 24.11, and the next file places it.

// RegistrationTopology is the Topology= a new compute pod registers with, or "" for none:
// the place node's labels give, when spec has one kind (tree or block, not both: a string
// would have to name a place in each), the release takes topology_str (byStr), node is
// known (nil in Replicas mode, where the pod's node is chosen later) and labelled, and
// running (topology.yaml as slurmctld runs it, "" when that is not known) has that place.
// The place is rendered from node alone: a name that would collide with another node's
// value ends in a hash in the file and so is not found there.
func RegistrationTopology(spec *sunkv1.TopologySpec, byStr bool, running string, node *TopologyNode) string {
	if spec == nil || (spec.Tree == nil) == (spec.Block == nil) || !byStr || node == nil || running == "" {
		return ""
	}
	alone := *spec
	if alone.Block != nil {
		// Sizes decide which blocks are left out, not their names; one node is no block.
		b := *alone.Block
		b.BlockSizes = nil
		alone.Block = &b
	}
	t, err := RenderTopology(&alone, []TopologyNode{*node})
	if err != nil {
		return ""
	}
	place := t.Places[node.Name]
	if len(place) == 0 || place[len(place)-1] == UnknownTopologyName {
		return "" // unlabelled: nothing worth pinning in slurmctld's state
	}
	file, err := ReadTopologyYAML(running)
	if err != nil || file.Name != TopologyKind(t) || !file.Units[PlaceKey(place)] {
		return ""
	}
	return TopologyStr(file.Name, place)
}
