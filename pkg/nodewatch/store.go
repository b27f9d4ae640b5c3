package nodewatch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// maxTombstones bounds the deletions a Store remembers; a reader further behind gets the
// whole table instead of the changes.
const maxTombstones = 20000

// Store is the node table as the watcher last read it, versioned: every batch of changes
// bumps Seq, and each node and deletion remembers the Seq it changed at, so "changes since N"
// costs the changed nodes, not the table. Epoch is new for every Store (every watcher
// process): a reader that knew another epoch gets the whole table.
type Store struct {
	epoch string

	mu       sync.Mutex
	seq      uint64
	nodes    map[string]stored
	gone     map[string]uint64 // deleted node -> Seq of its deletion
	horizon  uint64            // deletions at or before this Seq are forgotten
	pending  []line            // lines of the batch being read, until its sync line
	synced   bool              // a whole table has been read since the last error
	lastSync time.Time
	lastErr  error
	wake     chan struct{} // closed (and replaced) at every change of Seq or readability
}

type stored struct {
	node slurm.Node
	seq  uint64
}

// NewStore returns an empty Store with a fresh epoch; it is unreadable until a whole table.
func NewStore() *Store {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Store{epoch: hex.EncodeToString(b), nodes: map[string]stored{}, gone: map[string]uint64{},
		wake: make(chan struct{}), lastErr: errors.New("the node table has not been read yet")}
}

// Epoch names this Store's sequence.
func (s *Store) Epoch() string { return s.epoch }

// Apply takes one line of sunk-slurm-nodes: node and gone lines wait for the sync line that
// ends their batch, which applies them at once.
func (s *Store) Apply(l line, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case l.Node != nil, l.Gone != nil:
		s.pending = append(s.pending, l)
	case l.Error != nil:
		s.failLocked(errors.New(*l.Error))
	case l.Sync != nil:
		if !l.Sync.Full && !s.synced {
			// Changes against a table this Store never had: wait for a whole one.
			s.pending = nil
			return
		}
		s.applyLocked(l.Sync.Full)
		s.synced, s.lastSync = true, now
		if s.lastErr != nil {
			s.lastErr = nil
			s.wakeLocked()
		}
	}
}

// Fail says the table cannot be read (the reader failed or exited): unreadable until the next
// whole table.
func (s *Store) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(err)
}

func (s *Store) failLocked(err error) {
	s.pending, s.synced = nil, false
	if s.lastErr == nil || s.lastErr.Error() != err.Error() {
		s.lastErr = err
		s.wakeLocked()
	}
}

func (s *Store) applyLocked(full bool) {
	next := s.seq + 1
	changed := false
	seen := map[string]bool{}
	for _, l := range s.pending {
		if l.Gone != nil {
			if _, ok := s.nodes[*l.Gone]; ok {
				delete(s.nodes, *l.Gone)
				s.gone[*l.Gone] = next
				changed = true
			}
			continue
		}
		n := l.Node.toNode()
		seen[n.Name] = true
		if old, ok := s.nodes[n.Name]; ok && reflect.DeepEqual(old.node, n) {
			continue
		}
		s.nodes[n.Name] = stored{node: n, seq: next}
		delete(s.gone, n.Name)
		changed = true
	}
	if full {
		// A whole table: what it does not list is gone (it went while nobody could read).
		for name := range s.nodes {
			if !seen[name] {
				delete(s.nodes, name)
				s.gone[name] = next
				changed = true
			}
		}
	}
	s.pending = nil
	if !changed {
		return
	}
	s.seq = next
	if len(s.gone) > maxTombstones {
		s.trimLocked()
	}
	s.wakeLocked()
}

// trimLocked forgets the older half of the deletions.
func (s *Store) trimLocked() {
	for len(s.gone) > maxTombstones/2 {
		oldest := ^uint64(0)
		for _, q := range s.gone {
			oldest = min(oldest, q)
		}
		for n, q := range s.gone {
			if q == oldest {
				delete(s.gone, n)
			}
		}
		s.horizon = oldest
	}
}

func (s *Store) wakeLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// Changes is an answer to "changes since": the whole table (Full) or the nodes that changed
// and the names of those deleted since, as of Seq.
type Changes struct {
	Epoch   string       `json:"epoch"`
	Seq     uint64       `json:"seq"`
	Full    bool         `json:"full"`
	Nodes   []slurm.Node `json:"nodes"`
	Deleted []string     `json:"deleted,omitempty"`
}

// Since answers "changes since seq of epoch". It fails while the table is unreadable or older
// than staleAfter (the reader hangs): no answer is ever "nothing changed" by default. wake is
// closed at the next change, for a caller that waits.
func (s *Store) Since(epoch string, seq uint64, now time.Time, staleAfter time.Duration) (Changes, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unreadableLocked(now, staleAfter); err != nil {
		return Changes{}, s.wake, err
	}
	c := Changes{Epoch: s.epoch, Seq: s.seq, Nodes: []slurm.Node{}}
	if epoch != s.epoch || seq < s.horizon || seq > s.seq {
		c.Full = true
		for _, n := range s.nodes {
			c.Nodes = append(c.Nodes, n.node)
		}
		return c, s.wake, nil
	}
	for _, n := range s.nodes {
		if n.seq > seq {
			c.Nodes = append(c.Nodes, n.node)
		}
	}
	for name, q := range s.gone {
		if q > seq {
			c.Deleted = append(c.Deleted, name)
		}
	}
	return c, s.wake, nil
}

func (s *Store) unreadableLocked(now time.Time, staleAfter time.Duration) error {
	switch {
	case s.lastErr != nil:
		return s.lastErr
	case now.Sub(s.lastSync) > staleAfter:
		return fmt.Errorf("the node table was last read %s ago", now.Sub(s.lastSync).Round(time.Second))
	}
	return nil
}
