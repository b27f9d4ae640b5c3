package render

import (
	"sort"
	"strings"
)

// Slurm 25.05 and later place a node by a string, the node's topology_str: the Topology= of
// its node line (slurmd -Z --conf) or of a REST node update, "<topology>:<block>" or
// "<topology>:<switch>:...:<leaf switch>" (slurm.conf(5), Topology). slurmctld takes it
// without a reconfigure only for a place its topology already has: a block must exist
// (topology_block.c, topology_p_add_rm_node), a tree path must start at a switch it knows and
// end at a leaf (topology_tree.c); anything else fails the update, and fails a dynamic
// node's registration outright (ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE, node_mgr.c).

// TopologyStr is Slurm's topology_str of a node at place in the topology named topology.
func TopologyStr(topology string, place []string) string {
	return strings.Join(append([]string{topology}, place...), ":")
}

// TopologyMove is a node to move in slurmctld's topology, and its new topology_str.
type TopologyMove struct {
	Node, TopologyStr string
}

// TopologyMoves are the nodes of desired whose place differs from their place in running
// (the topology slurmctld has read) and whose new place running already has: moved by a
// node update, without a reconfigure. Nodes new to running, or moving to a switch or block
// running lacks, are not moves: they wait for the file to be rewritten. Sorted by node.
func TopologyMoves(topology string, running, desired *Topology) []TopologyMove {
	if running == nil || desired == nil || running.Plugin != desired.Plugin {
		return nil
	}
	has := runningPlaces(running)
	var moves []TopologyMove
	for node, place := range desired.Places {
		old, ok := running.Places[node]
		if !ok || samePlace(old, place) || !has[strings.Join(place, "\x00")] {
			continue
		}
		moves = append(moves, TopologyMove{Node: node, TopologyStr: TopologyStr(topology, place)})
	}
	sort.Slice(moves, func(a, b int) bool { return moves[a].Node < moves[b].Node })
	return moves
}

// runningPlaces are the places running has: every placed node's, which covers every leaf
// switch and block with a node, and with them every switch above a leaf.
func runningPlaces(t *Topology) map[string]bool {
	has := map[string]bool{}
	for _, p := range t.Places {
		has[strings.Join(p, "\x00")] = true
	}
	return has
}

func samePlace(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}
