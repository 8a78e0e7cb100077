package config

import "github.com/ragwatch/ragwatch/internal/secret"

// A config field that holds a credential has one of the two types below, and redaction
// follows the type: `GET /api/v1/config`, logs and errors print a config through String,
// MarshalJSON or MarshalYAML, which hide the value, so no list of key names has to be kept in
// step with the config. Code that sends a credential calls Reveal. The types live in
// internal/secret, with the settings of internal/natsconn and internal/tlsauth that hold them.

// Secret is a credential: a token, key, password or header value. It never prints.
type Secret = secret.Secret

// SecretURL is a URL, or a comma-separated list of URLs, that may carry a credential; it
// prints each URL's scheme and host only.
type SecretURL = secret.URL

// ReadSecret resolves a secret from an environment variable name or a file path (one of them;
// both empty gives ""). The error names the variable or file, never the value.
func ReadSecret(envName, file string) (Secret, error) { return secret.Read(envName, file) }
