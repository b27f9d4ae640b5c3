//go:build integration

package integration

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/test/testenv"
)

// startNodeWatcher runs the node watcher against the test bed's slurmctld, as a cluster's
// controller pods run it (spec.controller.nodeWatcher, on by default in the charts), and returns
// its URL for the plugin's nodeWatcherURL: the tests and the benchmark follow Slurm's nodes the
// way a deployed sunk-scheduler does, not by polling slurmrestd's node list.
func startNodeWatcher(t testing.TB) string {
	t.Helper()
	env := testenv.Slurm(t)
	cmd := env.NodeReader(t, "-i", "200")
	ctx, cancel := context.WithCancel(context.Background())
	s := nodewatch.NewStore()
	done := make(chan struct{})
	go func() { defer close(done); _ = nodewatch.Run(ctx, s, cmd, time.Second) }()
	srv := httptest.NewServer(nodewatch.Handler(s, 15*time.Second, env.WatcherAuth(t)))
	t.Cleanup(func() { cancel(); srv.Close(); <-done })
	return srv.URL
}
