// Package secret holds the types of credentials in ragwatch's settings, which never print:
// Secret (a token, key or password) and URL (an address that may carry one), and Read, which
// resolves a secret from an environment variable or a file. Settings types that live with the
// code that uses them (internal/natsconn, internal/tlsauth) and the config that embeds them
// share these.
package secret

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// A settings field that holds a credential has one of the two types below, and redaction
// follows the type: `GET /api/v1/config`, logs and errors print a config through String,
// MarshalJSON or MarshalYAML, which hide the value, so no list of key names has to be kept in
// step with the config. Code that sends a credential calls Reveal.

// Secret is a credential: a token, key, password or header value. It never prints: String,
// GoString, MarshalJSON and MarshalYAML all give "<redacted>" (an unset secret marshals as
// "", so a dump shows that it is unset).
type Secret string

const redacted = "<redacted>"

func (s Secret) String() string { return redacted }

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return redacted }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.shown()) }

// MarshalYAML implements yaml.Marshaler.
func (s Secret) MarshalYAML() (any, error) { return s.shown(), nil }

func (s Secret) shown() string {
	if s == "" {
		return ""
	}
	return redacted
}

// Reveal returns the secret's value, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// URL is a URL, or a comma-separated list of URLs, that may carry a credential: user
// info (nats://user:pass@host), a token in the path (Slack and webhook URLs) or in the query.
// It prints each URL's scheme and host only ("https://hooks.slack.com/<redacted>",
// "nats://<redacted>@nats:4222"), so a dump shows where it points but not what unlocks it.
// Addresses without a scheme, as NATS and OTLP/gRPC take them, print the same way
// ("<redacted>@nats:4222", "collector:4317").
type URL string

// String gives the URL with its user info, path, query and fragment replaced by "<redacted>";
// a value that does not parse as an absolute URL or host:port is redacted whole, and so is
// any value where a credential may have been split by the parser: an '@' that is not the user
// info separator (a password holding '/', '?' or '#'), or a list mixing URLs with and without
// a scheme (a password holding ',').
func (u URL) String() string {
	if u == "" {
		return ""
	}
	parts := strings.Split(string(u), ",")
	schemes := 0
	for _, p := range parts {
		if strings.Contains(p, "://") {
			schemes++
		}
	}
	if schemes != 0 && schemes != len(parts) {
		return redacted
	}
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactURL(s string) string {
	bare := !strings.Contains(s, "://")
	raw := s
	if bare {
		raw = "//" + s
	}
	v, err := url.Parse(raw)
	if err != nil || v.Host == "" || (!bare && v.Scheme == "") {
		return redacted
	}
	if strings.Contains(s, "@") && (v.User == nil || strings.Contains(v.Path+v.RawQuery+v.Fragment, "@")) {
		return redacted
	}
	if bare && v.User == nil && v.Port() == "" {
		return redacted // "token" alone is no address
	}
	out := ""
	if !bare {
		out = v.Scheme + "://"
	}
	if v.User != nil {
		out += redacted + "@"
	}
	out += v.Host
	if (v.Path != "" && v.Path != "/") || v.RawPath != "" || v.RawQuery != "" || v.Fragment != "" || v.ForceQuery {
		out += "/" + redacted
	}
	return out
}

// GoString hides the credential from %#v.
func (u URL) GoString() string { return u.String() }

// MarshalJSON implements json.Marshaler.
func (u URL) MarshalJSON() ([]byte, error) { return json.Marshal(u.String()) }

// MarshalYAML implements yaml.Marshaler.
func (u URL) MarshalYAML() (any, error) { return u.String(), nil }

// Reveal returns the URL as configured, for the one place that connects to it.
func (u URL) Reveal() string { return string(u) }

// Read resolves a secret from an environment variable name or a file path (one of them;
// both empty gives ""). The error names the variable or file, never the value.
func Read(envName, file string) (Secret, error) {
	switch {
	case envName != "" && file != "":
		return "", fmt.Errorf("set either the env var or the file, not both")
	case envName != "":
		v, ok := os.LookupEnv(envName)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", envName)
		}
		return Secret(v), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read secret file %s: %w", file, err)
		}
		return Secret(strings.TrimSpace(string(b))), nil
	}
	return "", nil
}
