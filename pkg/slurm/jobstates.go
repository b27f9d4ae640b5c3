package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// jobStatesAnswer is GET /jobs/state's body. It is decoded here rather than through the
// generated clients: Slurm 24.11's specs describe this answer as a full job list
// (openapi_job_info_resp), while slurmrestd sends {"jobs": [{"job_id": "12", "state": [...]}]}
// with the job id as a string (data_parser's JOB_STATE_RESP_JOB dumper). The shape is the same in
// v0.0.41 and v0.0.42.
type jobStatesAnswer struct {
	Jobs []struct {
		JobID *string  `json:"job_id"`
		State []string `json:"state"`
	} `json:"jobs"`
	Errors []struct {
		ErrorNumber int    `json:"error_number"`
		Error       string `json:"error"`
		Description string `json:"description"`
		Source      string `json:"source"`
	} `json:"errors"`
}

// jobStates runs GET /jobs/state through get (the version's generated request) and decodes it.
func (c *core) jobStates(ctx context.Context, get func(context.Context) (*http.Response, error)) ([]JobState, error) {
	var out []JobState
	err := c.call(ctx, "GET /jobs/state/", false, func(ctx context.Context) (answer, error) {
		resp, err := get(ctx)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
			return bodyless(resp)
		}
		var b jobStatesAnswer
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			return answer{status: resp.StatusCode}, err
		}
		a := answer{status: resp.StatusCode}
		for _, e := range b.Errors {
			a.errs = append(a.errs, ErrorDetail{Code: e.ErrorNumber, Error: e.Error, Description: e.Description, Source: e.Source})
		}
		if resp.StatusCode != http.StatusOK || len(a.errs) > 0 {
			return a, nil
		}
		out = make([]JobState, 0, len(b.Jobs))
		for i, j := range b.Jobs {
			// A record without an id or a state is not "a job in no state": fail closed.
			if j.JobID == nil || *j.JobID == "" || len(j.State) == 0 {
				return a, fmt.Errorf("jobs[%d] has no job_id or no state", i)
			}
			out = append(out, JobState{ID: *j.JobID, State: j.State})
		}
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
