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

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/config"
)

// ServerTLS builds a server TLS config, or nil when TLS is not configured. With a client CA it
// requires and verifies client certificates. protos are the ALPN protocols ("h2" for gRPC).
func ServerTLS(c config.TLSServer, protos ...string) (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
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

// Tokens is a set of accepted bearer tokens. A nil *Tokens accepts every request.
type Tokens struct {
	// sums are SHA-256 digests: comparing fixed-size digests in constant time leaks neither a
	// token's content nor its length.
	sums [][32]byte
}

// NewTokens resolves the configured tokens; nil when auth is off.
func NewTokens(c config.BearerAuth) (*Tokens, error) {
	if !c.Enabled() {
		return nil, nil
	}
	secrets, err := c.Tokens()
	if err != nil {
		return nil, err
	}
	t := &Tokens{}
	for _, s := range secrets {
		t.sums = append(t.sums, sha256.Sum256([]byte(s.Reveal())))
	}
	return t, nil
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
	for _, s := range t.sums {
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

// UnaryInterceptor rejects gRPC calls without a valid token with Unauthenticated.
func (t *Tokens) UnaryInterceptor(onReject func()) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if t != nil {
			md, _ := metadata.FromIncomingContext(ctx)
			var header string
			if v := md.Get("authorization"); len(v) > 0 {
				header = v[0]
			}
			if err := t.Check(header); err != nil {
				if onReject != nil {
					onReject()
				}
				return nil, status.Error(codes.Unauthenticated, err.Error())
			}
		}
		return handler(ctx, req)
	}
}
