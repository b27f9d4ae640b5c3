package syncer

import (
	"slices"
	"testing"

	"sunk.dev/sunk/pkg/slurm"
)

// TestJobIndex: a running job is listed on each of its nodes; its end, its departure from the
// job table or a pending state take it off; only the nodes that changed are reported.
func TestJobIndex(t *testing.T) {
	x := newJobIndex()
	running := func(id uint32, nodes string) slurm.Job {
		return slurm.Job{ID: id, State: []string{"RUNNING"}, Nodes: nodes}
	}
	step := func(j slurm.Job, gone bool, want ...string) {
		t.Helper()
		if got := x.observe(j, gone); !slices.Equal(got, want) {
			t.Fatalf("observe(%d %v gone=%v) = %v, want %v", j.ID, j.State, gone, got, want)
		}
	}
	step(slurm.Job{ID: 7, State: []string{"PENDING"}}, false)
	step(running(7, "cpu-[0-1]"), false, "cpu-0", "cpu-1")
	step(running(7, "cpu-[0-1]"), false) // unchanged
	step(running(12, "cpu-1"), false, "cpu-1")
	if got := x.on("cpu-1"); got != "7,12" {
		t.Fatalf("on(cpu-1) = %q", got)
	}
	step(slurm.Job{ID: 7, State: []string{"COMPLETED", "COMPLETING"}, Nodes: "cpu-[0-1]"}, false, "cpu-0", "cpu-1")
	if got, other := x.on("cpu-1"), x.on("cpu-0"); got != "12" || other != "" {
		t.Fatalf("after job 7 ended: on(cpu-1) = %q, on(cpu-0) = %q", got, other)
	}
	step(running(12, "cpu-1"), true, "cpu-1")
	if len(x.onNode) != 0 || len(x.ofJob) != 0 {
		t.Fatalf("index not empty: %v %v", x.onNode, x.ofJob)
	}
}
