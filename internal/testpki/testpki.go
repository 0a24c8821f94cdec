// Package testpki makes a private CA and the certificates signed by it that tests of
// TLS and mTLS need: a server certificate for 127.0.0.1 and localhost, and client
// certificates. Everything is written as PEM files into a directory the caller owns,
// so a test runs an engine and a broker against them as an operator would. Nothing is
// for production: keys are ECDSA P-256, valid for a day.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a private certificate authority whose certificate is at CertFile.
type CA struct {
	Dir      string
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	serial   int64
}

// Pair is a certificate and its key, as PEM files.
type Pair struct{ CertFile, KeyFile string }

// NewCA makes a CA under dir.
func NewCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "abi-engine test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Dir: dir, CertFile: filepath.Join(dir, "ca.pem"), cert: cert, key: key}
	return ca, writePEM(ca.CertFile, "CERTIFICATE", der)
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost, named name.
func (ca *CA) Server(name string) (Pair, error) {
	return ca.issue(name, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, []string{"localhost"})
}

// Client issues a client certificate with common name cn.
func (ca *CA) Client(cn string) (Pair, error) {
	return ca.issue(cn, x509.ExtKeyUsageClientAuth, nil, nil)
}

// ClientValid issues a client certificate with common name cn valid from notBefore
// until notAfter: an expired one, or one not valid yet.
func (ca *CA) ClientValid(cn string, notBefore, notAfter time.Time) (Pair, error) {
	return ca.issueValid(cn, x509.ExtKeyUsageClientAuth, nil, nil, notBefore, notAfter)
}

func (ca *CA) issue(cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (Pair, error) {
	return ca.issueValid(cn, usage, ips, dns, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

func (ca *CA) issueValid(cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string, notBefore, notAfter time.Time) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial + 1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{CertFile: filepath.Join(ca.Dir, cn+".pem"), KeyFile: filepath.Join(ca.Dir, cn+"-key.pem")}
	if err := writePEM(p.CertFile, "CERTIFICATE", der); err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.KeyFile, "EC PRIVATE KEY", kder)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("testpki: %w", err)
	}
	return nil
}
