package slurm

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// jobSignalResult is one entry of DELETE /jobs' status list: a job slurmctld could not signal.
type jobSignalResult struct {
	// JobID is the job's id, unset (0) for a job slurmctld does not know: StepID still names it
	// as it was asked for.
	JobID   uint32
	StepID  string
	Code    int
	Error   string
	Message string
}

// jobSignalFailures turns DELETE /jobs' status list into the per-job errors CancelJobs returns.
// An entry it cannot tie to one of ids fails the whole request: reading it as "cancelled" would
// leave a job running that the caller believes gone.
func jobSignalFailures(endpoint string, ids []uint32, results []jobSignalResult) (map[uint32]error, error) {
	asked := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	failed := map[uint32]error{}
	for _, r := range results {
		id := r.JobID
		if id == 0 {
			// The id as asked for: "123", or "123_4" / "123+1" / "123.0" for parts of a job.
			head, _, _ := strings.Cut(r.StepID, ".")
			head, _, _ = strings.Cut(head, "_")
			head, _, _ = strings.Cut(head, "+")
			n, err := strconv.ParseUint(head, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("slurm %s: %w: a result names job %q", endpoint, ErrDecode, r.StepID)
			}
			id = uint32(n)
		}
		if !asked[id] {
			return nil, fmt.Errorf("slurm %s: %w: a result names job %d, which was not asked for", endpoint, ErrDecode, id)
		}
		if r.Code == 0 || r.Code == errnoAlreadyDone {
			continue // signalled after all, or ended before: cancelled either way, as CancelJob reads it
		}
		failed[id] = classify(endpoint, http.StatusOK, []ErrorDetail{{Code: r.Code, Error: r.Error, Description: r.Message, Source: "status"}}, nil, false)
	}
	return failed, nil
}
