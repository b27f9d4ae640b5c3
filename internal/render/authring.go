package render

// auth/slurm's key ring, slurm.jwks (Slurm 24.05+, src/plugins/auth/slurm/internal.c): a JSON
// object whose "keys" are HS256 keys, each with a kid, kty "oct", alg "HS256" and k (base64url,
// at least 16 bytes); at most one has "use": "default" (else the first is the default). Tokens
// and credentials are signed with the default key and carry its kid; a daemon verifies with the
// key of the token's kid, and a token without a kid with its default key. slurmctld ends any
// daemon on a ring that breaks these rules (fatal), so the operator checks them before it
// writes one.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
)

// AuthRingKey is one key of slurm.jwks.
type AuthRingKey struct {
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Kty string `json:"kty"`
	K   string `json:"k"`
	Use string `json:"use,omitempty"`
}

// AuthRing is slurm.jwks.
type AuthRing struct {
	Keys []AuthRingKey `json:"keys"`
}

// authRingKidPattern: what sunk accepts as a key id, a name an admin types (Slurm takes any
// string; the id travels in every token's header).
var authRingKidPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CheckAuthRingKid says why kid cannot name a key of the ring, or nil.
func CheckAuthRingKid(kid string) error {
	if !authRingKidPattern.MatchString(kid) {
		return fmt.Errorf("%q is not a key id: 1 to 63 of A-Z a-z 0-9 . _ -, starting with a letter or digit", kid)
	}
	return nil
}

// NewAuthRingKey is the ring entry of key under kid.
func NewAuthRingKey(kid string, key []byte) AuthRingKey {
	return AuthRingKey{Kid: kid, Alg: "HS256", Kty: "oct", K: base64.RawURLEncoding.EncodeToString(key)}
}

// ParseAuthRing reads slurm.jwks and checks it as auth/slurm would.
func ParseAuthRing(b []byte) (*AuthRing, error) {
	r := &AuthRing{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", AuthRingName, err)
	}
	if err := r.Check(); err != nil {
		return nil, err
	}
	return r, nil
}

// Check applies auth/slurm's rules: at least one key, unique kids, HS256/oct, 16 bytes or more,
// at most one default.
func (r *AuthRing) Check() error {
	if len(r.Keys) == 0 {
		return fmt.Errorf("%s: no keys", AuthRingName)
	}
	seen, defaults := map[string]bool{}, 0
	for i, k := range r.Keys {
		if k.Kid == "" || seen[k.Kid] {
			return fmt.Errorf("%s: keys[%d].kid %q is empty or not unique", AuthRingName, i, k.Kid)
		}
		seen[k.Kid] = true
		if k.Alg != "HS256" || k.Kty != "oct" {
			return fmt.Errorf("%s: keys[%d] (kid %q): alg must be HS256 and kty oct", AuthRingName, i, k.Kid)
		}
		if raw, err := k.Bytes(); err != nil || len(raw) < 16 {
			return fmt.Errorf("%s: keys[%d].k (kid %q) must be base64url of at least 16 bytes", AuthRingName, i, k.Kid)
		}
		if k.Use == "default" {
			defaults++
		}
	}
	if defaults > 1 {
		return fmt.Errorf("%s: more than one key has \"use\": \"default\"", AuthRingName)
	}
	return nil
}

// Bytes is the key itself.
func (k AuthRingKey) Bytes() ([]byte, error) {
	if b, err := base64.RawURLEncoding.DecodeString(k.K); err == nil {
		return b, nil
	}
	return base64.StdEncoding.DecodeString(k.K)
}

// Default is the kid of the key auth/slurm signs with: the one marked default, else the first.
func (r *AuthRing) Default() string {
	for _, k := range r.Keys {
		if k.Use == "default" {
			return k.Kid
		}
	}
	if len(r.Keys) == 0 {
		return ""
	}
	return r.Keys[0].Kid
}

// Has reports whether the ring holds a key of that kid.
func (r *AuthRing) Has(kid string) bool {
	for _, k := range r.Keys {
		if k.Kid == kid {
			return true
		}
	}
	return false
}

// WithDefault is the ring with kid as its only default key.
func (r *AuthRing) WithDefault(kid string) *AuthRing {
	out := &AuthRing{}
	for _, k := range r.Keys {
		k.Use = ""
		if k.Kid == kid {
			k.Use = "default"
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// Only is the ring with the key of kid alone.
func (r *AuthRing) Only(kid string) *AuthRing {
	out := &AuthRing{}
	for _, k := range r.Keys {
		if k.Kid == kid {
			out.Keys = append(out.Keys, k)
		}
	}
	return out
}

// Marshal is the file's content.
func (r *AuthRing) Marshal() []byte {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		panic(err) // strings only
	}
	return append(b, '\n')
}
