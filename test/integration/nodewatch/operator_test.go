//go:build integration

package nodewatch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// countingLists is a REST client that counts whole node lists.
type countingLists struct {
	slurm.Client
	lists *atomic.Int32
}

func (c countingLists) ListNodes(ctx context.Context, since time.Time) (*slurm.NodeList, error) {
	c.lists.Add(1)
	return c.Client.ListNodes(ctx, since)
}

// TestOperatorNodeCache: the operator's node table (slurmconn.Pool.Nodes, what the NodeSet
// controller and the topology planning read) comes from the node watcher beside the real
// slurmctld, not from slurmrestd's list: the same nodes, a drain within a watcher poll, an
// error (never "no nodes") while the watcher's reader is gone, and the change made meanwhile
// once it is back.
func TestOperatorNodeCache(t *testing.T) {
	env := testenv.Slurm(t)
	cmd := env.NodeReader(t, "-i", "100")
	ctx := context.Background()
	var lists atomic.Int32
	rest := countingLists{Client: restClient(t, env), lists: &lists}

	// The watcher on clusternames.NodeWatchPort of a loopback address of its own, which the
	// watchers' Service names as its cluster IP.
	var l net.Listener
	var ip string
	var err error
	for range 20 {
		ip = fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
		if l, err = net.Listen("tcp", fmt.Sprintf("%s:%d", ip, clusternames.NodeWatchPort)); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	s := nodewatch.NewStore()
	rctx, stopReader := context.WithCancel(ctx)
	readerDone := make(chan struct{})
	go func() { defer close(readerDone); _ = nodewatch.Run(rctx, s, cmd, 200*time.Millisecond) }()
	// The operator's tokens name SlurmUser, as in a cluster (the bed's own user is root).
	auth, err := nodewatch.NewJWTAuth(wellknown.SlurmUser, env.JWTKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nodewatch.Handler(s, 15*time.Second, auth))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	n := clusternames.Names{Cluster: "nwtest", Namespace: "ns", NodeWatch: "nwtest-nodewatch", JWTSecret: "nwtest-jwt-key"}
	k8s := fake.NewClientBuilder().WithObjects(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n.NodeWatch},
		Spec: corev1.ServiceSpec{ClusterIP: ip}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n.JWTSecret}, Data: map[string][]byte{wellknown.SecretJWTKey: env.JWTKey(t)}}).Build()
	pool := slurmconn.New(slurmconn.Options{Reader: k8s})
	t.Cleanup(func() { pool.Forget(types.NamespacedName{Namespace: "ns", Name: "nwtest"}) })
	nodes := func() ([]slurm.Node, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return pool.Nodes(ctx, n, true, rest)
	}

	var got []slurm.Node
	wait.For(t, "the operator's first table", time.Minute, 100*time.Millisecond, func() error {
		got, err = nodes()
		return err
	})
	want, err := rest.Client.ListNodes(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := slices.Sorted(slices.Values(names(got))), slices.Sorted(slices.Values(names(want.Nodes))); !slices.Equal(g, w) {
		t.Fatalf("the cache has %v, slurmrestd %v", g, w)
	}

	drained := func(reason string) func() error {
		return func() error {
			got, err := nodes()
			if err != nil {
				return err
			}
			for _, nd := range got {
				if nd.Name == env.Nodes[0] && nd.Drained() && nd.Reason == reason {
					return nil
				}
			}
			return fmt.Errorf("%s not drained (%s) in the cache", env.Nodes[0], reason)
		}
	}
	node := env.Nodes[0]
	t.Cleanup(func() { _, _ = env.Exec("scontrol", "update", "nodename="+node, "state=resume") })
	start := time.Now()
	exec(t, env, "scontrol", "update", "nodename="+node, "state=drain", "reason=operator cache test")
	wait.For(t, "the drain in the cache", 10*time.Second, 10*time.Millisecond, drained("operator cache test"))
	t.Logf("the drain reached the operator's cache in %s", time.Since(start).Round(time.Millisecond))

	// The reader is gone: an error, never the table it had or an empty one.
	stopReader()
	<-readerDone
	wait.For(t, "an error while the reader is gone", 30*time.Second, 100*time.Millisecond, func() error {
		if got, err := nodes(); err == nil {
			return fmt.Errorf("answered %d nodes", len(got))
		}
		return nil
	})
	if _, err := nodes(); err == nil {
		t.Fatal("the cache answered again while the reader is gone")
	}
	exec(t, env, "scontrol", "update", "nodename="+node, "state=drain", "reason=while the reader was gone")
	rctx, stopReader = context.WithCancel(ctx)
	t.Cleanup(stopReader)
	go func() { _ = nodewatch.Run(rctx, s, cmd, 200*time.Millisecond) }()
	wait.For(t, "the change made while the reader was gone", 30*time.Second, 50*time.Millisecond, drained("while the reader was gone"))
	if c := lists.Load(); c != 0 {
		t.Errorf("%d node lists through slurmrestd; want none", c)
	}
}
