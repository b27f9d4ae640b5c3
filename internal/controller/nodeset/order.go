// Member order: which of a NodeSet's possible members spec.replicas keeps. The members step
// runs the first replicas of them and the autoscaler decides on the same list, so that its
// "member i" is the member the i-th replica runs, in both modes.

package nodeset

import (
	"fmt"
	"sort"

	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
)

// memberOrder is the order in which spec.replicas takes a NodeSet's members. In Replicas mode
// it is the ordinals 0, 1, … without end; in PerNode mode the candidates perNodeOrder lists,
// which end with the nodes the NodeSet may run on.
type memberOrder struct {
	nodeSet string
	perNode bool
	// candidates are the PerNode members in order, and at their positions by name.
	candidates []render.ComputeMember
	at         map[string]int
}

func replicasOrder(nodeSet string) memberOrder { return memberOrder{nodeSet: nodeSet} }

func perNodeMemberOrder(nodeSet string, candidates []render.ComputeMember) memberOrder {
	at := make(map[string]int, len(candidates))
	for i, c := range candidates {
		at[c.Name] = i
	}
	return memberOrder{nodeSet: nodeSet, perNode: true, candidates: candidates, at: at}
}

// name is the member at position i; false past the last candidate.
func (o memberOrder) name(i int) (string, bool) {
	if !o.perNode {
		return clusternames.OrdinalMemberName(o.nodeSet, i), true
	}
	if i < 0 || i >= len(o.candidates) {
		return "", false
	}
	return o.candidates[i].Name, true
}

// position is where a member stands; false for a name that is no candidate (in PerNode mode: a
// node no longer selected, held by an older NodeSet, or deleted).
func (o memberOrder) position(name string) (int, bool) {
	if !o.perNode {
		return clusternames.MemberOrdinal(o.nodeSet, name)
	}
	i, ok := o.at[name]
	return i, ok
}

// keepsParked reports whether a member's record may stay parked: a candidate below maxReplicas.
func (o memberOrder) keepsParked(name string, maxReplicas int32) bool {
	i, ok := o.position(name)
	return ok && int32(i) < maxReplicas
}

// running is how many members spec.replicas runs: in PerNode mode at most the candidates, all
// of them when it is unset.
func (o memberOrder) running(replicas *int32) int32 {
	if !o.perNode {
		return ptr.Deref(replicas, 0)
	}
	n := int32(len(o.candidates))
	if replicas != nil {
		n = min(n, *replicas)
	}
	return n
}

// desired are the members spec.replicas runs, by name.
func (o memberOrder) desired(replicas *int32) []render.ComputeMember {
	if !o.perNode {
		return replicasDesired(o.nodeSet, replicas)
	}
	return perNodeDesired(o.candidates, replicas)
}

// perNodeOrder lists the candidate members of a PerNode NodeSet: one per selected node that no
// older NodeSet holds, nodes that already have a pod first (so that a cap does not move pods),
// then by node name. It returns the conflicts it found: nodes an older NodeSet holds (held maps
// node -> that NodeSet) and nodes whose member name another node already has.
func perNodeOrder(nodeSet string, selected []string, held map[string]string, hasPod func(member string) bool) (candidates []render.ComputeMember, conflicts []string) {
	var free []render.ComputeMember
	for _, node := range selected {
		if other, ok := held[node]; ok {
			conflicts = append(conflicts, fmt.Sprintf("node %s is held by the older NodeSet %s", node, other))
			continue
		}
		free = append(free, render.ComputeMember{Name: clusternames.PerNodeMemberName(nodeSet, node), NodeName: node})
	}
	sort.SliceStable(free, func(i, j int) bool {
		pi, pj := hasPod(free[i].Name), hasPod(free[j].Name)
		if pi != pj {
			return pi
		}
		return free[i].NodeName < free[j].NodeName
	})
	seen := map[string]string{}
	for _, m := range free {
		if node, dup := seen[m.Name]; dup {
			conflicts = append(conflicts, fmt.Sprintf("nodes %s and %s have the same member name %s", node, m.NodeName, m.Name))
			continue
		}
		seen[m.Name] = m.NodeName
		candidates = append(candidates, m)
	}
	return candidates, conflicts
}

// perNodeDesired are the first limit candidates (all of them without a limit), by name.
func perNodeDesired(candidates []render.ComputeMember, limit *int32) []render.ComputeMember {
	desired := candidates
	if limit != nil && int(*limit) < len(desired) {
		desired = desired[:*limit]
	}
	desired = append([]render.ComputeMember(nil), desired...)
	sort.Slice(desired, func(i, j int) bool { return desired[i].Name < desired[j].Name })
	return desired
}

// replicasDesired are members 0..replicas-1.
func replicasDesired(nodeSet string, replicas *int32) []render.ComputeMember {
	n := int(ptr.Deref(replicas, 0))
	out := make([]render.ComputeMember, n)
	for i := range out {
		out[i] = render.ComputeMember{Name: clusternames.OrdinalMemberName(nodeSet, i)}
	}
	return out
}

// memberRecords are the Slurm records of a NodeSet's members by name, whether or not they are
// candidates now: registered by its pods, and in Replicas mode named by an ordinal
// (clusternames.MemberOrdinal), in PerNode mode registered by this NodeSet rather than one of
// a longer name (clusternames.RegisteringNodeSet).
func memberRecords(ns *sunkv1.NodeSet, nodes []slurm.Node) map[string]*slurm.Node {
	records := map[string]*slurm.Node{}
	for i := range nodes {
		n := &nodes[i]
		var ours bool
		if ns.ModeOrDefault() == sunkv1.NodeSetPerNode {
			ours = clusternames.RegisteringNodeSet(n.Name, n.Features) == ns.Name
		} else {
			_, named := clusternames.MemberOrdinal(ns.Name, n.Name)
			ours = named && clusternames.RegisteredByNodeSet(n.Name, n.Features)
		}
		if ours {
			records[n.Name] = n
		}
	}
	return records
}
