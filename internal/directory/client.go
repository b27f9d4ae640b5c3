package directory

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/go-ldap/ldap/v3"
)

const (
	// defaultTimeout bounds connecting to one server, and each request when the caller's
	// context has no deadline, so that a server that stopped answering fails a reconcile
	// instead of hanging it.
	defaultTimeout = 10 * time.Second
	// maxEntries caps every search's result and a group's member count. A group above it is
	// an error: a truncated member list would delete the pods of the users cut off.
	maxEntries = 10000
	// batchSize is how many users one search asks for. It keeps filters short and each
	// result well below the 500 entries OpenLDAP answers unprivileged binds by default.
	batchSize = 50
)

// searcher is what Members needs of an *ldap.Conn, so that tests can stand in for a directory.
type searcher interface {
	Search(*ldap.SearchRequest) (*ldap.SearchResult, error)
	SetTimeout(time.Duration)
	Close() error
}

// Client searches one directory. Its methods may be called from several goroutines, but run one
// at a time: each sets the connection's request timeout from its own context.
type Client struct {
	mu    chan struct{} // a lock; a channel so that waiting for it can honour ctx
	conn  searcher
	cfg   Config
	attrs attrMap
	limit int
}

func newClient(cfg Config, attrs attrMap, conn searcher) *Client {
	if cfg.UserSearchBase == "" {
		cfg.UserSearchBase = cfg.SearchBase
	}
	if cfg.GroupSearchBase == "" {
		cfg.GroupSearchBase = cfg.SearchBase
	}
	return &Client{mu: make(chan struct{}, 1), conn: conn, cfg: cfg, attrs: attrs, limit: maxEntries}
}

// Dial connects to the first of cfg.URIs that answers, as SSSD fails over between them,
// upgrades the connection with StartTLS if cfg asks for it, and binds as cfg.BindDN, or stays
// anonymous without one. Each server gets the smaller of ctx's remaining time and 10 s, so that
// one unreachable server leaves time for the next.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	attrs, err := cfg.attrs()
	if err != nil {
		return nil, fmt.Errorf("directory: domain %s: %w", cfg.Domain, err)
	}
	if len(cfg.URIs) == 0 {
		return nil, fmt.Errorf("directory: domain %s has no server URIs", cfg.Domain)
	}
	var errs []error
	for _, uri := range cfg.URIs {
		conn, err := dialOne(ctx, cfg, uri)
		if err == nil {
			return newClient(cfg, attrs, conn), nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", uri, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("directory: no server of domain %s could be used: %w", cfg.Domain, errors.Join(errs...))
}

func dialOne(ctx context.Context, cfg Config, uri string) (*ldap.Conn, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, err
	}
	timeout, err := requestTimeout(ctx)
	if err != nil {
		return nil, err
	}
	timeout = min(timeout, defaultTimeout)
	tc := &tls.Config{
		ServerName: u.Hostname(),
		RootCAs:    cfg.RootCAs,
		MinVersion: tls.VersionTLS12,
		// Only when sssd.conf says ldap_tls_reqcert = never or allow: SSSD itself then trusts
		// any certificate, and the operator reads what the cluster's logins read.
		InsecureSkipVerify: cfg.InsecureSkipVerify, //nolint:gosec
	}
	conn, err := ldap.DialURL(uri, ldap.DialWithDialer(&net.Dialer{Timeout: timeout}), ldap.DialWithTLSConfig(tc))
	if err != nil {
		return nil, err
	}
	conn.SetTimeout(timeout)
	if cfg.StartTLS && u.Scheme == "ldap" {
		if err := conn.StartTLS(tc); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("StartTLS: %w", err)
		}
	}
	if cfg.BindDN != "" {
		if err := conn.Bind(cfg.BindDN, cfg.BindPassword); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("binding as %s: %w", cfg.BindDN, err)
		}
	}
	return conn, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// requestTimeout is ctx's remaining time, or defaultTimeout without a deadline: the go-ldap
// connection only knows timeouts, so that is how ctx reaches a request in flight.
func requestTimeout(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return defaultTimeout, nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return 0, context.DeadlineExceeded
	}
	return d, nil
}

// search runs one search, failing on anything short of a complete answer: a server error, a
// size limit reached, or an entry of a multi-valued attribute sent in ranges (Active Directory's
// way to cut a large member list).
func (c *Client) search(ctx context.Context, base string, scope int, filter string, attrs []string) (*ldap.SearchResult, error) {
	timeout, err := requestTimeout(ctx)
	if err != nil {
		return nil, err
	}
	c.conn.SetTimeout(timeout)
	req := ldap.NewSearchRequest(base, scope, ldap.NeverDerefAliases, c.limit,
		int((timeout+time.Second-1)/time.Second), false, filter, attrs, nil)
	// Also count entries client-side, in case a server ignores the requested limit.
	req.EnforceSizeLimit = true
	res, err := c.conn.Search(req)
	if err != nil {
		return nil, fmt.Errorf("searching %s for %s: %w", base, filter, err)
	}
	if len(res.Entries) > c.limit {
		return nil, fmt.Errorf("searching %s for %s: more than %d entries", base, filter, c.limit)
	}
	for _, e := range res.Entries {
		for _, a := range e.Attributes {
			if _, rng, ok := cutFold(a.Name, ";range="); ok {
				return nil, fmt.Errorf("searching %s: %s sent only values %s of %s, and ranged retrieval is not supported", base, e.DN, rng, a.Name)
			}
		}
	}
	return res, nil
}

// lock takes c's lock, unless ctx ends first.
func (c *Client) lock(ctx context.Context) error {
	select {
	case c.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) unlock() { <-c.mu }
