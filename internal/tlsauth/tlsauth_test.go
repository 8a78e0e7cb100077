package tlsauth

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMutualTLS(t *testing.T) {
	p := testutil.NewPKI(t)
	tc, err := ServerTLS(TLSServer{CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: p.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "https://" + ln.Addr().String() + "/"

	get := func(certs []tls.Certificate) error {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, Certificates: certs}}}
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := get(nil); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	if err := get([]tls.Certificate{p.Client}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if tc.MinVersion != tls.VersionTLS12 {
		t.Errorf("min version %x", tc.MinVersion)
	}
}

func TestServerTLSErrors(t *testing.T) {
	if tc, err := ServerTLS(TLSServer{}); tc != nil || err != nil {
		t.Fatalf("disabled TLS = %v, %v", tc, err)
	}
	_, err := ServerTLS(TLSServer{CertFile: "/nonexistent.pem", KeyFile: "/nonexistent-key.pem"})
	if err == nil || !strings.Contains(err.Error(), "load TLS certificate /nonexistent.pem") {
		t.Fatalf("err = %v", err)
	}
}

func TestTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("old-token\n  new-token \n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := NewTokens(BearerAuth{TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"Bearer old-token", true}, {"bearer new-token", true}, {"Bearer new-token ", true},
		{"Bearer wrong", false}, {"Bearer ", false}, {"", false}, {"Basic old-token", false}, {"old-token", false},
	} {
		if err := tok.Check(tc.header); (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tc.header, err, tc.ok)
		}
	}
	var none *Tokens
	if none.Check("") != nil {
		t.Error("nil tokens must accept")
	}
	t.Setenv("RW_TEST_TOKEN", "")
	if _, err := NewTokens(BearerAuth{TokenEnv: "RW_TEST_TOKEN"}); err == nil || strings.Contains(err.Error(), "old-token") {
		t.Errorf("empty env: err = %v", err)
	}
}

func TestHTTPAndGRPCGuards(t *testing.T) {
	t.Setenv("RW_TEST_TOKEN", "s3cret")
	tok, err := NewTokens(BearerAuth{TokenEnv: "RW_TEST_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	h := tok.HTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), func() { rejected++ })
	for _, tc := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer nope", 401}, {"Bearer s3cret", 200}} {
		rec := &recorder{header: http.Header{}, code: 200}
		req, _ := http.NewRequest(http.MethodPost, "/api/v1/records", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		h.ServeHTTP(rec, req)
		if rec.code != tc.code {
			t.Errorf("auth %q: code %d, want %d", tc.auth, rec.code, tc.code)
		}
		if tc.code == 401 && rec.header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		if strings.Contains(rec.body.String(), "s3cret") {
			t.Error("the token leaked into the response")
		}
	}
	if rejected != 2 {
		t.Errorf("rejected = %d, want 2", rejected)
	}

	ic := tok.UnaryInterceptor(nil)
	call := func(md metadata.MD) error {
		ctx := metadata.NewIncomingContext(context.Background(), md)
		_, err := ic(ctx, nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) { return "ok", nil })
		return err
	}
	if err := call(metadata.Pairs("authorization", "Bearer s3cret")); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	if err := call(metadata.MD{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("missing token: %v", err)
	}
}

type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(c int)           { r.code = c }
