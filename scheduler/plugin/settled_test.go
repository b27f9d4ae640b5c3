package plugin

import (
	"context"
	"testing"

	"k8s.io/klog/v2"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// A pass settles the jobs it can do nothing for (ended with their single pod gone, or not a
// placeholder at all) and skips them after; a gang's job, a job whose pod is still there and a
// live job stay; a change of a settled job unsettles it.
func TestSettledJobs(t *testing.T) {
	fk := slurmfake.New()
	b := newTestBed(t, 2, nil, fk)
	waiting := b.addPod(pod(nil, nil))
	members := b.gang("g", 2)
	b.deletePod(members[0])
	b.deletePod(members[1])
	ended := []string{"CANCELLED"}
	jobs := []struct {
		job     slurm.Job
		settled bool
	}{
		{slurm.Job{ID: 1, UserName: "root", Comment: testMarker.comment(podJobKey("gone")), State: ended, Nodes: "n1"}, true},
		{slurm.Job{ID: 2, UserName: "someone", Comment: "not a placeholder", State: []string{"RUNNING"}, Nodes: "n1"}, true},
		{slurm.Job{ID: 3, UserName: "root", Comment: testMarker.comment(gangJobKey("ns", "g", members)), State: ended, Nodes: "n[1-2]"}, false},
		{slurm.Job{ID: 4, UserName: "root", Comment: testMarker.comment(podJobKey(waiting.UID)), State: []string{"FAILED"}}, false},
		{slurm.Job{ID: 5, UserName: "root", Comment: testMarker.comment(podJobKey("gone-too")), State: []string{"RUNNING"}, Nodes: "n2"}, false},
	}
	for _, j := range jobs {
		fk.AddJob(j.job)
	}
	b.poll(b.p)
	for range 2 { // the second pass skips what the first settled
		if err := b.p.reconcile(context.Background(), klog.Background()); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if got := b.p.settled.has(j.job.ID); got != j.settled {
				t.Errorf("job %d %v (%q): settled %v, want %v", j.job.ID, j.job.State, j.job.Comment, got, j.settled)
			}
		}
	}
	b.p.settled.changed(1)
	if b.p.settled.has(1) {
		t.Error("job 1 still settled after a change")
	}
	if got := b.p.jobs.ListWhere(func(id uint32) bool { return !b.p.settled.has(id) }); len(got) != 4 {
		t.Errorf("a pass would read %d jobs, want 4 (all but job 2)", len(got))
	}
}
