package nodewatch

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"sunk.dev/sunk/pkg/slurm"
)

// DefaultWait is how long a Client's request waits for a change.
const DefaultWait = 5 * time.Second

// Client reads a watcher's changes; it is a slurm.NodeChangeSource. Not for concurrent use by
// more than one cache: it remembers where its reader is (epoch and seq).
type Client struct {
	wait   time.Duration
	http   *http.Client
	tokens slurm.TokenSource

	mu    sync.Mutex
	url   string // a test moves it to another watcher
	epoch string
	seq   uint64
}

// NewClient reads the watcher at base (http://host:port) with tokens of the cluster's
// SlurmUser (the source its slurmrestd client uses). wait is how long a request waits for a
// change (zero: DefaultWait).
func NewClient(base string, wait time.Duration, tokens slurm.TokenSource) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("node watcher URL %q: want http://host:port or https://host:port", base)
	}
	if tokens == nil {
		return nil, errors.New("node watcher client: no token source (the watcher answers the cluster's SlurmUser only)")
	}
	if wait <= 0 {
		wait = DefaultWait
	}
	// A watcher that stops answering (a partition, a hung process) is an error within a few
	// seconds past the wait, not a request that hangs for ever.
	return &Client{url: base, wait: wait, tokens: tokens, http: &http.Client{Timeout: wait + 5*time.Second}}, nil
}

// SetTLSConfig verifies the watcher with cfg (clustertls.ClientConfig: the cluster's CA and
// the Service's name), for a base of https://.
func (c *Client) SetTLSConfig(cfg *tls.Config) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	c.http.Transport = t
}

// SetTransport sends the requests through rt (a benchmark counts the bytes).
func (c *Client) SetTransport(rt http.RoundTripper) { c.http.Transport = rt }

// NodeChanges asks for the changes since the last answer (the whole table the first time, after
// the watcher restarted, or when this reader fell too far behind) and waits for one.
func (c *Client) NodeChanges(ctx context.Context) (slurm.NodeChanges, error) {
	c.mu.Lock()
	base, epoch, seq := c.url, c.epoch, c.seq
	c.mu.Unlock()
	q := url.Values{"epoch": {epoch}, "since": {strconv.FormatUint(seq, 10)}, "wait": {c.wait.String()}}
	resp, err := c.get(ctx, base+Path+"?"+q.Encode())
	if err != nil {
		return slurm.NodeChanges{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return slurm.NodeChanges{}, fmt.Errorf("node watcher: %s: %s", resp.Status, b)
	}
	var ch Changes
	if err := json.NewDecoder(resp.Body).Decode(&ch); err != nil {
		return slurm.NodeChanges{}, fmt.Errorf("node watcher: decoding its answer: %w", err)
	}
	if ch.Epoch == "" {
		return slurm.NodeChanges{}, fmt.Errorf("node watcher: an answer without an epoch")
	}
	c.mu.Lock()
	c.epoch, c.seq = ch.Epoch, ch.Seq
	c.mu.Unlock()
	return slurm.NodeChanges{Full: ch.Full, Nodes: ch.Nodes, Deleted: ch.Deleted}, nil
}

// get sends a request with a token and, when the watcher refuses it and the source has another
// (a key rotation: the watcher may still hold the old key, or already the new one), once more.
func (c *Client) get(ctx context.Context, u string) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		user, tok, err := c.tokens.Token(ctx)
		if err != nil {
			return nil, fmt.Errorf("node watcher: a token: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set(UserHeader, user)
		req.Header.Set(TokenHeader, tok)
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("node watcher: %w", err)
		}
		rot, ok := c.tokens.(slurm.RotatingTokenSource)
		if resp.StatusCode != http.StatusUnauthorized || attempt > 0 || !ok || !rot.Rejected(tok) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
}
