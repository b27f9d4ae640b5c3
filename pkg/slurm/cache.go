package slurm

import (
	"context"
	"iter"
	"reflect"
	"sync"
	"time"
)

// MinPollInterval is the floor of an Informer's interval.
const MinPollInterval = 100 * time.Millisecond

// Handler receives an Informer's events. Nil funcs are skipped. Handlers run on the polling
// goroutine, in order; a slow handler delays the next poll.
type Handler[T any] struct {
	OnAdd    func(obj T)
	OnUpdate func(old, obj T)
	OnDelete func(obj T)
}

// InformerOptions configures an Informer.
type InformerOptions struct {
	// Interval between polls (default 1s, at least MinPollInterval).
	Interval time.Duration
	// ResyncEvery forces a full list (no update_time) every so many polls, a safety net against
	// a missed change (e.g. a wrong ServerLocation for v0.0.41). Default 300; negative disables.
	ResyncEvery int
	// JobFullListEvery and JobMaxFetch tune a job informer's lister (see jobLister); zero means
	// DefaultJobFullListEvery and DefaultJobMaxFetch.
	JobFullListEvery time.Duration
	JobMaxFetch      int
}

// PollResult says what one poll did.
type PollResult struct {
	NotModified             bool
	Added, Updated, Deleted int
	Full                    bool // listed without update_time
	// Backlog counts changes the poll saw but left for the next one (a job informer fetches
	// at most a poll's budget of changed jobs); Run polls again without waiting for them.
	Backlog int
}

// Informer keeps a local copy of Slurm's nodes or jobs and emits add/update/delete events.
//
// Each poll lists with update_time set to the previous answer's last_update. Slurm answers "no
// change" when nothing changed (an unchanged cluster costs one small request; for jobs it is 200
// with an empty list, never 304: the adapters read each form as NotModified) and the full list
// otherwise — update_time is a "changed since" test, not a filter — so a deletion shows
// up as a record missing from the next full list, and the Informer diffs full lists to find it.
//
// A failed poll changes nothing: the store keeps its last good contents and no event is sent
// (fail closed: an error never looks like "every node disappeared"). LastError and LastSuccess
// tell callers how fresh the store is.
type Informer[K comparable, T any] struct {
	list  func(ctx context.Context, since time.Time) ([]T, time.Time, bool, error)
	key   func(*T) K
	opts  InformerOptions
	equal func(a, b *T) bool

	mu          sync.RWMutex
	items       map[K]T
	since       time.Time
	synced      bool
	lastErr     error
	lastSuccess time.Time
	polls       int
	handlers    []Handler[T]
	pollMu      sync.Mutex
	// backlog, when set, says how many changes the last list left for the next.
	backlog func() int
	// changes, when set, replaces list: a source that answers with changes only (see
	// NewNodeChangeInformer).
	changes func(ctx context.Context) (objs []T, deleted []K, full bool, err error)
	// prime, when set, tells the lister behind list that Fetch put obj in the store.
	prime func(obj *T)
}

// NewNodeInformer watches nodes through c.
func NewNodeInformer(c Client, opts InformerOptions) *Informer[string, Node] {
	return newInformer(opts, func(ctx context.Context, since time.Time) ([]Node, time.Time, bool, error) {
		l, err := c.ListNodes(ctx, since)
		if err != nil {
			return nil, time.Time{}, false, err
		}
		return l.Nodes, l.LastUpdate, l.NotModified, nil
	}, func(n *Node) string { return n.Name })
}

// NewJobInformer watches jobs through c. Its polls cost what changed, not the whole job table
// (see jobLister): a job's state change is seen at the next poll, a change of its other fields
// (e.g. the pending reason) within JobFullListEvery.
func NewJobInformer(c Client, opts InformerOptions) *Informer[uint32, Job] {
	return newJobInformer(newJobLister(c, opts), opts)
}

func newJobInformer(l *jobLister, opts InformerOptions) *Informer[uint32, Job] {
	if opts.ResyncEvery == 0 {
		// The lister's own refresh (JobFullListEvery) is the safety net: a state change is
		// seen through the state list whatever update_time says, and a list without
		// update_time every so many polls would stall a poll on the whole job table.
		opts.ResyncEvery = -1
	}
	i := newInformer(opts, l.list, func(j *Job) uint32 { return j.ID })
	i.backlog = func() int { return l.backlog }
	i.prime = l.prime
	return i
}

func newInformer[K comparable, T any](opts InformerOptions, list func(context.Context, time.Time) ([]T, time.Time, bool, error), key func(*T) K) *Informer[K, T] {
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.Interval < MinPollInterval {
		opts.Interval = MinPollInterval
	}
	if opts.ResyncEvery == 0 {
		opts.ResyncEvery = 300
	}
	return &Informer[K, T]{list: list, key: key, opts: opts, items: map[K]T{},
		equal: func(a, b *T) bool { return reflect.DeepEqual(a, b) }}
}

// Interval is the effective polling interval.
func (i *Informer[K, T]) Interval() time.Duration { return i.opts.Interval }

// AddHandler registers h; objects already in the store are replayed to h.OnAdd.
func (i *Informer[K, T]) AddHandler(h Handler[T]) {
	i.pollMu.Lock() // no poll may emit between the replay and the registration
	defer i.pollMu.Unlock()
	i.mu.Lock()
	i.handlers = append(i.handlers, h)
	existing := make([]T, 0, len(i.items))
	for _, v := range i.items {
		existing = append(existing, v)
	}
	i.mu.Unlock()
	if h.OnAdd != nil {
		for _, v := range existing {
			h.OnAdd(v)
		}
	}
}

// Run polls until ctx ends and returns ctx.Err(). Poll errors are kept in LastError.
// A poll that left a backlog is followed by the next after MinPollInterval, not Interval: a
// burst of job starts is then read as fast as Slurm answers, not a budget per interval.
func (i *Informer[K, T]) Run(ctx context.Context) error {
	t := time.NewTicker(i.opts.Interval)
	defer t.Stop()
	for {
		res, err := i.Poll(ctx)
		next := t.C
		if err == nil && res.Backlog > 0 {
			next = time.After(MinPollInterval)
		}
		if err == nil && i.changes != nil {
			// A change source waits for a change itself: ask again at once after a change,
			// and after a short pause when it had none (a source that stops waiting must not
			// make this loop spin).
			next = closed
			if res.NotModified {
				next = time.After(MinPollInterval)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		}
	}
}

// closed is a channel that is always ready.
var closed = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

// Poll lists once and applies the answer.
func (i *Informer[K, T]) Poll(ctx context.Context) (PollResult, error) {
	i.pollMu.Lock()
	defer i.pollMu.Unlock()
	if i.changes != nil {
		return i.pollChanges(ctx)
	}
	i.mu.RLock()
	since, polls, synced := i.since, i.polls, i.synced
	i.mu.RUnlock()
	var res PollResult
	if !synced || (i.opts.ResyncEvery > 0 && polls%i.opts.ResyncEvery == 0) {
		since, res.Full = time.Time{}, true
	}
	objs, last, notModified, err := i.list(ctx, since)
	if i.backlog != nil && err == nil {
		res.Backlog = i.backlog()
	}
	i.mu.Lock()
	i.polls++
	if err != nil {
		i.lastErr = err
		i.mu.Unlock()
		return res, err
	}
	i.lastErr, i.lastSuccess = nil, time.Now()
	if notModified {
		i.mu.Unlock()
		res.NotModified = true
		return res, nil
	}
	i.since = last
	return i.applyLocked(res, objs, nil, true), nil
}

// applyLocked stores objs (all of them when full, else the changed ones) and removes deleted
// (and, when full, whatever objs lacks), then unlocks i.mu and calls the handlers.
func (i *Informer[K, T]) applyLocked(res PollResult, objs []T, deleted []K, full bool) PollResult {
	type update struct{ old, obj T }
	var adds, dels []T
	var upds []update
	seen := make(map[K]struct{}, len(objs))
	for n := range objs {
		obj := &objs[n]
		k := i.key(obj)
		seen[k] = struct{}{}
		old, ok := i.items[k]
		switch {
		case !ok:
			adds = append(adds, *obj)
		case !i.equal(&old, obj):
			upds = append(upds, update{old, *obj})
		default:
			continue
		}
		i.items[k] = *obj
	}
	for k, v := range i.items {
		if _, ok := seen[k]; !ok && full {
			dels = append(dels, v)
			delete(i.items, k)
		}
	}
	for _, k := range deleted {
		if v, ok := i.items[k]; ok {
			if _, again := seen[k]; !again {
				dels = append(dels, v)
				delete(i.items, k)
			}
		}
	}
	// HasSynced turns true only after the handlers have seen the first list: a reader that
	// trusts it (the scheduler's "this pod has no job yet, submit one") must find the jobs in
	// its handlers' index, or it acts on an empty one.
	first := !i.synced
	handlers := i.handlers
	i.mu.Unlock()
	if first {
		defer func() {
			i.mu.Lock()
			i.synced = true
			i.mu.Unlock()
		}()
	}

	res.Added, res.Updated, res.Deleted = len(adds), len(upds), len(dels)
	for _, h := range handlers {
		for _, v := range adds {
			if h.OnAdd != nil {
				h.OnAdd(v)
			}
		}
		for _, u := range upds {
			if h.OnUpdate != nil {
				h.OnUpdate(u.old, u.obj)
			}
		}
		for _, v := range dels {
			if h.OnDelete != nil {
				h.OnDelete(v)
			}
		}
	}
	return res
}

// Fetch reads the object of key k with read and puts it in the store as a poll would, telling
// the handlers, unless the store holds it already: for a reader that has just made the object
// (sunk-scheduler, an allocation Slurm granted) and whose waiters must not wait for the next
// poll to see it. It does nothing while a poll is under way, which reads the object itself or
// leaves it to the next poll (in a burst they follow each other closely, and read what changed
// several at a time, where a Fetch per object would read them one after another), nor before
// the first full list. It reads under the poll lock, so that no poll reads the object too; a
// job informer's lister takes the record as its own read, and the next poll reads it again
// only if its state changed since. An error of read is returned and changes nothing.
func (i *Informer[K, T]) Fetch(k K, read func() (T, error)) error {
	if !i.pollMu.TryLock() {
		return nil
	}
	defer i.pollMu.Unlock()
	i.mu.RLock()
	_, known := i.items[k]
	synced := i.synced
	i.mu.RUnlock()
	if known || !synced {
		return nil
	}
	obj, err := read()
	if err != nil {
		return err
	}
	i.mu.Lock()
	if i.prime != nil {
		i.prime(&obj)
	}
	i.applyLocked(PollResult{}, []T{obj}, nil, false)
	return nil
}

// HasSynced reports whether one full list has been applied.
func (i *Informer[K, T]) HasSynced() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.synced
}

// WaitForSync polls until HasSynced or ctx ends.
func (i *Informer[K, T]) WaitForSync(ctx context.Context) error {
	for !i.HasSynced() {
		select {
		case <-ctx.Done():
			if err := i.LastError(); err != nil {
				return err
			}
			return ctx.Err()
		case <-time.After(i.opts.Interval / 4):
		}
	}
	return nil
}

// Get returns the stored object with key k.
func (i *Informer[K, T]) Get(k K) (T, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	v, ok := i.items[k]
	return v, ok
}

// List returns every stored object, in no particular order.
func (i *Informer[K, T]) List() []T {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]T, 0, len(i.items))
	for _, v := range i.items {
		out = append(out, v)
	}
	return out
}

// All yields every stored object, in no particular order, copying none (List copies the whole
// table, which a caller asking per request at thousands of nodes pays for): the loop's body
// runs under the cache's read lock, so it must not call the informer, and a poll waits for it.
func (i *Informer[K, T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		i.mu.RLock()
		defer i.mu.RUnlock()
		for _, v := range i.items {
			if !yield(v) {
				return
			}
		}
	}
}

// ListWhere is List of the objects whose keys keep accepts, copying no other: keep runs under
// the cache's read lock, so it must not call the informer.
func (i *Informer[K, T]) ListWhere(keep func(K) bool) []T {
	i.mu.RLock()
	defer i.mu.RUnlock()
	var out []T
	for k, v := range i.items {
		if keep(k) {
			out = append(out, v)
		}
	}
	return out
}

// Len is the number of stored objects.
func (i *Informer[K, T]) Len() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.items)
}

// LastError is the error of the last poll, nil if it succeeded.
func (i *Informer[K, T]) LastError() error {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.lastErr
}

// LastSuccess is when a poll last succeeded (zero before the first).
func (i *Informer[K, T]) LastSuccess() time.Time {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.lastSuccess
}
