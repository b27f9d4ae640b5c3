// The scheduler's own view of Slurm's nodes, asked before an immediate allocation is.

package plugin

import (
	"iter"
	"slices"

	"sunk.dev/sunk/pkg/slurm"
)

// viewHasRoom says whether the node view (the node informer's table) shows room for an
// immediate allocation of js: at least as many nodes as it asks for that Slurm could give it now.
// It looks only at what makes slurmctld refuse an immediate allocation as busy (error 2016)
// whatever else holds: a job completing on the node (slurmctld places no job on a node where one
// completes, cg_node_bitmap in node_scheduler.c: in a burst of short pods most refusals), a node
// down, drained or not responding, its memory taken, and for an exclusive job any allocation on
// it. Not its CPUs: a partition with OverSubscribe hands allocated CPUs out again, and a node
// record does not say whether its partitions do. The view lags Slurm by a poll, so it decides
// only whether to ask now; Slurm stays the judge of every request sent. A view with no node of
// the job's partitions (or not listed yet) has nothing to judge by: Slurm answers.
func viewHasRoom(nodes iter.Seq[slurm.Node], js *slurm.JobSubmit) bool {
	want := max(js.MinNodes, 1)
	mem := js.MemoryPerNodeMB
	if mem == 0 {
		mem = js.MemoryPerCPUMB * int64(max(js.CPUsPerTask, 1))
	}
	partitions := splitList(js.Partition)
	have, considered := 0, 0
	for n := range nodes {
		if slices.Contains(js.ExcludedNodes, n.Name) || !inPartitions(&n, partitions) {
			continue
		}
		considered++
		if nodeTakes(&n, js.Exclusive, mem) {
			if have++; have >= want {
				return true
			}
		}
	}
	return considered == 0
}

// nodeTakes says whether the view rules nothing out for a job (exclusive, needing memMB on the
// node) on n now. It rules out a node completing a job, one down, future, drained or not
// responding, one without memMB free, and for an exclusive job one with any allocation.
func nodeTakes(n *slurm.Node, exclusive bool, memMB int64) bool {
	switch {
	case n.HasState("COMPLETING"):
		return false
	case n.BaseState() == "DOWN", n.BaseState() == "FUTURE", n.Drained(), n.HasState("NOT_RESPONDING"):
		return false
	case memMB > 0 && n.RealMemoryMB > 0 && n.RealMemoryMB-n.AllocMemoryMB < memMB:
		return false
	case exclusive && (n.AllocCPUs > 0 || n.AllocMemoryMB > 0 || n.BaseState() == "ALLOCATED" || n.BaseState() == "MIXED"):
		return false
	}
	return true
}

// inPartitions: the node is in one of the job's partitions, or the job names none (the
// cluster's default, which a node record does not mark).
func inPartitions(n *slurm.Node, partitions []string) bool {
	if len(partitions) == 0 {
		return true
	}
	for _, p := range partitions {
		if slices.Contains(n.Partitions, p) {
			return true
		}
	}
	return false
}

// nodeOpened says whether a node update (old nil: a node first seen) may let a held allocation
// through: the node can take jobs now, and before it could not (completing, unavailable) or it
// held more memory or CPUs.
func nodeOpened(old, cur *slurm.Node) bool {
	if !nodeTakes(cur, false, 0) {
		return false
	}
	return old == nil || !nodeTakes(old, false, 0) || cur.AllocMemoryMB < old.AllocMemoryMB || cur.AllocCPUs < old.AllocCPUs
}

// watchNodeRoom lets the allocations held by the node view ask when it opens.
func (p *Plugin) watchNodeRoom() {
	p.nodes.AddHandler(slurm.Handler[slurm.Node]{
		OnAdd: func(n slurm.Node) {
			if nodeOpened(nil, &n) {
				p.allocationQueue.opened()
			}
		},
		OnUpdate: func(old, n slurm.Node) {
			if nodeOpened(&old, &n) {
				p.allocationQueue.opened()
			}
		},
	})
}
