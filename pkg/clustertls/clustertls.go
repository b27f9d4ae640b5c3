// Package clustertls is the one home of the TLS between sunk's components and the servers of a
// SlurmCluster they speak to (slurmrestd behind its terminator, the node watchers): the keys of
// the cluster's TLS Secret, the certificates the operator issues into it and when it renews
// them (issue.go, renew.go), the clients' verification against the cluster's CA (client.go)
// and the servers' certificate, read again when kubelet refreshes the Secret's volume
// (server.go). Standard library only: sunk-scheduler's module imports it too.
package clustertls

import "time"

// The keys of a cluster's TLS Secret (clusternames.Names.TLSSecret). The servers' pods mount
// CertKey and KeyKey alone; the clients read CACertKey; CAKeyKey stays in the Secret, for the
// operator's renewals.
const (
	// CACertKey holds the CA certificates clients trust, PEM, the current CA first. After a
	// new CA, the one it replaces stays until it expires: a server may still present a
	// certificate it signed until kubelet refreshes its volume.
	CACertKey = "ca.crt"
	// CAKeyKey holds the current CA's private key (PKCS #8, PEM).
	CAKeyKey = "ca.key"
	// CertKey and KeyKey are the serving certificate and its key (kubernetes.io/tls's names).
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
)

// Lifetimes of what the operator issues; each is renewed past RenewFraction of its life.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 365 * 24 * time.Hour
	// RenewFraction of a certificate's life: a 1-year certificate is renewed after 8 months,
	// leaving 4 for an operator that was down or a Secret volume slow to refresh.
	RenewFraction = 2.0 / 3.0
)
