// Package slurm is sunk's only way to talk to Slurm: a client of slurmrestd built on the typed
// clients generated from Slurm's own OpenAPI specs (pkg/slurm/openapi: 24.11's v0.0.41 and v0.0.42,
// 26.05's v0.0.43–v0.0.45; Connect picks the newest a slurmrestd serves), a token source
// that mints the JWTs slurmrestd expects, and an incremental polling cache. One adapter
// (adapter.go) implements Client for every REST API version; only the mapping onto each
// version's generated types is per version, rendered from one template (zz_adapter_*.go).
//
// The client fails closed. Every answer that is not a clean success is an error the caller can
// tell apart with errors.Is (ErrNotFound, ErrUnauthorized, ErrUnavailable, ErrDecode,
// ErrVersionNotServed) or errors.As (*SlurmError with Slurm's error number and text). Nothing turns an error into an empty
// list, a missing node into a state, or an undecodable answer into a default.
package slurm

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client is the set of Slurm operations sunk needs. The real implementation speaks one REST API
// version (New); slurmfake provides an in-memory one for unit tests.
type Client interface {
	// Ping asks every slurmctld whether it responds.
	Ping(ctx context.Context) ([]ControllerPing, error)
	// Diag returns slurmctld statistics.
	Diag(ctx context.Context) (*Diag, error)
	// Reconfigure makes slurmctld reread its configuration (scontrol reconfigure).
	Reconfigure(ctx context.Context) error

	// ListNodes lists all nodes. With a non-zero since (the LastUpdate of an earlier list) Slurm
	// answers NotModified when no node changed; otherwise it returns every node.
	ListNodes(ctx context.Context, since time.Time) (*NodeList, error)
	// GetNode returns one node or ErrNotFound.
	GetNode(ctx context.Context, name string) (*Node, error)
	// UpdateNode changes a node (or a hostlist expression of nodes).
	UpdateNode(ctx context.Context, name string, u NodeUpdate) error
	// DeleteNode removes a dynamic node.
	DeleteNode(ctx context.Context, name string) error

	SubmitJob(ctx context.Context, j JobSubmit) (*SubmitResult, error)
	// AllocateJob asks for an allocation that starts now or not at all (salloc --immediate
	// --no-shell; j.Script is not sent): slurmd launches nothing when it starts and has nothing
	// to kill when it ends. Slurm refuses one that cannot start at once with a *SlurmError
	// (2016 "Requested nodes are busy", or a job of higher priority waits) and records the
	// refused job as FAILED.
	AllocateJob(ctx context.Context, j JobSubmit) (*SubmitResult, error)
	// GetJob returns one job or ErrNotFound (also once slurmctld has purged a finished job).
	GetJob(ctx context.Context, id uint32) (*Job, error)
	// ListJobs lists all jobs; since works as for ListNodes.
	ListJobs(ctx context.Context, since time.Time) (*JobList, error)
	// ListJobStates lists every job's id and state (about 80 bytes a job where ListJobs sends
	// 5 KB): the change detector of NewJobInformer.
	ListJobStates(ctx context.Context) ([]JobState, error)
	CancelJob(ctx context.Context, id uint32) error
	// CancelJobs cancels many jobs in one request (DELETE /jobs, as `scancel id id ...` does).
	// The error is the request's: nothing is known to be cancelled. Otherwise the map holds the
	// jobs Slurm could not cancel, each with its own error (ErrNotFound for a job it does not
	// know); a job that had already ended counts as cancelled, as it does for CancelJob.
	CancelJobs(ctx context.Context, ids []uint32) (map[uint32]error, error)
	// SignalJob sends a signal by name or number (e.g. "SIGTERM", "USR1", "9").
	SignalJob(ctx context.Context, id uint32, signal string) error
	UpdateJob(ctx context.Context, id uint32, u JobUpdate) error

	ListPartitions(ctx context.Context) ([]Partition, error)
	GetPartition(ctx context.Context, name string) (*Partition, error)

	ListReservations(ctx context.Context) ([]Reservation, error)
	GetReservation(ctx context.Context, name string) (*Reservation, error)
	// CreateReservation and DeleteReservation return ErrUnsupported against Slurm 24.11:
	// neither v0.0.41 nor v0.0.42 has a reservation write endpoint.
	CreateReservation(ctx context.Context, r ReservationCreate) error
	DeleteReservation(ctx context.Context, name string) error
}

// API versions New knows. Slurm 24.11 serves v0.0.40–v0.0.42, Slurm 26.05 v0.0.42–v0.0.45:
// v0.0.42 is the one both speak.
const (
	V0041 = "v0.0.41"
	V0042 = "v0.0.42"
	V0043 = "v0.0.43"
	V0044 = "v0.0.44"
	V0045 = "v0.0.45"
)

// versions are the API versions New knows, oldest first, each with its constructor.
var versions = []struct {
	name string
	new  func(*core) (Client, error)
}{
	{V0041, newV0041}, {V0042, newV0042}, {V0043, newV0043}, {V0044, newV0044}, {V0045, newV0045},
}

// Versions lists the API versions New knows, oldest first.
func Versions() []string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = v.name
	}
	return out
}

// Config configures New.
type Config struct {
	// URL of slurmrestd, e.g. http://slurmrestd:6820 (no version path).
	URL string
	// APIVersion is one of Versions(); New defaults to V0041. Connect, given none, asks
	// slurmrestd which it serves and takes the newest.
	APIVersion string
	// Tokens supplies the user name and token sent with each request (required).
	Tokens TokenSource
	// HTTPClient to use; default a client with Timeout over NewTransport(MaxConns).
	HTTPClient *http.Client
	// MaxConns bounds the connections of the default HTTPClient (default DefaultMaxConns).
	MaxConns int
	// TLS verifies an https URL's slurmrestd with the default HTTPClient
	// (clustertls.ClientConfig: the cluster's CA and the Service's name); required for https
	// without an HTTPClient, so that no client trusts whatever the host's roots would.
	TLS *tls.Config
	// Timeout bounds each request (default 30s) when HTTPClient is nil; a context deadline
	// applies either way.
	Timeout time.Duration
	// Metrics records request counts and latencies; nil records nothing.
	Metrics *Metrics
	// Cluster is the `cluster` label of the metrics (namespace/name of the SlurmCluster).
	Cluster string
	// ServerLocation is slurmrestd's local time zone (default UTC). Only v0.0.41 needs it: its
	// parser of update_time rejects UNIX timestamps and reads a local "YYYY-MM-DDTHH:MM:SS".
	ServerLocation *time.Location
}

// New returns a Client for the configured API version.
func New(cfg Config) (Client, error) {
	base, err := newCore(cfg)
	if err != nil {
		return nil, err
	}
	want := cmpOr(cfg.APIVersion, V0041)
	for _, v := range versions {
		if v.name == want {
			return v.new(base)
		}
	}
	return nil, fmt.Errorf("slurm: unknown API version %q (known: %s)", cfg.APIVersion, strings.Join(Versions(), ", "))
}

// newCore checks cfg and fills in its defaults.
func newCore(cfg Config) (*core, error) {
	if cfg.URL == "" {
		return nil, errors.New("slurm: Config.URL is required")
	}
	if cfg.Tokens == nil {
		return nil, errors.New("slurm: Config.Tokens is required")
	}
	if cfg.HTTPClient == nil && cfg.TLS == nil && strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("slurm: %s: https needs Config.TLS, the cluster's CA to verify slurmrestd with", cfg.URL)
	}
	if cfg.HTTPClient == nil {
		t := cfg.Timeout
		if t == 0 {
			t = 30 * time.Second
		}
		if cfg.MaxConns <= 0 {
			cfg.MaxConns = DefaultMaxConns
		}
		// A transport of its own: a kept-alive connection that went wrong (see Do) is
		// this client's to drop, and no other client's requests ride on it.
		tr := NewTransport(cfg.MaxConns)
		tr.TLSClientConfig = cfg.TLS
		cfg.HTTPClient = &http.Client{Timeout: t, Transport: tr}
	}
	if cfg.ServerLocation == nil {
		cfg.ServerLocation = time.UTC
	}
	return &core{cfg: cfg, url: strings.TrimRight(cfg.URL, "/")}, nil
}

// DefaultMaxConns is the default bound on one client's connections to slurmrestd.
const DefaultMaxConns = 4

// NewTransport is an HTTP transport that opens at most maxConns connections to a host and keeps
// them for reuse: slurmrestd serves a fixed number of connections (124 by default) to every
// component and user at once, and a component that opens more starves the others. Requests
// beyond the bound wait for a connection (within the client's Timeout).
func NewTransport(maxConns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = maxConns
	t.MaxIdleConnsPerHost = maxConns
	t.IdleConnTimeout = 60 * time.Second
	return t
}

// core is what every version adapter shares: authentication, transport errors, classification
// and metrics.
type core struct {
	cfg Config
	url string
}

type endpointKey struct{}

// Do is the HTTP doer handed to the generated clients: it adds the credentials and turns
// transport failures into ErrUnavailable.
func (c *core) Do(req *http.Request) (*http.Response, error) {
	user, token, err := c.cfg.Tokens.Token(req.Context())
	if err != nil {
		return nil, fmt.Errorf("slurm: token: %w: %w", ErrUnauthorized, err)
	}
	if sent, ok := req.Context().Value(sentTokenKey{}).(*string); ok {
		*sent = token
	}
	req.Header.Set("X-SLURM-USER-NAME", user)
	req.Header.Set("X-SLURM-USER-TOKEN", token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err == nil && suspect(resp) {
		// Whatever sits on the kept-alive connections (e.g. a gateway that answered for a
		// Service IP before kube-proxy set it up) must not answer the next request too.
		c.cfg.HTTPClient.CloseIdleConnections()
	}
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if notServed(resp) {
		return nil, fmt.Errorf("%w: %s %s answers 404 %q", ErrVersionNotServed, req.Method, req.URL.Path, versionNotServedHint)
	}
	return resp, nil
}

// versionNotServedHint is what both slurmrestd 24.11 and 26.05 say in their plain-text 404 for
// a path they do not serve.
const versionNotServedHint = "/openapi/v3"

// notServed reports slurmrestd's answer to a path it has no handler for (a data parser
// version it does not serve): 404, plain text pointing to its OpenAPI document. Without the
// check the answer has no JSON body and would read as "not found", the node or job missing.
// Another answer is left as it was, its body intact.
func notServed(resp *http.Response) bool {
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), rest), rest}
	if err != nil || !bytes.Contains(b, []byte(versionNotServedHint)) {
		return false
	}
	resp.Body.Close()
	return true
}

// suspect reports an answer that is not slurmrestd's own (it answers JSON) or a failing
// server's.
func suspect(resp *http.Response) bool {
	return resp.StatusCode >= 500 ||
		resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
}

// answer is what an adapter reports about one exchange, for classify.
type answer struct {
	status  int
	errs    []ErrorDetail
	missing bool
}

// call runs one operation: fn performs the request and decodes; call classifies, measures and
// wraps. allowNotModified makes a 304 a success (incremental lists).
func (c *core) call(ctx context.Context, endpoint string, allowNotModified bool, fn func(ctx context.Context) (answer, error)) error {
	var sent string
	err := c.attempt(context.WithValue(ctx, sentTokenKey{}, &sent), endpoint, allowNotModified, fn)
	// A request Slurm refused for its credential did nothing, so it is safe to send again, once,
	// with the token source's other key (a JWT key rotation under way, JWTSource).
	if r, ok := c.cfg.Tokens.(RotatingTokenSource); ok && sent != "" && keyRefused(err) && r.Rejected(sent) {
		err = c.attempt(ctx, endpoint, allowNotModified, fn)
	}
	return err
}

// sentTokenKey carries, in a request's context, where Do notes the token it sent.
type sentTokenKey struct{}

func (c *core) attempt(ctx context.Context, endpoint string, allowNotModified bool, fn func(ctx context.Context) (answer, error)) error {
	start := time.Now()
	a, err := fn(ctx)
	switch {
	case err != nil && (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrVersionNotServed)):
		err = fmt.Errorf("slurm %s: %w", endpoint, err)
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("slurm %s: %w: %w", endpoint, ErrUnavailable, err)
	case err != nil && a.status == 0:
		// Transport errors that are not the context's (e.g. the client's own Timeout) are
		// unavailability too.
		err = fmt.Errorf("slurm %s: %w: %w", endpoint, ErrUnavailable, err)
	case a.status == http.StatusNotModified && allowNotModified:
		err = nil
	default:
		err = classify(endpoint, a.status, a.errs, err, a.missing)
	}
	c.cfg.Metrics.observe(c.cfg.Cluster, endpoint, outcome(err, a.status), time.Since(start))
	return err
}

// newestVersion is the newest API version New knows.
func newestVersion() string { return versions[len(versions)-1].name }
