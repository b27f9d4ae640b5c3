// Writing to Slurm in batches: the drains and resumes the workers decide are read afresh and
// sent together, one request per action and reason instead of two per node.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"sunk.dev/sunk/pkg/slurm"
)

// A cordon of a Kubernetes node with 40 compute pods made 32 workers each read and write
// their node at once; slurmrestd and slurmctld, sharing 2 cores with everything else, took
// 5–10 s per read, and the drains landed 6 s after the cordon. Batched, that is one read of
// the 40 nodes (one list, or 4 one-node reads at a time in a large cluster) and one update.
const (
	// batchWait is how long a batch waits for more requests after the last one arrived.
	batchWait = 10 * time.Millisecond
	// batchMaxWait bounds the wait from the first request of a batch.
	batchMaxWait = 50 * time.Millisecond
	// batchMax nodes per batch; more wait for the next.
	batchMax = 256
	// nodesPerRead: one GET /node/X costs slurmctld and slurmrestd about what listing this
	// many nodes costs (BenchmarkNodeList5000 on 24.11: GetNode 2.1-2.8 ms, FullList of 5,000
	// nodes 641-659 ms, 0.13 ms a node, so 16-21), so
	// k reads cost about k*nodesPerRead and one list of N nodes about N+nodesPerRead. A cordon
	// of a 40-pod node in a 5,000-node cluster is 40 small reads instead of one 12 MB list; in
	// a 100-node cluster, one list; one node is always one read.
	nodesPerRead = 20
	// readers bounds the one-node reads in flight (the pool's connections to slurmrestd).
	readers = 4
	// namesPerUpdate bounds the node names of one update request (its URL path).
	namesPerUpdate = 64
)

var (
	// errChanged: Slurm's node no longer calls for the action decided on the cached one.
	errChanged = errors.New("the node changed in Slurm since the last poll")
	// errRead: the nodes could not be read afresh, so nothing was written.
	errRead = errors.New("reading Slurm's nodes before changing them")
)

// writeReq asks for one node's action, decided on its Kubernetes causes and the GRES its pod
// registered (WithGres adds the GRES cause from the node as Slurm has it then).
type writeReq struct {
	node   string
	action Action
	causes []string
	gres   Registered
	done   chan error // nil, errChanged, slurm.ErrNotFound (wrapped) or the write's error
}

// writer batches the Syncer's drains and resumes.
type writer struct {
	sl   slurm.Client
	reqs chan writeReq
	// clusterSize is how many nodes the cluster has (the Syncer's cache), which decides
	// between reads per node and one list.
	clusterSize func() int
}

func newWriter(sl slurm.Client, clusterSize func() int) *writer {
	return &writer{sl: sl, reqs: make(chan writeReq), clusterSize: clusterSize}
}

// apply has node's action applied if Slurm, read now, still calls for it; it blocks until then.
func (w *writer) apply(ctx context.Context, node string, a Action, causes []string, gres Registered) error {
	r := writeReq{node: node, action: a, causes: causes, gres: gres, done: make(chan error, 1)}
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run serves batches until ctx ends.
func (w *writer) run(ctx context.Context) {
	for {
		var batch []writeReq
		select {
		case r := <-w.reqs:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
		deadline := time.NewTimer(batchMaxWait)
		idle := time.NewTimer(batchWait)
	collect:
		for len(batch) < batchMax {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
				idle.Reset(batchWait)
			case <-idle.C:
				break collect
			case <-deadline.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		deadline.Stop()
		idle.Stop()
		w.write(ctx, batch)
	}
}

// write reads the batch's nodes afresh, drops the requests Slurm no longer calls for, and sends
// the rest grouped by action.
func (w *writer) write(ctx context.Context, batch []writeReq) {
	fresh, err := w.read(ctx, batch)
	if err != nil {
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	groups := map[Action][]writeReq{}
	for _, r := range batch {
		n, ok := fresh[r.node]
		switch {
		case !ok:
			r.done <- fmt.Errorf("node %s: %w", r.node, slurm.ErrNotFound)
		case Decide(WithGres(r.causes, r.gres, n), n) != r.action:
			r.done <- errChanged
		default:
			groups[r.action] = append(groups[r.action], r)
		}
	}
	for a, rs := range groups {
		w.update(ctx, a, rs)
	}
}

// read returns the batch's nodes as Slurm has them now: one GET /node/X per node, readers at
// a time, or one full list when that costs less (nodesPerRead).
func (w *writer) read(ctx context.Context, batch []writeReq) (map[string]*slurm.Node, error) {
	if (len(batch)-1)*nodesPerRead > w.clusterSize() {
		return w.list(ctx, len(batch))
	}
	out := make(map[string]*slurm.Node, len(batch))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for _, r := range batch {
		g.Go(func() error {
			n, err := w.sl.GetNode(gctx, r.node)
			if errors.Is(err, slurm.ErrNotFound) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%w: node %s: %w", errRead, r.node, err)
			}
			mu.Lock()
			out[r.node] = n
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (w *writer) list(ctx context.Context, batch int) (map[string]*slurm.Node, error) {
	l, err := w.sl.ListNodes(ctx, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("%w: %d nodes: %w", errRead, batch, err)
	}
	out := make(map[string]*slurm.Node, len(l.Nodes))
	for i := range l.Nodes {
		out[l.Nodes[i].Name] = &l.Nodes[i]
	}
	return out, nil
}

// update sends one action to its nodes, namesPerUpdate at a time. slurmctld stops at the first
// node of a list it cannot update, having updated the ones before it, so a failed request is
// finished node by node: each node gets its own answer.
func (w *writer) update(ctx context.Context, a Action, rs []writeReq) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].node < rs[j].node })
	u := slurm.NodeUpdate{State: slurm.NodeStateResume}
	if a.Kind == Drain {
		reason := a.Reason
		u = slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}
	}
	for len(rs) > 0 {
		chunk := rs[:min(len(rs), namesPerUpdate)]
		rs = rs[len(chunk):]
		names := make([]string, len(chunk))
		for i, r := range chunk {
			names[i] = r.node
		}
		err := w.sl.UpdateNode(ctx, strings.Join(names, ","), u)
		if err != nil && len(chunk) > 1 {
			for _, r := range chunk {
				r.done <- w.updateOne(ctx, a, r.node, u)
			}
			continue
		}
		for _, r := range chunk {
			r.done <- err
		}
	}
}

// updateOne applies u to one node unless the failed list update did already.
func (w *writer) updateOne(ctx context.Context, a Action, name string, u slurm.NodeUpdate) error {
	n, err := w.sl.GetNode(ctx, name)
	if err != nil {
		return err
	}
	if a.Kind == Drain && n.Drained() && n.Reason == a.Reason || a.Kind == Resume && !n.Drained() {
		return nil
	}
	return w.sl.UpdateNode(ctx, name, u)
}
