// Reading a cluster's Slurm node table through slurmrestd when it has no node watchers: the
// process's one copy of it per cluster, brought up to date at each read with update_time, so
// that a read of an unchanged table costs one small request instead of the whole list.

package slurmconn

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/slurm"
)

// restNodes is a cluster's node table as read through its REST client. It polls no more than
// its readers ask: slurmctld changes the table's update time at every ping round, so a poll in
// the background would fetch the whole table each round whether or not anyone reads it. And
// every read asks: an answer even a second old is not reused, because the NodeSet plan's
// rolling budget counts a replaced member unavailable until its new record registers, and a
// table from before the old record went would show the member available.
type restNodes struct {
	mu  sync.Mutex // one read at a time
	inf *slurm.Informer[string, slurm.Node]
}

// restNodeTable is the cluster's node table read through sl: the table of the cluster's client
// brought up to date (GET /nodes/?update_time=, answered "not modified" when nothing changed,
// the whole list when anything did), as fresh as a whole list read now. A client that is not
// the pool's current one for the cluster (rebuilt since the caller's For) is read once, whole.
//
// It fails closed: a read that fails is an error, never the table as last read.
func (p *Pool) restNodeTable(ctx context.Context, k types.NamespacedName, sl slurm.Client) ([]slurm.Node, error) {
	p.mu.Lock()
	c := p.conns[k]
	if c == nil || c.client != sl {
		p.mu.Unlock()
		l, err := sl.ListNodes(ctx, time.Time{})
		if err != nil {
			return nil, err
		}
		return l.Nodes, nil
	}
	if c.nodes == nil {
		// Nothing runs it: it polls when read. Its default ResyncEvery makes every 300th read a
		// whole list, the informers' safety net against a missed change.
		c.nodes = &restNodes{inf: slurm.NewNodeInformer(c.client, slurm.InformerOptions{})}
	}
	rn := c.nodes
	p.mu.Unlock()

	rn.mu.Lock()
	defer rn.mu.Unlock()
	if _, err := rn.inf.Poll(ctx); err != nil {
		return nil, fmt.Errorf("reading the Slurm node table of %s: %w", k, err)
	}
	return rn.inf.List(), nil
}
