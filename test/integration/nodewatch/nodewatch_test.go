//go:build integration

// Package nodewatch_test runs the node watcher (sunk-slurm-nodes and pkg/nodewatch) against the
// real Slurm test bed.
package nodewatch_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// watcher is a running watcher: its reader process, its store and its endpoint.
type watcher struct {
	s    *nodewatch.Store
	srv  *httptest.Server
	stop context.CancelFunc
}

func startWatcher(t *testing.T, env *testenv.SlurmEnv, cmd []string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{s: nodewatch.NewStore(), stop: cancel}
	go func() { _ = nodewatch.Run(ctx, w.s, cmd, 200*time.Millisecond) }()
	w.srv = httptest.NewServer(nodewatch.Handler(w.s, 15*time.Second, env.WatcherAuth(t)))
	t.Cleanup(func() { cancel(); w.srv.Close() })
	return w
}

func restClient(t *testing.T, env *testenv.SlurmEnv) slurm.Client {
	tokens, err := slurm.NewJWTSource(env.User, env.JWTKey(t), slurm.WithLifetime(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, err := slurm.NewDiscovering(slurm.Config{URL: env.RESTURL, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func exec(t *testing.T, env *testenv.SlurmEnv, args ...string) {
	t.Helper()
	if out, err := env.Exec(args...); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestNodeWatcher: the watcher's table is slurmrestd's, a change comes as that one node, a
// new and a deleted record come as such, and while its reader is gone the watcher answers
// "unreadable", then the change made meanwhile.
func TestNodeWatcher(t *testing.T) {
	env := testenv.Slurm(t)
	cmd := env.NodeReader(t, "-i", "100")
	ctx := context.Background()
	rest := restClient(t, env)
	w := startWatcher(t, env, cmd)
	c, err := nodewatch.NewClient(w.srv.URL, 2*time.Second, env.Tokens(t))
	if err != nil {
		t.Fatal(err)
	}
	var first slurm.NodeChanges
	wait.For(t, "the first table", time.Minute, 100*time.Millisecond, func() error {
		first, err = c.NodeChanges(ctx)
		return err
	})
	if !first.Full {
		t.Fatalf("first answer not the whole table: %+v", first)
	}
	// The same nodes as slurmrestd lists, field by field where sunk reads them.
	l, err := rest.ListNodes(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]slurm.Node{}
	for _, n := range first.Nodes {
		byName[n.Name] = n
	}
	if len(byName) != len(l.Nodes) {
		t.Errorf("watcher has %d nodes, slurmrestd %d", len(byName), len(l.Nodes))
	}
	for _, r := range l.Nodes {
		n, ok := byName[r.Name]
		if !ok {
			t.Errorf("%s: not in the watcher's table", r.Name)
			continue
		}
		got := fmt.Sprint(n.State, n.Reason, n.Gres, n.Features, n.ActiveFeatures, n.Partitions, n.CPUs, n.AllocCPUs, n.RealMemoryMB, n.Address, n.Hostname, n.Version, n.BootTime.Unix(), n.SlurmdStartTime.Unix(), n.Topology)
		want := fmt.Sprint(r.State, r.Reason, r.Gres, r.Features, r.ActiveFeatures, r.Partitions, r.CPUs, r.AllocCPUs, r.RealMemoryMB, r.Address, r.Hostname, r.Version, r.BootTime.Unix(), r.SlurmdStartTime.Unix(), r.Topology)
		if got != want {
			t.Errorf("%s:\n watcher    %s\n slurmrestd %s", r.Name, got, want)
		}
	}

	// One drain: one node in the answer.
	node := env.Nodes[0]
	exec(t, env, "scontrol", "update", "nodename="+node, "state=drain", "reason=nodewatch test")
	t.Cleanup(func() { _, _ = env.Exec("scontrol", "update", "nodename="+node, "state=resume") })
	waitFor(t, c, func(ch slurm.NodeChanges) error {
		for _, n := range ch.Nodes {
			if n.Name == node && n.Drained() && n.Reason == "nodewatch test" {
				if len(ch.Nodes) > 3 || ch.Full {
					return fmt.Errorf("the drain came with %d nodes (full %v): want only what changed", len(ch.Nodes), ch.Full)
				}
				return nil
			}
		}
		return fmt.Errorf("%s not drained yet: %v", node, names(ch.Nodes))
	})
	exec(t, env, "scontrol", "update", "nodename="+node, "state=resume")

	// A new record and its deletion.
	exec(t, env, "scontrol", "create", "nodename=nwtest1", "state=future", "cpus=1", "realmemory=100")
	t.Cleanup(func() { _, _ = env.Exec("scontrol", "delete", "nodename=nwtest1") })
	waitFor(t, c, func(ch slurm.NodeChanges) error {
		if slices.Contains(names(ch.Nodes), "nwtest1") {
			return nil
		}
		return fmt.Errorf("nwtest1 not added: %v", names(ch.Nodes))
	})
	exec(t, env, "scontrol", "delete", "nodename=nwtest1")
	waitFor(t, c, func(ch slurm.NodeChanges) error {
		if slices.Contains(ch.Deleted, "nwtest1") {
			return nil
		}
		return fmt.Errorf("nwtest1 not deleted: %v", ch.Deleted)
	})

	// The reader is killed: unreadable, never "nothing changed".
	w.stop()
	wait.For(t, "unreadable", 30*time.Second, 100*time.Millisecond, func() error {
		if _, err := c.NodeChanges(ctx); err == nil || !strings.Contains(err.Error(), "unreadable") {
			return fmt.Errorf("answer while the reader is gone: %v", err)
		}
		return nil
	})
	// A change while it is down, then the reader again (same store, same epoch).
	exec(t, env, "scontrol", "update", "nodename="+node, "state=drain", "reason=while the watcher was down")
	rctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = nodewatch.Run(rctx, w.s, cmd, 200*time.Millisecond) }()
	waitFor(t, c, func(ch slurm.NodeChanges) error {
		for _, n := range ch.Nodes {
			if n.Name == node && n.Reason == "while the watcher was down" {
				if ch.Full {
					return fmt.Errorf("caught up with the whole table: want the changes (same epoch)")
				}
				return nil
			}
		}
		return fmt.Errorf("the change made while down not seen: %v", names(ch.Nodes))
	})
}

func waitFor(t *testing.T, c *nodewatch.Client, ok func(slurm.NodeChanges) error) {
	t.Helper()
	wait.For(t, "a change", 30*time.Second, time.Millisecond, func() error {
		ch, err := c.NodeChanges(context.Background())
		if err != nil {
			return err
		}
		return ok(ch)
	})
}

func names(ns []slurm.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}
