package alertmanager

import (
	"fmt"
	"time"

	"github.com/ragwatch/ragwatch/config"
)

// Config is an Alertmanager target.
type Config struct {
	Name string
	// URL is Alertmanager's base URL; alerts go to URL + /api/v2/alerts.
	URL config.Secret
	// RepeatInterval is how often a firing alert is re-sent; EndsAt of a firing alert is set 4
	// intervals ahead so Alertmanager resolves it on its own if ragwatch goes away.
	RepeatInterval time.Duration
}

// NewConfig reads the target from the notifier config (url, or url_env).
func NewConfig(c config.Notifier) (Config, error) {
	u := config.Secret(c.URL.Reveal())
	if c.URLEnv != "" {
		s, err := config.ReadSecret(c.URLEnv, "")
		if err != nil {
			return Config{}, fmt.Errorf("notifier %s: %w", c.Name, err)
		}
		u = s
	}
	return Config{Name: c.Name, URL: u, RepeatInterval: time.Duration(c.RepeatInterval)}, nil
}
