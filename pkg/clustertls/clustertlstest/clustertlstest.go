// Package clustertlstest gives tests a SlurmCluster's TLS as the operator issues it and as its
// servers present it: the TLS Secret's data (Issue), the serving pair mounted as files
// (CertFiles) and an httptest server presenting it (Server). Standard library only, as
// pkg/clustertls: the scheduler's module imports it too.
package clustertlstest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sunk.dev/sunk/pkg/clustertls"
)

// Issue is the TLS Secret's data of cluster with a CA of its own: two calls are two CAs, the
// second one's server a stranger to the first one's clients.
func Issue(t testing.TB, cluster string, names []string) map[string][]byte {
	t.Helper()
	data, err := clustertls.Renewed(cluster, nil, clustertls.Decision{NewCA: true}, names, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// CertFiles serves data's serving pair from files, as a server's pod mounts the Secret: the
// pair alone, never the CA's key.
func CertFiles(t testing.TB, data map[string][]byte) *clustertls.CertFiles {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{clustertls.CertKey, clustertls.KeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certs, err := clustertls.NewCertFiles(filepath.Join(dir, clustertls.CertKey), filepath.Join(dir, clustertls.KeyKey))
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// Server is handler over TLS with data's serving certificate (a nil handler answers 200 and
// nothing), closed when the test ends. Its error log is discarded: the handshakes it refuses
// are what the tests are about.
func Server(t testing.TB, data map[string][]byte, handler http.Handler) *httptest.Server {
	t.Helper()
	if handler == nil {
		handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	}
	s := httptest.NewUnstartedServer(handler)
	s.TLS = CertFiles(t, data).ServerConfig()
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}
