package validation

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"

	kvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/slurmversion"
	"sunk.dev/sunk/pkg/slurmconf"
	"sunk.dev/sunk/pkg/wellknown"
)

// validateTopology checks spec.topology as CEL cannot: presets of the right kind, label keys
// Kubernetes accepts, and BlockSizes Slurm accepts (block_record.c calls fatal() on sizes that
// are not the base times a power of two, up to 2^15); and, as the CRD's rules do for a cluster
// without the webhook, tree and block together and partitions' topologies only where Slurm
// reads topology.yaml.
func validateTopology(spec *sunkv1.SlurmClusterSpec, path *field.Path) (field.ErrorList, []string) {
	errs := validatePartitionTopologies(spec, path.Root().Child("partitions"))
	t := spec.Topology
	if t == nil {
		return errs, nil
	}
	var warnings []string
	yaml := slurmversion.FeaturesOf(spec.Version()).TopologyYAML
	switch {
	case t.Tree == nil && t.Block == nil:
		errs = append(errs, field.Invalid(path, "", "at least one of tree and block must be set"))
	case t.Tree != nil && t.Block != nil && !yaml:
		errs = append(errs, field.Invalid(path, "tree and block", fmt.Sprintf(
			"tree and block together need Slurm 25.05 or later (spec.slurmVersion %s): Slurm %s runs one topology plugin", sunkv1.SlurmVersion2605, spec.Version())))
	}
	if tr := t.Tree; tr != nil {
		p := path.Child("tree")
		switch {
		case (tr.Preset == "") == (len(tr.LabelKeys) == 0):
			errs = append(errs, field.Invalid(p, "", "exactly one of preset and labelKeys must be set"))
		case tr.Preset != "":
			if _, ok := wellknown.TreePresetLabels[string(tr.Preset)]; !ok {
				errs = append(errs, field.NotSupported(p.Child("preset"), tr.Preset, sortedKeys(wellknown.TreePresetLabels)))
			}
		}
		seen := map[string]bool{}
		for i, k := range tr.LabelKeys {
			errs = append(errs, validateLabelKey(k, p.Child("labelKeys").Index(i))...)
			if seen[k] {
				errs = append(errs, field.Duplicate(p.Child("labelKeys").Index(i), k))
			}
			seen[k] = true
		}
	}
	if bl := t.Block; bl != nil {
		p := path.Child("block")
		switch {
		case (bl.Preset == "") == (bl.LabelKey == ""):
			errs = append(errs, field.Invalid(p, "", "exactly one of preset and labelKey must be set"))
		case bl.Preset != "":
			if _, ok := wellknown.BlockPresetLabel[string(bl.Preset)]; !ok {
				errs = append(errs, field.NotSupported(p.Child("preset"), bl.Preset, sortedKeys(wellknown.BlockPresetLabel)))
			}
		default:
			errs = append(errs, validateLabelKey(bl.LabelKey, p.Child("labelKey"))...)
		}
		errs = append(errs, validateBlockSizes(bl.BlockSizes, p.Child("blockSizes"))...)
	}
	for _, l := range strings.Split(spec.Controller.ExtraConf, "\n") {
		if line, _ := slurmconf.Parse(l); line.Sets("TopologyPlugin") {
			warnings = append(warnings, fmt.Sprintf("%s: its TopologyPlugin replaces the plugin of spec.topology, whose topology.conf may not suit it", path.Root().Child("controller", "extraConf")))
		}
	}
	return errs, warnings
}

// validatePartitionTopologies: a partition's topology is one spec.topology defines, on a Slurm
// that reads topology.yaml (a 24.11 slurmctld would stop on the unknown key Topology= of the
// partition line).
func validatePartitionTopologies(spec *sunkv1.SlurmClusterSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range spec.Partitions {
		if p.Topology == "" {
			continue
		}
		fp := path.Index(i).Child("topology")
		var defined []string
		for _, n := range []sunkv1.TopologyName{sunkv1.TopologyTree, sunkv1.TopologyBlock} {
			if spec.Topology.Has(n) {
				defined = append(defined, string(n))
			}
		}
		switch {
		case !slurmversion.FeaturesOf(spec.Version()).TopologyYAML:
			errs = append(errs, field.Invalid(fp, p.Topology, fmt.Sprintf(
				"a partition's topology needs Slurm 25.05 or later (spec.slurmVersion %s): Slurm %s knows no partition Topology=", sunkv1.SlurmVersion2605, spec.Version())))
		case !spec.Topology.Has(p.Topology):
			errs = append(errs, field.NotSupported(fp, p.Topology, defined))
		}
	}
	return errs
}

func validateLabelKey(k string, p *field.Path) field.ErrorList {
	if msgs := kvalidation.IsQualifiedName(k); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, k, "must be a label key: "+strings.Join(msgs, "; "))}
	}
	return nil
}

// validateBlockSizes: each size is the first (the base block) times a power of two, larger
// than the one before, at most 2^15 times the base.
func validateBlockSizes(sizes []int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range sizes {
		switch {
		case s < 1:
			errs = append(errs, field.Invalid(p.Index(i), s, "must be at least 1"))
		case i == 0:
		case s <= sizes[i-1]:
			errs = append(errs, field.Invalid(p.Index(i), s, "must be larger than the size before it"))
		case sizes[0] < 1 || s%sizes[0] != 0 || bits.OnesCount32(uint32(s/sizes[0])) != 1:
			errs = append(errs, field.Invalid(p.Index(i), s, fmt.Sprintf("must be the base block size %d times a power of two", sizes[0])))
		case s/sizes[0] > 1<<15:
			errs = append(errs, field.Invalid(p.Index(i), s, "must be at most 2^15 times the base block size"))
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
