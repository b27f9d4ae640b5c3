// The v0.0.41 adapter: the Client interface over the generated v0.0.41 client. It is long
// because it converts every endpoint sunk uses, and it mirrors v0042.go line for line where the
// two APIs agree; one adapter shape for every version (and 26.05's) is issue 15's work.

package slurm

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	g "sunk.dev/sunk/pkg/slurm/openapi/v0041"
)

// The v0.0.41 adapter. Slurm's v0.0.41 spec inlines every schema, so most generated types are
// anonymous structs; the aliases below name the few shapes the adapter reads, and alloc
// allocates the others by inference.

type nv41i64 = struct {
	Infinite *bool  `json:"infinite,omitempty"`
	Number   *int64 `json:"number,omitempty"`
	Set      *bool  `json:"set,omitempty"`
}

type nv41i32 = struct {
	Infinite *bool  `json:"infinite,omitempty"`
	Number   *int32 `json:"number,omitempty"`
	Set      *bool  `json:"set,omitempty"`
}

type errs41 = []struct {
	Description *string `json:"description,omitempty"`
	Error       *string `json:"error,omitempty"`
	ErrorNumber *int32  `json:"error_number,omitempty"`
	Source      *string `json:"source,omitempty"`
}

func nv64(p *nv41i64) (int64, bool) {
	if p == nil {
		return 0, false
	}
	return noVal(p.Set, p.Infinite, p.Number)
}

func nv32(p *nv41i32) (int64, bool) {
	if p == nil {
		return 0, false
	}
	return noVal(p.Set, p.Infinite, p.Number)
}

func set41i64(v int64) *nv41i64 { return &nv41i64{Set: ptr(true), Number: &v} }
func set41i32(v int32) *nv41i32 { return &nv41i32{Set: ptr(true), Number: &v} }

func details41(e *errs41) []ErrorDetail {
	if e == nil || len(*e) == 0 {
		return nil
	}
	out := make([]ErrorDetail, len(*e))
	for i, d := range *e {
		out[i] = ErrorDetail{Code: num(d.ErrorNumber), Error: str(d.Error), Description: str(d.Description), Source: str(d.Source)}
	}
	return out
}

type v0041 struct {
	*core
	c *g.Client
}

func newV0041(base *core) (Client, error) {
	c, err := g.NewClient(base.url, g.WithHTTPClient(base))
	if err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return &v0041{core: base, c: c}, nil
}

// updateTime formats `since` for v0.0.41, whose parser rejects a UNIX timestamp (error 9202)
// but takes slurmrestd's local time as YYYY-MM-DDTHH:MM:SS.
func (a *v0041) updateTime(since time.Time) *string {
	if since.IsZero() {
		return nil
	}
	return ptr(since.In(a.cfg.ServerLocation).Format("2006-01-02T15:04:05"))
}

func (a *v0041) Ping(ctx context.Context) ([]ControllerPing, error) {
	var out []ControllerPing
	err := a.call(ctx, "GET /ping/", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041GetPing(ctx)
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041GetPingResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		for _, c := range b.Pings {
			out = append(out, ControllerPing{Hostname: str(c.Hostname), Responding: str(c.Pinged) == "UP",
				Primary: str(c.Mode) == "primary", Mode: str(c.Mode), Latency: time.Duration(num(c.Latency)) * time.Microsecond})
		}
		return answer{status: resp.StatusCode, errs: details41(b.Errors)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) Diag(ctx context.Context) (*Diag, error) {
	var out *Diag
	err := a.call(ctx, "GET /diag/", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041GetDiag(ctx)
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041GetDiagResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		s := b.Statistics
		out = &Diag{
			ServerThreadCount: num(s.ServerThreadCount), AgentQueueSize: num(s.AgentQueueSize),
			JobsSubmitted: num(s.JobsSubmitted), JobsStarted: num(s.JobsStarted), JobsCompleted: num(s.JobsCompleted),
			JobsCanceled: num(s.JobsCanceled), JobsFailed: num(s.JobsFailed), JobsPending: num(s.JobsPending),
			JobsRunning: num(s.JobsRunning), ScheduleQueueLength: num(s.ScheduleQueueLength),
			ScheduleCycleLast: time.Duration(num(s.ScheduleCycleLast)) * time.Microsecond,
			ScheduleCycleMax:  time.Duration(num(s.ScheduleCycleMax)) * time.Microsecond,
			BackfillActive:    boolean(s.BfActive),
			BackfillCycleLast: time.Duration(num(s.BfCycleLast)) * time.Microsecond,
			RequestTime:       unixTime(nv64(s.ReqTime)),
		}
		out.DBDAgentQueueSize = num(s.DbdAgentQueueSize)
		out.ScheduleCycleMean = time.Duration(num(s.ScheduleCycleMean)) * time.Microsecond
		out.ScheduleCycles, out.ScheduleCyclesPerMinute = num(s.ScheduleCycleTotal), num(s.ScheduleCyclePerMinute)
		out.ScheduleCycleMeanDepth = num(s.ScheduleCycleMeanDepth)
		out.BackfillCycleMax = time.Duration(num(s.BfCycleMax)) * time.Microsecond
		out.BackfillCycleMean = time.Duration(num(s.BfCycleMean)) * time.Microsecond
		out.BackfillCycles, out.BackfillJobs, out.BackfillLastJobs = num(s.BfCycleCounter), num(s.BfBackfilledJobs), num(s.BfLastBackfilledJobs)
		out.BackfillLastDepth, out.BackfillLastDepthTry = num(s.BfLastDepth), num(s.BfLastDepthTry)
		out.BackfillDepthMean, out.BackfillQueueLength = num(s.BfDepthMean), num(s.BfQueueLen)
		out.BackfillLastCycle = unixTime(nv64(s.BfWhenLastCycle))
		out.ResetTime = unixTime(nv64(s.ReqTimeStart))
		return answer{status: resp.StatusCode, errs: details41(b.Errors)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) Reconfigure(ctx context.Context) error {
	return a.call(ctx, "GET /reconfigure/", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041GetReconfigure(ctx)
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041GetReconfigureResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		return answer{status: resp.StatusCode, errs: details41(b.Errors)}, nil
	})
}

func (a *v0041) nodes(ctx context.Context, endpoint, name string, since time.Time) (*NodeList, error) {
	var out *NodeList
	err := a.call(ctx, endpoint, name == "", func(ctx context.Context) (answer, error) {
		var resp *http.Response
		var err error
		if name == "" {
			resp, err = a.c.SlurmV0041GetNodes(ctx, &g.SlurmV0041GetNodesParams{UpdateTime: a.updateTime(since)}, rawQuery("flags", nodeFlags))
		} else {
			resp, err = a.c.SlurmV0041GetNode(ctx, name, &g.SlurmV0041GetNodeParams{}, rawQuery("flags", nodeFlags))
		}
		if err != nil {
			return answer{}, err
		}
		if resp.StatusCode == http.StatusNotModified {
			resp.Body.Close()
			out = &NodeList{NotModified: true, LastUpdate: since}
			return answer{status: resp.StatusCode}, nil
		}
		p, err := g.ParseSlurmV0041GetNodesResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		if name == "" && resp.StatusCode == http.StatusOK && len(details41(b.Errors)) == 0 {
			unchanged, err := unchangedList(since, len(b.Nodes), unixTime(nv64(&b.LastUpdate)))
			if err != nil {
				return answer{status: resp.StatusCode}, err
			}
			if unchanged {
				out = &NodeList{NotModified: true, LastUpdate: since}
				return answer{status: http.StatusNotModified}, nil
			}
		}
		out = &NodeList{Nodes: make([]Node, 0, len(b.Nodes)), LastUpdate: unixTime(nv64(&b.LastUpdate))}
		for i := range b.Nodes {
			n := &b.Nodes[i]
			out.Nodes = append(out.Nodes, Node{
				Name: str(n.Name), Hostname: str(n.Hostname), Address: str(n.Address),
				State: stringsOf(n.State), Reason: str(n.Reason), ReasonSetBy: str(n.ReasonSetByUser),
				ReasonChangedAt: unixTime(nv64(n.ReasonChangedAt)), Comment: str(n.Comment), Extra: str(n.Extra),
				Features: strs(n.Features), ActiveFeatures: strs(n.ActiveFeatures), Partitions: strs(n.Partitions),
				Gres: str(n.Gres), GresUsed: str(n.GresUsed), CPUs: num(n.Cpus), AllocCPUs: num(n.AllocCpus),
				RealMemoryMB: int64(num(n.RealMemory)), AllocMemoryMB: int64(num(n.AllocMemory)), Weight: uint32(num(n.Weight)),
				Version: str(n.Version), BootTime: unixTime(nv64(n.BootTime)),
				SlurmdStartTime: unixTime(nv64(n.SlurmdStartTime)), LastBusy: unixTime(nv64(n.LastBusy)),
			})
		}
		return answer{status: resp.StatusCode, errs: details41(b.Errors), missing: name != "" && len(b.Nodes) == 0}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) ListNodes(ctx context.Context, since time.Time) (*NodeList, error) {
	l, err := a.nodes(ctx, "GET /nodes/", "", since)
	if err != nil && !since.IsZero() && isPartitionsNoChange(err) {
		return a.nodes(ctx, "GET /nodes/", "", time.Time{})
	}
	return l, err
}

func (a *v0041) GetNode(ctx context.Context, name string) (*Node, error) {
	l, err := a.nodes(ctx, "GET /node/{node_name}", name, time.Time{})
	if err != nil {
		return nil, err
	}
	for i := range l.Nodes {
		if l.Nodes[i].Name == name {
			return &l.Nodes[i], nil
		}
	}
	return nil, &SlurmError{Endpoint: "GET /node/{node_name}", HTTPStatus: http.StatusOK, Kind: ErrNotFound,
		Description: fmt.Sprintf("answer has %d nodes, none named %q", len(l.Nodes), name)}
}

func (a *v0041) UpdateNode(ctx context.Context, name string, u NodeUpdate) error {
	var body g.V0041UpdateNodeMsg
	if u.State != "" {
		body.State = &[]g.V0041UpdateNodeMsgState{g.V0041UpdateNodeMsgState(u.State)}
	}
	body.Reason, body.Comment, body.Extra, body.Gres = u.Reason, u.Comment, u.Extra, u.Gres
	body.Features, body.FeaturesAct = u.Features, u.ActiveFeatures
	if u.Features != nil && u.ActiveFeatures == nil {
		body.FeaturesAct = u.Features
	}
	if u.Weight != nil {
		body.Weight = set41i32(int32(*u.Weight))
	}
	return a.call(ctx, "POST /node/{node_name}", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041PostNode(ctx, name, body)
		if err != nil {
			return answer{}, err
		}
		return a.plain(resp)
	})
}

func (a *v0041) DeleteNode(ctx context.Context, name string) error {
	return a.call(ctx, "DELETE /node/{node_name}", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041DeleteNode(ctx, name)
		if err != nil {
			return answer{}, err
		}
		return a.plain(resp)
	})
}

// plain decodes an answer that carries nothing but errors and warnings.
func (a *v0041) plain(resp *http.Response) (answer, error) {
	p, err := g.ParseSlurmV0041DeleteNodeResponse(resp)
	if err != nil {
		return answer{status: resp.StatusCode}, err
	}
	b := pick(p.JSON200, p.JSONDefault)
	if b == nil {
		return bodyless(resp)
	}
	return answer{status: resp.StatusCode, errs: details41(b.Errors)}, nil
}

func (a *v0041) SubmitJob(ctx context.Context, j JobSubmit) (*SubmitResult, error) {
	var body g.SlurmV0041PostJobSubmitJSONRequestBody
	d := alloc(&body.Job)
	d.Script = &j.Script
	d.Environment = ptr(defaultEnv(j.Environment))
	d.CurrentWorkingDirectory = ptr(cmpOr(j.WorkDir, "/tmp"))
	setStr := func(dst **string, v string) {
		if v != "" {
			*dst = ptr(v)
		}
	}
	setStr(&d.Name, j.Name)
	setStr(&d.Partition, j.Partition)
	setStr(&d.Account, j.Account)
	setStr(&d.Qos, j.QOS)
	setStr(&d.Reservation, j.Reservation)
	setStr(&d.Constraints, j.Constraints)
	setStr(&d.Comment, j.Comment)
	setStr(&d.StandardOutput, j.StdOut)
	setStr(&d.StandardError, j.StdErr)
	setStr(&d.TresPerNode, gresTRES(j.GRES))
	if j.Tasks > 0 {
		d.Tasks = ptr(int32(j.Tasks))
	}
	if j.CPUsPerTask > 0 {
		d.CpusPerTask = ptr(int32(j.CPUsPerTask))
	}
	if j.MinNodes > 0 {
		d.MinimumNodes = ptr(int32(j.MinNodes))
	}
	if j.MaxNodes > 0 {
		d.MaximumNodes = ptr(int32(j.MaxNodes))
	}
	if j.MemoryPerNodeMB > 0 {
		d.MemoryPerNode = set41i64(j.MemoryPerNodeMB)
	}
	if j.Priority != nil {
		d.Priority = set41i32(int32(*j.Priority))
	}
	if j.Nice != nil {
		d.Nice = ptr(int32(*j.Nice))
	}
	if j.TimeLimit > 0 {
		d.TimeLimit = set41i32(int32(ceilMinutes(j.TimeLimit)))
	}
	if len(j.RequiredNodes) > 0 {
		d.RequiredNodes = &j.RequiredNodes
	}
	if len(j.ExcludedNodes) > 0 {
		d.ExcludedNodes = &j.ExcludedNodes
	}
	if j.Exclusive {
		d.Exclusive = &[]g.SlurmV0041PostJobSubmitJSONBodyJobExclusive{g.SlurmV0041PostJobSubmitJSONBodyJobExclusiveTrue}
	}
	if j.Hold {
		d.Hold = ptr(true)
	}
	var out *SubmitResult
	err := a.call(ctx, "POST /job/submit", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041PostJobSubmit(ctx, body)
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041PostJobSubmitResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		out = &SubmitResult{JobID: uint32(num(b.JobId)), Message: str(b.JobSubmitUserMsg)}
		a := answer{status: resp.StatusCode, errs: details41(b.Errors)}
		if out.JobID == 0 && len(a.errs) == 0 && resp.StatusCode < 300 {
			return a, fmt.Errorf("submit answer has no job id")
		}
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) jobs(ctx context.Context, endpoint string, id uint32, since time.Time) (*JobList, error) {
	var out *JobList
	err := a.call(ctx, endpoint, id == 0, func(ctx context.Context) (answer, error) {
		var resp *http.Response
		var err error
		if id == 0 {
			resp, err = a.c.SlurmV0041GetJobs(ctx, &g.SlurmV0041GetJobsParams{UpdateTime: a.updateTime(since)})
		} else {
			resp, err = a.c.SlurmV0041GetJob(ctx, strconv.FormatUint(uint64(id), 10), &g.SlurmV0041GetJobParams{})
		}
		if err != nil {
			return answer{}, err
		}
		if resp.StatusCode == http.StatusNotModified {
			resp.Body.Close()
			out = &JobList{NotModified: true, LastUpdate: since}
			return answer{status: resp.StatusCode}, nil
		}
		p, err := g.ParseSlurmV0041GetJobsResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		if id == 0 && resp.StatusCode == http.StatusOK && len(details41(b.Errors)) == 0 {
			unchanged, err := unchangedList(since, len(b.Jobs), unixTime(nv64(&b.LastUpdate)))
			if err != nil {
				return answer{status: resp.StatusCode}, err
			}
			if unchanged {
				out = &JobList{NotModified: true, LastUpdate: since}
				return answer{status: http.StatusNotModified}, nil
			}
		}
		out = &JobList{Jobs: make([]Job, 0, len(b.Jobs)), LastUpdate: unixTime(nv64(&b.LastUpdate))}
		for i := range b.Jobs {
			j := &b.Jobs[i]
			job := Job{
				ID: uint32(num(j.JobId)), Name: str(j.Name), UserName: str(j.UserName), UserID: num(j.UserId),
				Account: str(j.Account), Partition: str(j.Partition), QOS: str(j.Qos), State: stringsOf(j.JobState),
				StateReason: str(j.StateReason), StateDescription: str(j.StateDescription), Nodes: str(j.Nodes),
				BatchHost: str(j.BatchHost), TRESPerNode: str(j.TresPerNode), TRESAlloc: str(j.TresAllocStr),
				Nice: num(j.Nice), Hold: boolean(j.Hold), Reservation: str(j.ResvName),
				RequiredNodes: str(j.RequiredNodes), ExcludedNodes: str(j.ExcludedNodes), Comment: str(j.Comment),
				WorkDir: str(j.CurrentWorkingDirectory), StdOut: str(j.StandardOutput),
				SubmitTime: unixTime(nv64(j.SubmitTime)), StartTime: unixTime(nv64(j.StartTime)),
				EndTime: unixTime(nv64(j.EndTime)), TimeLimit: minutes(nv32(j.TimeLimit)),
			}
			if v, ok := nv32(j.NodeCount); ok {
				job.NodeCount = int(v)
			}
			if v, ok := nv32(j.Cpus); ok {
				job.CPUs = int(v)
			}
			if v, ok := nv32(j.CpusPerTask); ok {
				job.CPUsPerTask = int(v)
			}
			if v, ok := nv64(j.MemoryPerNode); ok {
				job.MemoryPerNodeMB = v
			}
			if v, ok := nv32(j.Priority); ok {
				job.Priority = uint32(v)
			}
			for _, e := range stringsOf(j.Exclusive) {
				job.Exclusive = job.Exclusive || e == "true"
			}
			for _, s := range stringsOf(j.Shared) {
				job.Exclusive = job.Exclusive || s == "none"
			}
			if ec := j.ExitCode; ec != nil {
				if v, ok := nv32(ec.ReturnCode); ok {
					job.ExitCode = int(v)
				}
				if ec.Signal != nil {
					if v, ok := nv32(ec.Signal.Id); ok {
						job.ExitSignal = int(v)
					}
				}
			}
			out.Jobs = append(out.Jobs, job)
		}
		return answer{status: resp.StatusCode, errs: details41(b.Errors), missing: id != 0 && len(b.Jobs) == 0}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) GetJob(ctx context.Context, id uint32) (*Job, error) {
	l, err := a.jobs(ctx, "GET /job/{job_id}", id, time.Time{})
	if err != nil {
		return nil, err
	}
	for i := range l.Jobs {
		if l.Jobs[i].ID == id {
			return &l.Jobs[i], nil
		}
	}
	return nil, &SlurmError{Endpoint: "GET /job/{job_id}", HTTPStatus: http.StatusOK, Kind: ErrNotFound,
		Description: fmt.Sprintf("answer has %d jobs, none with id %d", len(l.Jobs), id)}
}

func (a *v0041) ListJobs(ctx context.Context, since time.Time) (*JobList, error) {
	return a.jobs(ctx, "GET /jobs/", 0, since)
}

func (a *v0041) ListJobStates(ctx context.Context) ([]JobState, error) {
	return a.jobStates(ctx, func(ctx context.Context) (*http.Response, error) {
		return a.c.SlurmV0041GetJobsState(ctx, &g.SlurmV0041GetJobsStateParams{})
	})
}

func (a *v0041) CancelJob(ctx context.Context, id uint32) error {
	return a.signal(ctx, id, "")
}

func (a *v0041) SignalJob(ctx context.Context, id uint32, signal string) error {
	if signal == "" {
		return fmt.Errorf("slurm: SignalJob needs a signal")
	}
	return a.signal(ctx, id, signal)
}

func (a *v0041) signal(ctx context.Context, id uint32, signal string) error {
	params := &g.SlurmV0041DeleteJobParams{}
	if signal != "" {
		params.Signal = ptr(strings.TrimPrefix(strings.ToUpper(signal), "SIG"))
	}
	return a.call(ctx, "DELETE /job/{job_id}", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041DeleteJob(ctx, strconv.FormatUint(uint64(id), 10), params)
		if err != nil {
			return answer{}, err
		}
		return a.plain(resp)
	})
}

func (a *v0041) UpdateJob(ctx context.Context, id uint32, u JobUpdate) error {
	var body g.SlurmV0041PostJobJSONRequestBody
	body.Comment, body.Hold = u.Comment, u.Hold
	if u.Priority != nil {
		body.Priority = set41i32(int32(*u.Priority))
	}
	if u.Nice != nil {
		body.Nice = ptr(int32(*u.Nice))
	}
	if u.TimeLimit != nil {
		body.TimeLimit = set41i32(int32(ceilMinutes(*u.TimeLimit)))
	}
	return a.call(ctx, "POST /job/{job_id}", false, func(ctx context.Context) (answer, error) {
		resp, err := a.c.SlurmV0041PostJob(ctx, strconv.FormatUint(uint64(id), 10), body)
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041PostJobResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		errs := details41(b.Errors)
		// Per-job results carry their own error codes.
		if b.Results != nil {
			for _, r := range *b.Results {
				if c := num(r.ErrorCode); c != 0 {
					errs = append(errs, ErrorDetail{Code: c, Error: str(r.Error), Description: str(r.Why), Source: "results"})
				}
			}
		}
		return answer{status: resp.StatusCode, errs: errs}, nil
	})
}

func (a *v0041) partitions(ctx context.Context, endpoint, name string) ([]Partition, error) {
	var out []Partition
	err := a.call(ctx, endpoint, false, func(ctx context.Context) (answer, error) {
		var resp *http.Response
		var err error
		if name == "" {
			resp, err = a.c.SlurmV0041GetPartitions(ctx, &g.SlurmV0041GetPartitionsParams{})
		} else {
			resp, err = a.c.SlurmV0041GetPartition(ctx, name, &g.SlurmV0041GetPartitionParams{})
		}
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041GetPartitionsResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		for _, pt := range b.Partitions {
			part := Partition{Name: str(pt.Name)}
			if pt.Nodes != nil {
				part.Nodes, part.NodeCount = str(pt.Nodes.Configured), num(pt.Nodes.Total)
			}
			if pt.Cpus != nil {
				part.TotalCPUs = num(pt.Cpus.Total)
			}
			if pt.Partition != nil {
				part.State = stringsOf(pt.Partition.State)
			}
			if pt.Maximums != nil {
				part.MaxTime = minutes(nv32(pt.Maximums.Time))
			}
			if pt.Priority != nil {
				part.Priority = num(pt.Priority.Tier)
			}
			out = append(out, part)
		}
		a := answer{status: resp.StatusCode, errs: details41(b.Errors), missing: name != "" && len(b.Partitions) == 0}
		// An unknown partition is 422 with error 9000 "Unable to find partition NAME".
		if a.missing && resp.StatusCode == http.StatusUnprocessableEntity && len(a.errs) == 1 &&
			strings.HasPrefix(a.errs[0].Description, "Unable to find partition") {
			a.status = http.StatusNotFound
		}
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) ListPartitions(ctx context.Context) ([]Partition, error) {
	return a.partitions(ctx, "GET /partitions/", "")
}

func (a *v0041) GetPartition(ctx context.Context, name string) (*Partition, error) {
	l, err := a.partitions(ctx, "GET /partition/{partition_name}", name)
	if err != nil {
		return nil, err
	}
	return only(l, "GET /partition/{partition_name}", name, func(p *Partition) string { return p.Name })
}

func (a *v0041) reservations(ctx context.Context, endpoint, name string) ([]Reservation, error) {
	var out []Reservation
	err := a.call(ctx, endpoint, false, func(ctx context.Context) (answer, error) {
		var resp *http.Response
		var err error
		if name == "" {
			resp, err = a.c.SlurmV0041GetReservations(ctx, &g.SlurmV0041GetReservationsParams{})
		} else {
			resp, err = a.c.SlurmV0041GetReservation(ctx, name, &g.SlurmV0041GetReservationParams{})
		}
		if err != nil {
			return answer{}, err
		}
		p, err := g.ParseSlurmV0041GetReservationsResponse(resp)
		if err != nil {
			return answer{status: resp.StatusCode}, err
		}
		b := pick(p.JSON200, p.JSONDefault)
		if b == nil {
			return bodyless(resp)
		}
		for _, r := range b.Reservations {
			out = append(out, Reservation{
				Name: str(r.Name), Nodes: str(r.NodeList), NodeCount: num(r.NodeCount),
				StartTime: unixTime(nv64(r.StartTime)), EndTime: unixTime(nv64(r.EndTime)),
				Flags: stringsOf(r.Flags), Users: str(r.Users), Accounts: str(r.Accounts), Partition: str(r.Partition),
			})
		}
		return answer{status: resp.StatusCode, errs: details41(b.Errors), missing: name != "" && len(b.Reservations) == 0}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *v0041) ListReservations(ctx context.Context) ([]Reservation, error) {
	return a.reservations(ctx, "GET /reservations/", "")
}

func (a *v0041) GetReservation(ctx context.Context, name string) (*Reservation, error) {
	l, err := a.reservations(ctx, "GET /reservation/{reservation_name}", name)
	if err != nil {
		return nil, err
	}
	return only(l, "GET /reservation/{reservation_name}", name, func(r *Reservation) string { return r.Name })
}

func (a *v0041) CreateReservation(ctx context.Context, r ReservationCreate) error {
	return a.unsupported("POST /reservation", "reservation create")
}

func (a *v0041) DeleteReservation(ctx context.Context, name string) error {
	return a.unsupported("DELETE /reservation/{reservation_name}", "reservation delete")
}
