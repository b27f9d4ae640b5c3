package render

import (
	"strings"
	"testing"
)

func TestAuthRing(t *testing.T) {
	key := []byte("0123456789abcdef0123")
	r := &AuthRing{Keys: []AuthRingKey{NewAuthRingKey("old", key), NewAuthRingKey("new", key)}}
	if r.Default() != "old" {
		t.Errorf("Default() = %q, want the first key without a marked one", r.Default())
	}
	r2 := r.WithDefault("new")
	if r2.Default() != "new" || r.Default() != "old" {
		t.Errorf("WithDefault: %q (original %q)", r2.Default(), r.Default())
	}
	back, err := ParseAuthRing(r2.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if back.Default() != "new" || !back.Has("old") || back.Only("new").Has("old") {
		t.Errorf("round trip: %+v", back)
	}
	if b, _ := back.Keys[0].Bytes(); string(b) != string(key) {
		t.Errorf("key bytes: %q", b)
	}
}

func TestAuthRingCheck(t *testing.T) {
	good := NewAuthRingKey("a", []byte("0123456789abcdef"))
	for _, tc := range []struct {
		name string
		keys []AuthRingKey
		want string // "" valid, else part of the error
	}{
		{"one key", []AuthRingKey{good}, ""},
		{"empty", nil, "no keys"},
		{"duplicate kid", []AuthRingKey{good, good}, "not unique"},
		{"short key", []AuthRingKey{NewAuthRingKey("a", []byte("short"))}, "at least 16 bytes"},
		{"alg", []AuthRingKey{{Kid: "a", Alg: "RS256", Kty: "oct", K: good.K}}, "alg must be HS256"},
		{"two defaults", []AuthRingKey{{Kid: "a", Alg: "HS256", Kty: "oct", K: good.K, Use: "default"},
			{Kid: "b", Alg: "HS256", Kty: "oct", K: good.K, Use: "default"}}, "more than one"},
	} {
		err := (&AuthRing{Keys: tc.keys}).Check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Check() = %v, want %q", tc.name, err, tc.want)
		}
	}
	for kid, ok := range map[string]bool{"k2026-11": true, "": false, "-a": false, "a b": false, strings.Repeat("a", 64): false} {
		if err := CheckAuthRingKid(kid); (err == nil) != ok {
			t.Errorf("CheckAuthRingKid(%q) = %v", kid, err)
		}
	}
}
