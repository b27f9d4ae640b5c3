package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

func TestInformerEventsAndFailClosed(t *testing.T) {
	ctx := context.Background()
	f := slurmfake.New()
	f.AddNode(slurm.Node{Name: "a"})
	f.AddNode(slurm.Node{Name: "b"})
	inf := slurm.NewNodeInformer(f, slurm.InformerOptions{Interval: time.Nanosecond})
	if inf.Interval() != slurm.MinPollInterval {
		t.Fatalf("floor: %v", inf.Interval())
	}
	var events []string
	inf.AddHandler(slurm.Handler[slurm.Node]{
		OnAdd: func(n slurm.Node) { events = append(events, "add "+n.Name) },
		OnUpdate: func(o, n slurm.Node) {
			events = append(events, "update "+n.Name+" "+n.BaseState()+">"+n.State[len(n.State)-1])
		},
		OnDelete: func(n slurm.Node) { events = append(events, "delete "+n.Name) },
	})
	if res, err := inf.Poll(ctx); err != nil || !res.Full || res.Added != 2 || !inf.HasSynced() {
		t.Fatalf("first poll %+v %v", res, err)
	}
	if got := inf.ListWhere(func(name string) bool { return name == "b" }); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("ListWhere(b) = %+v", got)
	}
	var seen []string
	for n := range inf.All() {
		seen = append(seen, n.Name)
		break // a loop left early releases the read lock: the poll below would hang otherwise
	}
	if len(seen) != 1 {
		t.Fatalf("All, left after one: %v", seen)
	}
	time.Sleep(time.Millisecond)
	if res, err := inf.Poll(ctx); err != nil || !res.NotModified {
		t.Fatalf("unchanged: %+v %v", res, err)
	}
	if err := f.UpdateNode(ctx, "a", slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: ptr("k8s: test")}); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteNode(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if res, err := inf.Poll(ctx); err != nil || res.Updated != 1 || res.Deleted != 1 {
		t.Fatalf("changed: %+v %v", res, err)
	}
	// A failing Slurm changes nothing: no deletes, store intact, the error is reported.
	f.SetError("*", slurm.ErrUnavailable)
	if _, err := inf.Poll(ctx); !errors.Is(err, slurm.ErrUnavailable) || !errors.Is(inf.LastError(), slurm.ErrUnavailable) {
		t.Fatalf("want the error, got %v", err)
	}
	if n, ok := inf.Get("a"); !ok || !n.Drained() || len(inf.List()) != 1 {
		t.Fatalf("store after an error: %+v", inf.List())
	}
	f.SetError("*", nil)
	want := []string{"add a", "add b", "update a IDLE>DRAIN", "delete b"}
	if len(events) != len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] && !(i < 2 && (events[0]+events[1] == "add badd a")) {
			t.Fatalf("events %v, want %v", events, want)
		}
	}
	// A late handler gets the current contents replayed.
	var replay []string
	inf.AddHandler(slurm.Handler[slurm.Node]{OnAdd: func(n slurm.Node) { replay = append(replay, n.Name) }})
	if len(replay) != 1 || replay[0] != "a" {
		t.Fatalf("replay %v", replay)
	}
}

func TestInformerRunAndWaitForSync(t *testing.T) {
	f := slurmfake.New()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	inf := slurm.NewJobInformer(f, slurm.InformerOptions{Interval: 100 * time.Millisecond})
	added := make(chan uint32, 10)
	inf.AddHandler(slurm.Handler[slurm.Job]{OnAdd: func(j slurm.Job) { added <- j.ID }})
	done := make(chan error)
	go func() { done <- inf.Run(ctx) }()
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := f.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\n"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-added:
		if id != r.JobID {
			t.Fatalf("added %d", id)
		}
	case <-ctx.Done():
		t.Fatal("job never added")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestFakeContract(t *testing.T) {
	ctx := context.Background()
	f := slurmfake.New()
	f.AddNode(slurm.Node{Name: "n1"})
	if _, err := f.GetNode(ctx, "nope"); !errors.Is(err, slurm.ErrNotFound) {
		t.Fatal(err)
	}
	if err := f.UpdateNode(ctx, "n1", slurm.NodeUpdate{State: slurm.NodeStateDrain}); err == nil {
		t.Fatal("drain without a reason accepted")
	}
	if err := f.UpdateNode(ctx, "n1", slurm.NodeUpdate{State: slurm.NodeStateResume}); err == nil {
		t.Fatal("resume of an idle node accepted (Slurm refuses it)")
	}
	r, _ := f.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\n", Hold: true})
	if err := f.CancelJob(ctx, r.JobID); err != nil {
		t.Fatal(err)
	}
	if j, _ := f.GetJob(ctx, r.JobID); j.BaseState() != "CANCELLED" {
		t.Fatalf("job %v", j.State)
	}
	if f.Calls("GetJob") != 1 {
		t.Fatal(f.Calls("GetJob"))
	}

	f.AddJob(slurm.Job{ID: 7, State: []string{"RUNNING"}, Nodes: "n1", CPUs: 2})
	l, err := f.ListJobs(ctx, time.Time{})
	if err != nil || len(l.Jobs) != 2 || l.Jobs[1].ID != 7 || l.Jobs[1].Nodes != "n1" || l.Jobs[1].CPUs != 2 {
		t.Fatalf("AddJob: %+v, %v", l, err)
	}
	if r, _ := f.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\n", Hold: true}); r.JobID != 8 {
		t.Fatalf("a job submitted after AddJob(7) got id %d", r.JobID)
	}
	reset := time.Unix(1699920000, 0)
	f.SetDiag(slurm.Diag{BackfillJobs: 9, ResetTime: reset})
	if d, err := f.Diag(ctx); err != nil || d.BackfillJobs != 9 || !d.ResetTime.Equal(reset) || d.RequestTime.IsZero() {
		t.Fatalf("SetDiag: %+v, %v", d, err)
	}
	if f.Calls("Diag") != 1 || f.Calls("ListJobs") != 1 {
		t.Fatalf("calls: Diag %d, ListJobs %d", f.Calls("Diag"), f.Calls("ListJobs"))
	}
}

func ptr[T any](v T) *T { return &v }

// HasSynced turns true only once the handlers have seen the first list: the scheduler decides
// "this pod has no job, submit one" on HasSynced and its handlers' index, and submitted a
// second job for a pod whose job the index did not hold yet.
func TestInformerSyncedAfterHandlers(t *testing.T) {
	f := slurmfake.New()
	f.AddNode(slurm.Node{Name: "a"})
	inf := slurm.NewNodeInformer(f, slurm.InformerOptions{})
	var syncedDuringAdd []bool
	inf.AddHandler(slurm.Handler[slurm.Node]{OnAdd: func(slurm.Node) { syncedDuringAdd = append(syncedDuringAdd, inf.HasSynced()) }})
	if _, err := inf.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(syncedDuringAdd) != 1 || syncedDuringAdd[0] {
		t.Fatalf("HasSynced during the first list's OnAdd: %v, want [false]", syncedDuringAdd)
	}
	if !inf.HasSynced() {
		t.Fatal("not synced after the first poll")
	}
}

// Fetch reads a record into a job informer as a poll would: the handlers hear of it at once,
// the next poll neither reads it again nor drops it while its state is unchanged, a job the
// store holds is not read, and a later change is fetched as usual.
func TestJobInformerFetch(t *testing.T) {
	ctx := context.Background()
	f := slurmfake.New()
	f.AddJob(slurm.Job{ID: 1, State: []string{"RUNNING"}, Nodes: "a"})
	inf := slurm.NewJobInformer(f, slurm.InformerOptions{JobFullListEvery: time.Hour})
	var events []string
	inf.AddHandler(slurm.Handler[slurm.Job]{
		OnAdd:    func(j slurm.Job) { events = append(events, fmt.Sprintf("add %d %s", j.ID, j.BaseState())) },
		OnUpdate: func(_, j slurm.Job) { events = append(events, fmt.Sprintf("update %d %s", j.ID, j.BaseState())) },
		OnDelete: func(j slurm.Job) { events = append(events, fmt.Sprintf("delete %d", j.ID)) },
	})
	reads := 0
	read := func(id uint32) func() (slurm.Job, error) {
		return func() (slurm.Job, error) {
			reads++
			j, err := f.GetJob(ctx, id)
			if err != nil {
				return slurm.Job{}, err
			}
			return *j, nil
		}
	}
	f.AddJob(slurm.Job{ID: 2, State: []string{"RUNNING"}, Nodes: "b"})
	if err := inf.Fetch(2, read(2)); err != nil || reads != 0 {
		t.Fatalf("before the first full list: %v, %d reads", err, reads)
	}
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inf.Fetch(2, read(2)); err != nil || reads != 0 {
		t.Fatalf("a job the store holds: %v, %d reads", err, reads)
	}
	events = nil

	f.AddJob(slurm.Job{ID: 3, State: []string{"RUNNING"}, Nodes: "c"})
	if err := inf.Fetch(3, read(3)); err != nil || reads != 1 {
		t.Fatalf("Fetch(3): %v, %d reads", err, reads)
	}
	if got, ok := inf.Get(3); !ok || got.Nodes != "c" || fmt.Sprint(events) != "[add 3 RUNNING]" {
		t.Fatalf("after Fetch: %+v %v, events %v", got, ok, events)
	}
	gets := f.Calls("GetJob")
	if res, err := inf.Poll(ctx); err != nil || res.Added+res.Updated+res.Deleted != 0 || f.Calls("GetJob") != gets {
		t.Fatalf("the poll after Fetch: %+v %v, GetJob %d → %d", res, err, gets, f.Calls("GetJob"))
	}
	if _, ok := inf.Get(3); !ok || len(events) != 1 {
		t.Fatalf("job 3 after the poll: %v, events %v", ok, events)
	}
	if err := f.SetJobState(3, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := inf.Get(3); got.BaseState() != "COMPLETED" || fmt.Sprint(events) != "[add 3 RUNNING update 3 COMPLETED]" {
		t.Fatalf("after the job ended: %+v, events %v", got, events)
	}
	f.SetError("*", slurm.ErrUnavailable)
	if err := inf.Fetch(4, read(4)); !errors.Is(err, slurm.ErrUnavailable) {
		t.Fatalf("a failed read: %v", err)
	}
}
