package slurm

import (
	"context"
	"errors"
	"time"
)

// NodeChanges is an answer of a NodeChangeSource: the whole node table (Full) or the nodes that
// changed and the names of the nodes deleted since the previous answer.
type NodeChanges struct {
	Full    bool
	Nodes   []Node
	Deleted []string
}

// NodeChangeSource answers with the node changes since its previous answer, waiting a while
// for one when there is none (pkg/nodewatch's Client). An error must mean "unknown", never
// "nothing changed".
type NodeChangeSource interface {
	NodeChanges(ctx context.Context) (NodeChanges, error)
}

// NewNodeChangeInformer keeps nodes from src: each answer costs what changed, and Run asks
// again as soon as an answer is applied (src paces itself by waiting for changes). It fails
// like a polling Informer: an error keeps the store and is kept in LastError.
func NewNodeChangeInformer(src NodeChangeSource, opts InformerOptions) *Informer[string, Node] {
	i := newInformer(opts, func(context.Context, time.Time) ([]Node, time.Time, bool, error) {
		return nil, time.Time{}, false, errors.New("a change informer does not list")
	}, func(n *Node) string { return n.Name })
	i.changes = func(ctx context.Context) ([]Node, []string, bool, error) {
		c, err := src.NodeChanges(ctx)
		return c.Nodes, c.Deleted, c.Full, err
	}
	return i
}

func (i *Informer[K, T]) pollChanges(ctx context.Context) (PollResult, error) {
	objs, deleted, full, err := i.changes(ctx)
	i.mu.Lock()
	i.polls++
	if err != nil {
		i.lastErr = err
		i.mu.Unlock()
		return PollResult{}, err
	}
	i.lastErr, i.lastSuccess = nil, time.Now()
	if !full && !i.synced {
		i.mu.Unlock()
		return PollResult{}, errors.New("a change source answered with changes before the whole table")
	}
	res := PollResult{Full: full, NotModified: !full && len(objs) == 0 && len(deleted) == 0}
	if res.NotModified {
		i.mu.Unlock()
		return res, nil
	}
	return i.applyLocked(res, objs, deleted, full), nil
}
