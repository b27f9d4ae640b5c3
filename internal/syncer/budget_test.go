package syncer

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

func dynamicNode(name, reason string, state ...string) *slurm.Node {
	return &slurm.Node{Name: name, State: append(state, "DYNAMIC_NORM"), Reason: reason}
}

// newTestBudget knows n idle dynamic nodes n0..n(n-1); a static node is not the cluster's.
func newTestBudget(t *testing.T, n int, stale time.Duration) *budget {
	t.Helper()
	b := newBudget(func(n *slurm.Node) bool { return n.HasState("DYNAMIC_NORM") }, DefaultDrainBudgetPercent, stale)
	for i := range n {
		b.observe(dynamicNode(fmt.Sprintf("n%d", i), "", "IDLE"), false)
	}
	b.observe(&slurm.Node{Name: "static", State: []string{"IDLE"}}, false)
	return b
}

var notReadyDrain = Action{Kind: Drain, Reason: DrainReason([]string{CausePodNotReady})}

func TestBudgetHoldsUntilADrainEnds(t *testing.T) {
	b := newTestBudget(t, 10, time.Minute) // limit 1
	causes := []string{CausePodNotReady}
	if held, _, _ := b.admit(notReadyDrain, dynamicNode("n1", "", "IDLE"), causes); held != "" {
		t.Fatalf("first drain held by %q", held)
	}
	// Sent, not in the cache yet: it counts already.
	held, newly, v := b.admit(notReadyDrain, dynamicNode("n2", "", "IDLE"), causes)
	if held != CausePodNotReady || !newly || v.DrainedFor[CausePodNotReady] != 1 || v.Nodes != 10 {
		t.Fatalf("second drain: held by %q, newly %v, view %+v", held, newly, v)
	}
	if _, newly, _ := b.admit(notReadyDrain, dynamicNode("n2", "", "IDLE"), causes); newly {
		t.Error("a node held again is reported again")
	}
	if got := b.heldNodes(); len(got) != 1 || got[0] != "n2" {
		t.Errorf("held %v, want [n2]", got)
	}
	// The cache shows n1 drained: still one.
	if b.observe(dynamicNode("n1", "k8s: pod not Ready", "IDLE", "DRAIN"), false) {
		t.Error("a drain that starts frees nothing")
	}
	if held, _, _ := b.admit(notReadyDrain, dynamicNode("n2", "", "IDLE"), causes); held == "" {
		t.Error("n2 drained while n1 holds the budget")
	}
	// n1 is resumed: room for n2.
	if !b.observe(dynamicNode("n1", "k8s: pod not Ready", "IDLE"), false) {
		t.Error("a drain that ends frees nothing")
	}
	if held, _, _ := b.admit(notReadyDrain, dynamicNode("n2", "", "IDLE"), causes); held != "" {
		t.Errorf("n2 still held by %q", held)
	}
	if got := b.heldNodes(); len(got) != 0 {
		t.Errorf("held %v after the drain went ahead", got)
	}
}

func TestBudgetCountsOnlyBudgetedDrainsOfTheCluster(t *testing.T) {
	b := newTestBudget(t, 10, time.Minute)
	b.observe(dynamicNode("n1", "k8s: node cordoned; pod not Ready", "IDLE", "DRAIN"), false) // exempt
	b.observe(dynamicNode("n3", "pod not Ready", "IDLE", "DRAIN"), false)                     // a person's
	b.observe(&slurm.Node{Name: "static", State: []string{"IDLE", "DRAIN"}, Reason: "k8s: pod not Ready"}, false)
	if held, _, v := b.admit(notReadyDrain, dynamicNode("n2", "", "IDLE"), []string{CausePodNotReady}); held != "" {
		t.Errorf("held by %q with %+v", held, v)
	}
}

func TestBudgetFreesWhenTheCauseChangesOrTheNodeGoes(t *testing.T) {
	b := newTestBudget(t, 10, time.Minute)
	b.observe(dynamicNode("n1", "k8s: node NotReady; pod not Ready", "IDLE", "DRAIN"), false)
	if !b.observe(dynamicNode("n1", "k8s: pod not Ready", "IDLE", "DRAIN"), false) {
		t.Error("no longer drained for node NotReady: frees that budget")
	}
	if !b.observe(dynamicNode("n1", "k8s: pod not Ready", "IDLE", "DRAIN"), true) {
		t.Error("a drained node that goes frees its budget")
	}
}

func TestBudgetGrowsWithTheCluster(t *testing.T) {
	b := newTestBudget(t, 19, time.Minute) // limit 1
	if !b.observe(dynamicNode("n19", "", "IDLE"), false) {
		t.Error("the 20th node raises the limit to 2: held drains are due")
	}
	if b.observe(dynamicNode("n20", "", "IDLE"), false) {
		t.Error("the 21st node does not raise the limit")
	}
}

func TestBudgetForgetsDrainsTheCacheNeverShows(t *testing.T) {
	b := newTestBudget(t, 10, 0) // a drain sent counts until the cache could have shown it: here, not at all
	causes := []string{CausePodNotReady}
	if held, _, _ := b.admit(notReadyDrain, dynamicNode("n1", "", "IDLE"), causes); held != "" {
		t.Fatal(held)
	}
	b.release("n1") // and one Slurm refused does not count either
	if held, _, _ := b.admit(notReadyDrain, dynamicNode("n2", "", "IDLE"), causes); held != "" {
		t.Errorf("held by %q: a lost drain still counts", held)
	}
}

// Workers decide at the same time on one cache snapshot; the budget still admits no more
// than its limit.
func TestBudgetConcurrentAdmits(t *testing.T) {
	b := newTestBudget(t, 20, time.Minute) // limit 2
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if held, _, _ := b.admit(notReadyDrain, dynamicNode(fmt.Sprintf("n%d", i), "", "IDLE"), []string{CausePodNotReady}); held == "" {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 2 {
		t.Errorf("%d drains admitted, want 2", admitted)
	}
}
