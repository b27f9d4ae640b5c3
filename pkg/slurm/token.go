package slurm

import (
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
type JWTSource struct {
	user     string
	key      []byte
	keyFile  string
	lifetime time.Duration
	margin   time.Duration
	now      func() time.Time

	mu    sync.Mutex
	token string
	exp   time.Time
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

// NewJWTSource mints tokens for user from key.
func NewJWTSource(user string, key []byte, opts ...JWTOption) (*JWTSource, error) {
	if len(key) == 0 {
		return nil, errors.New("slurm: empty jwt key")
	}
	return newJWT(user, append([]byte(nil), key...), "", opts)
}

// NewJWTSourceFromFile mints tokens for user from the key in file, read again at each refresh so
// that a rotated key (a Secret update) is picked up.
func NewJWTSourceFromFile(user, file string, opts ...JWTOption) (*JWTSource, error) {
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("slurm: jwt key: %w", err)
	}
	return newJWT(user, nil, file, opts)
}

func newJWT(user string, key []byte, file string, opts []JWTOption) (*JWTSource, error) {
	if user == "" {
		return nil, errors.New("slurm: jwt token source needs a user name")
	}
	s := &JWTSource{user: user, key: key, keyFile: file, lifetime: 30 * time.Minute, now: time.Now}
	for _, o := range opts {
		o(s)
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
	key := s.key
	if s.keyFile != "" {
		var err error
		if key, err = os.ReadFile(s.keyFile); err != nil {
			return "", "", fmt.Errorf("slurm: jwt key: %w", err)
		}
		if len(key) == 0 {
			return "", "", fmt.Errorf("slurm: jwt key file %s is empty", s.keyFile)
		}
	}
	exp := now.Add(s.lifetime)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iat": now.Unix(), "exp": exp.Unix(), "sun": s.user,
	}).SignedString(key)
	if err != nil {
		return "", "", fmt.Errorf("slurm: signing jwt: %w", err)
	}
	s.token, s.exp = tok, exp
	return s.user, tok, nil
}
