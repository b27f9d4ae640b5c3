// Reading a cluster's whole Slurm node table: from the process's one cache of it, fed by the
// cluster's node watchers (pkg/nodewatch) when it has them, else read through slurmrestd with
// update_time (restnodes.go).

package slurmconn

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

const (
	// NodeCacheStaleAfter: a watcher cache whose last answer is older than this is unreadable.
	// A watcher answers a long poll within nodewatch.DefaultWait, and a request that gets no
	// answer fails 5 s past it, so a healthy cache is never older than about 10 s.
	NodeCacheStaleAfter = nodewatch.DefaultWait + 10*time.Second
	// nodeCacheSyncWait bounds how long a reconcile waits for a new cache's whole table.
	nodeCacheSyncWait = 10 * time.Second
)

// nodeCache is a cluster's Slurm node cache, fed by its node watchers at url with tokens of
// the JWT keys, verified with the CA, whose sum is key.
type nodeCache struct {
	url  string
	key  [sha256.Size]byte
	inf  *slurm.Informer[string, slurm.Node]
	stop context.CancelFunc
}

// NodeWatcherURL is the cluster's node watchers' endpoint (render.NodeWatchService makes their Service), through
// their Service's cluster IP, which works from inside the cluster and from a process outside
// it; https with spec.tls, checked against the Service's name. The Service has ClientIP affinity: each watcher has its own epoch, and a reader that
// switched between them would get the whole table at every switch.
func NodeWatcherURL(ctx context.Context, r client.Reader, n clusternames.Names) (string, error) {
	svc := &corev1.Service{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.NodeWatch}, svc); err != nil {
		return "", fmt.Errorf("reading the node watchers' Service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("service %s/%s has no cluster IP", n.Namespace, n.NodeWatch)
	}
	return fmt.Sprintf("%s://%s:%d", n.Scheme(), svc.Spec.ClusterIP, clusternames.NodeWatchPort), nil
}

// NodeWatcher is a client of the cluster's node watchers, a slurm.NodeChangeSource for one
// cache (the syncer's), with tokens of the cluster's JWT keys.
func (p *Pool) NodeWatcher(ctx context.Context, n clusternames.Names) (*nodewatch.Client, error) {
	keys, ca, err := p.credentials(ctx, n)
	if err != nil {
		return nil, err
	}
	url, err := NodeWatcherURL(ctx, p.opts.Reader, n)
	if err != nil {
		return nil, err
	}
	return newNodeWatcher(n, url, keys, ca)
}

// credentials are the cluster's JWT keys and CA: its REST client's, read from their Secrets
// when there is no client yet.
func (p *Pool) credentials(ctx context.Context, n clusternames.Names) (Keys, []byte, error) {
	p.mu.Lock()
	c := p.conns[Key(n)]
	p.mu.Unlock()
	if c != nil {
		return c.keys, c.ca, nil
	}
	keys, err := p.readKeys(ctx, n)
	if err != nil {
		return Keys{}, nil, err
	}
	ca, err := p.readCA(ctx, n)
	return keys, ca, err
}

// newNodeWatcher is the watchers' client at url, minting SlurmUser's tokens from keys as the
// cluster's REST client does (and falling back to the key a rotation replaces alike), and
// verifying the watchers against ca with spec.tls.
func newNodeWatcher(n clusternames.Names, url string, keys Keys, ca []byte) (*nodewatch.Client, error) {
	tokens, err := slurm.NewJWTSource(wellknown.SlurmUser, keys.Current, slurm.WithFallbackKey(keys.Previous))
	if err != nil {
		return nil, err
	}
	c, err := nodewatch.NewClient(url, 0, tokens)
	if err != nil {
		return nil, err
	}
	if n.TLS {
		cfg, err := clustertls.ClientConfig(Key(n).String(), n.ServerName(n.NodeWatch), clustertls.StaticRoots(ca))
		if err != nil {
			return nil, err
		}
		c.SetTLSConfig(cfg)
	}
	return c, nil
}

// cacheSum identifies the credentials a node cache reads with.
func cacheSum(keys Keys, ca []byte) [sha256.Size]byte {
	k := keys.sum()
	return sha256.Sum256(append(k[:], ca...))
}

// Nodes is the cluster's whole Slurm node table. With watcher (the SlurmCluster's
// spec.controller.nodeWatcher) it comes from the process's one cache of the cluster, fed by the
// node watchers: a read costs nothing in Slurm and lags Slurm by one watcher poll (200 ms), so
// a caller that acts on one node (deleting its pod) reads that node afresh first. Without, it
// is the process's one copy of the table read through sl (restNodeTable): one small request
// when the table has not changed since the last read, the whole list when it has.
//
// It fails closed: a cache that has not read a whole table yet, whose watcher does not answer
// or whose last answer is older than NodeCacheStaleAfter is an error, never "no nodes"; so is
// a read through slurmrestd that fails. The nodes share their slices (State, Features...) with
// the cache: read them, clone to change.
func (p *Pool) Nodes(ctx context.Context, n clusternames.Names, watcher bool, sl slurm.Client) ([]slurm.Node, error) {
	k := Key(n)
	if !watcher {
		p.stopNodeCache(k)
		return p.restNodeTable(ctx, k, sl)
	}
	url, err := NodeWatcherURL(ctx, p.opts.Reader, n)
	if err != nil {
		return nil, err
	}
	keys, ca, err := p.credentials(ctx, n)
	if err != nil {
		return nil, err
	}
	inf, err := p.nodeCache(n, url, keys, ca)
	if err != nil {
		return nil, err
	}
	if !inf.HasSynced() {
		wctx, cancel := context.WithTimeout(ctx, nodeCacheSyncWait)
		err := inf.WaitForSync(wctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the node watchers' table has not been read yet: %w", err)
		}
	}
	if err := inf.LastError(); err != nil {
		return nil, fmt.Errorf("reading the node watchers: %w", err)
	}
	if age := time.Since(inf.LastSuccess()); age > NodeCacheStaleAfter {
		return nil, fmt.Errorf("the node watchers last answered %s ago", age.Round(time.Second))
	}
	return inf.List(), nil
}

// nodeCache returns the cluster's cache of the watchers at url, started on first use and
// started afresh when the Service's address, the JWT keys or the CA changed.
func (p *Pool) nodeCache(n clusternames.Names, url string, keys Keys, ca []byte) (*slurm.Informer[string, slurm.Node], error) {
	k := Key(n)
	sum := cacheSum(keys, ca)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.nodes[k]; c != nil {
		if c.url == url && c.key == sum {
			return c.inf, nil
		}
		c.stop()
		delete(p.nodes, k)
	}
	src, err := newNodeWatcher(n, url, keys, ca)
	if err != nil {
		return nil, err
	}
	inf := slurm.NewNodeChangeInformer(src, slurm.InformerOptions{})
	// The cache outlives the reconcile that started it: it stops at Forget, when the cluster
	// turns its watchers off, or when their address changes.
	ctx, stop := context.WithCancel(context.Background())
	go func() { _ = inf.Run(ctx) }()
	p.nodes[k] = &nodeCache{url: url, key: sum, inf: inf, stop: stop}
	return inf, nil
}

func (p *Pool) stopNodeCache(k types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.nodes[k]; c != nil {
		c.stop()
		delete(p.nodes, k)
	}
}
