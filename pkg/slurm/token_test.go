package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func parse(t *testing.T, tok string, key []byte) jwt.MapClaims {
	t.Helper()
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(tok, claims, func(tk *jwt.Token) (any, error) {
		if tk.Method != jwt.SigningMethodHS256 {
			t.Fatalf("method %v", tk.Method.Alg())
		}
		return key, nil
	}, jwt.WithoutClaimsValidation())
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

func TestJWTSourceMintsAndRefreshes(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	s, err := NewJWTSource("slurm", key, WithLifetime(10*time.Minute), WithRefreshMargin(2*time.Minute), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	user, tok1, err := s.Token(context.Background())
	if err != nil || user != "slurm" {
		t.Fatal(user, err)
	}
	c := parse(t, tok1, key)
	if c["sun"] != "slurm" || c["iat"].(float64) != float64(now.Unix()) || c["exp"].(float64) != float64(now.Add(10*time.Minute).Unix()) {
		t.Fatalf("claims %v", c)
	}
	now = now.Add(7 * time.Minute) // before exp-margin: reused
	if _, tok2, _ := s.Token(context.Background()); tok2 != tok1 {
		t.Fatal("token refreshed too early")
	}
	now = now.Add(90 * time.Second) // 8m30s: inside the margin: refreshed
	_, tok3, err := s.Token(context.Background())
	if err != nil || tok3 == tok1 {
		t.Fatalf("token not refreshed: %v", err)
	}
	if exp := parse(t, tok3, key)["exp"].(float64); exp != float64(now.Add(10*time.Minute).Unix()) {
		t.Fatalf("refreshed exp %v", exp)
	}
}

func TestJWTSourceFromFileRereadsKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "jwt.key")
	if err := os.WriteFile(file, []byte("key-one"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	s, err := NewJWTSourceFromFile("root", file, WithLifetime(time.Minute), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parse(t, tok, []byte("key-one"))
	if err := os.WriteFile(file, []byte("key-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, tok, err = s.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	parse(t, tok, []byte("key-two"))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, _, err := s.Token(context.Background()); err == nil {
		t.Fatal("a missing key file must be an error")
	}
}

func TestTokenSourceErrors(t *testing.T) {
	if _, err := NewJWTSource("u", nil); err == nil {
		t.Error("empty key accepted")
	}
	if _, err := NewJWTSource("", []byte("k")); err == nil {
		t.Error("empty user accepted")
	}
	if _, err := NewJWTSourceFromFile("u", filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("missing file accepted")
	}
	if _, _, err := (StaticToken{User: "u"}).Token(context.Background()); err == nil {
		t.Error("empty static token accepted")
	}
	if u, v, err := (StaticToken{User: "u", Value: "t"}).Token(context.Background()); err != nil || u != "u" || v != "t" {
		t.Error(u, v, err)
	}
}

// TestJWTSourceFromReader: a reader's keys are asked again at a rejection, a rotation it shows
// is picked up, the fallback it returns is tried, and a reader that fails (or returns nothing)
// fails the token, never a token of no key.
func TestJWTSourceFromReader(t *testing.T) {
	if _, err := NewJWTSourceFromReader("u", nil); err == nil {
		t.Error("nil reader accepted")
	}
	keys, readErr := [][]byte{[]byte("old")}, error(nil)
	s, err := NewJWTSourceFromReader("u", func() ([][]byte, error) { return keys, readErr })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, tok, err := s.Token(ctx)
	if err != nil || !signedBy(tok, "old") {
		t.Fatalf("first token: %v", err)
	}
	// A rotation: the reader now has the new key and the old one as fallback.
	keys = [][]byte{[]byte("new"), []byte("old")}
	if !s.Rejected(tok) {
		t.Fatal("a changed key set is not worth a retry")
	}
	if _, tok, _ = s.Token(ctx); !signedBy(tok, "new") {
		t.Fatal("not minted with the new key")
	}
	if !s.Rejected(tok) {
		t.Fatal("the fallback is not tried")
	}
	if _, tok, _ = s.Token(ctx); !signedBy(tok, "old") {
		t.Fatal("not minted with the fallback")
	}
	readErr = errors.New("secret gone")
	if s.Rejected(tok) {
		t.Error("a failed read is worth a retry")
	}
	if _, _, err := s.Token(ctx); err == nil || !strings.Contains(err.Error(), "secret gone") {
		t.Errorf("a failed read: %v", err)
	}
	keys, readErr = nil, nil
	if _, _, err := s.Token(ctx); err == nil {
		t.Error("no keys and no error minted a token")
	}
}

func signedBy(tok, key string) bool {
	_, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return []byte(key), nil })
	return err == nil
}

func TestTokenErrorIsUnauthorized(t *testing.T) {
	file := writeTemp(t, "k")
	s, err := NewJWTSourceFromFile("root", file)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(file)
	c, err := New(Config{URL: "http://127.0.0.1:1", Tokens: s})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListNodes(context.Background(), time.Time{}); !isUnauthorized(err) {
		t.Fatalf("want ErrUnauthorized, got %v", err)
	}
}

func writeTemp(t *testing.T, content string) string {
	f := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReadJWTKeys(t *testing.T) {
	dir := t.TempDir()
	key, fb := filepath.Join(dir, "jwt.key"), filepath.Join(dir, "jwt.key"+FallbackKeySuffix)
	write := func(p, v string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadJWTKeys(key, fb); err == nil {
		t.Error("a missing key: no error")
	}
	write(key, "")
	if _, err := ReadJWTKeys(key, fb); err == nil {
		t.Error("an empty key: no error")
	}
	write(key, "new")
	if keys, err := ReadJWTKeys(key, fb); err != nil || len(keys) != 1 || string(keys[0]) != "new" {
		t.Errorf("no fallback file yet: %q, %v", keys, err)
	}
	write(fb, "old")
	if keys, err := ReadJWTKeys(key, fb); err != nil || len(keys) != 2 || string(keys[0]) != "new" || string(keys[1]) != "old" {
		t.Errorf("with a fallback: %q, %v, want [new old]", keys, err)
	}
	if keys, err := ReadJWTKeys(key, ""); err != nil || len(keys) != 1 {
		t.Errorf("no fallback asked for: %q, %v", keys, err)
	}
	if err := os.Remove(fb); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(fb, 0o700); err != nil { // exists, cannot be read as a file
		t.Fatal(err)
	}
	if _, err := ReadJWTKeys(key, fb); err == nil {
		t.Error("an unreadable fallback: no error")
	}
}
