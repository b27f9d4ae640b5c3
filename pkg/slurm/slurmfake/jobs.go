package slurmfake

// Jobs: submitting, reading, listing, signalling and updating them.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

func (f *Fake) SubmitJob(ctx context.Context, s slurm.JobSubmit) (*slurm.SubmitResult, error) {
	if err := f.enter(ctx, "SubmitJob"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if s.Script == "" {
		return nil, &slurm.SlurmError{Endpoint: "slurmfake submit", HTTPStatus: 500, Code: 2002, Description: "batch script is empty"}
	}
	j, err := f.newJob(s, "slurmfake submit")
	if err != nil {
		return nil, err
	}
	f.jobs[j.ID] = j
	f.touchJobs()
	return &slurm.SubmitResult{JobID: j.ID}, nil
}

// AllocateJob answers as slurmctld does when a job of higher priority waits in the partition
// (the fake starts no job by itself): the request is refused with error 2013 and the job it
// made is kept as FAILED.
func (f *Fake) AllocateJob(ctx context.Context, s slurm.JobSubmit) (*slurm.SubmitResult, error) {
	if err := f.enter(ctx, "AllocateJob"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	j, err := f.newJob(s, "slurmfake allocate")
	if err != nil {
		return nil, err
	}
	j.State, j.StateReason = []string{"FAILED"}, "BadConstraints"
	f.jobs[j.ID] = j
	f.touchJobs()
	return nil, AllocationRefused(2013, "Immediate execution impossible, insufficient priority")
}

// AllocationRefused is slurmrestd's answer to an immediate allocation slurmctld refused with
// the error number code (2016: nodes busy; 2013: not top priority) and its text.
func AllocationRefused(code int, text string) *slurm.SlurmError {
	const desc, src = "Job allocation request failed", "slurm_allocate_resources_blocking()"
	return &slurm.SlurmError{Endpoint: "slurmfake allocate", HTTPStatus: 500, Code: code, Description: desc, Source: src,
		Errors: []slurm.ErrorDetail{{Code: code, Error: text, Description: desc, Source: src}}}
}

// newJob validates a request and makes its pending record under the next job id.
func (f *Fake) newJob(s slurm.JobSubmit, endpoint string) (slurm.Job, error) {
	part := s.Partition
	if part == "" {
		part = "all"
	}
	if _, ok := f.partitions[part]; !ok {
		return slurm.Job{}, &slurm.SlurmError{Endpoint: endpoint, HTTPStatus: 500, Code: 2000, Description: "invalid partition " + part}
	}
	id := f.nextJob
	f.nextJob++
	j := slurm.Job{
		ID: id, Name: s.Name, UserName: "root", Account: s.Account, Partition: part, QOS: s.QOS,
		State: []string{"PENDING"}, StateReason: "None", CPUsPerTask: s.CPUsPerTask, MemoryPerNodeMB: s.MemoryPerNodeMB,
		TRESPerNode: s.GRES, Hold: s.Hold, TimeLimit: s.TimeLimit, Reservation: s.Reservation,
		Exclusive: s.Exclusive, Features: s.Constraints, Comment: s.Comment, WorkDir: s.WorkDir, StdOut: s.StdOut, SubmitTime: f.now(),
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
	return j, nil
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

// CancelJobs cancels each job as CancelJob does, in one call: a job the fake does not know is
// ErrNotFound in the map, as slurmctld answers error 2017 for it.
func (f *Fake) CancelJobs(ctx context.Context, ids []uint32) (map[uint32]error, error) {
	if err := f.enter(ctx, "CancelJobs"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	failed := map[uint32]error{}
	for _, id := range ids {
		if !f.kill(id) {
			failed[id] = notFound("job", fmt.Sprint(id))
		}
	}
	return failed, nil
}

// SignalJob: KILL (which CancelJob sends) makes a pending, running or suspended job CANCELLED;
// other signals change nothing but are counted in Calls("SignalJob").
func (f *Fake) SignalJob(ctx context.Context, id uint32, signal string) error {
	if err := f.enter(ctx, "SignalJob"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.jobs[id]; !ok {
		return notFound("job", fmt.Sprint(id))
	}
	if signal == "KILL" || signal == "SIGKILL" || signal == "9" {
		f.kill(id)
	}
	return nil
}

// kill makes a pending, running or suspended job CANCELLED; it reports whether the job exists.
// f.mu is held.
func (f *Fake) kill(id uint32) bool {
	j, ok := f.jobs[id]
	if !ok {
		return false
	}
	switch j.BaseState() {
	case "PENDING", "RUNNING", "SUSPENDED":
		j.State, j.EndTime = []string{"CANCELLED"}, f.now()
		f.jobs[id] = j
		f.touchJobs()
	}
	return true
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
