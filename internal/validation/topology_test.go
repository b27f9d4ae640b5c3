package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestValidateTopology(t *testing.T) {
	tree := func(tt sunkv1.TreeTopology) *sunkv1.TopologySpec { return &sunkv1.TopologySpec{Tree: &tt} }
	block := func(b sunkv1.BlockTopology) *sunkv1.TopologySpec { return &sunkv1.TopologySpec{Block: &b} }
	both := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetGKE}, Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetTopograph}}
	for _, c := range []struct {
		name    string
		topo    *sunkv1.TopologySpec
		extra   string
		version string                 // spec.slurmVersion; "" is 24.11
		parts   []sunkv1.PartitionSpec // spec.partitions
		wantErr string
		warn    bool
	}{
		{name: "tree preset", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS})},
		{name: "tree keys", topo: tree(sunkv1.TreeTopology{LabelKeys: []string{"example.com/spine", "example.com/leaf"}})},
		{name: "block preset and sizes", topo: block(sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{18, 36, 72}})},
		{name: "both kinds on 24.11", topo: both, wantErr: `spec.topology: Invalid value: "tree and block": tree and block together need Slurm 25.05 or later (spec.slurmVersion 26.05): Slurm 24.11 runs one topology plugin`},
		{name: "both kinds on 24.11 by name", topo: both, version: "24.11", wantErr: "Slurm 24.11 runs one topology plugin"},
		{name: "both kinds on 26.05", topo: both, version: "26.05"},
		{name: "both kinds, a partition on each", topo: both, version: "26.05", parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}, {Name: "b", Topology: "block"}, {Name: "c"}}},
		{name: "a partition on the one topology", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}), version: "26.05", parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}}},
		{name: "a partition on a topology not defined", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}), version: "26.05", parts: []sunkv1.PartitionSpec{{Name: "a"}, {Name: "b", Topology: "block"}},
			wantErr: `spec.partitions[1].topology: Unsupported value: "block": supported values: "tree"`},
		{name: "a partition's topology without spec.topology", version: "26.05", parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}}, wantErr: `spec.partitions[0].topology: Unsupported value: "tree"`},
		{name: "a partition's topology on 24.11", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}), parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "tree"}},
			wantErr: `spec.partitions[0].topology: Invalid value: "tree": a partition's topology needs Slurm 25.05 or later (spec.slurmVersion 26.05): Slurm 24.11 knows no partition Topology=`},
		{name: "a partition's unknown topology", topo: both, version: "26.05", parts: []sunkv1.PartitionSpec{{Name: "a", Topology: "nvlink"}}, wantErr: `spec.partitions[0].topology: Unsupported value: "nvlink": supported values: "tree", "block"`},
		{name: "neither kind", topo: &sunkv1.TopologySpec{}, wantErr: "spec.topology: Invalid value: \"\": at least one of tree and block must be set"},
		{name: "tree preset and keys", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS, LabelKeys: []string{"a"}}), wantErr: "spec.topology.tree"},
		{name: "block preset for a tree", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetNVIDIAGPUClique}), wantErr: `spec.topology.tree.preset: Unsupported value: "nvidia-gpu-clique"`},
		{name: "tree preset for blocks", topo: block(sunkv1.BlockTopology{Preset: sunkv1.PresetAWS}), wantErr: "spec.topology.block.preset"},
		{name: "bad label key", topo: tree(sunkv1.TreeTopology{LabelKeys: []string{"ok/leaf", "not a key"}}), wantErr: "spec.topology.tree.labelKeys[1]"},
		{name: "duplicate label key", topo: tree(sunkv1.TreeTopology{LabelKeys: []string{"a", "a"}}), wantErr: "spec.topology.tree.labelKeys[1]: Duplicate"},
		{name: "block label key", topo: block(sunkv1.BlockTopology{LabelKey: "example.com/rack\nx"}), wantErr: "spec.topology.block.labelKey"},
		{name: "block sizes not powers of two", topo: block(sunkv1.BlockTopology{LabelKey: "r", BlockSizes: []int32{18, 54}}), wantErr: "spec.topology.block.blockSizes[1]: Invalid value: 54: must be the base block size 18 times a power of two"},
		{name: "block sizes shrinking", topo: block(sunkv1.BlockTopology{LabelKey: "r", BlockSizes: []int32{4, 2}}), wantErr: "blockSizes[1]"},
		{name: "block sizes too far apart", topo: block(sunkv1.BlockTopology{LabelKey: "r", BlockSizes: []int32{1, 1 << 16}}), wantErr: "2^15"},
		{name: "block size zero", topo: block(sunkv1.BlockTopology{LabelKey: "r", BlockSizes: []int32{0}}), wantErr: "blockSizes[0]"},
		{name: "extraConf plugin", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}), extra: "TopologyPlugin=topology/block", warn: true},
		{name: "extraConf plugin with spaces around =", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}), extra: "topologyplugin = topology/block", warn: true},
		{name: "extraConf plugin behind another key", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS}), extra: "MinJobAge=5 TopologyPlugin=topology/block", warn: true, wantErr: "Slurm reads one key a line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := sunkv1.SlurmClusterSpec{Image: "x", Topology: c.topo, Controller: sunkv1.ControllerSpec{ExtraConf: c.extra}, SlurmVersion: c.version, Partitions: c.parts}
			errs, warnings := ValidateSpec(&spec, field.NewPath("spec"))
			got := errs.ToAggregate()
			switch {
			case c.wantErr == "" && got != nil:
				t.Fatalf("unexpected error: %v", got)
			case c.wantErr != "" && (got == nil || !strings.Contains(got.Error(), c.wantErr)):
				t.Fatalf("error %v, want one naming %q", got, c.wantErr)
			}
			if (len(warnings) > 0) != c.warn {
				t.Fatalf("warnings %v, want some: %v", warnings, c.warn)
			}
		})
	}
}
