package app

import (
	"crypto/tls"
	"fmt"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/secure"
)

// security is the resolved TLS configs and bearer tokens of the listeners.
type security struct {
	grpcTLS, otlpHTTPTLS, httpTLS          *tls.Config
	grpcTokens, otlpHTTPTokens, httpTokens *secure.Tokens
}

func buildSecurity(cfg *config.Config) (security, error) {
	var s security
	var err error
	o := cfg.Receivers.OTLP
	if s.grpcTLS, err = secure.ServerTLS(o.GRPC.TLS, "h2"); err != nil {
		return s, fmt.Errorf("receivers.otlp.grpc.tls: %w", err)
	}
	if s.otlpHTTPTLS, err = secure.ServerTLS(o.HTTP.TLS, "h2", "http/1.1"); err != nil {
		return s, fmt.Errorf("receivers.otlp.http.tls: %w", err)
	}
	if s.httpTLS, err = secure.ServerTLS(cfg.HTTP.TLS, "h2", "http/1.1"); err != nil {
		return s, fmt.Errorf("http.tls: %w", err)
	}
	if s.grpcTokens, err = secure.NewTokens(o.GRPC.Auth); err != nil {
		return s, fmt.Errorf("receivers.otlp.grpc.auth: %w", err)
	}
	if s.otlpHTTPTokens, err = secure.NewTokens(o.HTTP.Auth); err != nil {
		return s, fmt.Errorf("receivers.otlp.http.auth: %w", err)
	}
	if s.httpTokens, err = secure.NewTokens(cfg.HTTP.Auth); err != nil {
		return s, fmt.Errorf("http.auth: %w", err)
	}
	return s, nil
}
