//go:build integration

package testbed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/test/testenv"
)

// A batch job submitted over slurmrestd with a minted JWT runs on the real slurmd nodes and
// reaches COMPLETED with exit code 0; its output lands on the shared filesystem.
func TestSlurmBatchJobCompletes(t *testing.T) {
	env := testenv.Slurm(t)
	token := env.Token(t, env.User)
	out := fmt.Sprintf("testbed-%d.out", time.Now().UnixNano())
	submit := map[string]any{
		"script": "#!/bin/bash\nsrun hostname\n",
		"job": map[string]any{
			"name": "sunk-testbed", "partition": "all", "nodes": "2", "tasks": 2,
			"current_working_directory": "/shared", "standard_output": "/shared/" + out,
			"environment": []string{"PATH=/usr/bin:/bin"},
		},
	}
	var resp struct {
		JobID  int `json:"job_id"`
		Errors []struct {
			Description string `json:"description"`
			Error       string `json:"error"`
		} `json:"errors"`
	}
	rest(t, env, token, http.MethodPost, "/slurm/v0.0.41/job/submit", submit, &resp)
	if len(resp.Errors) > 0 || resp.JobID == 0 {
		t.Fatalf("submit: job %d, errors %+v", resp.JobID, resp.Errors)
	}

	var state string
	var exit int
	deadline := time.Now().Add(60 * time.Second)
	for {
		var job struct {
			Jobs []struct {
				JobState []string `json:"job_state"`
				ExitCode struct {
					ReturnCode struct {
						Number int `json:"number"`
					} `json:"return_code"`
				} `json:"exit_code"`
			} `json:"jobs"`
		}
		rest(t, env, token, http.MethodGet, fmt.Sprintf("/slurm/v0.0.41/job/%d", resp.JobID), nil, &job)
		if len(job.Jobs) != 1 {
			t.Fatalf("job %d: got %d records", resp.JobID, len(job.Jobs))
		}
		state, exit = strings.Join(job.Jobs[0].JobState, ","), job.Jobs[0].ExitCode.ReturnCode.Number
		if state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d ended %s with exit code %d, want COMPLETED 0", resp.JobID, state, exit)
	}
	output, err := os.ReadFile(filepath.Join(env.SharedDir, out))
	if err != nil {
		t.Fatal(err)
	}
	hosts := strings.Fields(string(output))
	if len(hosts) != 2 || hosts[0] == hosts[1] {
		t.Fatalf("job output %q: want two different node names", output)
	}
}

func rest(t *testing.T, env *testenv.SlurmEnv, token, method, path string, body, into any) {
	t.Helper()
	var r *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	} else {
		r = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, env.RESTURL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-SLURM-USER-NAME", env.User)
	req.Header.Set("X-SLURM-USER-TOKEN", token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		t.Fatalf("%s %s: HTTP %d: %s", method, path, res.StatusCode, b.String())
	}
	if err := json.NewDecoder(res.Body).Decode(into); err != nil {
		t.Fatalf("%s %s: decoding: %v", method, path, err)
	}
}
