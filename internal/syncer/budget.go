package syncer

import (
	"slices"
	"sync"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// budget keeps the counts the drain budget (HeldBy) needs, so that deciding one drain does
// not scan every node: the Slurm node cache's handlers keep the cluster's nodes and their
// budgeted drains up to date, and the workers add the drains they send until the cache shows
// them (without that, workers deciding at the same time would each see room for one more).
type budget struct {
	owns    func(*slurm.Node) bool
	percent int
	stale   time.Duration // a drain sent and not shown for this long counts no more

	mu      sync.Mutex
	nodes   map[string]struct{}     // the cluster's Slurm nodes (owns)
	drained map[string][]string     // node -> causes of its budgeted drain, as Slurm shows it
	pending map[string]pendingDrain // node -> a budgeted drain sent, not in the cache yet
	held    map[string]string       // node -> the cause whose budget holds its drain back
}

type pendingDrain struct {
	causes []string
	at     time.Time
}

func newBudget(owns func(*slurm.Node) bool, percent int, stale time.Duration) *budget {
	return &budget{owns: owns, percent: percent, stale: stale, nodes: map[string]struct{}{},
		drained: map[string][]string{}, pending: map[string]pendingDrain{}, held: map[string]string{}}
}

// observe takes in a node as the cache now shows it (gone: deleted). It reports whether the
// budget may have room it had not before (a budgeted drain ended, or the limit grew), so that
// the drains it holds are decided again.
func (b *budget) observe(n *slurm.Node, gone bool) (freed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.limit()
	was := b.drained[n.Name]
	if gone || !b.owns(n) {
		delete(b.nodes, n.Name)
		delete(b.drained, n.Name)
		delete(b.pending, n.Name)
	} else {
		b.nodes[n.Name] = struct{}{}
		if causes := BudgetedDrainOf(n); causes != nil {
			b.drained[n.Name] = causes
		} else {
			delete(b.drained, n.Name)
		}
		if n.Drained() {
			delete(b.pending, n.Name) // the cache shows it now
		}
	}
	for _, c := range was {
		if !slices.Contains(b.drained[n.Name], c) {
			freed = true // no longer drained for c
		}
	}
	return freed || b.limit() > limit
}

func (b *budget) limit() int { return Budget{Nodes: len(b.nodes), Percent: b.percent}.Limit() }

// view is the Budget for a decision about node self: the drains of the other nodes, those
// the cache shows and those sent since. Callers hold mu.
func (b *budget) view(self string) Budget {
	v := Budget{Nodes: len(b.nodes), Percent: b.percent, DrainedFor: map[string]int{}}
	for name, causes := range b.drained {
		if name != self {
			for _, c := range causes {
				v.DrainedFor[c]++
			}
		}
	}
	now := time.Now()
	for name, p := range b.pending {
		switch {
		case now.Sub(p.at) > b.stale:
			delete(b.pending, name) // lost or undone: the cache would show it by now
		case name != self:
			for _, c := range p.causes {
				if !slices.Contains(b.drained[name], c) {
					v.DrainedFor[c]++
				}
			}
		}
	}
	return v
}

// admit applies HeldBy to the action for node and, when it goes ahead as a budgeted drain,
// counts it as sent. heldBy is the cause that holds it back ("" when it goes ahead);
// newly is true the first time a node is held for that cause, for the event and the metric.
func (b *budget) admit(a Action, n *slurm.Node, causes []string) (heldBy string, newly bool, v Budget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v = b.view(n.Name)
	heldBy = HeldBy(a, n, causes, v)
	if heldBy == "" {
		delete(b.held, n.Name)
		if a.Kind == Drain && !n.Drained() && Budgeted(causes) {
			b.pending[n.Name] = pendingDrain{causes: causeKinds(causes), at: time.Now()}
		}
		return "", false, v
	}
	newly = b.held[n.Name] != heldBy
	b.held[n.Name] = heldBy
	return heldBy, newly, v
}

// release forgets a drain admitted but not sent (Slurm refused it).
func (b *budget) release(name string) {
	b.mu.Lock()
	delete(b.pending, name)
	b.mu.Unlock()
}

// forget drops a node that wants no drain any more (its pod is gone).
func (b *budget) forget(name string) {
	b.mu.Lock()
	delete(b.held, name)
	b.mu.Unlock()
}

// heldNodes are the nodes whose drain the budget holds back.
func (b *budget) heldNodes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.held))
	for name := range b.held {
		out = append(out, name)
	}
	return out
}
