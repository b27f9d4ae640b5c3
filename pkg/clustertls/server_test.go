package clustertls

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A server presents a renewed certificate once its files change, and keeps the last one while
// they are unreadable.
func TestCertFilesReload(t *testing.T) {
	now := time.Now()
	a, b := secretAt(t, now, names), secretAt(t, now, names)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, CertKey), filepath.Join(dir, KeyKey)
	write := func(d map[string][]byte) {
		t.Helper()
		if err := os.WriteFile(certFile, d[CertKey], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, d[KeyKey], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewCertFiles(certFile, keyFile); err == nil {
		t.Fatal("NewCertFiles without files")
	}
	write(a)
	f, err := NewCertFiles(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Past NewCertFiles' own read: the first call reads again.
	clock := time.Now().Add(time.Hour)
	f.now = func() time.Time { return clock }
	first, _ := f.current()
	write(b)
	if c, _ := f.current(); c != first {
		t.Fatal("read again before recheck")
	}
	clock = clock.Add(recheck)
	second, err := f.current()
	if err != nil || second == first {
		t.Fatalf("after recheck: %v, same certificate %v", err, second == first)
	}
	os.Remove(certFile)
	clock = clock.Add(recheck)
	if c, err := f.current(); err != nil || c != second {
		t.Fatalf("with the files gone: %v; want the last certificate", err)
	}
}
