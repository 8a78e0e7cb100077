package slack

import (
	"fmt"

	"github.com/ragwatch/ragwatch/config"
)

// Config is a Slack incoming webhook. The URL is itself a credential.
type Config struct {
	Name string
	URL  config.Secret
}

// NewConfig reads the webhook URL from url or, preferably, the variable named by url_env.
func NewConfig(c config.Notifier) (Config, error) {
	u := config.Secret(c.URL.Reveal())
	if c.URLEnv != "" {
		s, err := config.ReadSecret(c.URLEnv, "")
		if err != nil {
			return Config{}, fmt.Errorf("notifier %s: url_env: %w", c.Name, err)
		}
		u = s
	}
	return Config{Name: c.Name, URL: u}, nil
}
