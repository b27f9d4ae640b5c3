// Issuing a cluster's CA and its serving certificate: ECDSA P-256, crypto/x509.

package clustertls

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// backdate covers clocks a little behind the operator's: a certificate that a server's or a
// client's clock sees as not yet valid fails every handshake.
const backdate = 5 * time.Minute

// NewCA is a new CA for cluster (its name in the CA's subject), valid from now for CALifetime:
// the certificate and its key, PEM.
func NewCA(cluster string, now time.Time) (certPEM, keyPEM []byte, err error) {
	return create(&x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"sunk"}, CommonName: "sunk CA of SlurmCluster " + cluster},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, nil, nil)
}

// IssueServing is a serving certificate for names (DNS names), signed by the CA (the first
// certificate of caCertPEM, whose key caKeyPEM is), valid from now for CertLifetime: the
// certificate and its key, PEM.
func IssueServing(caCertPEM, caKeyPEM []byte, names []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	if len(names) == 0 {
		return nil, nil, errors.New("a serving certificate needs at least one name")
	}
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(CertLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	return create(&x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"sunk"}, CommonName: names[0]},
		DNSNames:    append([]string(nil), names...),
		NotBefore:   now.Add(-backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
}

// create signs tmpl for a new P-256 key under a random 127-bit serial number: with parentKey as
// parent's, or, for a CA (parent nil), with the new key itself. It returns the certificate and
// the new key, PEM.
func create(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// Renewed is the Secret data after decision d on data (the Secret's current data, nil for
// none): a new CA when d.NewCA (the one it replaces kept in CACertKey while it is valid), a
// new serving certificate for names when d.NewCert; everything else as it was.
func Renewed(cluster string, data map[string][]byte, d Decision, names []string, now time.Time) (map[string][]byte, error) {
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	if d.NewCA {
		caCert, caKey, err := NewCA(cluster, now)
		if err != nil {
			return nil, err
		}
		bundle := caCert
		if old, err := parseCerts(data[CACertKey]); err == nil && len(old) > 0 && now.Before(old[0].NotAfter) {
			bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: old[0].Raw})...)
		}
		out[CACertKey], out[CAKeyKey] = bundle, caKey
	}
	if d.NewCA || d.NewCert {
		cert, key, err := IssueServing(out[CACertKey], out[CAKeyKey], names, now)
		if err != nil {
			return nil, err
		}
		out[CertKey], out[KeyKey] = cert, key
	}
	return out, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseCerts reads every CERTIFICATE block of b, in order.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// parseKey reads a PKCS #8 ECDSA key.
func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, want ECDSA", k)
	}
	return ec, nil
}

// parseCA is the current CA (the first certificate) and its key, which must match.
func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", CACertKey, err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", CAKeyKey, err)
	}
	if !matches(certs[0], key) {
		return nil, nil, fmt.Errorf("%s is not the key of the first certificate of %s", CAKeyKey, CACertKey)
	}
	return certs[0], key, nil
}

func matches(c *x509.Certificate, key *ecdsa.PrivateKey) bool {
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return false
	}
	a, err1 := x509.MarshalPKIXPublicKey(pub)
	b, err2 := x509.MarshalPKIXPublicKey(&key.PublicKey)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}
