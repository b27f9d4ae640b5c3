package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenSource supplies the credentials of a request: the X-SLURM-USER-NAME and
// X-SLURM-USER-TOKEN headers.
type TokenSource interface {
	Token(ctx context.Context) (user, token string, err error)
}

// A RotatingTokenSource can answer a token Slurm refused with another one (JWTSource during a
// key rotation): the client calls Rejected with the refused token and retries the request once
// when it returns true.
type RotatingTokenSource interface {
	TokenSource
	Rejected(token string) bool
}

// StaticToken is a fixed user and token (e.g. from `scontrol token`).
type StaticToken struct {
	User, Value string
}

// Token implements TokenSource.
func (s StaticToken) Token(context.Context) (string, string, error) {
	if s.User == "" || s.Value == "" {
		return "", "", errors.New("slurm: static token has no user or value")
	}
	return s.User, s.Value, nil
}

// JWTSource mints HS256 JWTs the way `scontrol token` does, from the cluster's jwt key
// (AuthAltParameters=jwt_key=...), and reuses each one until it is close to expiry.
//
// It may hold a fallback key: during a rotation (docs/security.md, "Rotating keys") the new key
// is the current one and the old one the fallback, and slurmctld accepts whichever of the two
// it loaded last (Slurm's HS256 key is a single key, src/plugins/auth/jwt/auth_jwt.c). A client
// that sees a token refused for its key calls Rejected and retries once with the other key, so
// that no component fails closed until it is restarted.
type JWTSource struct {
	user     string
	given    [][]byte // in-memory keys: current, fallback
	read     KeyReader
	lifetime time.Duration
	margin   time.Duration
	now      func() time.Time

	mu     sync.Mutex
	keys   [][]byte // the keys minted with: current first
	active int      // index into keys
	token  string
	exp    time.Time
}

// JWTOption configures a JWTSource.
type JWTOption func(*JWTSource)

// WithLifetime sets how long a minted token is valid (default 30 minutes, at least a minute).
func WithLifetime(d time.Duration) JWTOption { return func(s *JWTSource) { s.lifetime = d } }

// WithRefreshMargin sets how long before expiry a new token is minted (default a fifth of the
// lifetime).
func WithRefreshMargin(d time.Duration) JWTOption { return func(s *JWTSource) { s.margin = d } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) JWTOption { return func(s *JWTSource) { s.now = now } }

// WithFallbackKey adds the key to mint with when slurmctld refuses the current one (the old key
// of a rotation that slurmctld has not reloaded yet). Empty means none.
func WithFallbackKey(key []byte) JWTOption {
	return func(s *JWTSource) {
		if len(key) > 0 {
			s.given = append(s.given, append([]byte(nil), key...))
		}
	}
}

// NewJWTSource mints tokens for user from key.
func NewJWTSource(user string, key []byte, opts ...JWTOption) (*JWTSource, error) {
	if len(key) == 0 {
		return nil, errors.New("slurm: empty jwt key")
	}
	return newJWT(user, [][]byte{append([]byte(nil), key...)}, nil, opts)
}

// FallbackKeySuffix names the fallback of a key file: the file beside it with this suffix
// (jwt.key.previous for jwt.key, as in a mounted JWT key Secret during a rotation).
const FallbackKeySuffix = ".previous"

// NewJWTSourceFromFile mints tokens for user from the key in file, with the key in
// file+FallbackKeySuffix, when it exists, as the fallback. Both are read again at each refresh
// and when a token is rejected, so that a rotated key (a Secret update) is picked up.
func NewJWTSourceFromFile(user, file string, opts ...JWTOption) (*JWTSource, error) {
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("slurm: jwt key: %w", err)
	}
	return newJWT(user, nil, func() ([][]byte, error) { return ReadJWTKeys(file, file+FallbackKeySuffix) }, opts)
}

// A KeyReader returns the JWT keys a token may be signed with, current first (the key that
// signed before a rotation after it), or why they cannot be read: never no keys and no error.
type KeyReader func() ([][]byte, error)

// NewJWTSourceFromReader mints tokens for user from the keys read returns, asked again at each
// refresh and when a token is rejected, as NewJWTSourceFromFile reads its files: for keys kept
// elsewhere than in files (sunk-scheduler reads the cluster's JWT key Secret through the API).
func NewJWTSourceFromReader(user string, read KeyReader, opts ...JWTOption) (*JWTSource, error) {
	if read == nil {
		return nil, errors.New("slurm: jwt token source needs a key reader")
	}
	return newJWT(user, nil, read, opts)
}

func newJWT(user string, keys [][]byte, read KeyReader, opts []JWTOption) (*JWTSource, error) {
	if user == "" {
		return nil, errors.New("slurm: jwt token source needs a user name")
	}
	s := &JWTSource{user: user, given: keys, read: read, lifetime: 30 * time.Minute, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.read == nil {
		s.keys = s.given
	}
	if s.lifetime < time.Minute {
		s.lifetime = time.Minute
	}
	if s.margin <= 0 || s.margin >= s.lifetime {
		s.margin = s.lifetime / 5
	}
	return s, nil
}

// Token implements TokenSource.
func (s *JWTSource) Token(context.Context) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.token != "" && now.Before(s.exp.Add(-s.margin)) {
		return s.user, s.token, nil
	}
	if _, err := s.load(); err != nil {
		return "", "", err
	}
	exp := now.Add(s.lifetime)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iat": now.Unix(), "exp": exp.Unix(), "sun": s.user,
	}).SignedString(s.keys[s.active])
	if err != nil {
		return "", "", fmt.Errorf("slurm: signing jwt: %w", err)
	}
	s.token, s.exp = tok, exp
	return s.user, tok, nil
}

// Rejected reports that Slurm refused token for its key, and whether a retry may succeed: a
// newer token exists already, the key files changed, or there is another key to try (which
// becomes the one minted with until it is refused in turn).
func (s *JWTSource) Rejected(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token != s.token {
		return true
	}
	s.token = ""
	changed, err := s.load()
	switch {
	case err != nil:
		return false
	case changed:
		return true
	case len(s.keys) > 1:
		s.active = (s.active + 1) % len(s.keys)
		return true
	}
	return false
}

// load reads the keys, if they are not in memory; when they changed, minting starts again with
// the current key.
func (s *JWTSource) load() (changed bool, err error) {
	if s.read == nil {
		return false, nil
	}
	keys, err := s.read()
	if err != nil {
		return false, err
	}
	if len(keys) == 0 || len(keys[0]) == 0 {
		return false, errors.New("slurm: jwt key reader returned no key")
	}
	if sameKeys(keys, s.keys) {
		return false, nil
	}
	s.keys, s.active = keys, 0
	return true, nil
}

// ReadJWTKeys reads the JWT key in file and, when fallback names a file that exists and is not
// empty, the key that signed before the last rotation (FallbackKeySuffix): the keys a token may
// be signed with, current first. A missing or empty key, or a fallback that exists but cannot
// be read, is an error. Every reader of a mounted key (token sources, the node watcher's
// verifier) reads it here, so that they agree on what a rotation left behind.
func ReadJWTKeys(file, fallback string) ([][]byte, error) {
	key, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("slurm: jwt key: %w", err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("slurm: jwt key file %s is empty", file)
	}
	keys := [][]byte{key}
	if fallback == "" {
		return keys, nil
	}
	fb, err := os.ReadFile(fallback)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("slurm: fallback jwt key: %w", err)
	}
	if len(fb) > 0 {
		keys = append(keys, fb)
	}
	return keys, nil
}

func sameKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
