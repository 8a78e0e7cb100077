package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files into a temporary directory.
type PKI struct {
	CAFile, CertFile, KeyFile string          // the CA, and the server's certificate and key
	Client                    tls.Certificate // a client certificate the CA signed (mTLS)
	Pool                      *x509.CertPool  // trusts the CA
}

// NewPKI makes a PKI valid for an hour around now. Each call makes new keys, so two calls give
// two servers whose certificates differ (rotation tests).
func NewPKI(tb testing.TB) PKI {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ragwatch test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	issue := func(cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		return der, key
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	p := PKI{CAFile: write("ca.pem", "CERTIFICATE", caDER), Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	sDER, sKey := issue("ragwatch", x509.ExtKeyUsageServerAuth)
	skb, err := x509.MarshalECPrivateKey(sKey)
	if err != nil {
		tb.Fatal(err)
	}
	p.CertFile, p.KeyFile = write("server.pem", "CERTIFICATE", sDER), write("server-key.pem", "EC PRIVATE KEY", skb)
	cDER, cKey := issue("client", x509.ExtKeyUsageClientAuth)
	p.Client = tls.Certificate{Certificate: [][]byte{cDER}, PrivateKey: cKey}
	return p
}
