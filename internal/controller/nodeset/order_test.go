package nodeset

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
)

func names(ms []render.ComputeMember) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name+"@"+m.NodeName)
	}
	return out
}

func TestPerNodeDesired(t *testing.T) {
	selected := []string{"a", "b.x", "b-x", "c", "d"}
	held := map[string]string{"c": "older"}
	withPod := map[string]bool{"cpu-d": true}
	candidates, conflicts := perNodeOrder("cpu", selected, held, func(n string) bool { return withPod[n] })
	if want := []string{"cpu-d@d", "cpu-a@a", "cpu-b-x@b-x"}; !slices.Equal(names(candidates), want) {
		t.Errorf("candidates %v, want %v: nodes with a pod first, then by node name", names(candidates), want)
	}
	if len(conflicts) != 2 || !strings.Contains(conflicts[0], "node c is held by the older NodeSet older") || !strings.Contains(conflicts[1], "cpu-b-x") {
		t.Errorf("conflicts %q", conflicts)
	}
	if got, want := names(perNodeDesired(candidates, nil)), []string{"cpu-a@a", "cpu-b-x@b-x", "cpu-d@d"}; !slices.Equal(got, want) {
		t.Errorf("desired %v, want %v", got, want)
	}
	// A cap keeps the nodes that have pods.
	if got, want := names(perNodeDesired(candidates, ptr.To(int32(2)))), []string{"cpu-a@a", "cpu-d@d"}; !slices.Equal(got, want) {
		t.Errorf("capped: %v, want %v", got, want)
	}
	if !slices.Equal(names(candidates), []string{"cpu-d@d", "cpu-a@a", "cpu-b-x@b-x"}) {
		t.Errorf("perNodeDesired reordered the candidates: %v", names(candidates))
	}
}

// TestMemberOrder: position i is the same member for the autoscaler (name, position) and the
// members step (desired): spec.replicas n runs exactly positions 0 .. n-1, in both modes.
func TestMemberOrder(t *testing.T) {
	hasPod := map[string]bool{"gpu-n3": true}
	candidates, _ := perNodeOrder("gpu", []string{"n1", "n2", "n3", "n4"}, nil, func(n string) bool { return hasPod[n] })
	for _, tc := range []struct {
		name      string
		order     memberOrder
		positions []string // the names at positions 0, 1, …
		end       bool     // no member past positions
		unset     int32    // members run with spec.replicas unset
	}{
		{name: "Replicas", order: replicasOrder("cpu"), positions: []string{"cpu-0", "cpu-1", "cpu-2", "cpu-3", "cpu-4"}},
		{name: "PerNode", order: perNodeMemberOrder("gpu", candidates),
			positions: []string{"gpu-n3", "gpu-n1", "gpu-n2", "gpu-n4"}, end: true, unset: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.order
			for i, want := range tc.positions {
				if got, ok := o.name(i); !ok || got != want {
					t.Errorf("name(%d) = %q, %v; want %q", i, got, ok, want)
				}
				if got, ok := o.position(want); !ok || got != i {
					t.Errorf("position(%q) = %d, %v; want %d", want, got, ok, i)
				}
			}
			if _, ok := o.name(len(tc.positions)); ok == tc.end {
				t.Errorf("name(%d): ok %v, want %v", len(tc.positions), ok, !tc.end)
			}
			for _, stranger := range []string{"other-0", "gpu-n9", "cpu-x"} {
				if i, ok := o.position(stranger); ok {
					t.Errorf("position(%q) = %d: no candidate has that name", stranger, i)
				}
			}
			if got := o.running(nil); got != tc.unset {
				t.Errorf("running(unset) = %d, want %d", got, tc.unset)
			}
			for n := range int32(len(tc.positions)) + 1 {
				want := slices.Clone(tc.positions[:n])
				slices.Sort(want)
				var got []string
				for _, m := range o.desired(ptr.To(n)) {
					got = append(got, m.Name)
				}
				if !slices.Equal(got, want) || o.running(ptr.To(n)) != n {
					t.Errorf("replicas %d: desired %v (running %d), want positions 0..%d: %v", n, got, o.running(ptr.To(n)), n-1, want)
				}
			}
			for i, name := range tc.positions {
				if got := o.keepsParked(name, 2); got != (i < 2) {
					t.Errorf("keepsParked(%q at %d, max 2) = %v", name, i, got)
				}
			}
			if o.keepsParked("other-0", 10) {
				t.Error("keepsParked: a record that is no candidate stays parked")
			}
		})
	}
	// Above the candidates, a PerNode NodeSet runs them all.
	if got := perNodeMemberOrder("gpu", candidates).running(ptr.To(int32(9))); got != 4 {
		t.Errorf("running(9) of 4 candidates = %d", got)
	}
}

func TestMemberRecords(t *testing.T) {
	nodes := []slurm.Node{
		{Name: "gpu-0", Features: []string{"gpu"}},
		{Name: "gpu-n1", Features: []string{"gpu"}},
		{Name: "gpu-a-0", Features: []string{"gpu-a", "gpu"}}, // NodeSet gpu-a's, with the feature gpu
		{Name: "gpu-n2", Features: []string{"other"}},         // a person's dynamic node
		{Name: "cpu-0", Features: []string{"cpu"}},
	}
	for _, tc := range []struct {
		mode sunkv1.NodeSetMode
		want []string
	}{
		{sunkv1.NodeSetReplicas, []string{"gpu-0"}},
		{sunkv1.NodeSetPerNode, []string{"gpu-0", "gpu-n1"}},
	} {
		ns := &sunkv1.NodeSet{Spec: sunkv1.NodeSetSpec{Mode: tc.mode}}
		ns.Name = "gpu"
		var got []string
		for name := range memberRecords(ns, nodes) {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: records %v, want %v", tc.mode, got, tc.want)
		}
	}
}
