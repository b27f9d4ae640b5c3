package clusternames

import (
	"strings"
	"testing"
)

func TestMemberNames(t *testing.T) {
	if got := PerNodeMemberName("cpu", "Node_1.Example.com"); got != "cpu-node-1-example-com" {
		t.Errorf("sanitized: %q", got)
	}
	long := strings.Repeat("a", 50) + ".zone-b.example.internal"
	a, b := PerNodeMemberName("cpu", long), PerNodeMemberName("cpu", long+"x")
	if len(a) > MaxSlurmNodeName || len(b) > MaxSlurmNodeName || a == b || !strings.HasPrefix(a, "cpu-aaaa") {
		t.Errorf("long names: %q (%d), %q (%d)", a, len(a), b, len(b))
	}
	if PerNodeMemberName("cpu", long) != a {
		t.Error("not stable")
	}
	for name, want := range map[string]int{"gpu-0": 0, "gpu-12": 12} {
		if i, ok := MemberOrdinal("gpu", name); !ok || i != want {
			t.Errorf("MemberOrdinal(%q) = %d, %v", name, i, ok)
		}
	}
	for _, name := range []string{"gpu-", "gpu-01", "gpu--1", "gpu-a", "gpux-1", "cpu-1", "gpu-1-2", "gpu2-1", "gpu-+1"} {
		if _, ok := MemberOrdinal("gpu", name); ok {
			t.Errorf("MemberOrdinal(%q) accepted", name)
		}
	}
}

func TestRegisteredByNodeSet(t *testing.T) {
	for _, tt := range []struct {
		name     string
		features []string
		want     bool
	}{
		{"cpu-0", []string{"cpu"}, true},
		{"gpu-node-a-1", []string{"gpu", "h100"}, true},
		{"gpu-node-a-1", []string{"h100", "gpu"}, true},
		{OrdinalMemberName("cpu", 12), []string{"cpu", "x"}, true},
		{PerNodeMemberName("pn", "ip-10-0-0-1.ec2.internal"), []string{"pn"}, true},
		// a person's dynamic node: its name is not <feature>-...
		{"slurm-n1", []string{"sunk-test"}, false},
		{"login-extra", nil, false},
		{"cpu", []string{"cpu"}, false},
		{"cpu-", []string{"cpu"}, false},
		{"cpux-0", []string{"cpu"}, false},
		{"-0", []string{""}, false},
	} {
		if got := RegisteredByNodeSet(tt.name, tt.features); got != tt.want {
			t.Errorf("RegisteredByNodeSet(%q, %q) = %v, want %v", tt.name, tt.features, got, tt.want)
		}
	}
}

func TestRegisteringNodeSet(t *testing.T) {
	for _, tt := range []struct {
		name     string
		features []string
		want     string
	}{
		{"gpu-0", []string{"gpu", "h100"}, "gpu"},
		{PerNodeMemberName("gpu", "sunk-node"), []string{"gpu"}, "gpu"},
		// NodeSet gpu-a with the feature gpu: the longer prefix is the NodeSet's own name.
		{"gpu-a-0", []string{"gpu-a", "gpu"}, "gpu-a"},
		{"gpu-a-0", []string{"gpu", "gpu-a"}, "gpu-a"},
		{"slurm-n1", []string{"sunk-test"}, ""},
		{"cpu", []string{"cpu"}, ""},
	} {
		if got := RegisteringNodeSet(tt.name, tt.features); got != tt.want {
			t.Errorf("RegisteringNodeSet(%q, %q) = %q, want %q", tt.name, tt.features, got, tt.want)
		}
	}
}
