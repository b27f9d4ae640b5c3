// The digest of the Slurm nodes' shapes, part of every refusal's ask, kept until a shape changes.

package plugin

import (
	"crypto/sha256"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"sunk.dev/sunk/pkg/slurm"
)

// nodeShapes is the digest of every Slurm node's shape (name, CPUs, memory, GRES, partitions,
// features: what decides whether a job can ever be satisfied, not the state, which every job
// changes). refusalAsk includes it for each pod it sums up, and a gang's submission asks once per
// member: formatted per call, it was a line per node per member, seconds for a gang of 1,000 at
// 5,000 nodes. It is computed again only after the node informer's handlers saw a shape change.
type nodeShapes struct {
	// watched is set once the handlers are registered; until then every call computes.
	watched atomic.Bool
	// changes counts the shape changes the handlers saw.
	changes atomic.Uint64

	mu    sync.Mutex
	valid bool
	at    uint64 // changes when sum was computed
	sum   [sha256.Size]byte
}

// watch registers the handlers that count shape changes on nodes.
func (s *nodeShapes) watch(nodes *slurm.Informer[string, slurm.Node]) {
	nodes.AddHandler(slurm.Handler[slurm.Node]{
		OnAdd: func(slurm.Node) { s.changes.Add(1) },
		OnUpdate: func(old, n slurm.Node) {
			if shapeOf(&old) != shapeOf(&n) {
				s.changes.Add(1)
			}
		},
		OnDelete: func(slurm.Node) { s.changes.Add(1) },
	})
	s.watched.Store(true)
}

// digest is the digest of the nodes' shapes. The change count is read before the nodes: a
// change the handlers have not counted yet is either in the nodes read (the sum is fresh) or
// counted later (the next call computes again), so a stale sum lasts only until the handler of
// the change has run, and a refusal compared against it asks again at the next change.
func (s *nodeShapes) digest(nodes iter.Seq[slurm.Node]) [sha256.Size]byte {
	watched, at := s.watched.Load(), s.changes.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if watched && s.valid && s.at == at {
		return s.sum
	}
	var lines []string
	for n := range nodes {
		lines = append(lines, shapeLine(&n))
	}
	slices.Sort(lines)
	s.sum = sha256.Sum256([]byte(strings.Join(lines, "")))
	s.valid, s.at = watched, at
	return s.sum
}

// nodeShape is what the digest reads of a node: the one list of its fields, which both the
// digest's line and the handlers' comparison use.
type nodeShape struct {
	name, gres, partitions, features string
	cpus                             int
	memMB                            int64
}

// shapeOf is n's shape. The joins allocate only for nodes in several partitions or with several
// features, so comparing two shapes stays cheap for the handlers, which compare every update.
func shapeOf(n *slurm.Node) nodeShape {
	return nodeShape{name: n.Name, gres: n.Gres, partitions: strings.Join(n.Partitions, ","), features: strings.Join(n.Features, ","),
		cpus: n.CPUs, memMB: n.RealMemoryMB}
}

// shapeLine is one node's shape, as the digest reads it.
func shapeLine(n *slurm.Node) string {
	s := shapeOf(n)
	return fmt.Sprintf("%s cpus=%d mem=%d gres=%s partitions=%s features=%s\n", s.name, s.cpus, s.memMB, s.gres, s.partitions, s.features)
}
