package syncer

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"sunk.dev/sunk/pkg/slurm"
)

// RunningCluster is a SlurmCluster whose Syncer runs, for readers in the same process that
// share its REST client (the Slurm exporter, internal/exporter): one client per cluster per
// process, and only on the leader.
type RunningCluster struct {
	Key   types.NamespacedName
	Slurm slurm.Client
	// Nodes is the Syncer's Slurm node cache, to read and never to poll.
	Nodes *slurm.Informer[string, slurm.Node]
}

// NodeCache is the Syncer's Slurm node cache (its Informer, which Run polls every
// PollInterval). Read it; polling it from elsewhere would move the Syncer's `since`.
func (s *Syncer) NodeCache() *slurm.Informer[string, slurm.Node] { return s.nodes }

// Running lists the clusters whose Syncer runs, by key. It is empty before the manager has
// started the Syncers and on a replica that is not the leader.
func (c *Clusters) Running() []RunningCluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]RunningCluster, 0, len(c.running))
	for key, r := range c.running {
		rc := RunningCluster{Key: key, Slurm: r.slurm}
		if r.syncer != nil {
			rc.Nodes = r.syncer.NodeCache()
		}
		out = append(out, rc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}
