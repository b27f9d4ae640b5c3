package clustertls

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// server serves "ok" over TLS with the serving certificate of data.
func server(t *testing.T, data map[string][]byte) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{CertKey, KeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := NewCertFiles(filepath.Join(dir, CertKey), filepath.Join(dir, KeyKey))
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	s.TLS = f.ServerConfig()
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refusals are the point
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, url string, cfg *tls.Config) error {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func TestClientVerifies(t *testing.T) {
	now := time.Now()
	data := secretAt(t, now, names)
	other := secretAt(t, now, names)
	s := server(t, data)
	for _, tc := range []struct {
		name, serverName string
		roots            []byte
		want             string // "" for success
	}{
		{name: "the cluster's CA and a name of the certificate", serverName: "c1-restapi.ns.svc", roots: data[CACertKey]},
		{name: "another CA", serverName: "c1-restapi.ns.svc", roots: other[CACertKey], want: "unknown authority"},
		{name: "a name the certificate lacks", serverName: "c2-restapi.ns.svc", roots: data[CACertKey], want: "c2-restapi.ns.svc"},
		{name: "no CA at all", serverName: "c1-restapi.ns.svc", roots: []byte("nothing"), want: "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ClientConfig("ns/c1", tc.serverName, StaticRoots(tc.roots))
			if err != nil {
				t.Fatal(err)
			}
			err = get(t, s.URL, cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("GET: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("GET succeeded, want a refusal")
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cluster ns/c1")):
				t.Fatalf("GET: %v, want an error naming the cluster and %q", err, tc.want)
			}
		})
	}
	// Plain HTTP to the TLS port is no answer either.
	resp, err := http.Get(strings.Replace(s.URL, "https://", "http://", 1))
	if err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP to the TLS port answered 200")
		}
		resp.Body.Close()
	}
	if _, err := ClientConfig("ns/c1", "", StaticRoots(data[CACertKey])); err == nil {
		t.Fatal("a config without a server name")
	}
	if _, err := ClientConfig("ns/c1", "x", nil); err == nil {
		t.Fatal("a config without roots")
	}
}

// A client reads its roots at each handshake: a new CA is trusted without a new client.
func TestClientFollowsNewRoots(t *testing.T) {
	now := time.Now()
	oldCA, newCA := secretAt(t, now, names), secretAt(t, now, names)
	s := server(t, newCA)
	var roots atomic.Value
	roots.Store(oldCA[CACertKey])
	cfg, err := ClientConfig("ns/c1", names[0], func() ([]byte, error) { return roots.Load().([]byte), nil })
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	if _, err := c.Get(s.URL); err == nil {
		t.Fatal("the old CA's client accepted the new CA's server")
	}
	roots.Store(newCA[CACertKey])
	resp, err := c.Get(s.URL)
	if err != nil {
		t.Fatalf("after the new CA: %v", err)
	}
	resp.Body.Close()
}

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
