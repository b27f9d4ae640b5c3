// Package slurmconn holds the one slurmrestd client a process keeps per SlurmCluster: it finds
// the cluster's REST Service and JWT key, bounds the connections the process opens to
// slurmrestd, speaks the cluster's spec.restApi.version or else the newest version both sides
// know (slurm.Discovering: asked once per client, again only when slurmrestd stops serving
// it), builds a new client only when the endpoint, the keys or the configured version change,
// and closes the old one then and when the cluster goes. Every component of a process (the SlurmCluster and
// NodeSet controllers, the syncer) shares it, so no reconcile opens connections of its own.
// It also keeps the process's one cache of each cluster's Slurm nodes (Nodes), fed by the
// cluster's node watchers when it has them and else read through slurmrestd with update_time,
// so that no reconcile lists every node through slurmrestd while nothing changed, and one
// cache of each cluster's Slurm jobs, polled incrementally on the cluster's client (Jobs), so
// that autoscaled NodeSets share one read of the queue.
package slurmconn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// Defaults of Options.
const (
	// DefaultMaxConns per cluster and process: with the operator and the syncer at 4 and
	// sunk-scheduler at 20, sunk holds at most 28 of slurmrestd's connections (render sizes
	// slurmrestd's threads and connection limit with room for users).
	DefaultMaxConns = slurm.DefaultMaxConns
	DefaultTimeout  = 15 * time.Second
)

// Keys are a cluster's JWT keys: the current one and, while a rotation is under way, the one
// it replaces, which clients fall back to as long as slurmctld refuses the current one.
type Keys struct {
	Current, Previous []byte
}

// KeysOf reads the keys of a JWT Secret; it fails when the current one is missing.
func KeysOf(s *corev1.Secret) (Keys, error) {
	k := Keys{Current: s.Data[wellknown.SecretJWTKey], Previous: s.Data[wellknown.SecretJWTPreviousKey]}
	if len(k.Current) == 0 {
		return Keys{}, fmt.Errorf("secret %s/%s has no %s", s.Namespace, s.Name, wellknown.SecretJWTKey)
	}
	return k, nil
}

func (k Keys) sum() [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{k.Current, k.Previous} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Factory builds a client for url with the cluster's JWT keys over hc, which carries the
// pool's connection bound. Tests substitute one that returns a fake.
type Factory func(url string, keys Keys, hc *http.Client) (slurm.Client, error)

// Options configure a Pool.
type Options struct {
	// Reader reads the REST Service and the JWT Secret (an API reader: neither is worth a
	// cluster-wide cache for one read per cluster).
	Reader client.Reader
	// Factory builds clients; nil speaks the configured (or discovered) version as SlurmUser with Metrics.
	Factory Factory
	// MaxConns bounds the connections to one cluster's slurmrestd (default DefaultMaxConns).
	MaxConns int
	// Timeout bounds each request, including the wait for a free connection.
	Timeout time.Duration
	// Metrics counts the default clients' requests per cluster; Forget drops their series.
	Metrics *slurm.Metrics
	// JobCache configures each cluster's job cache (Jobs); an Interval of zero polls every
	// DefaultJobPollInterval.
	JobCache slurm.InformerOptions
}

// Pool maps each SlurmCluster to its client. The zero value is not usable; use New.
type Pool struct {
	opts  Options
	mu    sync.Mutex
	conns map[types.NamespacedName]*conn
	// nodes are the clusters' Slurm node caches fed by their node watchers (Nodes).
	nodes map[types.NamespacedName]*nodeCache
	// now is the job caches' clock (their age and idleness); tests move it.
	now func() time.Time
}

type conn struct {
	url     string
	version string // configured; "" discovers
	keys    Keys   // the node watchers' clients mint their tokens with them too
	// ca is the cluster's CA (its TLS Secret's, with spec.tls; nil without), which the node
	// watchers' clients verify with too.
	ca        []byte
	client    slurm.Client
	transport *http.Transport
	// jobs is the cluster's job cache on client (Jobs), nil until asked for; it stops with
	// the client.
	jobs *jobCache
	// nodes is the cluster's node table read through client (Nodes without node watchers),
	// nil until asked for; it goes with the client.
	nodes *restNodes
}

// New returns an empty Pool.
func New(opts Options) *Pool {
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.JobCache.Interval <= 0 {
		opts.JobCache.Interval = DefaultJobPollInterval
	}
	return &Pool{opts: opts, conns: map[types.NamespacedName]*conn{}, nodes: map[types.NamespacedName]*nodeCache{}, now: time.Now}
}

// Key names a cluster in the pool and in metrics.
func Key(n clusternames.Names) types.NamespacedName {
	return types.NamespacedName{Namespace: n.Namespace, Name: n.Cluster}
}

// For returns the cluster's client, authenticated with the key of its JWT Secret, speaking
// version (the SlurmCluster's spec.restApi.version; "" for the newest both sides know).
func (p *Pool) For(ctx context.Context, n clusternames.Names, version string) (slurm.Client, error) {
	keys, err := p.readKeys(ctx, n)
	if err != nil {
		return nil, err
	}
	return p.ForKeys(ctx, n, version, keys)
}

// readCA reads the cluster's CA from its TLS Secret, with spec.tls; nil without. A cluster
// whose Secret is missing or has no CA yet has no client: never plain HTTP instead.
func (p *Pool) readCA(ctx context.Context, n clusternames.Names) ([]byte, error) {
	if !n.TLS {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := p.opts.Reader.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.TLSSecret}, s); err != nil {
		return nil, fmt.Errorf("cluster %s: reading the CA of its TLS Secret: %w", Key(n), err)
	}
	ca := s.Data[clustertls.CACertKey]
	if len(ca) == 0 {
		return nil, fmt.Errorf("cluster %s: Secret %s has no %s", Key(n), n.TLSSecret, clustertls.CACertKey)
	}
	return ca, nil
}

// transport is a new bounded transport to the cluster's Service svc: verifying its
// certificate against ca with spec.tls.
func transport(n clusternames.Names, svc string, ca []byte, maxConns int) (*http.Transport, error) {
	t := slurm.NewTransport(maxConns)
	if !n.TLS {
		return t, nil
	}
	cfg, err := clustertls.ClientConfig(Key(n).String(), n.ServerName(svc), clustertls.StaticRoots(ca))
	if err != nil {
		return nil, err
	}
	t.TLSClientConfig = cfg
	return t, nil
}

// readKeys reads the cluster's JWT Secret.
func (p *Pool) readKeys(ctx context.Context, n clusternames.Names) (Keys, error) {
	s := &corev1.Secret{}
	if err := p.opts.Reader.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.JWTSecret}, s); err != nil {
		return Keys{}, fmt.Errorf("reading the JWT key: %w", err)
	}
	return KeysOf(s)
}

// ForKeys is For with JWT keys the caller has already read. The client reaches slurmrestd
// through its Service's cluster IP, which works from inside the cluster and from a process
// running outside it.
func (p *Pool) ForKeys(ctx context.Context, n clusternames.Names, version string, keys Keys) (slurm.Client, error) {
	c, err := p.conn(ctx, n, version, keys)
	if err != nil {
		return nil, err
	}
	return c.client, nil
}

// conn is the cluster's connection for version and keys: the one the pool holds while
// nothing changed, else a new one that replaces it.
func (p *Pool) conn(ctx context.Context, n clusternames.Names, version string, keys Keys) (*conn, error) {
	url, err := p.url(ctx, n)
	if err != nil {
		return nil, err
	}
	ca, err := p.readCA(ctx, n)
	if err != nil {
		return nil, err
	}
	sum := keys.sum()
	k := Key(n)

	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[k]; c != nil {
		if c.url == url && c.keys.sum() == sum && c.version == version && bytes.Equal(c.ca, ca) {
			return c, nil
		}
		// The endpoint, the keys, the CA or the version changed: requests in flight on the old client finish; its
		// idle connections go now and the rest when they fall idle. Its job cache stops: it
		// would poll with the old client.
		c.close()
		delete(p.conns, k)
	}
	t, err := transport(n, n.RestAPI, ca, p.opts.MaxConns)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: p.opts.Timeout, Transport: t}
	var cl slurm.Client
	if cl, err = p.build(url, version, keys, hc, k); err != nil {
		return nil, err
	}
	c := &conn{url: url, version: version, keys: keys, ca: ca, client: cl, transport: t}
	p.conns[k] = c
	return c, nil
}

// Probe asks slurmctld (Diag) with a token of key alone, without falling back: nil when
// slurmctld has loaded key, an error matching slurm.ErrUnauthorized when it refuses it. The
// request shares the connections of the cluster's client, when there is one.
func (p *Pool) Probe(ctx context.Context, n clusternames.Names, version string, key []byte) error {
	url, err := p.url(ctx, n)
	if err != nil {
		return err
	}
	ca, err := p.readCA(ctx, n)
	if err != nil {
		return err
	}
	k := Key(n)
	p.mu.Lock()
	var t *http.Transport
	var shared slurm.Client
	if c := p.conns[k]; c != nil && c.url == url && bytes.Equal(c.ca, ca) {
		t, shared = c.transport, c.client
	}
	p.mu.Unlock()
	// The cluster's client has already asked slurmrestd which version to speak: a probe asks
	// again (its OpenAPI document, about 0.9 MB) only when there is no such answer yet. The
	// operator probes every few seconds while a rotation waits.
	if d, ok := shared.(*slurm.Discovering); ok && version == "" {
		version = d.APIVersion()
	}
	if t == nil {
		if t, err = transport(n, n.RestAPI, ca, 1); err != nil {
			return err
		}
		defer t.CloseIdleConnections()
	}
	cl, err := p.build(url, version, Keys{Current: key}, &http.Client{Timeout: p.opts.Timeout, Transport: t}, k)
	if err != nil {
		return err
	}
	_, err = cl.Diag(ctx)
	return err
}

// url is the cluster's slurmrestd, through its Service's cluster IP: https with spec.tls,
// whose certificate is checked against the Service's name (clusternames.Names.ServerName).
func (p *Pool) url(ctx context.Context, n clusternames.Names) (string, error) {
	svc := &corev1.Service{}
	if err := p.opts.Reader.Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.RestAPI}, svc); err != nil {
		return "", fmt.Errorf("reading the REST API Service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("service %s/%s has no cluster IP", n.Namespace, n.RestAPI)
	}
	return fmt.Sprintf("%s://%s:%d", n.Scheme(), svc.Spec.ClusterIP, clusternames.SlurmrestdPort), nil
}

func (p *Pool) build(url, version string, keys Keys, hc *http.Client, k types.NamespacedName) (slurm.Client, error) {
	if p.opts.Factory != nil {
		return p.opts.Factory(url, keys, hc)
	}
	return defaultClient(url, version, keys, hc, p.opts.Metrics, k.String())
}

// Forget closes the cluster's client, if any, stops its node and job caches and drops its
// metric series. Call it when the SlurmCluster is gone.
func (p *Pool) Forget(k types.NamespacedName) {
	p.stopNodeCache(k)
	p.mu.Lock()
	if c := p.conns[k]; c != nil {
		c.close()
		delete(p.conns, k)
	}
	p.mu.Unlock()
	p.opts.Metrics.Forget(k.String())
}

// Len is the number of clusters with a client.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (c *conn) close() {
	// A closed transport would still open new connections for a caller that kept the
	// client; taking its idle ones away and letting the rest time out bounds the leak to
	// the in-flight requests.
	c.transport.CloseIdleConnections()
	if c.jobs != nil {
		c.jobs.stop()
	}
}

// defaultClient speaks version, or discovers one, as SlurmUser; its metrics carry the cluster
// so that Forget finds them.
func defaultClient(url, version string, keys Keys, hc *http.Client, m *slurm.Metrics, cluster string) (slurm.Client, error) {
	tokens, err := slurm.NewJWTSource(wellknown.SlurmUser, keys.Current, slurm.WithFallbackKey(keys.Previous))
	if err != nil {
		return nil, err
	}
	return slurm.NewDiscovering(slurm.Config{URL: url, APIVersion: version, Tokens: tokens, HTTPClient: hc, Metrics: m, Cluster: cluster})
}
