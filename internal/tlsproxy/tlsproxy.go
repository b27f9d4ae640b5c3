// Package tlsproxy is slurmrestd's TLS terminator: it serves slurmrestd's port with the
// cluster's serving certificate and passes every request, unchanged, to slurmrestd listening on
// 127.0.0.1 of the same pod. Slurm 24.11's slurmrestd speaks no TLS (its connection manager has
// none; 25.05's needs the tls/s2n plugin, which Debian's packages do not build), and the
// requests it serves carry SlurmUser's JWTs (docs/security.md, "TLS").
package tlsproxy

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"sunk.dev/sunk/pkg/clustertls"
)

// MaxIdleBackendConns bounds the idle connections to slurmrestd the terminator keeps: sunk's
// components hold at most 28 of slurmrestd's connections (docs/architecture.md), users a few.
const MaxIdleBackendConns = 64

// Handler passes every request to backend (http://127.0.0.1:PORT) and its answer back as it
// comes (a long list streams). A backend that does not answer is a 502 saying so; nothing is
// retried, since a request may have been carried out.
func Handler(backend *url.URL, logger *log.Logger) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(backend)
			// slurmrestd sees its own address, as before the terminator stood in front of it.
			r.Out.Host = backend.Host
		},
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        MaxIdleBackendConns,
			MaxIdleConnsPerHost: MaxIdleBackendConns,
			IdleConnTimeout:     90 * time.Second,
		},
		FlushInterval: -1,
		ErrorLog:      logger,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			logger.Printf("%s %s: slurmrestd: %v", r.Method, r.URL.Path, err)
			http.Error(w, "slurmrestd does not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
}

// Server is the terminator on listen, presenting certs, in front of backend.
func Server(listen string, certs *clustertls.CertFiles, backend string, logger *log.Logger) (*http.Server, error) {
	u, err := url.Parse(backend)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("backend %q: want http://host:port (slurmrestd in the same pod)", backend)
	}
	return &http.Server{
		Addr:              listen,
		Handler:           Handler(u, logger),
		TLSConfig:         certs.ServerConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          logger,
	}, nil
}

// Serve runs srv on its address until it is shut down.
func Serve(srv *http.Server) error {
	// The certificate comes from TLSConfig.GetCertificate: no files here.
	if err := srv.ListenAndServeTLS("", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
