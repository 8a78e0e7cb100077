// Package tlsauth holds what the listeners share to be safe next to production: TLS (and mTLS)
// server configs and bearer-token checks for HTTP and gRPC, compared in constant time.
package tlsauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ServerTLS builds a server TLS config, or nil when TLS is not configured. With a client CA it
// requires and verifies client certificates. protos are the ALPN protocols ("h2" for gRPC).
// The files are read once; NewServerConfig gives a config that Prepare can read again.
func ServerTLS(c TLSServer, protos ...string) (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
	return loadServerTLS(c, protos)
}

func loadServerTLS(c TLSServer, protos []string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s: %w", c.CertFile, err)
	}
	t := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: protos}
	if c.MinVersion == "1.3" {
		t.MinVersion = tls.VersionTLS13
	}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client CA %s: %w", c.ClientCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA %s holds no PEM certificate", c.ClientCAFile)
		}
		t.ClientCAs = pool
		t.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return t, nil
}

// ServerConfig is a listener's TLS config whose certificate, key and client CA can be read
// again while the listener runs (certificate rotation): every handshake takes the pair in
// force, so a rotated certificate is served from the next connection on.
type ServerConfig struct {
	c      TLSServer
	protos []string
	cur    atomic.Pointer[tls.Config]
	base   *tls.Config
}

// NewServerConfig reads the configured files; nil when TLS is not configured.
func NewServerConfig(c TLSServer, protos ...string) (*ServerConfig, error) {
	if !c.Enabled() {
		return nil, nil
	}
	first, err := loadServerTLS(c, protos)
	if err != nil {
		return nil, err
	}
	s := &ServerConfig{c: c, protos: protos}
	s.cur.Store(first)
	// The listener's config only hands each handshake the config in force. It keeps the
	// version floor and ALPN protocols itself too: gRPC's credentials read NextProtos from it.
	s.base = &tls.Config{
		MinVersion: first.MinVersion,
		NextProtos: protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load(), nil
		},
	}
	return s, nil
}

// TLS is the config for tls.NewListener or gRPC credentials; nil when s is nil (no TLS).
func (s *ServerConfig) TLS() *tls.Config {
	if s == nil {
		return nil
	}
	return s.base
}

// Prepare reads the files again; commit makes the new pair the one handshakes use. On an error
// nothing changes.
func (s *ServerConfig) Prepare() (commit func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	next, err := loadServerTLS(s.c, s.protos)
	if err != nil {
		return nil, err
	}
	return func() { s.cur.Store(next) }, nil
}

// Tokens is a set of accepted bearer tokens, read from BearerAuth and read again by
// Prepare (token rotation and revocation). A nil *Tokens accepts every request.
type Tokens struct {
	c BearerAuth
	// sums are SHA-256 digests: comparing fixed-size digests in constant time leaks neither a
	// token's content nor its length. Swapped whole, so a check sees the old set or the new.
	sums atomic.Pointer[[][32]byte]
}

// NewTokens resolves the configured tokens; nil when auth is off.
func NewTokens(c BearerAuth) (*Tokens, error) {
	if !c.Enabled() {
		return nil, nil
	}
	sums, err := readTokens(c)
	if err != nil {
		return nil, err
	}
	t := &Tokens{c: c}
	t.sums.Store(&sums)
	return t, nil
}

func readTokens(c BearerAuth) ([][32]byte, error) {
	secrets, err := c.Tokens()
	if err != nil {
		return nil, err
	}
	sums := make([][32]byte, 0, len(secrets))
	for _, s := range secrets {
		sums = append(sums, sha256.Sum256([]byte(s.Reveal())))
	}
	return sums, nil
}

// Prepare reads the token variable or file again; commit makes the new set the one checked,
// so a token removed from the file stops working. On an error nothing changes.
func (t *Tokens) Prepare() (commit func(), err error) {
	if t == nil {
		return func() {}, nil
	}
	sums, err := readTokens(t.c)
	if err != nil {
		return nil, err
	}
	return func() { t.sums.Store(&sums) }, nil
}

// ErrUnauthenticated is returned when a request carries no valid token.
var ErrUnauthenticated = errors.New("missing or invalid bearer token")

// Check validates an Authorization header value ("Bearer <token>").
func (t *Tokens) Check(header string) error {
	if t == nil {
		return nil
	}
	const prefix = "bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return ErrUnauthenticated
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(header[len(prefix):])))
	ok := 0
	for _, s := range *t.sums.Load() {
		ok |= subtle.ConstantTimeCompare(got[:], s[:])
	}
	if ok != 1 {
		return ErrUnauthenticated
	}
	return nil
}

// HTTP wraps h so requests without a valid token get 401. onReject (may be nil) counts them.
func (t *Tokens) HTTP(h http.Handler, onReject func()) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := t.Check(r.Header.Get("Authorization")); err != nil {
			if onReject != nil {
				onReject()
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="ragwatch"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// CheckMetadata validates the authorization entry of gRPC metadata (a tap handle's headers).
func (t *Tokens) CheckMetadata(md metadata.MD) error {
	if t == nil {
		return nil
	}
	var header string
	if v := md.Get("authorization"); len(v) > 0 {
		header = v[0]
	}
	return t.Check(header)
}

// UnaryInterceptor rejects gRPC calls without a valid token with Unauthenticated.
func (t *Tokens) UnaryInterceptor(onReject func()) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if t != nil {
			md, _ := metadata.FromIncomingContext(ctx)
			if err := t.CheckMetadata(md); err != nil {
				if onReject != nil {
					onReject()
				}
				return nil, status.Error(codes.Unauthenticated, err.Error())
			}
		}
		return handler(ctx, req)
	}
}
