package plugin

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// granting is slurmfake granting every immediate allocation (a batch job made RUNNING), as
// slurmctld does with room.
type granting struct {
	*slurmfake.Fake
	allocs atomic.Int64
}

func (g *granting) AllocateJob(ctx context.Context, js slurm.JobSubmit) (*slurm.SubmitResult, error) {
	g.allocs.Add(1)
	js.Script = "#!/bin/true"
	res, err := g.SubmitJob(ctx, js)
	if err != nil {
		return nil, err
	}
	res.Allocated = true
	return res, g.SetJobState(res.JobID, "RUNNING")
}

func TestViewRoom(t *testing.T) {
	node := func(name string, state []string, mem, allocMem int64, allocCPUs int, partitions ...string) slurm.Node {
		return slurm.Node{Name: name, State: state, CPUs: 2, AllocCPUs: allocCPUs, RealMemoryMB: mem, AllocMemoryMB: allocMem, Partitions: partitions}
	}
	idle, mixed := []string{"IDLE"}, []string{"MIXED"}
	completing := []string{"MIXED", "COMPLETING"}
	small := slurm.JobSubmit{MinNodes: 1, CPUsPerTask: 1, MemoryPerNodeMB: 10, Partition: "bench"}
	exclusive := small
	exclusive.Exclusive = true
	two := small
	two.MinNodes = 2
	packed := slurm.JobSubmit{MinNodes: 1, CPUsPerTask: 2, MemoryPerCPUMB: 300, Partition: "bench"}
	excluding := small
	excluding.ExcludedNodes = []string{"a"}
	for _, tc := range []struct {
		name  string
		nodes []slurm.Node
		job   slurm.JobSubmit
		room  bool
	}{
		{"a free node", []slurm.Node{node("a", completing, 1024, 100, 2, "bench"), node("b", mixed, 1024, 100, 2, "bench")}, small, true},
		{"every node completing", []slurm.Node{node("a", completing, 1024, 100, 1, "bench"), node("b", completing, 1024, 0, 0, "bench")}, small, false},
		{"all CPUs allocated: an oversubscribed partition takes more", []slurm.Node{node("a", []string{"ALLOCATED"}, 1024, 100, 2, "bench")}, small, true},
		{"memory taken", []slurm.Node{node("a", mixed, 1024, 1020, 1, "bench")}, small, false},
		{"memory per CPU times the task's CPUs", []slurm.Node{node("a", mixed, 1024, 500, 1, "bench")}, packed, false},
		{"drained, down, not responding", []slurm.Node{node("a", []string{"IDLE", "DRAIN"}, 1024, 0, 0, "bench"),
			node("b", []string{"DOWN"}, 1024, 0, 0, "bench"), node("c", []string{"IDLE", "NOT_RESPONDING"}, 1024, 0, 0, "bench")}, small, false},
		{"exclusive: a node with jobs", []slurm.Node{node("a", mixed, 1024, 10, 1, "bench")}, exclusive, false},
		{"exclusive: an idle node", []slurm.Node{node("a", mixed, 1024, 10, 1, "bench"), node("b", idle, 1024, 0, 0, "bench")}, exclusive, true},
		{"two nodes wanted, one free", []slurm.Node{node("a", completing, 1024, 0, 0, "bench"), node("b", idle, 1024, 0, 0, "bench")}, two, false},
		{"the free node excluded", []slurm.Node{node("a", idle, 1024, 0, 0, "bench"), node("b", completing, 1024, 0, 0, "bench")}, excluding, false},
		{"the free node in another partition", []slurm.Node{node("a", idle, 1024, 0, 0, "all"), node("b", completing, 1024, 0, 0, "bench")}, small, false},
		{"no node of the partition in the view: Slurm answers", []slurm.Node{node("a", completing, 1024, 0, 0, "all")}, small, true},
		{"an empty view: Slurm answers", nil, small, true},
		{"no memory in the node record", []slurm.Node{node("a", mixed, 0, 0, 1, "bench")}, small, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := viewHasRoom(slices.Values(tc.nodes), &tc.job); got != tc.room {
				t.Fatalf("viewHasRoom = %v, want %v", got, tc.room)
			}
		})
	}
}

func TestNodeOpened(t *testing.T) {
	n := func(allocMem int64, allocCPUs int, state ...string) *slurm.Node {
		return &slurm.Node{Name: "a", State: state, CPUs: 2, RealMemoryMB: 1024, AllocMemoryMB: allocMem, AllocCPUs: allocCPUs}
	}
	for _, tc := range []struct {
		name     string
		old, cur *slurm.Node
		want     bool
	}{
		{"done completing", n(10, 1, "MIXED", "COMPLETING"), n(10, 1, "MIXED"), true},
		{"starts completing", n(10, 1, "MIXED"), n(10, 1, "MIXED", "COMPLETING"), false},
		{"memory freed", n(20, 1, "MIXED"), n(10, 1, "MIXED"), true},
		{"CPUs freed", n(10, 2, "ALLOCATED"), n(10, 1, "MIXED"), true},
		{"a job started", n(10, 1, "MIXED"), n(20, 2, "ALLOCATED"), false},
		{"resumed", n(0, 0, "IDLE", "DRAIN"), n(0, 0, "IDLE"), true},
		{"freed while still completing", n(20, 1, "MIXED", "COMPLETING"), n(10, 1, "MIXED", "COMPLETING"), false},
		{"first seen, free", nil, n(0, 0, "IDLE"), true},
		{"first seen, down", nil, n(0, 0, "DOWN"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeOpened(tc.old, tc.cur); got != tc.want {
				t.Fatalf("nodeOpened = %v, want %v", got, tc.want)
			}
		})
	}
}

// An allocation the node view shows no room for is not asked for: it waits until the view
// opens, then asks once and is granted (no refusal, no FAILED record). A view that never opens
// does not keep it: it asks Slurm, the judge, once its waits have seen nothing freed.
func TestAllocationHeldByTheNodeView(t *testing.T) {
	completing := func(fk *slurmfake.Fake, state ...string) {
		for _, name := range []string{"n1", "n2"} {
			fk.AddNode(slurm.Node{Name: name, State: state, CPUs: 2, RealMemoryMB: 1024})
		}
	}
	for _, tc := range []struct {
		name  string
		retry time.Duration
		opens bool
	}{
		{"held until the view opens", time.Hour, true},
		{"the view never opens: Slurm asked after the stalls", time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fk := slurmfake.New()
			g := &granting{Fake: fk}
			b := newTestBed(t, 2, g, fk)
			completing(fk, "MIXED", "COMPLETING")
			b.poll(b.p)
			b.p.watchNodeRoom()
			b.p.allocationRetry = tc.retry
			pod := b.addPod(pod(map[string]string{"sunk.dev/exclusive": "false"}, nil))
			if st := b.p.PreEnqueue(ctx, pod); st.IsSuccess() {
				t.Fatalf("a new pod: %v, want held while its job is asked for", st)
			}
			if tc.opens {
				time.Sleep(50 * time.Millisecond)
				if n := g.allocs.Load(); n != 0 {
					t.Fatalf("%d allocations asked for while every node completes, want none", n)
				}
				completing(fk, "MIXED")
				b.poll(b.p)
			}
			job := waitForJob(t, b, fk, pod)
			if a, s := g.allocs.Load(), int64(fk.Calls("SubmitJob")); a != 1 || s != a || job.BaseState() != "RUNNING" {
				t.Fatalf("%d allocations and %d batch jobs, job %v; want one allocation, granted", a, s-a, job.State)
			}
		})
	}
}
