package slurmcluster

import (
	"strings"
	"testing"
	"time"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/render"
)

func TestDecideTopology(t *testing.T) {
	const settle, maxDelay = 10 * time.Second, 60 * time.Second
	t0 := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	head := "# Rendered by sunk: topology/tree from the Kubernetes node labels a, b.\n"
	a, b, c := head+"SwitchName=s Nodes=n-[0-1]\n", head+"SwitchName=s Nodes=n-[0-2]\n", head+"SwitchName=s Nodes=n-[0-3]\n"
	other := "# Rendered by sunk: topology/block from the Kubernetes node labels r.\nBlockName=r Nodes=n-0\n"
	for _, tc := range []struct {
		name             string
		current, desired string
		pending          *pendingTopology
		now              time.Time
		apply            bool
		wait             time.Duration
		pendingFirst     time.Time
	}{
		{name: "unchanged", current: a, desired: a, now: t0, apply: true},
		{name: "no file yet", current: "", desired: a, now: t0, apply: true},
		{name: "another plugin: at once", current: a, desired: other, now: t0, apply: true},
		{name: "first change waits", current: a, desired: b, now: t0, wait: settle, pendingFirst: t0},
		{name: "same change, still settling", current: a, desired: b, pending: &pendingTopology{b, t0, t0}, now: t0.Add(4 * time.Second), wait: 6 * time.Second, pendingFirst: t0},
		{name: "same change, settled", current: a, desired: b, pending: &pendingTopology{b, t0, t0}, now: t0.Add(settle), apply: true},
		// A scale-up adds a pod every few seconds: each one restarts the settle time...
		{name: "another change restarts the settle time", current: a, desired: c, pending: &pendingTopology{b, t0, t0}, now: t0.Add(8 * time.Second), wait: settle, pendingFirst: t0},
		// ...but not past the longest delay.
		{name: "the longest delay caps the wait", current: a, desired: c, pending: &pendingTopology{b, t0, t0.Add(50 * time.Second)}, now: t0.Add(55 * time.Second), wait: 5 * time.Second, pendingFirst: t0},
		{name: "the longest delay is reached", current: a, desired: c, pending: &pendingTopology{c, t0, t0.Add(55 * time.Second)}, now: t0.Add(maxDelay), apply: true},
		{name: "back to the current file", current: a, desired: a, pending: &pendingTopology{b, t0, t0}, now: t0.Add(time.Second), apply: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apply, next, wait := decideTopology(tc.current, tc.desired, tc.pending, tc.now, settle, maxDelay)
			if apply != tc.apply || wait != tc.wait {
				t.Fatalf("apply %t wait %v, want %t %v", apply, wait, tc.apply, tc.wait)
			}
			if apply != (next == nil) {
				t.Fatalf("apply %t but pending %+v", apply, next)
			}
			if next != nil && (next.conf != tc.desired || !next.first.Equal(tc.pendingFirst)) {
				t.Fatalf("pending %+v", next)
			}
		})
	}
}

// On Slurm 25.05 and later the file is topology.yaml: a change of nodes waits like
// topology.conf's, a change of kind or keys does not (the file names both per topology).
func TestDecideTopologyYAML(t *testing.T) {
	const settle, maxDelay = 10 * time.Second, 60 * time.Second
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	file := func(spec *sunkv1.TopologySpec, nodes ...string) string {
		t.Helper()
		var tn []render.TopologyNode
		for _, n := range nodes {
			tn = append(tn, render.TopologyNode{Name: n, Labels: map[string]string{"example.com/leaf": "l-a"}})
		}
		topo, err := render.RenderTopology(spec, tn)
		if err != nil {
			t.Fatal(err)
		}
		_, y, err := render.TopologyFile(topo, true)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	tree := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"example.com/leaf"}}}
	block := &sunkv1.TopologySpec{Block: &sunkv1.BlockTopology{LabelKey: "example.com/leaf"}}
	a, b := file(tree, "n-0"), file(tree, "n-0", "n-1")
	if apply, _, wait := decideTopology(a, b, nil, t0, settle, maxDelay); apply || wait != settle {
		t.Errorf("a node more: apply %t wait %v, want to wait %v", apply, wait, settle)
	}
	if apply, _, _ := decideTopology(a, file(block, "n-0", "n-1"), nil, t0, settle, maxDelay); !apply {
		t.Errorf("tree to block waits")
	}
	if apply, _, _ := decideTopology(file(tree), b, nil, t0, settle, maxDelay); apply {
		t.Errorf("the first node of a flat topology.yaml is written at once; want it debounced like the others")
	}
}

// planTopologyStr: which nodes move by topology_str now, which wait for the file, and which
// places the file keeps, on a tree of spine s with leaves a and b (labels as the operator
// reads them).
func TestPlanTopologyStr(t *testing.T) {
	spec := &sunkv1.TopologySpec{Tree: &sunkv1.TreeTopology{LabelKeys: []string{"spine", "leaf"}}}
	tree := func(places ...string) *render.Topology { // node=spine/leaf ...
		t.Helper()
		var nodes []render.TopologyNode
		for _, p := range places {
			node, path, _ := strings.Cut(p, "=")
			spine, leaf, _ := strings.Cut(path, "/")
			nodes = append(nodes, render.TopologyNode{Name: node, Labels: map[string]string{"spine": spine, "leaf": leaf}})
		}
		topo, err := render.RenderTopology(spec, nodes)
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	file := func(topo *render.Topology) *render.FileTopology {
		t.Helper()
		_, y, err := render.TopologyFile(topo, true)
		if err != nil {
			t.Fatal(err)
		}
		ft, err := render.ReadTopologyYAML(y)
		if err != nil {
			t.Fatal(err)
		}
		return ft
	}
	ab := file(tree("n0=s/a", "n1=s/b"))
	for _, tc := range []struct {
		name    string
		running *render.FileTopology
		desired *render.Topology
		strs    map[string]string
		moves   string // node=str, ...
		waiting string
		keep    string
		err     string
	}{
		{name: "unchanged", running: ab, desired: tree("n0=s/a", "n1=s/b"), strs: map[string]string{"n0": "", "n1": ""}},
		{name: "relabel to a leaf the running file has: moved now", running: ab, desired: tree("n0=s/b", "n1=s/b"),
			strs: map[string]string{"n0": "", "n1": ""}, moves: "n0=tree:s:b"},
		{name: "moved: its string is its place", running: ab, desired: tree("n0=s/b", "n1=s/b"), strs: map[string]string{"n0": "tree:s:b", "n1": ""}},
		{name: "relabel to a new leaf: the file first", running: ab, desired: tree("n0=s/c", "n1=s/b"),
			strs: map[string]string{"n0": "", "n1": ""}, waiting: "n0"},
		{name: "a string naming the old leaf keeps it in the file", running: ab, desired: tree("n0=t/c", "n1=s/b"),
			strs: map[string]string{"n0": "tree:s:a", "n1": ""}, waiting: "n0", keep: "s:a"},
		{name: "the file has the new leaf and keeps the old: moved now", running: file(tree("n0=t/c", "n1=s/b", "x=s/a")), desired: tree("n0=t/c", "n1=s/b"),
			strs: map[string]string{"n0": "tree:s:a", "n1": ""}, moves: "n0=tree:t:c", keep: "s:a"},
		{name: "a node slurmd has not registered waits for the file", running: ab, desired: tree("n0=s/a", "n1=s/b", "n2=s/a"), strs: map[string]string{"n0": "", "n1": ""}},
		{name: "a node Slurm has but no Ready pod: its place is kept", running: ab, desired: tree("n1=s/b"), strs: map[string]string{"n0": "tree:s:a", "n1": ""}, keep: "s:a"},
		{name: "Slurm unreadable: every running place is kept", running: ab, desired: tree("n0=s/c", "n1=s/c"), keep: "s:a s:b"},
		{name: "a string of another topology", running: ab, desired: tree("n0=s/a"), strs: map[string]string{"n0": "nvl:blk-1"}, err: `node n0 is placed by topology_str "nvl:blk-1", outside topology "tree"`},
		{name: "no running file yet", desired: tree("n0=s/a"), strs: map[string]string{"n0": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planTopologyStr(tc.running, tc.desired, tc.strs)
			var moves, keep []string
			for _, m := range p.moves {
				moves = append(moves, m.Node+"="+m.TopologyStr)
			}
			for _, k := range p.keep {
				keep = append(keep, render.PlaceKey(k))
			}
			errs := ""
			if p.err != nil {
				errs = p.err.Error()
			}
			if got := strings.Join(moves, ", "); got != tc.moves {
				t.Errorf("moves %q, want %q", got, tc.moves)
			}
			if got := strings.Join(p.waiting, ", "); got != tc.waiting {
				t.Errorf("waiting %q, want %q", got, tc.waiting)
			}
			if got := strings.Join(keep, " "); got != tc.keep {
				t.Errorf("keep %q, want %q", got, tc.keep)
			}
			if errs != tc.err {
				t.Errorf("error %q, want %q", errs, tc.err)
			}
		})
	}
}
