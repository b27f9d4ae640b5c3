package webhook

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestValidateTopology(t *testing.T) {
	tree := func(tt sunkv1.TreeTopology) *sunkv1.TopologySpec { return &sunkv1.TopologySpec{Tree: &tt} }
	block := func(b sunkv1.BlockTopology) *sunkv1.TopologySpec { return &sunkv1.TopologySpec{Block: &b} }
	for _, c := range []struct {
		name    string
		topo    *sunkv1.TopologySpec
		extra   string
		wantErr string
		warn    bool
	}{
		{name: "tree preset", topo: tree(sunkv1.TreeTopology{Preset: sunkv1.PresetAWS})},
		{name: "tree keys", topo: tree(sunkv1.TreeTopology{LabelKeys: []string{"example.com/spine", "example.com/leaf"}})},
		{name: "block preset and sizes", topo: block(sunkv1.BlockTopology{Preset: sunkv1.PresetNVIDIAGPUClique, BlockSizes: []int32{18, 36, 72}})},
		{name: "both kinds", topo: &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{Preset: sunkv1.PresetGKE}, Block: &sunkv1.BlockTopology{Preset: sunkv1.PresetTopograph}}, wantErr: "spec.topology: Invalid value"},
		{name: "neither kind", topo: &sunkv1.TopologySpec{}, wantErr: "exactly one of tree and block"},
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
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := sunkv1.SlurmClusterSpec{Image: "x", Topology: c.topo, Controller: sunkv1.ControllerSpec{ExtraConf: c.extra}}
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
