// The autoscaler's demand: which pending jobs ask an autoscaled NodeSet for nodes. A job counts
// for a NodeSet only if Slurm could run it there: one of the job's partitions holds the
// NodeSet, the NodeSet's node features satisfy the job's --constraint, and one node's share of
// the job fits one of its nodes. When several autoscaled NodeSets could, the job's nodes go to
// them in Slurm's own order (lowest node Weight first), so that one job does not start machines
// in two NodeSets unless it needs both.

package nodeset

import (
	"cmp"
	"slices"
	"strings"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
)

// demandTarget is what splitDemand knows of one autoscaled NodeSet of the cluster.
type demandTarget struct {
	name       string
	shape      render.NodeShape
	features   map[string]bool // shape.Features, to look up
	partitions map[string]bool
	// room is how many more nodes it may run jobs on: maxReplicas less its busy nodes.
	room int32
}

// demand is what pending jobs ask one NodeSet for.
type demand struct{ jobs, nodes int32 }

// targetOf is the demandTarget of an autoscaled NodeSet with busy nodes running jobs.
func targetOf(sc *sunkv1.SlurmCluster, ns *sunkv1.NodeSet, busy int32) demandTarget {
	shape := render.ShapeOf(ns)
	features := map[string]bool{}
	for _, f := range shape.Features {
		features[f] = true
	}
	return demandTarget{name: ns.Name, shape: shape, features: features,
		partitions: partitionsOf(sc, ns.Name), room: max(ns.Spec.Autoscaling.MaxReplicas-busy, 0)}
}

// splitDemand hands each job that pends for nodes (waitsForNodes), highest priority first, to
// the autoscaled NodeSets it could run on, lowest Weight (then name) first: each takes as many
// of the job's nodes as it has room for, the next the rest. A job that fits nowhere still asks
// the first NodeSet that could run it for its nodes, which the bounds then clamp.
func splitDemand(jobs []slurm.Job, targets []demandTarget) map[string]demand {
	order := slices.Clone(targets)
	slices.SortFunc(order, func(a, b demandTarget) int {
		return cmp.Or(cmp.Compare(a.shape.Weight, b.shape.Weight), strings.Compare(a.name, b.name))
	})
	var waiting []*slurm.Job
	for i := range jobs {
		j := &jobs[i]
		if j.BaseState() == "PENDING" && !j.Hold && waitsForNodes(j.StateReason) {
			waiting = append(waiting, j)
		}
	}
	slices.SortStableFunc(waiting, func(a, b *slurm.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.ID, b.ID))
	})
	out := map[string]demand{}
	for _, j := range waiting {
		need := int32(max(j.NodeCount, 1))
		var first *demandTarget
		took := map[string]bool{}
		for i := range order {
			t := &order[i]
			if !t.canRun(j) {
				continue
			}
			if first == nil {
				first = t
			}
			take := min(need, t.room)
			if take == 0 {
				continue
			}
			t.room -= take
			need -= take
			took[t.name] = true
			out[t.name] = demand{jobs: out[t.name].jobs + 1, nodes: out[t.name].nodes + take}
			if need == 0 {
				break
			}
		}
		if need > 0 && first != nil {
			d := out[first.name]
			if !took[first.name] {
				d.jobs++
			}
			d.nodes += need
			out[first.name] = d
		}
	}
	return out
}

// canRun reports whether the job could run on the NodeSet's nodes: one of its partitions
// holds them, their features satisfy its constraint, and each of its nodes' share fits one.
func (t *demandTarget) canRun(j *slurm.Job) bool {
	in := false
	for p := range strings.SplitSeq(j.Partition, ",") {
		in = in || t.partitions[p]
	}
	return in && slurm.ConstraintAdmits(j.Features, func(f string) bool { return t.features[f] }) && fits(j, t.shape)
}

// fits reports whether one node's share of the job (its CPUs spread over its nodes, its
// memory and GPUs per node) fits a node of this shape; what the shape does not state fits.
func fits(j *slurm.Job, shape render.NodeShape) bool {
	n := int64(max(j.NodeCount, 1))
	cpus := max((int64(j.CPUs)+n-1)/n, int64(j.CPUsPerTask))
	gpus := render.GPUsOf(j.TRESPerNode)
	return (shape.CPUs == 0 || cpus <= shape.CPUs) &&
		(shape.MemoryMB == 0 || j.MemoryPerNodeMB <= shape.MemoryMB) &&
		(shape.GPUs < 0 || gpus <= shape.GPUs)
}

// waitsForNodes reports whether a pending job's reason is one more nodes can lift:
// "Resources" (no free nodes), "NodeDown", "Priority" (behind a job that waits for them),
// "ReqNodeNotAvail" (its nodes are parked or down) and "None" (not looked at yet).
func waitsForNodes(reason string) bool {
	switch reason {
	case "None", "", "Resources", "Priority", "NodeDown":
		return true
	}
	return strings.HasPrefix(reason, "ReqNodeNotAvail")
}

// partitionsOf names the cluster's partitions that hold the NodeSet's nodes.
func partitionsOf(sc *sunkv1.SlurmCluster, nodeSet string) map[string]bool {
	out := map[string]bool{}
	for _, p := range sc.Spec.EffectivePartitions() {
		if len(p.NodeSets) == 0 || slices.Contains(p.NodeSets, nodeSet) {
			out[p.Name] = true
		}
	}
	return out
}
