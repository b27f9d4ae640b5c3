// Package slurmfake is an in-memory slurm.Client for unit tests of sunk's components. It keeps
// nodes, jobs, partitions and reservations, follows the real client's error contract (unknown
// names are slurm.ErrNotFound, injected errors come back as given) and supports incremental
// lists (NotModified when nothing changed since the given time). fake.go holds the store and the
// controller calls; nodes.go, jobs.go and partitions.go the endpoints of each kind.
package slurmfake

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// Fake implements slurm.Client in memory. The zero value is not usable; use New.
type Fake struct {
	mu           sync.Mutex
	nodes        map[string]slurm.Node
	jobs         map[uint32]slurm.Job
	partitions   map[string]slurm.Partition
	reservations map[string]slurm.Reservation
	nextJob      uint32
	nodesChanged time.Time
	jobsChanged  time.Time
	diag         *slurm.Diag      // SetDiag's statistics; nil: counted from the jobs
	errs         map[string]error // by method name, e.g. "ListNodes"; "*" for every method
	calls        map[string]int
	now          func() time.Time
}

var _ slurm.Client = (*Fake)(nil)

// New returns an empty fake with one partition "all".
func New() *Fake {
	f := &Fake{
		nodes: map[string]slurm.Node{}, jobs: map[uint32]slurm.Job{},
		partitions:   map[string]slurm.Partition{"all": {Name: "all", State: []string{"UP"}}},
		reservations: map[string]slurm.Reservation{}, nextJob: 1,
		errs: map[string]error{}, calls: map[string]int{}, now: time.Now,
	}
	f.nodesChanged, f.jobsChanged = f.now(), f.now()
	return f
}

// SetError makes method (e.g. "GetNode", or "*" for all) fail with err until cleared with nil.
func (f *Fake) SetError(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// Calls is how often method was called.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// AddNode stores n (replacing a node of the same name) as if slurmd had registered.
func (f *Fake) AddNode(n slurm.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(n.State) == 0 {
		n.State = []string{"IDLE"}
	}
	f.nodes[n.Name] = n
	f.touchNodes()
}

// SetJobState changes a job's state list, as Slurm's scheduler would.
func (f *Fake) SetJobState(id uint32, state ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return notFound("job", fmt.Sprint(id))
	}
	j.State = state
	f.jobs[id] = j
	f.touchJobs()
	return nil
}

// AddJob stores j as given (replacing a job of the same id), e.g. a running job with its
// nodes and CPUs, as if Slurm's scheduler had placed it.
func (f *Fake) AddJob(j slurm.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j.State = slices.Clone(j.State)
	f.jobs[j.ID] = j
	if j.ID >= f.nextJob {
		f.nextJob = j.ID + 1
	}
	f.touchJobs()
}

// PurgeJob forgets a job, as slurmctld does MinJobAge after it ended.
func (f *Fake) PurgeJob(id uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.jobs, id)
	f.touchJobs()
}

// SetDiag makes Diag answer d (with RequestTime now when d's is zero) instead of the
// statistics it counts from the jobs.
func (f *Fake) SetDiag(d slurm.Diag) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diag = &d
}

// AddPartition stores p.
func (f *Fake) AddPartition(p slurm.Partition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partitions[p.Name] = p
}

func (f *Fake) touchNodes() { f.nodesChanged = f.now() }
func (f *Fake) touchJobs()  { f.jobsChanged = f.now() }

// enter counts the call and returns an injected error, with f.mu held on success.
func (f *Fake) enter(ctx context.Context, method string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("slurmfake %s: %w: %w", method, slurm.ErrUnavailable, err)
	}
	f.mu.Lock()
	f.calls[method]++
	if err := f.errs[method]; err != nil {
		f.mu.Unlock()
		return err
	}
	if err := f.errs["*"]; err != nil {
		f.mu.Unlock()
		return err
	}
	return nil
}

func notFound(kind, name string) error {
	return &slurm.SlurmError{Endpoint: "slurmfake " + kind, HTTPStatus: 404, Kind: slurm.ErrNotFound,
		Description: fmt.Sprintf("%s %s not found", kind, name)}
}

func (f *Fake) Ping(ctx context.Context) ([]slurm.ControllerPing, error) {
	if err := f.enter(ctx, "Ping"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	return []slurm.ControllerPing{{Hostname: "slurmctld", Responding: true, Primary: true, Mode: "primary"}}, nil
}

func (f *Fake) Diag(ctx context.Context) (*slurm.Diag, error) {
	if err := f.enter(ctx, "Diag"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if f.diag != nil {
		d := *f.diag
		if d.RequestTime.IsZero() {
			d.RequestTime = f.now()
		}
		return &d, nil
	}
	d := &slurm.Diag{ServerThreadCount: 1, RequestTime: f.now()}
	for _, j := range f.jobs {
		switch j.BaseState() {
		case "PENDING":
			d.JobsPending++
		case "RUNNING":
			d.JobsRunning++
		}
	}
	d.JobsSubmitted = len(f.jobs)
	return d, nil
}

func (f *Fake) Reconfigure(ctx context.Context) error {
	if err := f.enter(ctx, "Reconfigure"); err != nil {
		return err
	}
	f.mu.Unlock()
	return nil
}
