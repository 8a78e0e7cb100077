package webhook

import (
	"fmt"

	"github.com/ragwatch/ragwatch/config"
)

// Config is a generic JSON webhook.
type Config struct {
	Name string
	URL  config.Secret
	// Secret keys the HMAC-SHA256 signature; empty sends unsigned.
	Secret config.Secret
}

// NewConfig reads the URL (url or url_env) and the signing secret (secret_env).
func NewConfig(c config.Notifier) (Config, error) {
	u := config.Secret(c.URL.Reveal())
	if c.URLEnv != "" {
		s, err := config.ReadSecret(c.URLEnv, "")
		if err != nil {
			return Config{}, fmt.Errorf("notifier %s: url_env: %w", c.Name, err)
		}
		u = s
	}
	sec, err := config.ReadSecret(c.SecretEnv, "")
	if err != nil {
		return Config{}, fmt.Errorf("notifier %s: secret_env: %w", c.Name, err)
	}
	return Config{Name: c.Name, URL: u, Secret: sec}, nil
}
