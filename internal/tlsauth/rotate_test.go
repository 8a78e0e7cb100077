package tlsauth

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// A token removed from the file stops working once Prepare's commit runs, and a new one works;
// a failed read changes nothing.
func TestTokensRotate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old-token\n")
	tok, err := NewTokens(BearerAuth{TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	write("new-token\n")
	if tok.Check("Bearer old-token") != nil {
		t.Fatal("the file changed, but the set in force must stay until commit")
	}
	commit, err := tok.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	commit()
	if tok.Check("Bearer old-token") == nil {
		t.Error("a revoked token still works after the reload")
	}
	if err := tok.Check("Bearer new-token"); err != nil {
		t.Errorf("the new token: %v", err)
	}
	write("\n")
	if _, err := tok.Prepare(); err == nil {
		t.Error("an empty token file was accepted")
	}
	if err := tok.Check("Bearer new-token"); err != nil {
		t.Errorf("a failed reload changed the set: %v", err)
	}
	var none *Tokens
	if c, err := none.Prepare(); err != nil || c == nil {
		t.Errorf("nil tokens Prepare = %v", err)
	}
}

// A rotated certificate is served from the next handshake on, on a listener that kept running.
func TestServerConfigRotatesCertificate(t *testing.T) {
	first, second := testutil.NewPKI(t), testutil.NewPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	install := func(p testutil.PKI) {
		t.Helper()
		for src, dst := range map[string]string{p.CertFile: certFile, p.KeyFile: keyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)
	sc, err := NewServerConfig(TLSServer{CertFile: certFile, KeyFile: keyFile}, "http/1.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", sc.TLS())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	served := func() []byte {
		t.Helper()
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the served certificate
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	leaf := func(p testutil.PKI) []byte {
		c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	if !bytes.Equal(served(), leaf(first)) {
		t.Fatal("not serving the first certificate")
	}
	install(second)
	commit, err := sc.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	commit()
	if !bytes.Equal(served(), leaf(second)) {
		t.Error("a new handshake after the reload does not see the rotated certificate")
	}
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Prepare(); err == nil {
		t.Error("a broken key was accepted")
	}
	if !bytes.Equal(served(), leaf(second)) {
		t.Error("a failed reload changed the certificate")
	}
	if (*ServerConfig)(nil).TLS() != nil {
		t.Error("nil ServerConfig must give no TLS")
	}
}
