//go:build integration

package syncer_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/test/testenv"
)

// nodeWatcher is a node watcher process as the syncer sees it: a reader of the real
// slurmctld (sunk-slurm-nodes in the test bed) and its endpoint on a fixed address, so that a
// restarted watcher is found where the old one was.
type nodeWatcher struct {
	t    testing.TB
	cmd  []string
	auth *nodewatch.JWTAuth
	addr string
	stop func()
}

func newNodeWatcher(t testing.TB, env *testenv.SlurmEnv) *nodeWatcher {
	return newNodeWatcherEvery(t, env, 100*time.Millisecond)
}

// newNodeWatcherEvery is a watcher whose reader asks slurmctld every interval.
func newNodeWatcherEvery(t testing.TB, env *testenv.SlurmEnv, interval time.Duration) *nodeWatcher {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &nodeWatcher{t: t, cmd: env.NodeReader(t, "-i", strconv.FormatInt(interval.Milliseconds(), 10)), auth: env.WatcherAuth(t), addr: l.Addr().String()}
	w.serve(l)
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *nodeWatcher) url() string { return "http://" + w.addr }

// serve starts a watcher (a new store: a new epoch, as a new process) on l.
func (w *nodeWatcher) serve(l net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	s := nodewatch.NewStore()
	go func() { _ = nodewatch.Run(ctx, s, w.cmd, 200*time.Millisecond) }()
	srv := &http.Server{Handler: nodewatch.Handler(s, 15*time.Second, w.auth)}
	go func() { _ = srv.Serve(l) }()
	w.stop = func() { cancel(); _ = srv.Close() }
}

// restart starts a new watcher where the stopped one was.
func (w *nodeWatcher) restart() {
	l, err := net.Listen("tcp", w.addr)
	if err != nil {
		w.t.Fatal(err)
	}
	w.serve(l)
}

// TestSyncerNodeWatcher: the syncer reading Slurm through the node watcher. It mirrors a drain
// made in Slurm; while the watcher is gone (killed: no answer at all) it reports Slurm
// unreadable and changes nothing on either side; a new watcher process brings what happened
// meanwhile (a cordon to apply, a drain to mirror) within a few polls.
func TestSyncerNodeWatcher(t *testing.T) {
	h := setup(t)
	w := newNodeWatcher(t, h.env)
	wc, err := nodewatch.NewClient(w.url(), 2*time.Second, h.env.Tokens(t))
	if err != nil {
		t.Fatal(err)
	}
	h.changes = wc
	h.start()
	n1, n2 := h.env.Nodes[0], h.env.Nodes[1]
	for _, name := range h.env.Nodes {
		h.waitMirror(name, func(m mirror) bool { return m.podState == "idle" }, "idle through the watcher")
	}
	eventually(t, 10*time.Second, func() error {
		if !h.s.Healthy() {
			return errors.New("the syncer does not read Slurm yet")
		}
		return nil
	})
	if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=drain", "reason=seen through the watcher"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	h.waitMirror(n2, func(m mirror) bool { return m.podReason == "seen through the watcher" }, "a Slurm drain mirrored")
	if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=resume"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	h.waitMirror(n2, func(m mirror) bool { return m.podState == "idle" }, "resumed")

	// The watcher is killed.
	w.stop()
	eventually(t, 20*time.Second, func() error {
		if h.s.Healthy() {
			return errors.New("the syncer still reads Slurm as healthy with its watcher gone")
		}
		return nil
	})
	before := map[string]mirror{}
	for _, name := range h.env.Nodes {
		before[name], _ = h.mirror(name)
	}
	h.cordon(k8sNode(0), true, "while the watcher was down")
	why := "set while the watcher was down"
	if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=drain", "reason="+why); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	deadline := time.Now().Add(8 * poll)
	for time.Now().Before(deadline) {
		if st, _, err := h.slurmNode(n1); err != nil || strings.Contains(st, "DRAIN") {
			t.Fatalf("n1 changed in Slurm while the watcher was down: %s %v", st, err)
		}
		for _, name := range h.env.Nodes {
			if m, err := h.mirror(name); err != nil || m.podState != before[name].podState || m.podReason != before[name].podReason {
				t.Fatalf("%s's mirror changed while the watcher was down: %+v -> %+v (%v)", name, before[name], m, err)
			}
		}
	}
	back := time.Now()
	w.restart()
	h.waitSlurm(n1, drainedWith("k8s: node cordoned (while the watcher was down)"), "drained once the watcher is back")
	h.waitMirror(n2, func(m mirror) bool { return m.podReason == why }, "the drain made while down, mirrored once the watcher is back")
	t.Logf("caught up %v after the watcher came back", time.Since(back).Round(time.Millisecond))
	h.cordon(k8sNode(0), false, "")
	if out, err := h.env.Exec("scontrol", "update", "nodename="+n2, "state=resume"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	h.waitSlurm(n1, notDrained, "resumed")
	h.waitSlurm(n2, notDrained, "resumed")
}
