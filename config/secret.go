package config

import (
	"fmt"
	"os"
	"strings"
)

// Secret is a resolved credential. It never prints: String, MarshalJSON and MarshalYAML all
// give "<redacted>", so a config dump, log line or error cannot leak it.
type Secret string

const redacted = "<redacted>"

func (s Secret) String() string { return redacted }

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return redacted }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalYAML implements yaml.Marshaler.
func (s Secret) MarshalYAML() (any, error) { return redacted, nil }

// Reveal returns the secret's value, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// ReadSecret resolves a secret from an environment variable name or a file path (one of them;
// both empty gives ""). The error names the variable or file, never the value.
func ReadSecret(envName, file string) (Secret, error) {
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
