package nodewatch

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"sunk.dev/sunk/pkg/slurm"
)

// The watcher holds SlurmUser's view of the node table (addresses, reasons, who set them,
// comments): it answers only a request that carries a JWT of the cluster's own key, the one
// sunk's components already sign slurmrestd's tokens with, naming the cluster's SlurmUser. A
// Slurm user's own token (`scontrol token`, the same key) names that user and is refused.
// The headers are slurmrestd's, so one slurm.TokenSource serves both.
const (
	// UserHeader names the token's user.
	UserHeader = "X-SLURM-USER-NAME"
	// TokenHeader carries the JWT.
	TokenHeader = "X-SLURM-USER-TOKEN"
)

// keyRecheck is how often a JWTAuth reads its key files again: a rotated key reaches the
// mounted Secret within a kubelet sync, and a flood of requests must not become a flood of reads.
const keyRecheck = time.Second

// JWTAuth checks a request's token against the HS256 key in a file and, during a rotation, the
// key beside it (file+slurm.FallbackKeySuffix), as slurmctld checks slurmrestd's tokens.
type JWTAuth struct {
	user, file string
	now        func() time.Time

	mu     sync.Mutex
	keys   [][]byte
	readAt time.Time
}

// NewJWTAuth accepts tokens for user signed with the key in file (or its fallback). The file
// must be readable now: a watcher that could answer nobody must not start.
func NewJWTAuth(user, file string) (*JWTAuth, error) {
	if user == "" {
		return nil, errors.New("node watcher: the user its tokens must name is empty")
	}
	a := &JWTAuth{user: user, file: file, now: time.Now}
	if _, err := a.currentKeys(); err != nil {
		return nil, err
	}
	return a, nil
}

// Check returns nil when the request's token is valid for the user, else why not.
func (a *JWTAuth) Check(r *http.Request) error {
	tok := r.Header.Get(TokenHeader)
	if tok == "" {
		return fmt.Errorf("no %s header: the watcher answers the cluster's SlurmUser only", TokenHeader)
	}
	keys, err := a.currentKeys()
	if err != nil {
		return err
	}
	var last error
	for _, key := range keys {
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return key, nil },
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(a.now))
		if err != nil {
			last = err
			continue
		}
		// Slurm names the user in "sun" (src/plugins/auth/jwt/auth_jwt.c).
		if sun, _ := claims["sun"].(string); sun != a.user {
			return fmt.Errorf("the token names user %q, not %q", sun, a.user)
		}
		return nil
	}
	return fmt.Errorf("token refused: %w", last)
}

// currentKeys reads the key files at most every keyRecheck.
func (a *JWTAuth) currentKeys() ([][]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := a.now(); a.keys == nil || now.Sub(a.readAt) >= keyRecheck {
		keys, err := slurm.ReadJWTKeys(a.file, a.file+slurm.FallbackKeySuffix)
		switch {
		case err != nil && a.keys == nil:
			return nil, fmt.Errorf("node watcher: %w", err)
		case err != nil:
			// A Secret volume swaps its files atomically, so this is rare and brief: the keys
			// read last stay the cluster's until a read succeeds.
			return a.keys, nil
		}
		a.keys, a.readAt = keys, now
	}
	return a.keys, nil
}
