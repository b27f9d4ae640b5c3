package plugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// The shapes' digest is computed again when a node's shape changes (a node registers or leaves,
// its GRES or partitions change), and kept while only its state does (a job started on it):
// a kept digest is one refusalAsk does not pay for. Unwatched, it is computed at every call.
func TestNodeShapes(t *testing.T) {
	ctx := context.Background()
	fk := slurmfake.New()
	fk.AddNode(slurm.Node{Name: "n1", CPUs: 8, Gres: "gpu:h100:8", Partitions: []string{"gpu"}})
	nodes := slurm.NewNodeInformer(fk, slurm.InformerOptions{})
	poll := func() {
		t.Helper()
		if _, err := nodes.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll()
	var unwatched, s nodeShapes
	first := unwatched.digest(nodes.All())
	s.watch(nodes)
	if got := s.digest(nodes.All()); got != first {
		t.Fatal("watched and unwatched digests of the same nodes differ")
	}
	computed := s.at

	for _, c := range []struct {
		name    string
		change  func()
		changes bool
	}{
		{"a job starts on n1", func() {
			fk.AddNode(slurm.Node{Name: "n1", CPUs: 8, AllocCPUs: 4, Gres: "gpu:h100:8", Partitions: []string{"gpu"}, State: []string{"MIXED"}})
		}, false},
		{"n1 has more GPUs", func() { fk.AddNode(slurm.Node{Name: "n1", CPUs: 8, Gres: "gpu:h100:16", Partitions: []string{"gpu"}}) }, true},
		{"n1 joins a partition", func() {
			fk.AddNode(slurm.Node{Name: "n1", CPUs: 8, Gres: "gpu:h100:16", Partitions: []string{"gpu", "all"}})
		}, true},
		{"n2 registers", func() { fk.AddNode(slurm.Node{Name: "n2", CPUs: 4}) }, true},
		{"n2 leaves", func() {
			if err := fk.DeleteNode(ctx, "n2"); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		before := s.digest(nodes.All())
		c.change()
		poll()
		after := s.digest(nodes.All())
		if recomputed := s.at != computed; recomputed != c.changes || (after != before) != c.changes {
			t.Errorf("%s: computed again %v, digest changed %v; want %v", c.name, recomputed, after != before, c.changes)
		}
		if fresh := unwatched.digest(nodes.All()); fresh != after {
			t.Errorf("%s: the kept digest is not the nodes' digest", c.name)
		}
		computed = s.at
	}
}

// BenchmarkNodeShapes: the shapes' digest at 5,000 nodes, kept (what refusalAsk pays per pod
// while no shape changes) against computed at every call (what it paid before, and pays after
// a change), in the same run.
func BenchmarkNodeShapes(b *testing.B) {
	const n = 5000
	fk := slurmfake.New()
	for i := range n {
		fk.AddNode(slurm.Node{Name: fmt.Sprintf("gpu-%04d", i), CPUs: 128, RealMemoryMB: 2 << 20, Gres: "gpu:h100:8",
			Partitions: []string{"gpu", "all"}, Features: []string{"rack-" + fmt.Sprint(i/32)}})
	}
	nodes := slurm.NewNodeInformer(fk, slurm.InformerOptions{})
	if _, err := nodes.Poll(context.Background()); err != nil {
		b.Fatal(err)
	}
	var kept, computed nodeShapes
	kept.watch(nodes)
	kept.digest(nodes.All()) // computed once, then kept
	per := func(s *nodeShapes) time.Duration {
		start := time.Now()
		for range b.N {
			s.digest(nodes.All())
		}
		return time.Since(start) / time.Duration(b.N)
	}
	k, c := per(&kept), per(&computed)
	if kept.digest(nodes.All()) != computed.digest(nodes.All()) {
		b.Fatal("the kept digest differs from the computed one")
	}
	fmt.Printf("bench: name=node-shapes nodes=%d kept_us=%.2f computed_us=%.0f\n", n, float64(k.Nanoseconds())/1e3, float64(c.Nanoseconds())/1e3)
}
