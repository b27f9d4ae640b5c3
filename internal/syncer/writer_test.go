package syncer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// TestWriterBatches: a cordon's 40 drains and an uncordon's 40 resumes are one full list and
// one update each; a node a person drained meanwhile, and a node that is gone, are not
// written; every request gets its own answer.
func TestWriterBatches(t *testing.T) {
	f := slurmfake.New()
	for i := range 40 {
		f.AddNode(slurm.Node{Name: fmt.Sprintf("n%02d", i), State: []string{"IDLE"}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWriter(f, func() int { return 40 }) // the batch is the whole cluster: one list
	go w.run(ctx)

	cordon := []string{CauseCordoned}
	drain := Action{Kind: Drain, Reason: DrainReason(cordon)}
	// A person drained n05 after the syncer's cache was read: it must keep the person's reason.
	if err := f.UpdateNode(ctx, "n05", slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: ptr("bad DIMM")}); err != nil {
		t.Fatal(err)
	}
	lists, updates := f.Calls("ListNodes"), f.Calls("UpdateNode")
	errs := applyAll(ctx, w, append(names(40), "gone"), drain, cordon)
	for name, err := range errs {
		switch {
		case name == "n05":
			if !errors.Is(err, errChanged) {
				t.Errorf("n05, drained by a person meanwhile: %v, want errChanged", err)
			}
		case name == "gone":
			if !errors.Is(err, slurm.ErrNotFound) {
				t.Errorf("a node Slurm does not have: %v, want ErrNotFound", err)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := f.Calls("ListNodes") - lists; got > 2 {
		t.Errorf("%d node lists for one cordon of 40 nodes, want at most 2 (one per batch)", got)
	}
	if got := f.Calls("UpdateNode") - updates; got > 2 {
		t.Errorf("%d updates for one cordon of 40 nodes, want at most 2 (one per batch)", got)
	}
	for i := range 40 {
		n, _ := f.GetNode(ctx, fmt.Sprintf("n%02d", i))
		want := drain.Reason
		if i == 5 {
			want = "bad DIMM"
		}
		if !n.Drained() || n.Reason != want {
			t.Errorf("%s: %v %q, want drained with %q", n.Name, n.State, n.Reason, want)
		}
	}

	// The uncordon: the syncer's 39 drains are lifted, the person's stays.
	errs = applyAll(ctx, w, names(40), Action{Kind: Resume}, nil)
	for name, err := range errs {
		if name == "n05" {
			if !errors.Is(err, errChanged) {
				t.Errorf("resuming the person's drain on n05: %v, want errChanged", err)
			}
		} else if err != nil {
			t.Errorf("resume %s: %v", name, err)
		}
	}
	if n, _ := f.GetNode(ctx, "n05"); !n.Drained() {
		t.Errorf("n05 resumed: the person's drain was lifted")
	}
	if n, _ := f.GetNode(ctx, "n06"); n.Drained() {
		t.Errorf("n06 still drained after the resume")
	}
}

// TestWriterFallsBackPerNode: slurmctld stops at the first node of a list it cannot update;
// the writer then updates node by node, so one bad node fails only its own request.
func TestWriterFallsBackPerNode(t *testing.T) {
	f := slurmfake.New()
	for _, n := range []string{"a", "b", "c", "d"} {
		f.AddNode(slurm.Node{Name: n, State: []string{"IDLE", "DRAIN"}, Reason: "k8s: node cordoned"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWriter(f, func() int { return 4 })
	// "b" is deleted between the writer's read and its update: the list update stops there.
	rs := []writeReq{}
	for _, n := range []string{"a", "b", "c", "d"} {
		rs = append(rs, writeReq{node: n, action: Action{Kind: Resume}, done: make(chan error, 1)})
	}
	if err := f.DeleteNode(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	w.update(ctx, Action{Kind: Resume}, rs)
	for _, r := range rs {
		err := <-r.done
		if (r.node == "b") != errors.Is(err, slurm.ErrNotFound) {
			t.Errorf("%s: %v", r.node, err)
		}
	}
	for _, n := range []string{"a", "c", "d"} {
		if got, _ := f.GetNode(ctx, n); got.Drained() {
			t.Errorf("%s still drained: one bad node stopped the others", n)
		}
	}
}

// TestWriterReadsOneNodeEach: in a large cluster a cordon's 40 drains read their 40 nodes one
// by one (GET /node/X), not the whole table; a node that is gone is ErrNotFound; a failed read
// writes nothing at all.
func TestWriterReadsOneNodeEach(t *testing.T) {
	f := slurmfake.New()
	for i := range 40 {
		f.AddNode(slurm.Node{Name: fmt.Sprintf("n%02d", i), State: []string{"IDLE"}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWriter(f, func() int { return 5000 })
	go w.run(ctx)
	cordon := []string{CauseCordoned}
	drain := Action{Kind: Drain, Reason: DrainReason(cordon)}
	reads := f.Calls("GetNode")
	for name, err := range applyAll(ctx, w, append(names(40), "gone"), drain, cordon) {
		if (name == "gone") != errors.Is(err, slurm.ErrNotFound) || name != "gone" && err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := f.Calls("ListNodes"); got != 0 {
		t.Errorf("%d node lists, want none (40 of 5,000 nodes)", got)
	}
	if got := f.Calls("GetNode") - reads; got != 41 {
		t.Errorf("%d node reads, want 41", got)
	}
	for i := range 40 {
		if n, _ := f.GetNode(ctx, fmt.Sprintf("n%02d", i)); !n.Drained() {
			t.Errorf("n%02d not drained", i)
		}
	}

	// A read that fails: nothing written, every request told.
	f.SetError("GetNode", errors.New("slurmrestd: 500"))
	updates := f.Calls("UpdateNode")
	resume := Action{Kind: Resume}
	for name, err := range applyAll(ctx, w, names(10), resume, nil) {
		if !errors.Is(err, errRead) {
			t.Errorf("%s: %v, want errRead", name, err)
		}
	}
	if got := f.Calls("UpdateNode") - updates; got != 0 {
		t.Errorf("%d updates after a failed read, want none", got)
	}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%02d", i)
	}
	return out
}

// applyAll sends the action for every node at once, as the workers do after a cordon.
func applyAll(ctx context.Context, w *writer, nodes []string, a Action, causes []string) map[string]error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]error{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.apply(ctx, n, a, causes, Registered{})
			mu.Lock()
			out[n] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func ptr[T any](v T) *T { return &v }
