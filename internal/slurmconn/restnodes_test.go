package slurmconn

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
)

// nodeRecorder is a fake slurmrestd that keeps the update_time of each node list.
type nodeRecorder struct {
	*slurmfake.Fake
	sinceLog
}

func (r *nodeRecorder) ListNodes(ctx context.Context, since time.Time) (*slurm.NodeList, error) {
	r.add(since)
	return r.Fake.ListNodes(ctx, since)
}

// restNodesEnv is a pool whose clients all answer from one fake slurmrestd holding rest-0.
type restNodesEnv struct {
	p *Pool
	n clusternames.Names
	f *nodeRecorder
}

func newRESTNodesEnv(t *testing.T) *restNodesEnv {
	svc, sec := objects("10.0.0.1", "key-1")
	e := &restNodesEnv{n: clusternames.Names{Cluster: "a", Namespace: "ns", RestAPI: "a-restapi", JWTSecret: "a-jwt-key"},
		f: &nodeRecorder{Fake: slurmfake.New()}}
	e.f.AddNode(slurm.Node{Name: "rest-0", State: []string{"IDLE"}})
	e.p = New(Options{Reader: fake.NewClientBuilder().WithObjects(svc, sec).Build(),
		Factory: func(string, Keys, *http.Client) (slurm.Client, error) { return e.f, nil }})
	t.Cleanup(func() { e.p.Forget(Key(e.n)) })
	return e
}

// nodes reads the table as a reconcile does: For, then Nodes without watchers.
func (e *restNodesEnv) nodes(t *testing.T) ([]slurm.Node, error) {
	t.Helper()
	ctx := context.Background()
	sl, err := e.p.For(ctx, e.n, "")
	if err != nil {
		t.Fatal(err)
	}
	return e.p.Nodes(ctx, e.n, false, sl)
}

// Without node watchers the table is read through slurmrestd once whole, then with update_time:
// a read of an unchanged table costs one small request and answers the table as read, a change
// is read whole. Every read asks, however soon after another.
func TestNodesReadThroughRESTIncrementally(t *testing.T) {
	e := newRESTNodesEnv(t)
	want := func(want_ ...string) {
		t.Helper()
		got, err := e.nodes(t)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(got), want_) {
			t.Fatalf("nodes %v, want %v", names(got), want_)
		}
	}
	want("rest-0")
	if all, inc := e.f.lists(); all != 1 || inc != 0 {
		t.Fatalf("%d lists (%d incremental), want one whole list", all, inc)
	}
	want("rest-0")
	if all, inc := e.f.lists(); all != 2 || inc != 1 {
		t.Fatalf("%d lists (%d incremental), want a second one with update_time", all, inc)
	}
	e.f.AddNode(slurm.Node{Name: "rest-1", State: []string{"IDLE"}})
	want("rest-0", "rest-1")
	if all, inc := e.f.lists(); all != 3 || inc != 2 {
		t.Fatalf("%d lists (%d incremental), want a third one with update_time", all, inc)
	}

	// Readers at once (the cluster's NodeSets) each ask, one after the other.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if _, err := e.nodes(t); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if all, inc := e.f.lists(); all != 8 || inc != 7 {
		t.Errorf("%d lists (%d incremental) after five readers at once, want 8 (7)", all, inc)
	}
}

// Fail closed: a read that fails is an error, not the table as last read, and the next read
// asks again.
func TestNodesThroughRESTFailsClosed(t *testing.T) {
	e := newRESTNodesEnv(t)
	if _, err := e.nodes(t); err != nil {
		t.Fatal(err)
	}
	e.f.SetError("ListNodes", slurm.ErrUnavailable)
	if got, err := e.nodes(t); err == nil {
		t.Fatalf("a failed read answered %v, want an error", names(got))
	}
	if got, err := e.nodes(t); err == nil {
		t.Fatalf("the read after a failed one answered %v, want an error", names(got))
	}
	e.f.SetError("ListNodes", nil)
	if got, err := e.nodes(t); err != nil || !slices.Equal(names(got), []string{"rest-0"}) {
		t.Fatalf("nodes %v, error %v once slurmrestd answers again; want rest-0", names(got), err)
	}
}
