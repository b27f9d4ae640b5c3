// The servers' side: the serving certificate from files a Secret volume holds, read again when
// kubelet refreshes them after a renewal.

package clustertls

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"
)

// recheck is how often a server looks at its files again: a renewed certificate reaches the
// volume within a kubelet sync, and a flood of handshakes must not become a flood of reads.
const recheck = 10 * time.Second

// CertFiles serves the certificate in certFile and keyFile (a Secret volume's CertKey and
// KeyKey), read again at most every recheck. A read that fails keeps the certificate read
// last: a Secret volume swaps its files atomically, so that is brief.
type CertFiles struct {
	certFile, keyFile string
	now               func() time.Time

	mu     sync.Mutex
	cert   *tls.Certificate
	readAt time.Time
}

// NewCertFiles reads the files now: a server that could not present a certificate must not start.
func NewCertFiles(certFile, keyFile string) (*CertFiles, error) {
	f := &CertFiles{certFile: certFile, keyFile: keyFile, now: time.Now}
	if _, err := f.current(); err != nil {
		return nil, err
	}
	return f, nil
}

// ServerConfig is the TLS of a server presenting f's certificate.
func (f *CertFiles) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.current() },
	}
}

func (f *CertFiles) current() (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.cert != nil && now.Sub(f.readAt) < recheck {
		return f.cert, nil
	}
	c, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	switch {
	case err != nil && f.cert == nil:
		return nil, fmt.Errorf("the serving certificate: %w", err)
	case err == nil:
		f.cert = &c
	}
	f.readAt = now
	return f.cert, nil
}
