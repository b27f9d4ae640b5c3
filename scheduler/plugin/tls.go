package plugin

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"

	"sunk.dev/sunk/pkg/clustertls"
)

// validateTLS: https URLs need the cluster's CA from exactly one place, a CA needs https URLs,
// and slurmrestd and the node watchers speak the same (a SlurmCluster serves both over TLS or
// neither).
func (a Args) validateTLS() error {
	https := strings.HasPrefix(a.SlurmURL, "https://")
	if a.NodeWatcherURL != "" && strings.HasPrefix(a.NodeWatcherURL, "https://") != https {
		return fmt.Errorf("%s args: slurmURL %q and nodeWatcherURL %q: the cluster serves both over TLS (spec.tls) or neither", Name, a.SlurmURL, a.NodeWatcherURL)
	}
	ca := a.CASecret != "" || a.CAFile != ""
	switch {
	case https && (a.CASecret == "") == (a.CAFile == ""):
		return fmt.Errorf("%s args: https URLs: set exactly one of caSecret (%q) and caFile (%q), the cluster's CA", Name, a.CASecret, a.CAFile)
	case !https && ca:
		return fmt.Errorf("%s args: caSecret or caFile with slurmURL %q: the cluster's CA verifies https URLs only", Name, a.SlurmURL)
	}
	return nil
}

// caRoots reads the cluster's CA from args.CASecret (through the API, a cache of that one
// Secret) or args.CAFile, at each new connection; nil without https.
func caRoots(ctx context.Context, cs kubernetes.Interface, args Args) clustertls.Roots {
	switch {
	case args.CASecret != "":
		s := newSecretCache(ctx, cs, args.Namespace, args.CASecret, "the TLS Secret")
		return func() ([]byte, error) {
			sec, err := s.get()
			if err != nil {
				return nil, err
			}
			return sec.Data[clustertls.CACertKey], nil
		}
	case args.CAFile != "":
		return func() ([]byte, error) { return os.ReadFile(args.CAFile) }
	}
	return nil
}

// clientTLS is the TLS of a client of raw (an args URL): nil for http, else the cluster's CA
// and the URL's host name, checked at every handshake.
func clientTLS(args Args, raw string, roots clustertls.Roots) (*tls.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s args: %q: %w", Name, raw, err)
	}
	if u.Scheme != "https" {
		return nil, nil
	}
	return clustertls.ClientConfig(metricCluster(args), u.Hostname(), roots)
}
