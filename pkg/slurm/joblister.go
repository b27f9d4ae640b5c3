package slurm

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the job lister behind NewJobInformer.
const (
	// DefaultJobFullListEvery bounds how stale a job's other fields (pending reason, priority,
	// comment) may get: a state change is seen at the next poll, anything else at the next full
	// list.
	DefaultJobFullListEvery = 30 * time.Second
	// DefaultJobMaxFetch bounds the changed jobs fetched one by one in a poll; more make a full
	// list. Below it, the lister fetches one by one only while that is expected to take less
	// time than a full list (both timed as they happen: a full list of 2,000 jobs is 11 MB and
	// about a second; one job is 5 KB and a few milliseconds on an idle slurmctld, tens under
	// load).
	DefaultJobMaxFetch = 256
	// JobInformerConns is how many requests a job informer makes at once: its one-job fetches
	// run so many at a time (a client's MaxConns bounds them too).
	JobInformerConns = 8
	// jobFetchBudget bounds the one-job fetches of a poll, so that a burst of changes does not
	// make one poll (and the next look at what started) wait for all of them.
	jobFetchBudget = 4 * JobInformerConns
)

// jobLister lists jobs at a cost that grows with the changes, not with the job table.
//
// Slurm has no filter on GET /jobs: with update_time it answers "nothing changed" or every job
// (11 MB at 2,000 jobs), and during a burst of submissions something always changed. Each poll
// here reads every job's state instead (GET /jobs/state, about 80 bytes a job) and fetches the
// full records of the jobs that are new or entered a live state (PENDING, RUNNING, SUSPENDED:
// GET /job/{id}, started ones first, at most jobFetchBudget a poll); a job that ended or only
// gained or lost a flag (COMPLETING...) gets its new state on the record it has, the rest of the
// record (end time, exit code, reason) at the next full list; a job first seen already ended
// (nobody waited on it: in a burst, refused immediate allocations) is fetched only by a poll
// with nothing else to fetch; jobs missing from the state list are gone. A full list is still
// made at the start, every FullListEvery (for the fields a state does not show; less often while
// full lists are slow, see fullListEvery), when more than MaxFetch jobs changed, and whenever an
// array task or heterogeneous component changed (their state-list ids are not their records' ids).
//
// It fails closed: a failed request fails the whole poll and changes nothing, so a job that
// could not be read is asked for again at the next one.
type jobLister struct {
	c         Client
	fullEvery time.Duration
	maxFetch  int
	now       func() time.Time

	states   map[string]string // job id string → state list, as of the records below
	records  map[uint32]Job
	since    time.Time // last_update of the last full list
	lastFull time.Time
	// Moving averages, in seconds, of what a full list takes per job it returns and of what a
	// round of one-job fetches takes. A full list's cost grows with the job table, so it is
	// timed per job and estimated for the table as it is now: timed once on a nearly empty
	// table, it would make every later burst look cheaper to list in full than to fetch.
	fullCostPerJob, getCost float64
	// lastFullTook is what the last full list took (fullListEvery).
	lastFullTook time.Duration
	// backlog is how many changes the last list left for the next (over jobFetchBudget).
	backlog int
}

// ewma folds a new measurement into a moving average (the first sets it).
func ewma(avg, v float64) float64 {
	if avg == 0 {
		return v
	}
	return 0.8*avg + 0.2*v
}

// fetchCheaper says whether fetching n jobs one by one should end sooner than a full list of a
// table of jobs jobs.
func (l *jobLister) fetchCheaper(n, jobs int) bool {
	if n > l.maxFetch {
		return false
	}
	if l.fullCostPerJob == 0 || l.getCost == 0 {
		return true
	}
	rounds := (n + JobInformerConns - 1) / JobInformerConns
	return float64(rounds)*l.getCost <= l.fullCostPerJob*float64(max(jobs, 1))
}

func newJobLister(c Client, opts InformerOptions) *jobLister {
	l := &jobLister{c: c, fullEvery: opts.JobFullListEvery, maxFetch: opts.JobMaxFetch, now: time.Now}
	if l.fullEvery == 0 {
		l.fullEvery = DefaultJobFullListEvery
	}
	if l.maxFetch == 0 {
		l.maxFetch = DefaultJobMaxFetch
	}
	return l
}

// prime takes j, read from Slurm by someone else (Informer.Fetch), as this lister's own read of
// it: the next poll fetches it only if its state differs from j's. Called with the Informer's
// pollMu held, as list is.
func (l *jobLister) prime(j *Job) {
	if l.records == nil {
		return // before the first full list, which reads every job
	}
	l.states[strconv.FormatUint(uint64(j.ID), 10)] = strings.Join(j.State, ",")
	l.records[j.ID] = *j
}

// list is the Informer's list function: since zero asks for a full list.
func (l *jobLister) list(ctx context.Context, since time.Time) ([]Job, time.Time, bool, error) {
	// The states are read before the records: a job that changes in between has a record newer
	// than its state, and the next poll's state differs and fetches it again; the other order
	// could keep an old record under a new state for ever.
	l.backlog = 0
	states, err := l.c.ListJobStates(ctx)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	next := make(map[string]string, len(states))
	for _, s := range states {
		next[s.ID] = strings.Join(s.State, ",")
	}
	if since.IsZero() || l.records == nil {
		return l.full(ctx, next, time.Time{})
	}
	type change struct {
		id   uint32
		key  string
		rank int // fetched first: 0 started, 1 new, 2 the rest
	}
	var changes, late []change
	var stateOnly []Job
	needFull := false
	for id, st := range next {
		old, known := l.states[id]
		if known && old == st {
			continue
		}
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			needFull = true // an array task or a heterogeneous component
			continue
		}
		if !known && !liveStates[baseState(st)] {
			// Ended before it was first seen: nobody waits on it (in a burst, mostly refused
			// immediate allocations, FAILED at once). Fetched in a poll with nothing else to do.
			late = append(late, change{id: uint32(n), key: id, rank: 3})
			continue
		}
		if rec, ok := l.records[uint32(n)]; ok && known && !enteredLiveState(old, st) {
			// Ended, or a flag came or went: the state is all that changed that matters now.
			rec.State = strings.Split(st, ",")
			stateOnly = append(stateOnly, rec)
			continue
		}
		c := change{id: uint32(n), key: id, rank: 2}
		switch {
		case baseState(st) == "RUNNING":
			c.rank = 0 // what a scheduler waits for
		case !known:
			c.rank = 1
		}
		changes = append(changes, c)
	}
	var gone []uint32
	for id := range l.states {
		if _, ok := next[id]; ok {
			continue
		}
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			needFull = true
			continue
		}
		gone = append(gone, uint32(n))
	}
	switch {
	case needFull || !l.fetchCheaper(len(changes), len(next)):
		return l.full(ctx, next, time.Time{})
	case l.now().Sub(l.lastFull) >= l.fullListEvery():
		// update_time: when no record changed since the last full list, Slurm says so in a few
		// bytes, and the states' changes alone are fetched.
		if jobs, since, notModified, err := l.full(ctx, next, l.since); err != nil || !notModified {
			return jobs, since, notModified, err
		}
	}
	if len(changes) == 0 {
		changes = late
	} else {
		for _, c := range late {
			delete(next, c.key) // new again at the next poll
		}
	}
	if len(changes) == 0 && len(gone) == 0 && len(stateOnly) == 0 {
		return nil, l.since, true, nil
	}
	// A poll fetches at most jobFetchBudget records, the most awaited first; the others keep
	// their old state here, so the next poll sees them changed still and fetches them then.
	slices.SortFunc(changes, func(a, b change) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.id, b.id)) })
	if len(changes) > jobFetchBudget {
		for _, c := range changes[jobFetchBudget:] {
			if old, ok := l.states[c.key]; ok {
				next[c.key] = old
			} else {
				delete(next, c.key)
			}
		}
		l.backlog = len(changes) - jobFetchBudget
		changes = changes[:jobFetchBudget]
	}
	changed := make([]uint32, len(changes))
	for i, c := range changes {
		changed[i] = c.id
	}
	start := l.now()
	fetched, missing, err := l.fetch(ctx, changed)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	if len(changed) > 0 {
		rounds := (len(changed) + JobInformerConns - 1) / JobInformerConns
		l.getCost = ewma(l.getCost, l.now().Sub(start).Seconds()/float64(rounds))
	}
	for _, id := range append(gone, missing...) {
		delete(l.records, id)
	}
	for _, j := range append(stateOnly, fetched...) {
		l.records[j.ID] = j
	}
	l.states = next
	return l.all(), l.since, false, nil
}

// liveStates are the base states in which a job holds or waits for resources.
var liveStates = map[string]bool{"PENDING": true, "RUNNING": true, "SUSPENDED": true}

func baseState(joined string) string {
	base, _, _ := strings.Cut(joined, ",")
	return base
}

// enteredLiveState says whether a job's base state changed to a live one: it was submitted
// again, started, suspended or resumed, and its record (nodes, times, reason) changed with it.
func enteredLiveState(old, cur string) bool {
	return baseState(old) != baseState(cur) && liveStates[baseState(cur)]
}

// fullListEvery is how long the records may go without a full list: FullListEvery, or longer
// while full lists are slow. A full list holds up the poll that makes it (no start or end is seen
// meanwhile), and under a burst it grows with the job table (5-14 s for 2,000 jobs on a loaded
// slurmctld), so they take at most one tenth of the time.
func (l *jobLister) fullListEvery() time.Duration {
	if l.lastFullTook < slowFullList {
		return l.fullEvery
	}
	return max(l.fullEvery, fullListShare*l.lastFullTook)
}

// Slow full lists (over slowFullList) take at most 1/fullListShare of the time (fullListEvery).
const (
	slowFullList  = time.Second
	fullListShare = 10
)

// full replaces every record with a full list made after states were read. With since set,
// Slurm may answer that no job changed since then: nothing is replaced, and the third result
// (not modified) is true.
func (l *jobLister) full(ctx context.Context, states map[string]string, since time.Time) ([]Job, time.Time, bool, error) {
	start := l.now()
	jl, err := l.c.ListJobs(ctx, since)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	if jl.NotModified {
		l.lastFull = l.now()
		return nil, l.since, true, nil
	}
	l.lastFullTook = l.now().Sub(start)
	l.fullCostPerJob = ewma(l.fullCostPerJob, l.lastFullTook.Seconds()/float64(max(len(jl.Jobs), 1)))
	return l.apply(states, jl)
}

func (l *jobLister) apply(states map[string]string, jl *JobList) ([]Job, time.Time, bool, error) {
	l.records = make(map[uint32]Job, len(jl.Jobs))
	for _, j := range jl.Jobs {
		l.records[j.ID] = j
	}
	l.states, l.since, l.lastFull = states, jl.LastUpdate, l.now()
	return jl.Jobs, l.since, false, nil
}

// fetch reads the records of ids, a few at a time. Jobs Slurm no longer knows (purged between
// the state list and the request) are returned as missing; any other error fails the poll.
func (l *jobLister) fetch(ctx context.Context, ids []uint32) ([]Job, []uint32, error) {
	var (
		mu      sync.Mutex
		jobs    []Job
		missing []uint32
		errs    []error
		wg      sync.WaitGroup
	)
	work := make(chan uint32)
	for range min(JobInformerConns, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				j, err := l.c.GetJob(ctx, id)
				mu.Lock()
				switch {
				case errors.Is(err, ErrNotFound):
					missing = append(missing, id)
				case err != nil:
					errs = append(errs, err)
				default:
					jobs = append(jobs, *j)
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return nil, nil, errs[0]
	}
	return jobs, missing, nil
}

func (l *jobLister) all() []Job {
	out := make([]Job, 0, len(l.records))
	for _, j := range l.records {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b Job) int { return int(int64(a.ID) - int64(b.ID)) })
	return out
}
