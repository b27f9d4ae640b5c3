package v1alpha1

import "testing"

func TestTenantOf(t *testing.T) {
	p := SchedulerPolicy{Tenants: []SchedulerTenant{{Name: "a", Namespaces: []string{"x", "y"}}, {Name: "b", Namespaces: []string{"z"}}}}
	for ns, want := range map[string]string{"x": "a", "y": "a", "z": "b", "other": ""} {
		got := ""
		if t := p.TenantOf(ns); t != nil {
			got = t.Name
		}
		if got != want {
			t.Errorf("TenantOf(%q) = %q, want %q", ns, got, want)
		}
	}
}

// The default partition and the tiers are slurmctld's, as sunk renders slurm.conf.
func TestPartitionsAsSlurmSeesThem(t *testing.T) {
	ten := int32(10)
	for _, c := range []struct {
		name  string
		parts []PartitionSpec
		def   string
		tiers []int32
	}{
		{"none: all", nil, "all", []int32{1}},
		{"the marked default", []PartitionSpec{{Name: "a"}, {Name: "b", Default: true}}, "b", []int32{1, 1}},
		{"no default: the first", []PartitionSpec{{Name: "a"}, {Name: "b"}}, "a", []int32{1, 1}},
		{"tiers from the field and from extraConf", []PartitionSpec{{Name: "a", PriorityTier: &ten}, {Name: "b", ExtraConf: "OverSubscribe=NO prioritytier=7"}}, "a", []int32{10, 7}},
		{"a tier from extraConf with spaces around =", []PartitionSpec{{Name: "a", ExtraConf: "PriorityTier = 3 OverSubscribe=NO"}}, "a", []int32{3}},
		{"a tier in a comment is none", []PartitionSpec{{Name: "a", ExtraConf: "OverSubscribe=NO # PriorityTier=3"}}, "a", []int32{1}},
		{"a tier set twice: the last, as Slurm keeps it", []PartitionSpec{{Name: "a", ExtraConf: "PriorityTier=3 PriorityTier=4"}}, "a", []int32{4}},
	} {
		s := SlurmClusterSpec{Partitions: c.parts}
		if got := s.DefaultPartition(); got != c.def {
			t.Errorf("%s: default %q, want %q", c.name, got, c.def)
		}
		for i, p := range s.EffectivePartitions() {
			if got := p.Tier(); got != c.tiers[i] {
				t.Errorf("%s: %s tier %d, want %d", c.name, p.Name, got, c.tiers[i])
			}
		}
	}
}
