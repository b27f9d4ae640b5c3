// Package slurmfake is an in-memory slurm.Client for unit tests of sunk's components. It keeps
// nodes, jobs, partitions and reservations, follows the real client's error contract (unknown
// names are slurm.ErrNotFound, injected errors come back as given) and supports incremental
// lists (NotModified when nothing changed since the given time). It is one file because it
// implements one interface, endpoint by endpoint.
package slurmfake

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
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

func (f *Fake) ListNodes(ctx context.Context, since time.Time) (*slurm.NodeList, error) {
	if err := f.enter(ctx, "ListNodes"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	now := f.now()
	if !since.IsZero() && since.After(f.nodesChanged) {
		return &slurm.NodeList{NotModified: true, LastUpdate: since}, nil
	}
	l := &slurm.NodeList{LastUpdate: now, Nodes: make([]slurm.Node, 0, len(f.nodes))}
	for _, n := range f.nodes {
		l.Nodes = append(l.Nodes, clone(n))
	}
	sort.Slice(l.Nodes, func(i, j int) bool { return l.Nodes[i].Name < l.Nodes[j].Name })
	return l, nil
}

func clone(n slurm.Node) slurm.Node {
	n.State = slices.Clone(n.State)
	n.Features = slices.Clone(n.Features)
	n.ActiveFeatures = slices.Clone(n.ActiveFeatures)
	n.Partitions = slices.Clone(n.Partitions)
	return n
}

func (f *Fake) GetNode(ctx context.Context, name string) (*slurm.Node, error) {
	if err := f.enter(ctx, "GetNode"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	if !ok {
		return nil, notFound("node", name)
	}
	n = clone(n)
	return &n, nil
}

// UpdateNode applies u like slurmctld: DRAIN/DOWN need a reason; RESUME/UNDRAIN clear DRAIN
// (and DOWN for RESUME) but, as Slurm 24.11 does, keep the old reason.
// UpdateNode updates one node or a list of them ("a,b" or a hostlist expression), in order,
// as slurmctld does: it stops at the first node it cannot update, leaving the earlier ones
// updated.
func (f *Fake) UpdateNode(ctx context.Context, name string, u slurm.NodeUpdate) error {
	if err := f.enter(ctx, "UpdateNode"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	names, err := slurm.ExpandHostlist(name)
	if err != nil {
		return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Code: 2001, Description: err.Error()}
	}
	for _, one := range names {
		if err := f.updateNode(one, u); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fake) updateNode(name string, u slurm.NodeUpdate) error {
	n, ok := f.nodes[name]
	if !ok {
		return notFound("node", name)
	}
	if u.Reason != nil {
		n.Reason, n.ReasonSetBy, n.ReasonChangedAt = *u.Reason, "root", f.now()
	}
	switch u.State {
	case "":
	case slurm.NodeStateDrain, slurm.NodeStateDown:
		if u.Reason == nil || *u.Reason == "" {
			return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Code: 2028,
				Description: "a reason is required to drain or down a node"}
		}
		if u.State == slurm.NodeStateDrain {
			n.State = addFlag(n.State, "DRAIN")
		} else {
			n.State = append([]string{"DOWN"}, withoutBase(n.State)...)
		}
	case slurm.NodeStateResume, slurm.NodeStateUndrain:
		if !slices.Contains(n.State, "DRAIN") && !(u.State == slurm.NodeStateResume && n.BaseState() == "DOWN") {
			return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Code: 2028, Description: "Invalid node state specified"}
		}
		n.State = slices.DeleteFunc(n.State, func(s string) bool { return s == "DRAIN" })
		if u.State == slurm.NodeStateResume && n.BaseState() == "DOWN" {
			n.State[0] = "IDLE"
		}
	default:
		n.State = append([]string{string(u.State)}, withoutBase(n.State)...)
	}
	if u.Features != nil {
		n.Features, n.ActiveFeatures = slices.Clone(*u.Features), slices.Clone(*u.Features)
	}
	if u.ActiveFeatures != nil {
		n.ActiveFeatures = slices.Clone(*u.ActiveFeatures)
	}
	if u.Comment != nil {
		n.Comment = *u.Comment
	}
	if u.Extra != nil {
		n.Extra = *u.Extra
	}
	if u.Weight != nil {
		n.Weight = *u.Weight
	}
	if u.Gres != nil {
		n.Gres = *u.Gres
	}
	f.nodes[name] = n
	f.touchNodes()
	return nil
}

func addFlag(state []string, flag string) []string {
	if slices.Contains(state, flag) {
		return state
	}
	return append(slices.Clone(state), flag)
}

func withoutBase(state []string) []string {
	if len(state) == 0 {
		return nil
	}
	return slices.Clone(state[1:])
}

func (f *Fake) DeleteNode(ctx context.Context, name string) error {
	if err := f.enter(ctx, "DeleteNode"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.nodes[name]; !ok {
		return notFound("node", name)
	}
	for _, j := range f.jobs {
		if j.BaseState() == "RUNNING" && j.Nodes == name {
			return &slurm.SlurmError{Endpoint: "slurmfake node", HTTPStatus: 500, Description: "node " + name + " has running jobs"}
		}
	}
	delete(f.nodes, name)
	f.touchNodes()
	return nil
}

func (f *Fake) SubmitJob(ctx context.Context, s slurm.JobSubmit) (*slurm.SubmitResult, error) {
	if err := f.enter(ctx, "SubmitJob"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if s.Script == "" {
		return nil, &slurm.SlurmError{Endpoint: "slurmfake submit", HTTPStatus: 500, Code: 2002, Description: "batch script is empty"}
	}
	part := s.Partition
	if part == "" {
		part = "all"
	}
	if _, ok := f.partitions[part]; !ok {
		return nil, &slurm.SlurmError{Endpoint: "slurmfake submit", HTTPStatus: 500, Code: 2000, Description: "invalid partition " + part}
	}
	id := f.nextJob
	f.nextJob++
	j := slurm.Job{
		ID: id, Name: s.Name, UserName: "root", Account: s.Account, Partition: part, QOS: s.QOS,
		State: []string{"PENDING"}, StateReason: "None", CPUsPerTask: s.CPUsPerTask, MemoryPerNodeMB: s.MemoryPerNodeMB,
		TRESPerNode: s.GRES, Hold: s.Hold, TimeLimit: s.TimeLimit, Reservation: s.Reservation,
		Exclusive: s.Exclusive, Comment: s.Comment, WorkDir: s.WorkDir, StdOut: s.StdOut, SubmitTime: f.now(),
		NodeCount: max(s.MinNodes, 1), Priority: 1,
		// As slurmctld records them: hostlist expressions.
		RequiredNodes: slurm.CompressHostlist(s.RequiredNodes), ExcludedNodes: slurm.CompressHostlist(s.ExcludedNodes),
	}
	if s.Priority != nil {
		j.Priority = *s.Priority
	}
	if s.Nice != nil {
		j.Nice = *s.Nice
	}
	if s.Hold {
		j.Priority, j.StateReason = 0, "JobHeldUser"
	}
	f.jobs[id] = j
	f.touchJobs()
	return &slurm.SubmitResult{JobID: id}, nil
}

func (f *Fake) GetJob(ctx context.Context, id uint32) (*slurm.Job, error) {
	if err := f.enter(ctx, "GetJob"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return nil, notFound("job", fmt.Sprint(id))
	}
	j.State = slices.Clone(j.State)
	return &j, nil
}

func (f *Fake) ListJobs(ctx context.Context, since time.Time) (*slurm.JobList, error) {
	if err := f.enter(ctx, "ListJobs"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if !since.IsZero() && since.After(f.jobsChanged) {
		return &slurm.JobList{NotModified: true, LastUpdate: since}, nil
	}
	l := &slurm.JobList{LastUpdate: f.now(), Jobs: make([]slurm.Job, 0, len(f.jobs))}
	for _, j := range f.jobs {
		j.State = slices.Clone(j.State)
		l.Jobs = append(l.Jobs, j)
	}
	sort.Slice(l.Jobs, func(a, b int) bool { return l.Jobs[a].ID < l.Jobs[b].ID })
	return l, nil
}

// ListJobStates answers like slurmrestd: every job's id (a plain number here: the fake has no
// array or heterogeneous jobs) and state list.
func (f *Fake) ListJobStates(ctx context.Context) ([]slurm.JobState, error) {
	if err := f.enter(ctx, "ListJobStates"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := make([]slurm.JobState, 0, len(f.jobs))
	for _, j := range f.jobs {
		out = append(out, slurm.JobState{ID: strconv.FormatUint(uint64(j.ID), 10), State: slices.Clone(j.State)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

func (f *Fake) CancelJob(ctx context.Context, id uint32) error {
	return f.SignalJob(ctx, id, "KILL")
}

// SignalJob: KILL (which CancelJob sends) makes a pending, running or suspended job CANCELLED;
// other signals change nothing but are counted in Calls("SignalJob").
func (f *Fake) SignalJob(ctx context.Context, id uint32, signal string) error {
	if err := f.enter(ctx, "SignalJob"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return notFound("job", fmt.Sprint(id))
	}
	if signal == "KILL" || signal == "SIGKILL" || signal == "9" {
		switch j.BaseState() {
		case "PENDING", "RUNNING", "SUSPENDED":
			j.State, j.EndTime = []string{"CANCELLED"}, f.now()
			f.jobs[id] = j
			f.touchJobs()
		}
	}
	return nil
}

func (f *Fake) UpdateJob(ctx context.Context, id uint32, u slurm.JobUpdate) error {
	if err := f.enter(ctx, "UpdateJob"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return notFound("job", fmt.Sprint(id))
	}
	if u.Hold != nil {
		j.Hold = *u.Hold
		if j.Hold {
			j.Priority, j.StateReason = 0, "JobHeldUser"
		} else {
			j.Priority, j.StateReason = 1, "None"
		}
	}
	if u.Priority != nil {
		j.Priority = *u.Priority
	}
	if u.Nice != nil {
		j.Nice = *u.Nice
	}
	if u.TimeLimit != nil {
		j.TimeLimit = *u.TimeLimit
	}
	if u.Comment != nil {
		j.Comment = *u.Comment
	}
	f.jobs[id] = j
	f.touchJobs()
	return nil
}

func (f *Fake) ListPartitions(ctx context.Context) ([]slurm.Partition, error) {
	if err := f.enter(ctx, "ListPartitions"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := make([]slurm.Partition, 0, len(f.partitions))
	for _, p := range f.partitions {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) GetPartition(ctx context.Context, name string) (*slurm.Partition, error) {
	if err := f.enter(ctx, "GetPartition"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	p, ok := f.partitions[name]
	if !ok {
		return nil, notFound("partition", name)
	}
	return &p, nil
}

func (f *Fake) ListReservations(ctx context.Context) ([]slurm.Reservation, error) {
	if err := f.enter(ctx, "ListReservations"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := make([]slurm.Reservation, 0, len(f.reservations))
	for _, r := range f.reservations {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) GetReservation(ctx context.Context, name string) (*slurm.Reservation, error) {
	if err := f.enter(ctx, "GetReservation"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	r, ok := f.reservations[name]
	if !ok {
		return nil, notFound("reservation", name)
	}
	return &r, nil
}

// CreateReservation stores the reservation (the real client returns ErrUnsupported on 24.11;
// tests that need that can SetError("CreateReservation", ...)).
func (f *Fake) CreateReservation(ctx context.Context, r slurm.ReservationCreate) error {
	if err := f.enter(ctx, "CreateReservation"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.reservations[r.Name]; ok || r.Name == "" {
		return &slurm.SlurmError{Endpoint: "slurmfake reservation", HTTPStatus: 500, Description: "reservation name taken or empty"}
	}
	start := r.StartTime
	if start.IsZero() {
		start = f.now()
	}
	f.reservations[r.Name] = slurm.Reservation{
		Name: r.Name, Nodes: strings.Join(r.Nodes, ","), NodeCount: len(r.Nodes), StartTime: start,
		EndTime: start.Add(r.Duration), Flags: slices.Clone(r.Flags), Users: strings.Join(r.Users, ","),
		Accounts: strings.Join(r.Accounts, ","), Partition: r.Partition,
	}
	return nil
}

func (f *Fake) DeleteReservation(ctx context.Context, name string) error {
	if err := f.enter(ctx, "DeleteReservation"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.reservations[name]; !ok {
		return notFound("reservation", name)
	}
	delete(f.reservations, name)
	return nil
}
