package nodewatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/wait"
)

// testKeys writes a key file and returns a watcher's JWTAuth on it and a client's token source.
func testKeys(t *testing.T) (*JWTAuth, *slurm.JWTSource) {
	dir := keyFiles(t, map[string]string{"jwt.key": "the cluster's key"})
	return authAndTokens(t, filepath.Join(dir, "jwt.key"), filepath.Join(dir, "jwt.key"))
}

// keyFiles writes each file's key into a new directory, which it returns.
func keyFiles(t *testing.T, keys map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, k := range keys {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// authAndTokens is a watcher's JWTAuth on watcherKey and a client's tokens of clientKey, both
// for SlurmUser "slurm".
func authAndTokens(t *testing.T, watcherKey, clientKey string) (*JWTAuth, *slurm.JWTSource) {
	t.Helper()
	auth, err := NewJWTAuth("slurm", watcherKey)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := slurm.NewJWTSourceFromFile("slurm", clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return auth, tokens
}

func token(t *testing.T, user string, key []byte, opts ...slurm.JWTOption) string {
	t.Helper()
	src, err := slurm.NewJWTSource(user, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := src.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestHandlerAuth: the table only for a token of the cluster's key naming SlurmUser; the old
// key of a rotation while it is beside the new one; nothing to a missing, foreign, expired or
// other user's token, nor to an "alg: none" token.
func TestHandlerAuth(t *testing.T) {
	key, old, other := []byte("new key"), []byte("old key"), []byte("someone else's")
	dir := keyFiles(t, map[string]string{"jwt.key": string(key), "jwt.key" + slurm.FallbackKeySuffix: string(old)})
	auth, err := NewJWTAuth("slurm", filepath.Join(dir, "jwt.key"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFeeder(t)
	f.feed(nodeLine("n1", `["IDLE"]`, ""), syncFull)
	srv := httptest.NewServer(Handler(f.s, time.Minute, auth))
	defer srv.Close()
	// The table applied, so that a good token's answer is 200, not 503.
	wait.For(t, "the table read", 5*time.Second, 10*time.Millisecond, func() error {
		_, _, err := f.s.Since("", 0, time.Now(), time.Minute)
		return err
	})
	past := func() time.Time { return time.Now().Add(-2 * time.Hour) }
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"the cluster's key", token(t, "slurm", key), http.StatusOK},
		{"the key a rotation replaces", token(t, "slurm", old), http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"another key", token(t, "slurm", other), http.StatusUnauthorized},
		{"a Slurm user's own token", token(t, "alice", key), http.StatusUnauthorized},
		{"expired", token(t, "slurm", key, slurm.WithClock(past)), http.StatusUnauthorized},
		// {"alg":"none"} {"sun":"slurm","exp":9999999999} with no signature.
		{"unsigned", "eyJhbGciOiJub25lIn0.eyJzdW4iOiJzbHVybSIsImV4cCI6OTk5OTk5OTk5OX0.", http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+Path, nil)
			if c.token != "" {
				req.Header.Set(TokenHeader, c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, c.want)
			}
			if c.want != http.StatusOK && strings.Contains(string(body), "n1") {
				t.Fatalf("a refused request read the table: %s", body)
			}
		})
	}
}

// TestClientFollowsARotation: a client that mints with the new key while the watcher still
// holds only the old one is refused once, falls back to the old key and reads the table.
func TestClientFollowsARotation(t *testing.T) {
	dir := keyFiles(t, map[string]string{"watcher.key": "old", "client.key": "new", "client.key" + slurm.FallbackKeySuffix: "old"})
	clientKey := filepath.Join(dir, "client.key")
	auth, tokens := authAndTokens(t, filepath.Join(dir, "watcher.key"), clientKey)
	f := newFeeder(t)
	f.feed(nodeLine("n1", `["IDLE"]`, ""), syncFull)
	srv := httptest.NewServer(Handler(f.s, time.Minute, auth))
	defer srv.Close()
	c, err := NewClient(srv.URL, 10*time.Millisecond, tokens)
	if err != nil {
		t.Fatal(err)
	}
	// Until the feeder's table is applied the watcher answers 503 (not 401): wait for it.
	wait.For(t, "the table through the old key", 5*time.Second, 10*time.Millisecond, func() error {
		ch, err := c.NodeChanges(context.Background())
		if err == nil && len(ch.Nodes) != 1 {
			err = fmt.Errorf("changes %+v", ch)
		}
		return err
	})
	// Without a fallback the refusal is the caller's error, naming the status.
	if err := os.Remove(clientKey + slurm.FallbackKeySuffix); err != nil {
		t.Fatal(err)
	}
	fresh, _ := slurm.NewJWTSourceFromFile("slurm", clientKey)
	c2, _ := NewClient(srv.URL, 10*time.Millisecond, fresh)
	if _, err := c2.NodeChanges(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a client of another key: %v", err)
	}
	if _, err := NewClient(srv.URL, 0, nil); err == nil {
		t.Fatal("a client without tokens")
	}
}

// TestHandlerBoundsRequests: past MaxInFlight requests at once the watcher answers 429
// instead of holding another.
func TestHandlerBoundsRequests(t *testing.T) {
	auth, tokens := testKeys(t)
	f := newFeeder(t)
	f.feed(nodeLine("n1", `["IDLE"]`, ""), syncFull)
	srv := httptest.NewServer(Handler(f.s, time.Minute, auth))
	defer srv.Close()
	_, tok, _ := tokens.Token(context.Background())
	// The store's epoch and seq once it has the table: nothing changes after, so each request
	// with them waits.
	var now Changes
	wait.For(t, "the table read", 5*time.Second, 10*time.Millisecond, func() (err error) {
		now, _, err = f.s.Since("", 0, time.Now(), time.Minute)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	get := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s%s?epoch=%s&since=%d&wait=30s", srv.URL, Path, now.Epoch, now.Seq), nil)
		req.Header.Set(TokenHeader, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var held sync.WaitGroup
	for range MaxInFlight {
		held.Add(1)
		// A held request refused while a probe below had a slot asks again, so that the
		// bound is reached however the two interleave.
		go func() {
			defer held.Done()
			for ctx.Err() == nil {
				if code, err := get(ctx); err == nil && code != http.StatusTooManyRequests {
					t.Errorf("a held request answered %d before its wait", code)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wait.For(t, "a request past the bound refused", 10*time.Second, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		code, err := get(ctx)
		if err != nil || code != http.StatusTooManyRequests {
			return fmt.Errorf("status %d, %v", code, err)
		}
		return nil
	})
	cancel()
	held.Wait()
	wait.For(t, "requests served again", 10*time.Second, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if code, err := get(ctx); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("status %d, %v: want a request that waits", code, err)
		}
		return nil
	})
}
