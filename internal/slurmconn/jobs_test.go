package slurmconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

// sinceLog keeps the update_time of each list a fake slurmrestd answered.
type sinceLog struct {
	mu    sync.Mutex
	since []time.Time
}

func (l *sinceLog) add(since time.Time) {
	l.mu.Lock()
	l.since = append(l.since, since)
	l.mu.Unlock()
}

// lists are the lists made so far: all of them and those with update_time.
func (l *sinceLog) lists() (all, incremental int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.since {
		if !s.IsZero() {
			incremental++
		}
	}
	return len(l.since), incremental
}

// recorder is a fake slurmrestd that keeps the update_time of each job list.
type recorder struct {
	*slurmfake.Fake
	sinceLog
}

func (r *recorder) ListJobs(ctx context.Context, since time.Time) (*slurm.JobList, error) {
	r.add(since)
	return r.Fake.ListJobs(ctx, since)
}

// polls counts every request a job cache makes.
func (r *recorder) polls() int {
	all, _ := r.lists()
	return all + r.Calls("ListJobStates") + r.Calls("GetJob")
}

// jobsEnv is a pool whose Factory builds a new fake slurmrestd, holding one pending job, for
// each client; clock moves the job caches' clock.
type jobsEnv struct {
	p      *Pool
	n      clusternames.Names
	c      client.Client
	clock  atomic.Int64 // added to the real time
	mu     sync.Mutex
	fakes  []*recorder
	broken error // the error new fakes fail every call with
}

func newJobsEnv(t *testing.T, opts slurm.InformerOptions) *jobsEnv {
	svc, sec := objects("10.0.0.1", "key-1")
	e := &jobsEnv{n: clusternames.Names{Cluster: "a", Namespace: "ns", RestAPI: "a-restapi", JWTSecret: "a-jwt-key"},
		c: fake.NewClientBuilder().WithObjects(svc, sec).Build()}
	e.p = New(Options{Reader: e.c, JobCache: opts, Factory: func(string, Keys, *http.Client) (slurm.Client, error) {
		f := &recorder{Fake: slurmfake.New()}
		f.AddJob(slurm.Job{ID: 1, State: []string{"PENDING"}, StateReason: "Resources"})
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.broken != nil {
			f.SetError("*", e.broken)
		}
		e.fakes = append(e.fakes, f)
		return f, nil
	}})
	e.p.now = func() time.Time { return time.Now().Add(time.Duration(e.clock.Load())) }
	t.Cleanup(func() { e.p.Forget(Key(e.n)) })
	return e
}

// jobs reads the cluster's jobs as the autoscaler does: For (the pool's client, new when the
// keys changed), then Jobs.
func (e *jobsEnv) jobs(ctx context.Context) ([]slurm.Job, error) {
	if _, err := e.p.For(ctx, e.n, ""); err != nil {
		return nil, err
	}
	return e.p.Jobs(ctx, e.n)
}

// fake is the fake slurmrestd of the i-th client built.
func (e *jobsEnv) fake(i int) *recorder {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fakes[i]
}

func (e *jobsEnv) cache() *jobCache {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	if c := e.p.conns[Key(e.n)]; c != nil {
		return c.jobs
	}
	return nil
}

// stopped waits until jc polls no more.
func stopped(t *testing.T, jc *jobCache, why string) {
	t.Helper()
	select {
	case <-jc.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the job cache still polls after %s", why)
	}
}

func ids(jobs []slurm.Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprint(j.ID))
	}
	return strings.Join(out, ",")
}

// Two NodeSets of a cluster reading its jobs within an interval cost one list, not two.
func TestJobsOneListForTheCluster(t *testing.T) {
	e := newJobsEnv(t, slurm.InformerOptions{Interval: time.Hour})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if jobs, err := e.jobs(context.Background()); err != nil || ids(jobs) != "1" {
				t.Errorf("jobs %s, error %v; want job 1", ids(jobs), err)
			}
		}()
	}
	wg.Wait()
	if _, err := e.jobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if all, _ := e.fake(0).lists(); all != 1 || e.fake(0).Calls("ListJobStates") != 1 {
		t.Errorf("%d job lists and %d state lists for three reads, want 1 and 1", all, e.fake(0).Calls("ListJobStates"))
	}
}

// After the first list, polls read what changed: a new job is fetched alone, and a later
// full list carries update_time.
func TestJobsPollsIncrementally(t *testing.T) {
	ctx := context.Background()
	e := newJobsEnv(t, slurm.InformerOptions{Interval: slurm.MinPollInterval, JobFullListEvery: 2 * slurm.MinPollInterval})
	if _, err := e.jobs(ctx); err != nil {
		t.Fatal(err)
	}
	f := e.fake(0)
	f.AddJob(slurm.Job{ID: 2, State: []string{"PENDING"}, StateReason: "Priority"})
	wait.For(t, "the new job in the cache", 10*time.Second, 20*time.Millisecond, func() error {
		if jobs, err := e.jobs(ctx); err != nil || ids(jobs) != "1,2" && ids(jobs) != "2,1" {
			return fmt.Errorf("jobs %s, error %v", ids(jobs), err)
		}
		return nil
	})
	wait.For(t, "a job list with update_time", 10*time.Second, 20*time.Millisecond, func() error {
		if _, incremental := f.lists(); incremental == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	if all, incremental := f.lists(); all-incremental != 1 {
		t.Errorf("%d job lists without update_time, want only the first", all-incremental)
	}
	if f.Calls("GetJob") == 0 {
		t.Error("the new job was not fetched alone")
	}
}

// Fail closed: a cache whose lists fail, or whose last good list is too old, is an error,
// never a table.
func TestJobsFailsClosed(t *testing.T) {
	ctx := context.Background()
	down := fmt.Errorf("slurmctld: %w", slurm.ErrUnavailable)
	t.Run("no client", func(t *testing.T) {
		e := newJobsEnv(t, slurm.InformerOptions{Interval: slurm.MinPollInterval})
		jobs, err := e.p.Jobs(ctx, e.n)
		if err == nil || jobs != nil || !strings.Contains(err.Error(), "the cluster has no client") {
			t.Fatalf("jobs %v, error %v; want no client", jobs, err)
		}
	})
	t.Run("never listed", func(t *testing.T) {
		e := newJobsEnv(t, slurm.InformerOptions{Interval: slurm.MinPollInterval})
		e.broken = down
		jobs, err := e.jobs(ctx)
		if err == nil || jobs != nil || !errors.Is(err, slurm.ErrUnavailable) || !strings.Contains(err.Error(), "no list has succeeded yet") {
			t.Fatalf("jobs %v, error %v; want no list has succeeded yet", jobs, err)
		}
		e.fake(0).SetError("*", nil)
		wait.For(t, "the jobs once Slurm answers", 10*time.Second, 20*time.Millisecond, func() error {
			_, err := e.jobs(ctx)
			return err
		})
	})
	t.Run("last list failed", func(t *testing.T) {
		e := newJobsEnv(t, slurm.InformerOptions{Interval: slurm.MinPollInterval})
		if _, err := e.jobs(ctx); err != nil {
			t.Fatal(err)
		}
		e.fake(0).SetError("ListJobStates", down)
		var err error
		wait.For(t, "an error", 10*time.Second, 20*time.Millisecond, func() error {
			var jobs []slurm.Job
			if jobs, err = e.jobs(ctx); err == nil || jobs != nil {
				return fmt.Errorf("jobs %s, error %v", ids(jobs), err)
			}
			return nil
		})
		if !errors.Is(err, slurm.ErrUnavailable) || !strings.Contains(err.Error(), "slurm job cache of ns/a: last list failed") {
			t.Errorf("error %q, want the last list's failure", err)
		}
	})
	t.Run("stale", func(t *testing.T) {
		e := newJobsEnv(t, slurm.InformerOptions{Interval: time.Hour})
		if _, err := e.jobs(ctx); err != nil {
			t.Fatal(err)
		}
		e.clock.Store(int64(4 * time.Hour)) // three polls were due, and none happened
		jobs, err := e.jobs(ctx)
		if err == nil || jobs != nil || !strings.Contains(err.Error(), "last list succeeded 4h0m0s ago") {
			t.Errorf("jobs %v, error %v; want a stale cache's error", jobs, err)
		}
	})
}

// The cache stops with its client (Forget, new keys) and when nobody reads it: no list
// after, and the next read starts one on the current client.
func TestJobsCacheStops(t *testing.T) {
	ctx := context.Background()
	e := newJobsEnv(t, slurm.InformerOptions{Interval: slurm.MinPollInterval})
	read := func() {
		t.Helper()
		if _, err := e.jobs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// polling waits until the i-th client's cache polled twice more (two intervals passed),
	// and checks that the (i-1)-th's stopped one polled no more meanwhile.
	polling := func(i int) {
		t.Helper()
		old := e.fake(i - 1).polls()
		cur := e.fake(i).polls()
		wait.For(t, "the new cache's polls", 10*time.Second, 20*time.Millisecond, func() error {
			if n := e.fake(i).polls(); n < cur+2 {
				return fmt.Errorf("%d requests", n)
			}
			return nil
		})
		if n := e.fake(i - 1).polls(); n != old {
			t.Errorf("the stopped cache made %d requests after it stopped", n-old)
		}
	}

	read()
	jc := e.cache()
	e.p.Forget(Key(e.n))
	stopped(t, jc, "Forget")
	read()
	polling(1)

	jc = e.cache()
	update(t, e.c, func(_ *corev1.Service, s *corev1.Secret) { s.Data[wellknown.SecretJWTKey] = []byte("key-2") })
	read()
	stopped(t, jc, "a new key")
	polling(2)

	jc = e.cache()
	wait.For(t, "the unread cache to stop", 10*time.Second, 20*time.Millisecond, func() error {
		if !jc.stopped() {
			return errors.New("still polling")
		}
		return nil
	})
	read()
	if e.cache() == jc || e.cache().stopped() {
		t.Error("a read after the cache stopped did not start another")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.fakes); n != 3 {
		t.Errorf("%d clients, want 3 (an idle cache keeps its client)", n)
	}
}
