package slurmconn

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

// testJWTKey is the JWT key of nodesEnv's cluster, which the watchers check tokens with.
const testJWTKey = "the test cluster's JWT key, of 32 bytes or more"

// watcher is a real node watcher (pkg/nodewatch's Store and Handler) whose reader is this test:
// it writes the lines sunk-slurm-nodes prints. It listens on clusternames.NodeWatchPort of a loopback
// address of its own, as the Service's cluster IP would be.
type watcher struct {
	t   *testing.T
	ip  string
	w   *io.PipeWriter
	srv *httptest.Server
}

func startWatcher(t *testing.T) *watcher {
	var l net.Listener
	var ip string
	for range 20 {
		ip = fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
		var err error
		if l, err = net.Listen("tcp", fmt.Sprintf("%s:%d", ip, clusternames.NodeWatchPort)); err == nil {
			break
		}
	}
	if l == nil {
		t.Fatal("no loopback address to listen on")
	}
	s := nodewatch.NewStore()
	r, w := io.Pipe()
	go func() { _ = nodewatch.Feed(s, r) }()
	keyFile := filepath.Join(t.TempDir(), wellknown.SecretJWTKey)
	if err := os.WriteFile(keyFile, []byte(testJWTKey), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := nodewatch.NewJWTAuth(wellknown.SlurmUser, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nodewatch.Handler(s, time.Minute, auth))
	srv.Listener = l
	srv.Start()
	wt := &watcher{t: t, ip: ip, w: w, srv: srv}
	t.Cleanup(wt.stop)
	return wt
}

// table writes a whole table of idle nodes.
func (w *watcher) table(names ...string) {
	for _, n := range names {
		w.line(`{"node":{"name":"` + n + `","state":["IDLE"],"cpus":2}}`)
	}
	w.line(fmt.Sprintf(`{"sync":{"full":true,"last_update":100,"nodes":%d,"changed":%d}}`, len(names), len(names)))
}

func (w *watcher) line(l string) {
	if _, err := io.WriteString(w.w, l+"\n"); err != nil {
		w.t.Fatal(err)
	}
}

// stop ends the watcher process: its connections go with it.
func (w *watcher) stop() {
	w.srv.CloseClientConnections()
	w.srv.Close()
	_ = w.w.Close()
}

func nodesEnv(t *testing.T, w *watcher) (*Pool, clusternames.Names, *slurmfake.Fake) {
	n := clusternames.Names{Cluster: "a", Namespace: "ns", NodeWatch: "a-nodewatch", JWTSecret: "a-jwt-key"}
	ip := "10.0.0.9"
	if w != nil {
		ip = w.ip
	}
	c := fake.NewClientBuilder().WithObjects(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-nodewatch"},
		Spec: corev1.ServiceSpec{ClusterIP: ip}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-jwt-key"}, Data: map[string][]byte{wellknown.SecretJWTKey: []byte(testJWTKey)}}).Build()
	p := New(Options{Reader: c})
	t.Cleanup(func() { p.Forget(types.NamespacedName{Namespace: "ns", Name: "a"}) })
	sl := slurmfake.New()
	sl.AddNode(slurm.Node{Name: "rest-0", State: []string{"IDLE"}})
	return p, n, sl
}

func names(nodes []slurm.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

// With node watchers, the table comes from the watcher cache (no REST list), and a change
// reaches it as the watcher serves it; the cache is one per cluster.
func TestNodesReadsTheWatcherCache(t *testing.T) {
	ctx := context.Background()
	w := startWatcher(t)
	w.table("c-0", "c-1")
	p, n, sl := nodesEnv(t, w)
	got, err := p.Nodes(ctx, n, true, sl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(got), []string{"c-0", "c-1"}) {
		t.Fatalf("nodes %v, want c-0 c-1", names(got))
	}
	w.line(`{"node":{"name":"c-1","state":["IDLE","DRAIN"],"reason":"k8s: test","cpus":2}}`)
	w.line(`{"gone":"c-0"}`)
	w.line(`{"sync":{"full":false,"last_update":101,"nodes":1,"changed":2}}`)
	wait.For(t, "the change in the cache", 5*time.Second, 20*time.Millisecond, func() error {
		got, err := p.Nodes(ctx, n, true, sl)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].Name != "c-1" || !got[0].Drained() {
			return fmt.Errorf("nodes %+v", got)
		}
		return nil
	})
	if c := sl.Calls("ListNodes"); c != 0 {
		t.Errorf("%d REST node lists, want none", c)
	}
	p.mu.Lock()
	caches := len(p.nodes)
	p.mu.Unlock()
	if caches != 1 {
		t.Errorf("%d caches, want 1", caches)
	}
}

// Without node watchers, a client the pool did not make for the cluster is read once, whole, and
// the watcher cache the cluster had stops.
func TestNodesListsWithoutWatchers(t *testing.T) {
	ctx := context.Background()
	w := startWatcher(t)
	w.table("c-0")
	p, n, sl := nodesEnv(t, w)
	if _, err := p.Nodes(ctx, n, true, sl); err != nil {
		t.Fatal(err)
	}
	got, err := p.Nodes(ctx, n, false, sl)
	if err != nil || !slices.Equal(names(got), []string{"rest-0"}) || sl.Calls("ListNodes") != 1 {
		t.Fatalf("nodes %v, %d lists, error %v; want rest-0 from one list", names(got), sl.Calls("ListNodes"), err)
	}
	p.mu.Lock()
	caches := len(p.nodes)
	p.mu.Unlock()
	if caches != 0 {
		t.Errorf("%d caches left, want 0", caches)
	}
	sl.SetError("ListNodes", slurm.ErrUnauthorized)
	if got, err := p.Nodes(ctx, n, false, sl); err == nil {
		t.Errorf("a failed list answered %v, want an error", names(got))
	}
}

// Fail closed: a watcher that has not read a table, one that cannot read slurmctld, one that is
// gone, and a cluster without the watchers' Service are errors, never "no nodes"; the REST
// list is no fallback (its answer could be older than the cache's).
func TestNodesFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *watcher)
		after func(w *watcher) // after a good read
		want  string
	}{
		{"no table yet", func(*watcher) {}, nil, "has not been read yet"},
		{"slurmctld unreachable", func(w *watcher) { w.table("c-0") }, func(w *watcher) {
			w.line(`{"error":"slurm_load_node: Unable to contact slurm controller (connect failure)"}`)
		}, "Unable to contact slurm controller"},
		{"the watcher is gone", func(w *watcher) { w.table("c-0") }, (*watcher).stop, "node watcher"},
		{"no Service", nil, nil, "the node watchers' Service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w *watcher
			if tc.setup != nil {
				w = startWatcher(t)
			}
			p, n, sl := nodesEnv(t, w)
			if tc.setup == nil {
				n.NodeWatch = "missing"
			}
			if tc.setup != nil {
				tc.setup(w)
			}
			if tc.after != nil {
				if _, err := p.Nodes(context.Background(), n, true, sl); err != nil {
					t.Fatal(err)
				}
				tc.after(w)
			}
			var err error
			wait.For(t, "an error", 15*time.Second, 50*time.Millisecond, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				var got []slurm.Node
				if got, err = p.Nodes(ctx, n, true, sl); err == nil {
					return fmt.Errorf("answered %v", names(got))
				}
				return nil
			})
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to name %q", err, tc.want)
			}
			if c := sl.Calls("ListNodes"); c != 0 {
				t.Errorf("%d REST node lists, want none", c)
			}
		})
	}
}
