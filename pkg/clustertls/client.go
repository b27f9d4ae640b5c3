// The clients' side: a tls.Config that trusts only the cluster's CA and checks the server's name.

package clustertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Roots returns the PEM CA certificates a client trusts now (a Secret's CACertKey): read at
// every handshake, so that a client follows a new CA without being rebuilt.
type Roots func() ([]byte, error)

// StaticRoots are roots that never change.
func StaticRoots(pem []byte) Roots { return func() ([]byte, error) { return pem, nil } }

// ClientConfig is the TLS of a client of cluster's server serverName (the Service's DNS name:
// clients dial its cluster IP, which no certificate names). The server must present a
// certificate for serverName that one of roots signed; anything else fails the handshake with
// an error that names the cluster, the server name and the cause. There is no fallback to
// plain HTTP, and no way to skip the check.
func ClientConfig(cluster, serverName string, roots Roots) (*tls.Config, error) {
	if serverName == "" {
		return nil, fmt.Errorf("cluster %s: TLS without a server name to verify", cluster)
	}
	if roots == nil {
		return nil, fmt.Errorf("cluster %s: TLS to %s without a CA to verify it with", cluster, serverName)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// The standard verification with fixed RootCAs could not follow a new CA; it is done
		// in VerifyConnection instead, in full: the chain to roots and serverName.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := verify(cs, serverName, roots); err != nil {
				return fmt.Errorf("cluster %s: the certificate of %s: %w", cluster, serverName, err)
			}
			return nil
		},
	}, nil
}

func verify(cs tls.ConnectionState, serverName string, roots Roots) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented none")
	}
	b, err := roots()
	if err != nil {
		return fmt.Errorf("reading the cluster's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("the cluster's CA (%s) holds no PEM certificate", CACertKey)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName: serverName, Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
