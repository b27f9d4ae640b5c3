package slurm

import (
	"slices"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	for expr, want := range map[string][]string{
		"":                    nil,
		"n1":                  {"n1"},
		"slurm-n[1-3]":        {"slurm-n1", "slurm-n2", "slurm-n3"},
		"a[01-02,5],b,c[9]":   {"a01", "a02", "a5", "b", "c9"},
		"gpu-[8-10]-x":        {"gpu-8-x", "gpu-9-x", "gpu-10-x"},
		"rack[1-2],login-[0]": {"rack1", "rack2", "login-0"},
	} {
		got, err := ExpandHostlist(expr)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", expr, got, err, want)
		}
	}
	for _, bad := range []string{"n[3-1]", "n[1-x]", "n[1", "n]1", "n[1][2]", "a,,b"} {
		if got, err := ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q) = %q, want an error", bad, got)
		}
	}
}
