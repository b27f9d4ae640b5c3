package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// statusJSON is one entry of DELETE /jobs' status list as slurmrestd writes it: job_id is unset
// for a job slurmctld does not know, and step_id names the job as it was asked for.
func statusJSON(jobID int, stepID string, code int, text string) string {
	return fmt.Sprintf(`{"error":{"string":%q,"code":%d,"message":%q},"step_id":%q,`+
		`"job_id":{"set":%t,"infinite":false,"number":%d},"federation":{"sibling":""}}`, text, code, text, stepID, jobID != 0, jobID)
}

func killJobsJSON(entries ...string) string {
	return `{"status":[` + strings.Join(entries, ",") + `],"errors":[],"warnings":[]}`
}

func TestCancelJobs(t *testing.T) {
	ids := []uint32{7, 99}
	cases := []struct {
		name   string
		status int
		body   string
		failed map[uint32]error // the per-job errors; nil with err
		err    error            // the request's error
	}{
		{name: "all cancelled", status: 200, body: killJobsJSON(), failed: map[uint32]error{}},
		{name: "an unknown job is not found, by the id it was asked for", status: 200,
			body: killJobsJSON(statusJSON(0, "99", 2017, "Invalid job id specified")), failed: map[uint32]error{99: ErrNotFound}},
		{name: "a job that had ended counts as cancelled", status: 200,
			body: killJobsJSON(statusJSON(7, "7", 2021, "Job/step already completing or completed")), failed: map[uint32]error{}},
		{name: "a refusal stays the job's", status: 200,
			body: killJobsJSON(statusJSON(7, "7", 2002, "Access/permission denied")), failed: map[uint32]error{7: ErrUnauthorized}},
		{name: "a result for a job not asked for fails the request", status: 200,
			body: killJobsJSON(statusJSON(8, "8", 2020, "Job is in a transitional state")), err: ErrDecode},
		{name: "a result naming no job fails the request", status: 200,
			body: killJobsJSON(statusJSON(0, "", 2017, "Invalid job id specified")), err: ErrDecode},
		{name: "slurmctld unreachable", status: 500, body: errJSON(1001, "slurm_kill_jobs()"), err: ErrUnavailable},
	}
	for _, v := range []string{V0041, V0042, V0045} {
		for _, tc := range cases {
			t.Run(v+"/"+tc.name, func(t *testing.T) {
				var sent string
				s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					sent = r.Method + " " + r.URL.Path + " " + string(b)
					jsonReply(tc.status, tc.body)(w, r)
				})
				failed, err := newTestClient(t, s.URL, v, nil).CancelJobs(context.Background(), ids)
				if want := "DELETE /slurm/" + v + `/jobs/ {"jobs":["7","99"]}`; sent != want {
					t.Fatalf("sent %s, want %s", sent, want)
				}
				if tc.err != nil {
					if !errors.Is(err, tc.err) || failed != nil {
						t.Fatalf("got %v, %v; want %v", failed, err, tc.err)
					}
					return
				}
				if err != nil || len(failed) != len(tc.failed) {
					t.Fatalf("got %v, %v; want %v", failed, err, tc.failed)
				}
				for id, want := range tc.failed {
					if !errors.Is(failed[id], want) {
						t.Fatalf("job %d: %v, want %v", id, failed[id], want)
					}
				}
			})
		}
	}
}
