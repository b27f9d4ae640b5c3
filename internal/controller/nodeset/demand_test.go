package nodeset

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
)

func pending(reason, partition string, nodes int) slurm.Job {
	return slurm.Job{State: []string{"PENDING"}, StateReason: reason, Partition: partition, NodeCount: nodes}
}

func sized(t demandTarget, shape render.NodeShape) demandTarget {
	shape.Weight = t.shape.Weight
	t.shape = shape
	return t
}

func TestSplitDemand(t *testing.T) {
	target := func(name string, weight int64, room int32, features ...string) demandTarget {
		f := map[string]bool{name: true}
		for _, x := range features {
			f[x] = true
		}
		return demandTarget{name: name, shape: render.NodeShape{Weight: weight}, features: f, partitions: map[string]bool{"gpu": true}, room: room}
	}
	withFeatures := func(j slurm.Job, expr string) slurm.Job { j.Features = expr; return j }
	withPriority := func(j slurm.Job, p uint32) slurm.Job { j.Priority = p; return j }
	for _, tc := range []struct {
		name    string
		jobs    []slurm.Job
		targets []demandTarget
		want    map[string]demand
	}{{
		name: "what more nodes can lift, in the NodeSet's partitions",
		jobs: []slurm.Job{
			pending("Resources", "gpu", 4),
			pending("ReqNodeNotAvail, UnavailableNodes:gpu-[0-3]", "cpu,gpu", 1),
			pending("Priority", "gpu", 0), // counts as one node
			pending("Dependency", "gpu", 8),
			{State: []string{"PENDING"}, StateReason: "JobHeldUser", Partition: "gpu", Hold: true, NodeCount: 8},
			pending("Resources", "cpu", 8), // another partition
			{State: []string{"RUNNING"}, Partition: "gpu", NodeCount: 2},
		},
		targets: []demandTarget{target("a100", 1, 16)},
		want:    map[string]demand{"a100": {jobs: 3, nodes: 6}},
	}, {
		name:    "a job whose constraint no NodeSet has asks nobody",
		jobs:    []slurm.Job{withFeatures(pending("Resources", "gpu", 2), "a10O"), withFeatures(pending("Resources", "gpu", 1), "a100&ib")},
		targets: []demandTarget{target("a100", 1, 16), target("h100", 1, 16, "ib")},
		want:    map[string]demand{},
	}, {
		name:    "a constraint picks its NodeSet",
		jobs:    []slurm.Job{withFeatures(pending("Resources", "gpu", 2), "ib"), withFeatures(pending("Resources", "gpu", 1), "a100|v100")},
		targets: []demandTarget{target("a100", 1, 16), target("h100", 1, 16, "ib")},
		want:    map[string]demand{"a100": {jobs: 1, nodes: 1}, "h100": {jobs: 1, nodes: 2}},
	}, {
		name:    "one job starts machines in one NodeSet: the lowest weight, then name",
		jobs:    []slurm.Job{pending("Resources", "gpu", 2)},
		targets: []demandTarget{target("b", 1, 16), target("cheap", 0, 16), target("a", 1, 16)},
		want:    map[string]demand{"cheap": {jobs: 1, nodes: 2}},
	}, {
		name:    "a job larger than the first NodeSet's room spills into the next",
		jobs:    []slurm.Job{pending("Resources", "gpu", 5)},
		targets: []demandTarget{target("a", 1, 3), target("b", 1, 16)},
		want:    map[string]demand{"a": {jobs: 1, nodes: 3}, "b": {jobs: 1, nodes: 2}},
	}, {
		name:    "higher priority takes the room first",
		jobs:    []slurm.Job{pending("Resources", "gpu", 2), withPriority(pending("Priority", "gpu", 2), 100)},
		targets: []demandTarget{target("a", 1, 2), target("b", 2, 16)},
		want:    map[string]demand{"a": {jobs: 1, nodes: 2}, "b": {jobs: 1, nodes: 2}},
	}, {
		name:    "what fits nowhere asks the first NodeSet that could run it, once per job",
		jobs:    []slurm.Job{pending("Resources", "gpu", 5)},
		targets: []demandTarget{target("a", 1, 1), target("b", 1, 2)},
		want:    map[string]demand{"a": {jobs: 1, nodes: 3}, "b": {jobs: 1, nodes: 2}},
	}, {
		name: "a job counts where one node's share fits a node",
		jobs: []slurm.Job{
			{State: []string{"PENDING"}, StateReason: "Resources", Partition: "gpu", NodeCount: 2, CPUs: 16, TRESPerNode: "gres/gpu:8"},
			{State: []string{"PENDING"}, StateReason: "Resources", Partition: "gpu", NodeCount: 1, CPUs: 4, MemoryPerNodeMB: 500_000},
			{State: []string{"PENDING"}, StateReason: "Resources", Partition: "gpu", NodeCount: 1, CPUs: 1, CPUsPerTask: 64},
		},
		targets: []demandTarget{sized(target("small", 0, 16), render.NodeShape{CPUs: 8, MemoryMB: 64_000, GPUs: 0}),
			sized(target("big", 1, 16), render.NodeShape{CPUs: 32, MemoryMB: 1_000_000, GPUs: 8})},
		want: map[string]demand{"big": {jobs: 2, nodes: 3}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitDemand(tc.jobs, tc.targets); !maps.Equal(got, tc.want) {
				t.Errorf("splitDemand = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTargetOf(t *testing.T) {
	sc := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{Partitions: []sunkv1.PartitionSpec{
		{Name: "main", Default: true}, {Name: "big", NodeSets: []string{"gpu"}}, {Name: "other", NodeSets: []string{"cpu"}}}}}
	ns := &sunkv1.NodeSet{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: sunkv1.NodeSetSpec{
		Features: []string{"a100"}, Weight: ptr.To(int32(5)), Autoscaling: &sunkv1.NodeSetAutoscaling{MaxReplicas: 4}}}
	got := targetOf(sc, ns, 3)
	if got.name != "gpu" || got.shape.Weight != 5 || got.room != 1 || got.shape.CPUs != 0 || got.shape.GPUs != 0 ||
		!maps.Equal(got.features, map[string]bool{"gpu": true, "a100": true}) ||
		!maps.Equal(got.partitions, map[string]bool{"main": true, "big": true}) {
		t.Errorf("targetOf = %+v", got)
	}
	if got := targetOf(sc, ns, 6); got.room != 0 {
		t.Errorf("room with more busy nodes than maxReplicas = %d, want 0", got.room)
	}
}
