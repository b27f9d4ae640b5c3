// The version adapter: one implementation of Client for every REST API version.
//
// Its shape. An operation's flow (what is sent, what counts as success, "no change", "not
// found", the workarounds for slurmrestd 24.11's quirks) does not depend on the API version, so
// it is written once, here, over api. What does depend on the version is which generated
// function sends a request and which generated struct field holds a value; Go cannot abstract
// over struct fields, and the generated types of two versions are different types (v0.0.41's
// mostly anonymous), so that mapping is rendered per version from one template by `go generate`
// (internal/adaptergen: adapter.go.tmpl and its table of versions, zz_adapter_<version>.go
// here). The template is the same text for every version except where the table says an API
// differs; adding a data parser version is a row of that table and a regenerated file.

//go:generate go run ./internal/adaptergen

package slurm

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// api is one REST API version: a function to send each request through the version's generated
// client, and a reader of each answer into sunk's types. A reader returns a nil decoded for an
// answer without a JSON body (bodyless decides what it is) and an error when the body does not
// decode.
type api interface {
	getPing(ctx context.Context) (*http.Response, error)
	readPing(resp *http.Response) (*decoded[[]ControllerPing], error)
	getDiag(ctx context.Context) (*http.Response, error)
	readDiag(resp *http.Response) (*decoded[*Diag], error)
	getReconfigure(ctx context.Context) (*http.Response, error)
	// getNodes lists the nodes (name "", changed since since when that is not zero) or gets one.
	getNodes(ctx context.Context, name string, since time.Time) (*http.Response, error)
	readNodes(resp *http.Response) (*decoded[[]Node], error)
	postNode(ctx context.Context, name string, u NodeUpdate) (*http.Response, error)
	deleteNode(ctx context.Context, name string) (*http.Response, error)
	// nodeTopology: postNode sends NodeUpdate.Topology and readNodes reads Node.Topology.
	nodeTopology() bool
	postJobSubmit(ctx context.Context, j JobSubmit) (*http.Response, error)
	readJobSubmit(resp *http.Response) (*decoded[*SubmitResult], error)
	postJobAllocate(ctx context.Context, j JobSubmit) (*http.Response, error)
	readJobAllocate(resp *http.Response) (*decoded[*SubmitResult], error)
	// getJobs lists the jobs (id 0, changed since since when that is not zero) or gets one.
	getJobs(ctx context.Context, id uint32, since time.Time) (*http.Response, error)
	readJobs(resp *http.Response) (*decoded[[]Job], error)
	getJobsState(ctx context.Context) (*http.Response, error)
	// deleteJob cancels a job, or signals it when signal is not nil.
	deleteJob(ctx context.Context, id uint32, signal *string) (*http.Response, error)
	// deleteJobs cancels the jobs named by ids in one request (SIGKILL, as scancel sends).
	deleteJobs(ctx context.Context, ids []string) (*http.Response, error)
	// readDeleteJobs reads the per-job results of deleteJobs: Slurm lists only the jobs it
	// could not signal.
	readDeleteJobs(resp *http.Response) (*decoded[[]jobSignalResult], error)
	postJob(ctx context.Context, id uint32, u JobUpdate) (*http.Response, error)
	// readPostJob reads an update's answer, the per-job results' error codes among its errors.
	readPostJob(resp *http.Response) (*decoded[struct{}], error)
	getPartitions(ctx context.Context, name string) (*http.Response, error)
	readPartitions(resp *http.Response) (*decoded[[]Partition], error)
	getReservations(ctx context.Context, name string) (*http.Response, error)
	readReservations(resp *http.Response) (*decoded[[]Reservation], error)
	// readPlain reads an answer that carries nothing but errors and warnings.
	readPlain(resp *http.Response) (*decoded[struct{}], error)
}

// decoded is one answer: its value, slurmctld's last_update (lists of nodes and jobs) and
// Slurm's errors.
type decoded[T any] struct {
	val  T
	last time.Time
	errs []ErrorDetail
}

// adapter is the Client of every API version: the flows, over the version's api.
type adapter struct {
	*core
	v api
}

// exchange sends one request and reads its answer: the answer call classifies, and the decoded
// when there is one. With notModified a 304 is not read: the caller decides what it means.
func exchange[T any](ctx context.Context, notModified bool, send func(context.Context) (*http.Response, error),
	read func(*http.Response) (*decoded[T], error)) (*decoded[T], answer, error) {
	resp, err := send(ctx)
	if err != nil {
		return nil, answer{}, err
	}
	if notModified && resp.StatusCode == http.StatusNotModified {
		resp.Body.Close()
		return nil, answer{status: resp.StatusCode}, nil
	}
	r, err := read(resp)
	if err != nil {
		return nil, answer{status: resp.StatusCode}, err
	}
	if r == nil {
		a, err := bodyless(resp)
		return nil, a, err
	}
	return r, answer{status: resp.StatusCode, errs: r.errs}, nil
}

// fetch runs an operation with one answer and returns the decoded value. check, if not nil,
// looks at a decoded answer before call classifies it.
func fetch[T any](a *adapter, ctx context.Context, endpoint string, send func(context.Context) (*http.Response, error),
	read func(*http.Response) (*decoded[T], error), check func(T, *answer) error) (T, error) {
	var out, zero T
	err := a.call(ctx, endpoint, false, func(ctx context.Context) (answer, error) {
		r, ans, err := exchange(ctx, false, send, read)
		if r == nil || err != nil {
			return ans, err
		}
		out = r.val
		if check != nil {
			err = check(r.val, &ans)
		}
		return ans, err
	})
	if err != nil {
		return zero, err
	}
	return out, nil
}

// list runs a GET of nodes or jobs: all of them (one false; with a non-zero since only if
// something changed) or one by name or id. A 304, and slurmrestd's "no change" answer to an
// incremental list (unchangedList), are notModified; a lookup that found nothing is missing.
func list[T any](a *adapter, ctx context.Context, endpoint string, one bool, since time.Time,
	send func(context.Context) (*http.Response, error), read func(*http.Response) (*decoded[[]T], error),
) (items []T, last time.Time, notModified bool, err error) {
	err = a.call(ctx, endpoint, !one, func(ctx context.Context) (answer, error) {
		r, ans, err := exchange(ctx, true, send, read)
		if err != nil || r == nil {
			if err == nil && ans.status == http.StatusNotModified {
				notModified, last = true, since
			}
			return ans, err
		}
		if !one && ans.status == http.StatusOK && len(r.errs) == 0 {
			unchanged, err := unchangedList(since, len(r.val), r.last)
			if err != nil {
				return answer{status: ans.status}, err
			}
			if unchanged {
				notModified, last = true, since
				return answer{status: http.StatusNotModified}, nil
			}
		}
		items, last = r.val, r.last
		ans.missing = one && len(r.val) == 0
		return ans, nil
	})
	if err != nil {
		return nil, time.Time{}, false, err
	}
	return items, last, notModified, nil
}

func (a *adapter) Ping(ctx context.Context) ([]ControllerPing, error) {
	return fetch(a, ctx, "GET /ping/", a.v.getPing, a.v.readPing, nil)
}

func (a *adapter) Diag(ctx context.Context) (*Diag, error) {
	return fetch(a, ctx, "GET /diag/", a.v.getDiag, a.v.readDiag, nil)
}

func (a *adapter) Reconfigure(ctx context.Context) error {
	_, err := fetch(a, ctx, "GET /reconfigure/", a.v.getReconfigure, a.v.readPlain, nil)
	return err
}

func (a *adapter) nodes(ctx context.Context, endpoint, name string, since time.Time) (*NodeList, error) {
	send := func(ctx context.Context) (*http.Response, error) { return a.v.getNodes(ctx, name, since) }
	nodes, last, notModified, err := list(a, ctx, endpoint, name != "", since, send, a.v.readNodes)
	if err != nil {
		return nil, err
	}
	return &NodeList{Nodes: nodes, LastUpdate: last, NotModified: notModified}, nil
}

func (a *adapter) ListNodes(ctx context.Context, since time.Time) (*NodeList, error) {
	l, err := a.nodes(ctx, "GET /nodes/", "", since)
	if err != nil && !since.IsZero() && isPartitionsNoChange(err) {
		return a.nodes(ctx, "GET /nodes/", "", time.Time{})
	}
	return l, err
}

func (a *adapter) GetNode(ctx context.Context, name string) (*Node, error) {
	l, err := a.nodes(ctx, "GET /node/{node_name}", name, time.Time{})
	if err != nil {
		return nil, err
	}
	return only(l.Nodes, "GET /node/{node_name}", "nodes", fmt.Sprintf("named %q", name), func(n *Node) bool { return n.Name == name })
}

func (a *adapter) UpdateNode(ctx context.Context, name string, u NodeUpdate) error {
	if u.Topology != nil && !a.v.nodeTopology() {
		// Sending the update without it would report success and move nothing.
		return fmt.Errorf("slurm POST /node/{node_name}: %w: topology_str needs REST v0.0.43 or later (Slurm 25.05 and later)", ErrUnsupported)
	}
	send := func(ctx context.Context) (*http.Response, error) { return a.v.postNode(ctx, name, u) }
	_, err := fetch(a, ctx, "POST /node/{node_name}", send, a.v.readPlain, nil)
	return err
}

func (a *adapter) DeleteNode(ctx context.Context, name string) error {
	send := func(ctx context.Context) (*http.Response, error) { return a.v.deleteNode(ctx, name) }
	_, err := fetch(a, ctx, "DELETE /node/{node_name}", send, a.v.readPlain, nil)
	return err
}

func (a *adapter) SubmitJob(ctx context.Context, j JobSubmit) (*SubmitResult, error) {
	send := func(ctx context.Context) (*http.Response, error) { return a.v.postJobSubmit(ctx, j) }
	return fetch(a, ctx, "POST /job/submit", send, a.v.readJobSubmit, needJobID)
}

func (a *adapter) AllocateJob(ctx context.Context, j JobSubmit) (*SubmitResult, error) {
	send := func(ctx context.Context) (*http.Response, error) { return a.v.postJobAllocate(ctx, j) }
	r, err := fetch(a, ctx, "POST /job/allocate", send, a.v.readJobAllocate, needJobID)
	if err != nil {
		return nil, err
	}
	r.Allocated = true
	return r, nil
}

// needJobID refuses a clean answer to a submission or an allocation that names no job.
func needJobID(r *SubmitResult, ans *answer) error {
	if r.JobID == 0 && len(ans.errs) == 0 && ans.status < 300 {
		return fmt.Errorf("answer has no job id")
	}
	return nil
}

func (a *adapter) jobs(ctx context.Context, endpoint string, id uint32, since time.Time) (*JobList, error) {
	send := func(ctx context.Context) (*http.Response, error) { return a.v.getJobs(ctx, id, since) }
	jobs, last, notModified, err := list(a, ctx, endpoint, id != 0, since, send, a.v.readJobs)
	if err != nil {
		return nil, err
	}
	return &JobList{Jobs: jobs, LastUpdate: last, NotModified: notModified}, nil
}

func (a *adapter) GetJob(ctx context.Context, id uint32) (*Job, error) {
	l, err := a.jobs(ctx, "GET /job/{job_id}", id, time.Time{})
	if err != nil {
		return nil, err
	}
	return only(l.Jobs, "GET /job/{job_id}", "jobs", fmt.Sprintf("with id %d", id), func(j *Job) bool { return j.ID == id })
}

func (a *adapter) ListJobs(ctx context.Context, since time.Time) (*JobList, error) {
	return a.jobs(ctx, "GET /jobs/", 0, since)
}

func (a *adapter) ListJobStates(ctx context.Context) ([]JobState, error) {
	return a.jobStates(ctx, a.v.getJobsState)
}

func (a *adapter) CancelJob(ctx context.Context, id uint32) error {
	return a.signal(ctx, id, "")
}

// CancelJobs sends one DELETE /jobs for ids. slurmctld signals each job on its own and answers
// with the jobs it could not signal, each with its error number.
func (a *adapter) CancelJobs(ctx context.Context, ids []uint32) (map[uint32]error, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = strconv.FormatUint(uint64(id), 10)
	}
	const endpoint = "DELETE /jobs/"
	send := func(ctx context.Context) (*http.Response, error) { return a.v.deleteJobs(ctx, names) }
	results, err := fetch(a, ctx, endpoint, send, a.v.readDeleteJobs, nil)
	if err != nil {
		return nil, err
	}
	return jobSignalFailures(endpoint, ids, results)
}

func (a *adapter) SignalJob(ctx context.Context, id uint32, signal string) error {
	if signal == "" {
		return fmt.Errorf("slurm: SignalJob needs a signal")
	}
	return a.signal(ctx, id, signal)
}

func (a *adapter) signal(ctx context.Context, id uint32, signal string) error {
	var sig *string
	if signal != "" {
		sig = ptr(strings.TrimPrefix(strings.ToUpper(signal), "SIG"))
	}
	send := func(ctx context.Context) (*http.Response, error) { return a.v.deleteJob(ctx, id, sig) }
	_, err := fetch(a, ctx, "DELETE /job/{job_id}", send, a.v.readPlain, nil)
	return err
}

func (a *adapter) UpdateJob(ctx context.Context, id uint32, u JobUpdate) error {
	send := func(ctx context.Context) (*http.Response, error) { return a.v.postJob(ctx, id, u) }
	_, err := fetch(a, ctx, "POST /job/{job_id}", send, a.v.readPostJob, nil)
	return err
}

// named runs a GET of a list, or of the records named name: no record is missing.
func named[T any](a *adapter, ctx context.Context, endpoint, name string, get func(context.Context, string) (*http.Response, error),
	read func(*http.Response) (*decoded[[]T], error), check func(*answer)) ([]T, error) {
	send := func(ctx context.Context) (*http.Response, error) { return get(ctx, name) }
	return fetch(a, ctx, endpoint, send, read, func(l []T, ans *answer) error {
		ans.missing = name != "" && len(l) == 0
		if check != nil {
			check(ans)
		}
		return nil
	})
}

// byName gets the record named name through named.
func byName[T any](a *adapter, ctx context.Context, endpoint, name string, get func(context.Context, string) (*http.Response, error),
	read func(*http.Response) (*decoded[[]T], error), check func(*answer), nameOf func(*T) string) (*T, error) {
	l, err := named(a, ctx, endpoint, name, get, read, check)
	if err != nil {
		return nil, err
	}
	return only(l, endpoint, "records", fmt.Sprintf("named %q", name), func(r *T) bool { return nameOf(r) == name })
}

func (a *adapter) ListPartitions(ctx context.Context) ([]Partition, error) {
	return named(a, ctx, "GET /partitions/", "", a.v.getPartitions, a.v.readPartitions, unknownPartition)
}

func (a *adapter) GetPartition(ctx context.Context, name string) (*Partition, error) {
	return byName(a, ctx, "GET /partition/{partition_name}", name, a.v.getPartitions, a.v.readPartitions, unknownPartition,
		func(p *Partition) string { return p.Name })
}

// unknownPartition: slurmrestd answers an unknown partition with 422 and error 9000 "Unable to
// find partition NAME".
func unknownPartition(a *answer) {
	if a.missing && a.status == http.StatusUnprocessableEntity && len(a.errs) == 1 &&
		strings.HasPrefix(a.errs[0].Description, "Unable to find partition") {
		a.status = http.StatusNotFound
	}
}

func (a *adapter) ListReservations(ctx context.Context) ([]Reservation, error) {
	return named(a, ctx, "GET /reservations/", "", a.v.getReservations, a.v.readReservations, nil)
}

func (a *adapter) GetReservation(ctx context.Context, name string) (*Reservation, error) {
	return byName(a, ctx, "GET /reservation/{reservation_name}", name, a.v.getReservations, a.v.readReservations, nil,
		func(r *Reservation) string { return r.Name })
}

func (a *adapter) CreateReservation(ctx context.Context, r ReservationCreate) error {
	return a.unsupported("POST /reservation", "reservation create")
}

func (a *adapter) DeleteReservation(ctx context.Context, name string) error {
	return a.unsupported("DELETE /reservation/{reservation_name}", "reservation delete")
}

// localUpdateTime formats update_time as slurmrestd's local time YYYY-MM-DDTHH:MM:SS, for
// v0.0.41, whose parser rejects a UNIX timestamp (error 9202).
func localUpdateTime(since time.Time, loc *time.Location) *string {
	if since.IsZero() {
		return nil
	}
	return ptr(since.In(loc).Format("2006-01-02T15:04:05"))
}

// unixUpdateTime formats update_time as a UNIX timestamp (no time zone to agree on).
func unixUpdateTime(since time.Time) *string {
	if since.IsZero() {
		return nil
	}
	return ptr(strconv.FormatInt(since.Unix(), 10))
}

// jobID is a job id as the generated clients take it in a path.
func jobID(id uint32) string { return strconv.FormatUint(uint64(id), 10) }
