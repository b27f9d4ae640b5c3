// When the operator renews a cluster's CA or serving certificate: a pure decision on the
// Secret's data, the names clients use and the time.

package clustertls

import (
	"crypto/x509"
	"fmt"
	"slices"
	"time"
)

// Decision says what the TLS Secret needs. A new CA always comes with a new serving
// certificate. RenewAt is when the decision changes by itself (the earlier of the two renewal
// times) when nothing is needed now.
type Decision struct {
	NewCA, NewCert bool
	// Reason says why, for the event: empty when nothing is needed.
	Reason  string
	RenewAt time.Time
}

// Decide renews what is missing, unreadable, past RenewFraction of its life, or no longer
// right: a CA whose key does not match, a serving certificate whose key does not match, that
// the current CA did not sign, or whose names are not names (in any order).
func Decide(data map[string][]byte, names []string, now time.Time) Decision {
	if len(data[CACertKey]) == 0 && len(data[CAKeyKey]) == 0 {
		return Decision{NewCA: true, NewCert: true, Reason: "the cluster has none yet"}
	}
	ca, _, err := parseCA(data[CACertKey], data[CAKeyKey])
	if err != nil {
		return Decision{NewCA: true, NewCert: true, Reason: "no usable CA: " + err.Error()}
	}
	if at := renewAt(ca); !now.Before(at) {
		return Decision{NewCA: true, NewCert: true, Reason: fmt.Sprintf("the CA expires on %s", ca.NotAfter.UTC().Format(time.DateOnly))}
	}
	cert, err := servingCert(data)
	if err != nil {
		return Decision{NewCert: true, Reason: "no usable serving certificate: " + err.Error()}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	// The chain alone, at a time both were valid: expiry is the next rule's.
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: cert.NotBefore.Add(time.Second),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return Decision{NewCert: true, Reason: "the CA does not sign the serving certificate: " + err.Error()}
	}
	if !sameNames(cert.DNSNames, names) {
		return Decision{NewCert: true, Reason: fmt.Sprintf("the serving certificate names %v, clients use %v", cert.DNSNames, names)}
	}
	if at := renewAt(cert); !now.Before(at) {
		return Decision{NewCert: true, Reason: fmt.Sprintf("the serving certificate expires on %s", cert.NotAfter.UTC().Format(time.DateOnly))}
	}
	return Decision{RenewAt: minTime(renewAt(ca), renewAt(cert))}
}

// servingCert is the serving certificate, whose key must be KeyKey.
func servingCert(data map[string][]byte) (*x509.Certificate, error) {
	certs, err := parseCerts(data[CertKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CertKey, err)
	}
	key, err := parseKey(data[KeyKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyKey, err)
	}
	if !matches(certs[0], key) {
		return nil, fmt.Errorf("%s is not the key of %s", KeyKey, CertKey)
	}
	return certs[0], nil
}

// renewAt is RenewFraction into c's life.
func renewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * RenewFraction))
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
