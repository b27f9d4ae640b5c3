package slurmconn

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/slurm/slurmfake"
	"sunk.dev/sunk/pkg/wellknown"
)

func objects(ip, key string) (*corev1.Service, *corev1.Secret) {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-restapi"}, Spec: corev1.ServiceSpec{ClusterIP: ip}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-jwt-key"}, Data: map[string][]byte{wellknown.SecretJWTKey: []byte(key)}}
}

func TestPoolKeepsOneClientPerCluster(t *testing.T) {
	ctx := context.Background()
	svc, sec := objects("10.0.0.1", "key-1")
	c := fake.NewClientBuilder().WithObjects(svc, sec).Build()
	var built []string
	p := New(Options{Reader: c, Factory: func(url string, keys Keys, _ *http.Client) (slurm.Client, error) {
		built = append(built, url+" "+string(keys.Current)+" "+string(keys.Previous))
		return slurmfake.New(), nil
	}})
	n := clusternames.Names{Cluster: "a", Namespace: "ns", RestAPI: "a-restapi", JWTSecret: "a-jwt-key"}

	first, err := p.For(ctx, n, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := p.For(ctx, n, "")
		if err != nil || again != first {
			t.Fatalf("a second For built another client (%v)", err)
		}
	}
	update(t, c, func(s *corev1.Service, _ *corev1.Secret) { s.Spec.ClusterIP = "10.0.0.2" })
	second, err := p.For(ctx, n, "")
	if err != nil || second == first {
		t.Fatalf("a new endpoint kept the old client (%v)", err)
	}
	update(t, c, func(_ *corev1.Service, s *corev1.Secret) { s.Data[wellknown.SecretJWTKey] = []byte("key-2") })
	third, err := p.For(ctx, n, "")
	if err != nil || third == second {
		t.Fatalf("a new key kept the old client (%v)", err)
	}
	// A rotation: the previous key joins, then goes; each is a new client.
	update(t, c, func(_ *corev1.Service, s *corev1.Secret) {
		s.Data[wellknown.SecretJWTKey], s.Data[wellknown.SecretJWTPreviousKey] = []byte("key-3"), []byte("key-2")
	})
	fourth, err := p.For(ctx, n, "")
	if err != nil || fourth == third {
		t.Fatalf("a rotation kept the old client (%v)", err)
	}
	update(t, c, func(_ *corev1.Service, s *corev1.Secret) { delete(s.Data, wellknown.SecretJWTPreviousKey) })
	fifth, err := p.For(ctx, n, "")
	if err != nil || fifth == fourth {
		t.Fatalf("dropping the previous key kept the client that falls back to it (%v)", err)
	}
	// The SlurmCluster names a REST version: a client of that version, kept while it stays.
	sixth, err := p.For(ctx, n, slurm.V0042)
	if err != nil || sixth == fifth {
		t.Fatalf("a new version kept the old client (%v)", err)
	}
	if again, err := p.For(ctx, n, slurm.V0042); err != nil || again != sixth {
		t.Fatalf("the same version built another client (%v)", err)
	}
	want := []string{"http://10.0.0.1:6820 key-1 ", "http://10.0.0.2:6820 key-1 ", "http://10.0.0.2:6820 key-2 ",
		"http://10.0.0.2:6820 key-3 key-2", "http://10.0.0.2:6820 key-3 ", "http://10.0.0.2:6820 key-3 "}
	if len(built) != len(want) {
		t.Fatalf("built %v, want %v", built, want)
	}
	for i := range want {
		if built[i] != want[i] {
			t.Fatalf("built %v, want %v", built, want)
		}
	}
	p.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if p.Len() != 0 {
		t.Fatal("Forget kept the client")
	}
}

func TestPoolFailsWithoutServiceOrKey(t *testing.T) {
	ctx := context.Background()
	n := clusternames.Names{Cluster: "a", Namespace: "ns", RestAPI: "a-restapi", JWTSecret: "a-jwt-key"}
	svc, sec := objects("10.0.0.1", "")
	for name, objs := range map[string][]client.Object{
		"no objects": nil, "no service": {sec}, "empty key": {svc, sec},
		"headless": {func() *corev1.Service { s := svc.DeepCopy(); s.Spec.ClusterIP = corev1.ClusterIPNone; return s }(), sec},
	} {
		p := New(Options{Reader: fake.NewClientBuilder().WithObjects(objs...).Build()})
		if _, err := p.For(ctx, n, ""); err == nil {
			t.Errorf("%s: For succeeded", name)
		}
	}
}

// The default client speaks the configured version, or discovers one at its first request;
// an unknown configured version is an error naming it.
func TestPoolDefaultClientVersion(t *testing.T) {
	ctx := context.Background()
	svc, sec := objects("10.0.0.1", "key-1")
	n := clusternames.Names{Cluster: "a", Namespace: "ns", RestAPI: "a-restapi", JWTSecret: "a-jwt-key"}
	p := New(Options{Reader: fake.NewClientBuilder().WithObjects(svc, sec).Build()})
	for version, want := range map[string]string{"": "", slurm.V0045: slurm.V0045} {
		c, err := p.For(ctx, n, version)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := c.(*slurm.Discovering); !ok || d.APIVersion() != want {
			t.Errorf("version %q: client %T speaking %q, want %q before any request", version, c, d.APIVersion(), want)
		}
	}
	if _, err := p.For(ctx, n, "v0.0.40"); err == nil || !strings.Contains(err.Error(), "v0.0.40") {
		t.Errorf("an unknown version: %v", err)
	}
}

func update(t *testing.T, c client.Client, f func(*corev1.Service, *corev1.Secret)) {
	t.Helper()
	svc, sec := &corev1.Service{}, &corev1.Secret{}
	ctx := context.Background()
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "a-restapi"}, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "a-jwt-key"}, sec); err != nil {
		t.Fatal(err)
	}
	f(svc, sec)
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
}

// TestTransportBoundsConnections: 32 concurrent requests open at most MaxConns connections.
func TestTransportBoundsConnections(t *testing.T) {
	var open, peak atomic.Int32
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(DefaultMaxConns)
	var first atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.Add(1) <= DefaultMaxConns {
			arrived.Done()
		}
		<-release
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			if v := open.Add(1); v > peak.Load() {
				peak.Store(v)
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	hc := &http.Client{Transport: slurm.NewTransport(DefaultMaxConns)}
	var done sync.WaitGroup
	for range 32 {
		done.Add(1)
		go func() {
			defer done.Done()
			resp, err := hc.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	arrived.Wait() // the bound's worth of requests are in the server, the rest wait for a connection
	close(release)
	done.Wait()
	if got := peak.Load(); got > DefaultMaxConns {
		t.Fatalf("%d connections at once, want at most %d", got, DefaultMaxConns)
	}
}
