package slurm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// TestJobInformerFetchesOnlyChangedJobs: with 200 jobs, a state change costs one state list and
// one job record, a purge one state list, and an unchanged table one state list; many changes
// at once and the periodic refresh cost one full list.
func TestJobInformerFetchesOnlyChangedJobs(t *testing.T) {
	f := slurmfake.New()
	for id := uint32(1); id <= 200; id++ {
		f.AddJob(slurm.Job{ID: id, State: []string{"PENDING"}, StateReason: "Priority"})
	}
	now := time.Unix(1700000000, 0)
	inf := slurm.NewJobInformerAt(f, slurm.InformerOptions{JobMaxFetch: 10, JobFullListEvery: time.Minute}, func() time.Time { return now })
	var updates, deletes []uint32
	inf.AddHandler(slurm.Handler[slurm.Job]{
		OnUpdate: func(_, j slurm.Job) { updates = append(updates, j.ID) },
		OnDelete: func(j slurm.Job) { deletes = append(deletes, j.ID) },
	})
	ctx := context.Background()
	calls := func() [3]int { return [3]int{f.Calls("ListJobStates"), f.Calls("GetJob"), f.Calls("ListJobs")} }
	step := func(name string, want [3]int) {
		t.Helper()
		before := calls()
		if _, err := inf.Poll(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		after := calls()
		got := [3]int{after[0] - before[0], after[1] - before[1], after[2] - before[2]}
		if got != want {
			t.Fatalf("%s: (state lists, job reads, full lists) = %v, want %v", name, got, want)
		}
	}
	step("first poll", [3]int{1, 0, 1})
	step("nothing changed", [3]int{1, 0, 0})

	if err := f.SetJobState(7, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	step("one job started", [3]int{1, 1, 0})
	if j, _ := inf.Get(7); j.BaseState() != "RUNNING" || len(updates) != 1 || updates[0] != 7 {
		t.Fatalf("job 7 %v, updates %v; want RUNNING and one update of 7", j.State, updates)
	}

	f.PurgeJob(8)
	step("one job purged", [3]int{1, 0, 0})
	if _, ok := inf.Get(8); ok || len(deletes) != 1 || deletes[0] != 8 {
		t.Fatalf("job 8 still stored or deletes %v", deletes)
	}

	for id := uint32(20); id < 40; id++ {
		if err := f.SetJobState(id, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	step("more changes than JobMaxFetch", [3]int{1, 0, 1})

	// A reason is not a state: the periodic list brings it.
	j, _ := f.GetJob(ctx, 9)
	j.StateReason = "Resources"
	f.AddJob(*j)
	step("reason changed, before the refresh is due", [3]int{1, 0, 0})
	now = now.Add(time.Minute)
	step("the periodic refresh", [3]int{1, 0, 1})
	if j, _ := inf.Get(9); j.StateReason != "Resources" {
		t.Fatalf("job 9 reason %q after the refresh, want Resources", j.StateReason)
	}
}

// TestJobInformerFailsClosed: a failed state list or job read changes nothing, and the job is
// read at the next good poll.
func TestJobInformerFailsClosed(t *testing.T) {
	f := slurmfake.New()
	f.AddJob(slurm.Job{ID: 1, State: []string{"PENDING"}})
	inf := slurm.NewJobInformer(f, slurm.InformerOptions{})
	ctx := context.Background()
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.SetJobState(1, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"ListJobStates", "GetJob"} {
		f.SetError(method, slurm.ErrUnavailable)
		if _, err := inf.Poll(ctx); !errors.Is(err, slurm.ErrUnavailable) {
			t.Fatalf("%s failing: poll %v, want ErrUnavailable", method, err)
		}
		if j, _ := inf.Get(1); j.BaseState() != "PENDING" || len(inf.List()) != 1 {
			t.Fatalf("%s failing changed the store: %v", method, inf.List())
		}
		f.SetError(method, nil)
	}
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := inf.Get(1); j.BaseState() != "RUNNING" {
		t.Fatalf("job 1 %v after recovery, want RUNNING", j.State)
	}
}

// TestJobInformerFetchesStartsFirst: a poll fetches at most 32 changed jobs, started ones first;
// the rest come with the next poll, nothing lost.
func TestJobInformerFetchesStartsFirst(t *testing.T) {
	f := slurmfake.New()
	for id := uint32(1); id <= 40; id++ {
		f.AddJob(slurm.Job{ID: id, State: []string{"PENDING"}})
	}
	// A clock that stands still: the choice between fetching and a full list is made on timings
	// (TestJobListerChoosesTheCheaperRead), and on a loaded machine a real clock's fake full
	// list can time faster than a fetch.
	now := time.Unix(1700000000, 0)
	inf := slurm.NewJobInformerAt(f, slurm.InformerOptions{JobFullListEvery: time.Hour}, func() time.Time { return now })
	ctx := context.Background()
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for id := uint32(41); id <= 70; id++ { // 30 new jobs
		f.AddJob(slurm.Job{ID: id, State: []string{"PENDING"}})
	}
	for id := uint32(1); id <= 10; id++ { // 10 started
		if err := f.SetJobState(id, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	res, err := inf.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added+res.Updated != 32 {
		t.Fatalf("first poll after the burst: %+v, want 32 fetched", res)
	}
	for id := uint32(1); id <= 10; id++ {
		if j, _ := inf.Get(id); j.BaseState() != "RUNNING" {
			t.Fatalf("job %d %v after the first poll: the started jobs come first", id, j.State)
		}
	}
	res, err = inf.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added != 8 || len(inf.List()) != 70 || f.Calls("ListJobs") != 1 {
		t.Fatalf("second poll: %+v, %d stored, %d full lists; want the 8 left, 70 stored, 1 full list", res, len(inf.List()), f.Calls("ListJobs"))
	}
}

// TestJobInformerRunReadsABacklogAtOnce: a burst of starts larger than a poll's fetch budget is
// read by polls back to back, not one budget per interval (an hour here: a wait for the ticker
// would fail the test).
func TestJobInformerRunReadsABacklogAtOnce(t *testing.T) {
	f := slurmfake.New()
	for id := uint32(1); id <= 200; id++ {
		f.AddJob(slurm.Job{ID: id, State: []string{"PENDING"}})
	}
	now := time.Unix(1700000000, 0)
	inf := slurm.NewJobInformerAt(f, slurm.InformerOptions{Interval: time.Hour, JobFullListEvery: time.Hour}, func() time.Time { return now })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for id := uint32(1); id <= 100; id++ {
		if err := f.SetJobState(id, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	res, err := inf.Poll(ctx)
	if err != nil || res.Backlog != 100-32 || res.Updated != 32 {
		t.Fatalf("poll after 100 starts: %+v %v, want 32 fetched and a backlog of 68", res, err)
	}
	started := make(chan uint32, 100)
	inf.AddHandler(slurm.Handler[slurm.Job]{OnUpdate: func(_, j slurm.Job) { started <- j.ID }})
	go func() { _ = inf.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	for n := 0; n < 68; n++ {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("%d of the 68 left seen within 30 s of Run with an hour's interval", n)
		}
	}
	if res, err := inf.Poll(ctx); err != nil || res.Backlog != 0 {
		t.Fatalf("after the backlog: %+v %v", res, err)
	}
	for id := uint32(1); id <= 100; id++ {
		if j, _ := inf.Get(id); j.BaseState() != "RUNNING" {
			t.Fatalf("job %d %v", id, j.State)
		}
	}
}

// TestJobInformerFetchesLateJobsWhenIdle: jobs that ended before a poll first saw them (a burst
// of refused immediate allocations, FAILED at once) are read in polls with nothing else to do:
// they neither delay the starts nor count towards a full list.
func TestJobInformerFetchesLateJobsWhenIdle(t *testing.T) {
	f := slurmfake.New()
	for id := uint32(1); id <= 200; id++ {
		f.AddJob(slurm.Job{ID: id, State: []string{"PENDING"}})
	}
	now := time.Unix(1700000000, 0)
	inf := slurm.NewJobInformerAt(f, slurm.InformerOptions{JobMaxFetch: 10, JobFullListEvery: time.Hour}, func() time.Time { return now })
	ctx := context.Background()
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for id := uint32(201); id <= 250; id++ {
		f.AddJob(slurm.Job{ID: id, State: []string{"FAILED"}, StateReason: "BadConstraints"})
	}
	for id := uint32(1); id <= 5; id++ {
		if err := f.SetJobState(id, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []struct{ added, updated, stored int }{{0, 5, 200}, {32, 0, 232}, {18, 0, 250}, {0, 0, 250}} {
		res, err := inf.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Added != want.added || res.Updated != want.updated || len(inf.List()) != want.stored {
			t.Fatalf("poll %d: %+v, %d stored; want %d added, %d updated, %d stored", i+1, res, len(inf.List()), want.added, want.updated, want.stored)
		}
	}
	if got := f.Calls("ListJobs"); got != 1 {
		t.Fatalf("%d full lists, want only the first", got)
	}
	if j, ok := inf.Get(250); !ok || j.StateReason != "BadConstraints" {
		t.Fatalf("job 250: %+v", j)
	}
}
