package slurm

import "testing"

func TestConstraintAdmits(t *testing.T) {
	node := map[string]bool{"gpu": true, "a100": true, "rack1": true}
	has := func(f string) bool { return node[f] }
	for expr, want := range map[string]bool{
		"":                            true,
		"a100":                        true,
		"h100":                        false,
		"gpu&a100":                    true,
		"gpu,a100":                    true, // a comma is an &
		"gpu&h100":                    false,
		"h100|a100":                   true,
		"h100|v100":                   false,
		"h100&ib|a100":                true,  // (h100&ib)|a100
		"a100|h100&ib":                false, // left to right: (a100|h100)&ib
		"gpu&(h100|a100)":             true,
		"gpu&(h100|v100)":             false,
		"[rack1|rack2]":               true,
		"[rack2|rack3]":               false,
		"[rack1*2&rack2*4]":           true, // some nodes of each rack
		"[rack2*2&rack3*4]":           false,
		"(h100&ib)*4&a100*2":          true, // some nodes of each kind
		"(h100&ib)*4&v100*2":          false,
		"gpu*2":                       true,
		" a100 ":                      true,
		"a100&(":                      true, // unreadable: admitted, as slurmctld accepted it
		"gpu&&a100":                   true,
		"[rack1|rack2]&gpu":           true,
		"[rack1|rack2]&h100":          false,
		"((gpu))":                     true,
		"misspelt-feature-nobody-has": false,
	} {
		if got := ConstraintAdmits(expr, has); got != want {
			t.Errorf("ConstraintAdmits(%q) = %v, want %v", expr, got, want)
		}
	}
}
