package slurm

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// slurmctldWithKey answers like slurmrestd 24.11 in front of a slurmctld that loaded key: a
// token signed with another key gets HTTP 511 and SLURM_PROTOCOL_AUTHENTICATION_ERROR (as
// measured against the test bed), a good one the empty node list.
type slurmctldWithKey struct {
	mu  sync.Mutex
	key []byte
}

func (s *slurmctldWithKey) load(key string) { s.mu.Lock(); s.key = []byte(key); s.mu.Unlock() }

func (s *slurmctldWithKey) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if _, err := jwt.Parse(r.Header.Get("X-SLURM-USER-TOKEN"), func(*jwt.Token) (any, error) { return key, nil }); err != nil {
		w.WriteHeader(http.StatusNetworkAuthenticationRequired)
		_, _ = w.Write([]byte(errJSON(errnoProtocolAuth, "Protocol authentication error")))
		return
	}
	_, _ = w.Write([]byte(`{"nodes":[],"last_update":{"set":true,"infinite":false,"number":1},"errors":[],"warnings":[]}`))
}

func keyOf(t *testing.T, r *http.Request) string {
	t.Helper()
	for _, k := range []string{"key-old", "key-new"} {
		if _, err := jwt.Parse(r.Header.Get("X-SLURM-USER-TOKEN"), func(*jwt.Token) (any, error) { return []byte(k), nil }); err == nil {
			return k
		}
	}
	return "?"
}

// TestRotationNeverFailsClosed: across a rotation (new key current, old key the fallback), a
// client keeps working before slurmctld reloads (it falls back to the old key, one refused
// request once) and after (it goes back to the new key), without a new client.
func TestRotationNeverFailsClosed(t *testing.T) {
	ctl := &slurmctldWithKey{key: []byte("key-old")}
	s := newServer(t, ctl.handler)
	tokens, err := NewJWTSource("slurm", []byte("key-new"), WithFallbackKey([]byte("key-old")))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{URL: s.URL, APIVersion: V0041, Tokens: tokens, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	list := func(what string) {
		t.Helper()
		if _, err := c.ListNodes(context.Background(), time.Time{}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	list("before slurmctld reloads")
	list("again, on the fallback")
	ctl.load("key-new")
	list("after slurmctld reloaded")
	list("again, on the new key")
	var sent []string
	for _, r := range s.requests() {
		sent = append(sent, keyOf(t, r))
	}
	want := "key-new key-old key-old key-old key-new key-new"
	if got := strings.Join(sent, " "); got != want {
		t.Fatalf("keys sent %q, want %q", got, want)
	}

	// A refusal of both keys is an error, after one retry, not a loop.
	ctl.load("key-other")
	_, err = c.ListNodes(context.Background(), time.Time{})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("both keys refused: %v, want ErrUnauthorized", err)
	}
	if n := len(s.requests()); n != 8 {
		t.Fatalf("%d requests after both keys were refused, want 8 (one retry)", n)
	}
}

// TestNoRetryWithoutAnotherKey: a single key refused, or a refusal that is not about the
// credential (access denied), is not sent again.
func TestNoRetryWithoutAnotherKey(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"key refused":   jsonReply(http.StatusNetworkAuthenticationRequired, errJSON(errnoProtocolAuth, "Protocol authentication error")),
		"access denied": jsonReply(http.StatusInternalServerError, errJSON(errnoAccessDenied, "Access/permission denied")),
	} {
		s := newServer(t, h)
		tokens, err := NewJWTSource("slurm", []byte("key-new"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Config{URL: s.URL, APIVersion: V0041, Tokens: tokens, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListNodes(context.Background(), time.Time{}); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: %v, want ErrUnauthorized", name, err)
		}
		if n := len(s.requests()); n != 1 {
			t.Errorf("%s: %d requests, want 1", name, n)
		}
	}
}

// TestFileSourceFollowsARotation: the scheduler's file source (a mounted Secret) picks up a new
// jwt.key and jwt.key.previous when a token is refused, not only at its next refresh.
func TestFileSourceFollowsARotation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "jwt.key")
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("jwt.key", "key-old")
	ctl := &slurmctldWithKey{key: []byte("key-old")}
	s := newServer(t, ctl.handler)
	tokens, err := NewJWTSourceFromFile("slurm", file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{URL: s.URL, APIVersion: V0041, Tokens: tokens, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListNodes(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	// The rotation lands in the mounted Secret, then slurmctld reloads: the cached token of
	// the old key is refused, and the source reads the files again.
	write("jwt.key", "key-new")
	write("jwt.key"+FallbackKeySuffix, "key-old")
	ctl.load("key-new")
	if _, err := c.ListNodes(context.Background(), time.Time{}); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	reqs := s.requests()
	if got := keyOf(t, reqs[len(reqs)-1]); got != "key-new" {
		t.Fatalf("sent %s after the rotation, want key-new", got)
	}
}
