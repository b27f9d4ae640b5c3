//go:build integration

// Package slurm_test runs pkg/slurm against the real Slurm of the test bed (hack/env-slurm.sh;
// 24.11, or 26.05 with SUNK_SLURM_VERSION=26.05): slurmctld, slurmrestd with JWT, and dynamic
// slurmd nodes. Tests of every REST API version run each that both pkg/slurm and the test bed's
// slurmrestd know (24.11: v0.0.41, v0.0.42; 26.05: v0.0.42–v0.0.45); tests of one version take
// the oldest of those. Every test
// leaves the cluster as it found it (nodes resumed, test nodes and jobs removed).
package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

func newClient(t testing.TB, env *testenv.SlurmEnv, version string) slurm.Client {
	t.Helper()
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(t), slurm.WithLifetime(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c, err := slurm.New(slurm.Config{URL: env.RESTURL, APIVersion: version, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	wait.For(t, "", d, 200*time.Millisecond, f)
}

func TestPingDiagPartitionsReconfigure(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			pings, err := c.Ping(ctx)
			if err != nil || len(pings) == 0 || !pings[0].Responding {
				t.Fatalf("ping: %+v, %v", pings, err)
			}
			d, err := c.Diag(ctx)
			if err != nil || d.ServerThreadCount == 0 || d.RequestTime.IsZero() {
				t.Fatalf("diag: %+v, %v", d, err)
			}
			p, err := c.GetPartition(ctx, "all")
			if err != nil || p.NodeCount < len(env.Nodes) || p.TotalCPUs == 0 || !slicesContains(p.State, "UP") {
				t.Fatalf("partition all: %+v, %v", p, err)
			}
			if _, err := c.GetPartition(ctx, "no-such-partition"); !errors.Is(err, slurm.ErrNotFound) {
				t.Fatalf("unknown partition: want ErrNotFound, got %v", err)
			}
			// Slurm's times have whole seconds: a slurmd that started in the second of the call
			// counts as restarted by it (26.05's re-execute within that second).
			called := time.Now().Truncate(time.Second)
			if err := c.Reconfigure(ctx); err != nil {
				t.Fatalf("reconfigure: %v", err)
			}
			// Reconfigure is asynchronous: each slurmd re-executes itself (24.11 and 26.05) and
			// registers with a new start time. Until it has, it is still idle, and a second
			// reconfigure (the next REST version's pass) could reach it before its new process
			// handles SIGHUP, which then kills it: on a loaded machine that left slurm-n1 not
			// responding for every later test. Each look has its own deadline: on 26.05 a request
			// that reaches slurmctld while it re-executes itself can go unanswered.
			eventually(t, time.Minute, func() error {
				look, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := startedSince(look, c, env.Nodes, called); err != nil {
					return err
				}
				return nodesIdle(look, c, env.Nodes)
			})
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// startedSince says whether the slurmd of every named node started at or after t.
func startedSince(ctx context.Context, c slurm.Client, names []string, t time.Time) error {
	for _, n := range names {
		node, err := c.GetNode(ctx, n)
		if err != nil {
			return err
		}
		if node.SlurmdStartTime.Before(t) {
			return fmt.Errorf("slurmd of %s not restarted yet (started %v)", n, node.SlurmdStartTime)
		}
	}
	return nil
}

func nodesIdle(ctx context.Context, c slurm.Client, names []string) error {
	for _, n := range names {
		node, err := c.GetNode(ctx, n)
		if err != nil {
			return err
		}
		if node.BaseState() != "IDLE" || node.Drained() || node.HasState("NOT_RESPONDING") {
			return fmt.Errorf("node %s is %v (reason %q)", n, node.State, node.Reason)
		}
	}
	return nil
}

func TestUnknownIsNotFound(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			n, err := c.GetNode(ctx, "no-such-node")
			if !errors.Is(err, slurm.ErrNotFound) || n != nil {
				t.Fatalf("unknown node: want ErrNotFound, got %+v, %v", n, err)
			}
			var se *slurm.SlurmError
			if !errors.As(err, &se) || se.Description == "" {
				t.Fatalf("unknown node: want a *SlurmError with Slurm's text, got %#v", err)
			}
			t.Logf("unknown node: %v", err)
			if err := c.UpdateNode(ctx, "no-such-node", slurm.NodeUpdate{Comment: ptr("x")}); !errors.Is(err, slurm.ErrNotFound) {
				t.Fatalf("update unknown node: want ErrNotFound, got %v", err)
			}
			if err := c.DeleteNode(ctx, "no-such-node"); !errors.Is(err, slurm.ErrNotFound) {
				t.Fatalf("delete unknown node: want ErrNotFound, got %v", err)
			}
			if _, err := c.GetJob(ctx, 999999); !errors.Is(err, slurm.ErrNotFound) {
				t.Fatalf("unknown job: want ErrNotFound, got %v", err)
			}
			if _, err := c.GetReservation(ctx, "no-such-resv"); !errors.Is(err, slurm.ErrNotFound) {
				t.Fatalf("unknown reservation: want ErrNotFound, got %v", err)
			}
		})
	}
}

func TestUnauthorized(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			bad, err := slurm.NewJWTSource(env.User, []byte("not-the-cluster-key"))
			if err != nil {
				t.Fatal(err)
			}
			c, err := slurm.New(slurm.Config{URL: env.RESTURL, APIVersion: v, Tokens: bad})
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.ListNodes(ctxT(t, time.Minute), time.Time{})
			if !errors.Is(err, slurm.ErrUnauthorized) || l != nil {
				t.Fatalf("bad key: want ErrUnauthorized and no list, got %v, %v", l, err)
			}
			t.Logf("bad key: %v", err)
		})
	}
}

func TestDrainResumeNode(t *testing.T) {
	env := testenv.Slurm(t)
	name := env.Nodes[0]
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			eventually(t, 30*time.Second, func() error { return nodesIdle(ctx, c, []string{name}) })
			t.Cleanup(func() {
				_ = c.UpdateNode(context.Background(), name, slurm.NodeUpdate{State: slurm.NodeStateResume, Comment: ptr("")})
			})
			reason := "k8s: integration test " + v
			if err := c.UpdateNode(ctx, name, slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason, Comment: ptr("drained by test")}); err != nil {
				t.Fatal(err)
			}
			n, err := c.GetNode(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if !n.Drained() || n.Reason != reason || n.Comment != "drained by test" || n.ReasonChangedAt.IsZero() {
				t.Fatalf("after drain: state %v reason %q comment %q changed %v", n.State, n.Reason, n.Comment, n.ReasonChangedAt)
			}
			t.Logf("drained: state %v reason %q set by %q", n.State, n.Reason, n.ReasonSetBy)
			if err := c.UpdateNode(ctx, name, slurm.NodeUpdate{State: slurm.NodeStateResume, Comment: ptr("")}); err != nil {
				t.Fatal(err)
			}
			// Slurm pings a resumed node (NOT_RESPONDING for a moment) and, in 24.11, keeps the
			// old reason on the idle node: drained-ness is the DRAIN flag, never the reason.
			eventually(t, 30*time.Second, func() error { return nodesIdle(ctx, c, []string{name}) })
			if n, err = c.GetNode(ctx, name); err != nil {
				t.Fatal(err)
			}
			t.Logf("resumed: state %v, reason left by Slurm %q", n.State, n.Reason)
		})
	}
}

// TestDrainResumeNodeList: one update request drains and resumes a list of nodes ("a,b"),
// which the syncer's writer sends for a cordon of many compute pods at once.
func TestDrainResumeNodeList(t *testing.T) {
	env := testenv.Slurm(t)
	if len(env.Nodes) < 2 {
		t.Fatalf("the Slurm environment has %d nodes, want at least 2", len(env.Nodes))
	}
	names := env.Nodes[:2]
	list := strings.Join(names, ",")
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			eventually(t, 30*time.Second, func() error { return nodesIdle(ctx, c, names) })
			t.Cleanup(func() {
				_ = c.UpdateNode(context.Background(), list, slurm.NodeUpdate{State: slurm.NodeStateResume})
			})
			reason := "k8s: integration test list " + v
			if err := c.UpdateNode(ctx, list, slurm.NodeUpdate{State: slurm.NodeStateDrain, Reason: &reason}); err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				n, err := c.GetNode(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if !n.Drained() || n.Reason != reason {
					t.Fatalf("%s after the list drain: state %v reason %q", name, n.State, n.Reason)
				}
			}
			if err := c.UpdateNode(ctx, list, slurm.NodeUpdate{State: slurm.NodeStateResume}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, func() error { return nodesIdle(ctx, c, names) })
		})
	}
}

func TestUpdateNodeFeaturesWeight(t *testing.T) {
	env := testenv.Slurm(t)
	name := env.Nodes[1]
	c, ctx := newClient(t, env, env.APIVersions(t)[0]), ctxT(t, time.Minute)
	orig, err := c.GetNode(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.UpdateNode(context.Background(), name, slurm.NodeUpdate{Features: &orig.Features, Weight: &orig.Weight}); err != nil {
			t.Errorf("restoring %s: %v", name, err)
		}
	})
	feats, w := append(append([]string{}, orig.Features...), "sunk-extra"), uint32(7)
	if err := c.UpdateNode(ctx, name, slurm.NodeUpdate{Features: &feats, Weight: &w}); err != nil {
		t.Fatal(err)
	}
	n, err := c.GetNode(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !slicesContains(n.Features, "sunk-extra") || !slicesContains(n.ActiveFeatures, "sunk-extra") || n.Weight != 7 {
		t.Fatalf("features %v active %v weight %d", n.Features, n.ActiveFeatures, n.Weight)
	}
}

func TestDeleteDynamicNode(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			name := "sunk-it-" + strings.ReplaceAll(v, ".", "")
			if out, err := env.Exec("scontrol", "create", "nodename="+name, "state=future", "cpus=1", "realmemory=100", "features=sunk-it"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			t.Cleanup(func() { _, _ = env.Exec("scontrol", "delete", "nodename="+name) })
			n, err := c.GetNode(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if n.BaseState() != "FUTURE" || n.CPUs != 1 || n.RealMemoryMB != 100 {
				t.Fatalf("created node: %+v", n)
			}
			l, err := c.ListNodes(ctx, time.Time{})
			if err != nil || !hasNode(l.Nodes, name) {
				t.Fatalf("list does not show the future node: %v", err)
			}
			if err := c.DeleteNode(ctx, name); err != nil {
				t.Fatal(err)
			}
			if _, err := c.GetNode(ctx, name); !errors.Is(err, slurm.ErrNotFound) {
				t.Fatalf("after delete: want ErrNotFound, got %v", err)
			}
		})
	}
}

func hasNode(nodes []slurm.Node, name string) bool {
	for _, n := range nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

func TestSubmitRunComplete(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, 2*time.Minute)
			out := fmt.Sprintf("/shared/sunk-it-%s-%d.out", strings.ReplaceAll(v, ".", ""), time.Now().UnixNano())
			prio := uint32(1000)
			r, err := c.SubmitJob(ctx, slurm.JobSubmit{
				Name: "sunk-it-run", Script: "#!/bin/sh\necho \"hello $SUNK_TEST on $(hostname)\"\nsleep 2\n",
				Partition: "all", Tasks: 1, CPUsPerTask: 2, MemoryPerNodeMB: 256, MinNodes: 1, MaxNodes: 1,
				TimeLimit: 5 * time.Minute, Priority: &prio, RequiredNodes: []string{env.Nodes[2]},
				ExcludedNodes: []string{env.Nodes[0]}, Comment: "sunk integration", Exclusive: true,
				Constraints: "sunk-test&(sunk-test|gpu)", // the test bed's nodes have sunk-test
				Environment: []string{"PATH=/usr/bin:/bin", "SUNK_TEST=yes"}, WorkDir: "/tmp", StdOut: out,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
			var j *slurm.Job
			sawRunning := false
			eventually(t, 90*time.Second, func() error {
				if j, err = c.GetJob(ctx, r.JobID); err != nil {
					return err
				}
				sawRunning = sawRunning || j.BaseState() == "RUNNING"
				if j.BaseState() != "COMPLETED" {
					return fmt.Errorf("job %d is %v (%s)", j.ID, j.State, j.StateReason)
				}
				return nil
			})
			if !sawRunning {
				t.Logf("job went to COMPLETED between two polls; RUNNING not observed")
			}
			if j.ExitCode != 0 || j.Nodes != env.Nodes[2] || j.CPUs < 2 || j.MemoryPerNodeMB != 256 ||
				j.TimeLimit != 5*time.Minute || j.Comment != "sunk integration" || j.Name != "sunk-it-run" ||
				j.StartTime.IsZero() || j.EndTime.Before(j.StartTime) || !j.Exclusive && v != slurm.V0045 ||
				j.Features != "sunk-test&(sunk-test|gpu)" {
				t.Fatalf("completed job: %+v", j)
			}
			// v0.0.45's answers do not say whether a job is exclusive: slurmctld does.
			if out, err := env.Exec("scontrol", "show", "job", strconv.Itoa(int(j.ID))); err != nil || !strings.Contains(out, "OverSubscribe=NO") {
				t.Fatalf("job %d is not exclusive in slurmctld: %v\n%s", j.ID, err, out)
			}
			data, err := os.ReadFile(filepath.Join(env.SharedDir, filepath.Base(out)))
			if err != nil || !strings.Contains(string(data), "hello yes on "+env.Nodes[2]) {
				t.Fatalf("job output %q, %v", data, err)
			}
			_ = os.Remove(filepath.Join(env.SharedDir, filepath.Base(out)))
		})
	}
}

func TestGresSubmitRejected(t *testing.T) {
	// The test nodes have no GRES: a GPU request must come back as a Slurm error with its
	// number, not as a job id.
	env := testenv.Slurm(t)
	c, ctx := newClient(t, env, env.APIVersions(t)[0]), ctxT(t, time.Minute)
	r, err := c.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\ntrue\n", GRES: "gpu:1"})
	var se *slurm.SlurmError
	if !errors.As(err, &se) || se.Code == 0 || r != nil {
		t.Fatalf("want a SlurmError with a code, got %v, %v", r, err)
	}
	t.Logf("gres on a node without gres: %v", err)
}

func TestHoldReleaseCancelPending(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			r, err := c.SubmitJob(ctx, slurm.JobSubmit{Name: "sunk-it-held", Script: "#!/bin/sh\nsleep 60\n", Hold: true,
				Partition: "all", TimeLimit: time.Minute, StdOut: "/dev/null"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
			j, err := c.GetJob(ctx, r.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if j.BaseState() != "PENDING" || j.Priority != 0 {
				t.Fatalf("held job: state %v reason %s priority %d", j.State, j.StateReason, j.Priority)
			}
			// Release and hold again (priority returns, then drops to 0), then set a nice value.
			if err := c.UpdateJob(ctx, r.JobID, slurm.JobUpdate{Hold: ptr(false), Nice: ptr(100)}); err != nil {
				t.Fatal(err)
			}
			if err := c.UpdateJob(ctx, r.JobID, slurm.JobUpdate{Hold: ptr(true)}); err != nil {
				t.Fatal(err)
			}
			if j, err = c.GetJob(ctx, r.JobID); err != nil {
				t.Fatal(err)
			}
			if j.Nice != 100 || j.BaseState() == "COMPLETED" {
				t.Fatalf("updated job: state %v nice %d", j.State, j.Nice)
			}
			if err := c.CancelJob(ctx, r.JobID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, func() error {
				j, err := c.GetJob(ctx, r.JobID)
				if err != nil {
					return err
				}
				if j.BaseState() != "CANCELLED" {
					return fmt.Errorf("job %d is %v", j.ID, j.State)
				}
				return nil
			})
		})
	}
}

func TestIncrementalPoll(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			inf := slurm.NewNodeInformer(c, slurm.InformerOptions{Interval: time.Millisecond})
			if inf.Interval() != slurm.MinPollInterval {
				t.Fatalf("interval floor: %v", inf.Interval())
			}
			var adds, updates, deletes []string
			inf.AddHandler(slurm.Handler[slurm.Node]{
				OnAdd:    func(n slurm.Node) { adds = append(adds, n.Name) },
				OnUpdate: func(_, n slurm.Node) { updates = append(updates, n.Name) },
				OnDelete: func(n slurm.Node) { deletes = append(deletes, n.Name) },
			})
			res, err := inf.Poll(ctx)
			if err != nil || !res.Full || res.Added < len(env.Nodes) {
				t.Fatalf("first poll: %+v, %v", res, err)
			}
			// Slurm compares update_time at one-second granularity: wait until our since lies
			// strictly after the last change, then the unchanged cluster must answer 304.
			time.Sleep(1100 * time.Millisecond)
			eventually(t, 10*time.Second, func() error {
				res, err := inf.Poll(ctx)
				if err != nil {
					return err
				}
				if !res.NotModified {
					return fmt.Errorf("unchanged cluster: poll %+v", res)
				}
				return nil
			})
			res, err = inf.Poll(ctx)
			if err != nil || !res.NotModified || res.Added+res.Updated+res.Deleted != 0 {
				t.Fatalf("unchanged cluster: %+v, %v", res, err)
			}
			// A change: a new node appears, then disappears; both are seen as events.
			name := "sunk-poll-" + strings.ReplaceAll(v, ".", "")
			if out, err := env.Exec("scontrol", "create", "nodename="+name, "state=future", "cpus=1", "realmemory=100"); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			t.Cleanup(func() { _, _ = env.Exec("scontrol", "delete", "nodename="+name) })
			eventually(t, 10*time.Second, func() error {
				if _, err := inf.Poll(ctx); err != nil {
					return err
				}
				if _, ok := inf.Get(name); !ok {
					return fmt.Errorf("%s not seen; adds %v", name, adds)
				}
				return nil
			})
			if err := c.DeleteNode(ctx, name); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, func() error {
				if _, err := inf.Poll(ctx); err != nil {
					return err
				}
				if !slicesContains(deletes, name) {
					return fmt.Errorf("delete of %s not seen: %v", name, deletes)
				}
				return nil
			})
			t.Logf("events: adds %d, updates %v, deletes %v", len(adds), updates, deletes)
		})
	}
}

func TestJobInformer(t *testing.T) {
	env := testenv.Slurm(t)
	c, ctx := newClient(t, env, env.APIVersions(t)[0]), ctxT(t, time.Minute)
	inf := slurm.NewJobInformer(c, slurm.InformerOptions{Interval: 100 * time.Millisecond})
	added := make(chan uint32, 100)
	inf.AddHandler(slurm.Handler[slurm.Job]{OnAdd: func(j slurm.Job) { added <- j.ID }})
	go func() { _ = inf.Run(ctx) }()
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\ntrue\n", Hold: true, StdOut: "/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
	for {
		select {
		case id := <-added:
			if id == r.JobID {
				return
			}
		case <-ctx.Done():
			t.Fatalf("job %d never added: %v", r.JobID, inf.LastError())
		}
	}
}

func TestReservations(t *testing.T) {
	env := testenv.Slurm(t)
	c, ctx := newClient(t, env, env.APIVersions(t)[0]), ctxT(t, time.Minute)
	if err := c.CreateReservation(ctx, slurm.ReservationCreate{Name: "x"}); !errors.Is(err, slurm.ErrUnsupported) {
		t.Fatalf("create reservation on 24.11: want ErrUnsupported, got %v", err)
	}
	// Reservations are made with scontrol on 24.11; the client reads them.
	if out, err := env.Exec("scontrol", "create", "reservation", "reservationname=sunk-maint", "nodes="+env.Nodes[2],
		"starttime=now+1hour", "duration=60", "users=root", "flags=maint,ignore_jobs"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = env.Exec("scontrol", "delete", "reservationname=sunk-maint") })
	r, err := c.GetReservation(ctx, "sunk-maint")
	if err != nil {
		t.Fatal(err)
	}
	if r.Nodes != env.Nodes[2] || !slicesContains(r.Flags, "MAINT") || r.EndTime.Sub(r.StartTime) != time.Hour {
		t.Fatalf("reservation: %+v", r)
	}
	l, err := c.ListReservations(ctx)
	if err != nil || len(l) != 1 {
		t.Fatalf("list: %+v, %v", l, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestJobInformerNoChange: slurmrestd answers an unchanged job list with 200, no jobs and a
// warning, never 304; the informer must read that as "no change": the held job stays in the
// store, no delete is seen and the polls stay incremental.
func TestJobInformerNoChange(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, time.Minute)
			r, err := c.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\ntrue\n", Hold: true, StdOut: "/dev/null"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
			// A full list due at every poll: each asks with update_time and gets "no change".
			inf := slurm.NewJobInformer(c, slurm.InformerOptions{Interval: slurm.MinPollInterval, JobFullListEvery: time.Nanosecond})
			var deletes []uint32
			inf.AddHandler(slurm.Handler[slurm.Job]{OnDelete: func(j slurm.Job) { deletes = append(deletes, j.ID) }})
			if res, err := inf.Poll(ctx); err != nil || !res.Full {
				t.Fatalf("first poll: %+v, %v", res, err)
			}
			unchanged := 0
			eventually(t, 15*time.Second, func() error {
				res, err := inf.Poll(ctx)
				if err != nil {
					return err
				}
				if res.Full {
					return fmt.Errorf("an incremental poll relisted: %+v", res)
				}
				if res.NotModified {
					unchanged++
				}
				if unchanged < 3 {
					return fmt.Errorf("%d unchanged polls so far", unchanged)
				}
				return nil
			})
			if _, ok := inf.Get(r.JobID); !ok || len(deletes) > 0 {
				t.Fatalf("job %d lost from the store (deletes %v) after %d no-change answers", r.JobID, deletes, unchanged)
			}
		})
	}
}

// countingLists counts a client's full job lists.
type countingLists struct {
	slurm.Client
	lists atomic.Int32
}

func (c *countingLists) ListJobs(ctx context.Context, since time.Time) (*slurm.JobList, error) {
	c.lists.Add(1)
	return c.Client.ListJobs(ctx, since)
}

// TestJobStatesFollowAJob: the state list names a submitted job by its decimal id, and the job
// informer follows it from PENDING through RUNNING to its end on state lists and reads of that
// one job, without a second full list.
func TestJobStatesFollowAJob(t *testing.T) {
	env := testenv.Slurm(t)
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c := &countingLists{Client: newClient(t, env, v)}
			ctx := ctxT(t, time.Minute)
			r, err := c.SubmitJob(ctx, slurm.JobSubmit{Script: "#!/bin/sh\nsleep 2\n", Hold: true, StdOut: "/dev/null"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.CancelJob(context.Background(), r.JobID) })
			states, err := c.ListJobStates(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id := strconv.FormatUint(uint64(r.JobID), 10)
			if i := slices.IndexFunc(states, func(s slurm.JobState) bool { return s.ID == id }); i < 0 || states[i].State[0] != "PENDING" {
				t.Fatalf("job %s not PENDING in the state list (%d entries)", id, len(states))
			}
			inf := slurm.NewJobInformer(c, slurm.InformerOptions{Interval: slurm.MinPollInterval, JobFullListEvery: time.Hour})
			seen := map[string]bool{}
			inf.AddHandler(slurm.Handler[slurm.Job]{
				OnAdd:    func(j slurm.Job) { seen[j.BaseState()] = seen[j.BaseState()] || j.ID == r.JobID },
				OnUpdate: func(_, j slurm.Job) { seen[j.BaseState()] = seen[j.BaseState()] || j.ID == r.JobID },
			})
			if _, err := inf.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.UpdateJob(ctx, r.JobID, slurm.JobUpdate{Hold: ptr(false)}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, func() error {
				if _, err := inf.Poll(ctx); err != nil {
					return err
				}
				if !seen["PENDING"] || !seen["RUNNING"] || !seen["COMPLETED"] {
					return fmt.Errorf("states seen %v", seen)
				}
				return nil
			})
			if n := c.lists.Load(); n != 1 {
				t.Fatalf("%d full job lists, want 1 (the first poll)", n)
			}
		})
	}
}

// TestParkedNodeTakenOver is the contract the NodeSet autoscaler relies on (docs/autoscaling.md):
// a dynamic node set to FUTURE with a comment stays a record (DYNAMIC_NORM kept), a job that
// needs it is accepted and pends instead of being refused, and the node's next slurmd takes
// the record over.
func TestParkedNodeTakenOver(t *testing.T) {
	env := testenv.Slurm(t)
	name := env.Nodes[len(env.Nodes)-1]
	for _, v := range env.APIVersions(t) {
		t.Run(v, func(t *testing.T) {
			c, ctx := newClient(t, env, v), ctxT(t, 2*time.Minute)
			comment := wellknown.ParkedPrefix + "it"
			if err := c.UpdateNode(ctx, name, slurm.NodeUpdate{State: slurm.NodeStateFuture, Comment: &comment}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if !t.Failed() {
					return // registered again below
				}
				if out, err := testenv.Hack("env-slurm.sh", "restart-node", name); err != nil {
					t.Errorf("re-registering %s: %v: %s", name, err, out)
				}
			})
			n, err := c.GetNode(ctx, name)
			if err != nil || !wellknown.Parked(n.BaseState(), n.Comment) || !n.HasState("DYNAMIC_NORM") {
				t.Fatalf("parked node: %+v %v", n, err)
			}
			r, err := c.SubmitJob(ctx, slurm.JobSubmit{Name: "sunk-it-parked", Script: "#!/bin/sh\ntrue\n", Partition: "all",
				Tasks: 1, MinNodes: 1, MaxNodes: 1, RequiredNodes: []string{name}, TimeLimit: time.Minute,
				Environment: []string{"PATH=/usr/bin:/bin"}, WorkDir: "/tmp"})
			if err != nil {
				t.Fatalf("a job for the parked node was refused: %v", err)
			}
			j, err := c.GetJob(ctx, r.JobID)
			if err != nil || j.State[0] != "PENDING" {
				t.Fatalf("the job for the parked node: %+v %v", j, err)
			}
			if err := c.CancelJob(ctx, r.JobID); err != nil {
				t.Fatal(err)
			}
			if out, err := testenv.Hack("env-slurm.sh", "restart-node", name); err != nil {
				t.Fatalf("restarting %s's slurmd: %v: %s", name, err, out)
			}
			if n, err = c.GetNode(ctx, name); err != nil || n.BaseState() != "IDLE" || !n.HasState("DYNAMIC_NORM") {
				t.Fatalf("after its slurmd registered again: %+v %v", n, err)
			}
		})
	}
}
