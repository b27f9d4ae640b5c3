package slurm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// jobsNoChangeJSON is what slurmrestd 24.11 answers to GET /jobs?update_time=T when no job
// changed (jobs.c op_handler_jobs): 200, no jobs, last_update 0 and a warning, never 304.
const jobsNoChangeJSON = `{"jobs":[],"last_backfill":{"set":true,"infinite":false,"number":0},
 "last_update":{"set":true,"infinite":false,"number":0},"errors":[],
 "warnings":[{"description":"No job changes since update_time[1700000100]=2023-11-14T22:15:00","source":"op_handler_jobs"}]}`

const oneJobJSON = `{"jobs":[{"job_id":7,"name":"j","job_state":["RUNNING"],"nodes":"n1"}],
 "last_update":{"set":true,"infinite":false,"number":1700000100},"errors":[],"warnings":[]}`

// jobStatesJSON is slurmrestd 24.11's GET /jobs/state answer (the job id a string).
const jobStatesJSON = `{"jobs":[{"job_id":"7","state":["RUNNING"]}],"meta":{},"errors":[],"warnings":[]}`

// TestJobInformerNoChange: unchanged states and the "no change" answer of the periodic
// incremental list change nothing: no event, the store keeps its job, and no poll relists.
func TestJobInformerNoChange(t *testing.T) {
	for _, v := range []string{V0041, V0042} {
		t.Run(v, func(t *testing.T) {
			var lists atomic.Int32
			s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/jobs/state/"):
					jsonReply(200, jobStatesJSON)(w, r)
				case lists.Add(1) == 1:
					jsonReply(200, oneJobJSON)(w, r)
				default:
					jsonReply(200, jobsNoChangeJSON)(w, r)
				}
			})
			// A full list every poll: the incremental list's "no change" is tested too.
			inf := NewJobInformer(newTestClient(t, s.URL, v, nil), InformerOptions{JobFullListEvery: time.Nanosecond})
			var events []string
			inf.AddHandler(Handler[Job]{
				OnAdd:    func(Job) { events = append(events, "add") },
				OnUpdate: func(Job, Job) { events = append(events, "update") },
				OnDelete: func(Job) { events = append(events, "delete") },
			})
			ctx := context.Background()
			if _, err := inf.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				res, err := inf.Poll(ctx)
				if err != nil || !res.NotModified || res.Full {
					t.Fatalf("poll: %+v, %v; want not modified, incremental", res, err)
				}
			}
			if len(events) != 1 || events[0] != "add" {
				t.Fatalf("events %v, want only the first add", events)
			}
			if _, ok := inf.Get(7); !ok || len(inf.List()) != 1 {
				t.Fatalf("store lost job 7: %v", inf.List())
			}
			if got := lists.Load(); got != 4 {
				t.Fatalf("%d job lists, want 4 (one full, three incremental)", got)
			}
			for i, r := range s.requests() {
				if strings.HasSuffix(r.URL.Path, "/jobs/") && i > 1 && r.URL.Query().Get("update_time") == "" {
					t.Fatalf("request %d relisted without update_time", i+1)
				}
			}
		})
	}
}

// TestEmptyListWithoutLastUpdate: a full list without last_update is malformed, never "no
// jobs" or "no nodes"; an empty list with last_update is a real empty list.
func TestEmptyListWithoutLastUpdate(t *testing.T) {
	since := time.Unix(1700000100, 0)
	for _, v := range []string{V0041, V0042} {
		t.Run(v, func(t *testing.T) {
			s := newServer(t, jsonReply(200, jobsNoChangeJSON))
			c := newTestClient(t, s.URL, v, nil)
			if _, err := c.ListJobs(context.Background(), time.Time{}); !errors.Is(err, ErrDecode) {
				t.Fatalf("full job list without last_update: %v, want ErrDecode", err)
			}
			if _, err := c.ListNodes(context.Background(), time.Time{}); !errors.Is(err, ErrDecode) {
				t.Fatalf("full node list without last_update: %v, want ErrDecode", err)
			}
			if l, err := c.ListNodes(context.Background(), since); err != nil || !l.NotModified {
				t.Fatalf("incremental node list without last_update: %+v, %v, want not modified", l, err)
			}
			empty := newServer(t, jsonReply(200, `{"jobs":[],"last_update":{"set":true,"infinite":false,"number":1700000200},"errors":[]}`))
			l, err := newTestClient(t, empty.URL, v, nil).ListJobs(context.Background(), since)
			if err != nil || l.NotModified || len(l.Jobs) != 0 || l.LastUpdate.Unix() != 1700000200 {
				t.Fatalf("a changed, empty job list: %+v, %v", l, err)
			}
		})
	}
}

// TestNoChangeWithErrorsIsAnError: errors beside an empty answer are errors, not "no change".
func TestNoChangeWithErrorsIsAnError(t *testing.T) {
	for _, v := range []string{V0041, V0042} {
		s := newServer(t, jsonReply(500, `{"jobs":[],"errors":[{"description":"Unable to query jobs","error_number":1007,"error":"x","source":"slurm_load_jobs()"}]}`))
		if _, err := newTestClient(t, s.URL, v, nil).ListJobs(context.Background(), time.Unix(1700000100, 0)); err == nil {
			t.Fatalf("%s: an answer with errors was taken for no change", v)
		}
	}
}
