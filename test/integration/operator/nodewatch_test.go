//go:build integration

package operator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls/clustertlstest"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/privateslurm"
	"sunk.dev/sunk/test/testenv"
)

// startNodeWatcher runs a node watcher beside the private slurmctld, as sunk-nodewatch does in
// a slurmctld pod: sunk-slurm-nodes of the test bed's release, run as on slurmctld's host, and
// pkg/nodewatch serving its table on clusternames.NodeWatchPort of a loopback address of its own,
// which it returns (the address the operator reaches through the watchers' Service: see
// watcherAt). It answers tokens of jwtKey (the cluster's JWT Secret's) naming SlurmUser, over
// TLS with the serving certificate of tlsData (the cluster's TLS Secret's) as a SlurmCluster
// with spec.tls has it.
func (p *privateSlurm) startNodeWatcher(t *testing.T, jwtKey []byte, tlsData map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, wellknown.SecretJWTKey)
	must(t, os.WriteFile(keyFile, jwtKey, 0o600))
	certs := clustertlstest.CertFiles(t, tlsData)
	auth, err := nodewatch.NewJWTAuth(wellknown.SlurmUser, keyFile)
	must(t, err)
	bin, err := os.ReadFile(testenv.NodeReaderBinary(t))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(p.Dir, "shared", "sunk-slurm-nodes"), bin, 0o755))
	var l net.Listener
	var ip string
	for range 20 {
		ip = fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
		if l, err = net.Listen("tcp", fmt.Sprintf("%s:%d", ip, clusternames.NodeWatchPort)); err == nil {
			break
		}
	}
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := nodewatch.NewStore()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = nodewatch.Run(ctx, s, p.Command(privateslurm.CtldHost, "/shared/sunk-slurm-nodes", "-i", "200"), 200*time.Millisecond)
	}()
	srv := &http.Server{Handler: nodewatch.Handler(s, 15*time.Second, auth), ReadHeaderTimeout: 10 * time.Second, TLSConfig: certs.ServerConfig()}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { cancel(); _ = srv.Close(); <-done })
	return ip
}

// watcherAt reads through Reader, but the node watchers' Service (named service) has the
// cluster IP ip once the test stores one: the API server of these tests gives Services
// addresses nothing listens on.
type watcherAt struct {
	client.Reader
	service string
	ip      *atomic.Value // string
}

func (w watcherAt) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := w.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if svc, ok := obj.(*corev1.Service); ok && key.Name == w.service {
		if ip, ok := w.ip.Load().(string); ok {
			svc.Spec.ClusterIP = ip
		}
	}
	return nil
}

// noNodeList is a REST client that counts the whole node lists asked of it: with node
// watchers, the operator reads the table from their cache instead.
type noNodeList struct {
	slurm.Client
	lists *atomic.Int32
}

func (c noNodeList) ListNodes(ctx context.Context, since time.Time) (*slurm.NodeList, error) {
	c.lists.Add(1)
	return c.Client.ListNodes(ctx, since)
}
