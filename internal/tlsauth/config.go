package tlsauth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ragwatch/ragwatch/internal/fielderr"
	"github.com/ragwatch/ragwatch/internal/secret"
)

// The settings of a listener's TLS and bearer tokens live here, with the code that uses them;
// config embeds them (`http.tls`, `http.auth`, `receivers.otlp.*.tls`, ...), as the OTel
// Collector's configtls does.

// TLSServer turns on TLS for a listener; with client_ca_file it requires client certificates
// (mTLS).
type TLSServer struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is "1.2" (default) or "1.3".
	MinVersion string `yaml:"min_version"`
}

// Enabled reports whether TLS is configured.
func (t TLSServer) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Validate returns every problem, naming the key (config's walk adds the path and line).
func (t TLSServer) Validate() error {
	var errs []error
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, fielderr.Invalid("cert_file", "and `key_file` must be set together"))
	}
	if t.ClientCAFile != "" && !t.Enabled() {
		errs = append(errs, fielderr.Invalid("client_ca_file", "needs `cert_file` and `key_file`"))
	}
	switch t.MinVersion {
	case "", "1.2", "1.3":
	default:
		errs = append(errs, fielderr.Invalid("min_version", "must be 1.2 or 1.3, got %q", t.MinVersion))
	}
	return errors.Join(errs...)
}

// BearerAuth requires `Authorization: Bearer <token>`. Tokens come from an environment
// variable or a file (one token per line, so a rotation can hold the old and the new one).
type BearerAuth struct {
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
}

// Enabled reports whether auth is configured.
func (b BearerAuth) Enabled() bool { return b.TokenEnv != "" || b.TokenFile != "" }

// Validate returns the problem, naming the key.
func (b BearerAuth) Validate() error {
	if b.TokenEnv != "" && b.TokenFile != "" {
		return fielderr.Invalid("token_env", "and `token_file` are exclusive: set one")
	}
	return nil
}

// Tokens resolves the configured tokens; the error names the variable or file, never a value.
func (b BearerAuth) Tokens() ([]secret.Secret, error) {
	s, err := secret.Read(b.TokenEnv, b.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("bearer token: %w", err)
	}
	var out []secret.Secret
	for line := range strings.Lines(s.Reveal()) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, secret.Secret(line))
		}
	}
	if len(out) == 0 && b.Enabled() {
		return nil, fmt.Errorf("bearer token: no token in %s%s", b.TokenEnv, b.TokenFile)
	}
	return out, nil
}
