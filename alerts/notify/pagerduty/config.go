package pagerduty

import (
	"fmt"

	"github.com/ragwatch/ragwatch/config"
)

// Config is a PagerDuty Events API v2 integration.
type Config struct {
	Name       string
	URL        string        // https://events.pagerduty.com/v2/enqueue
	RoutingKey config.Secret // from routing_key_env
}

// NewConfig reads the routing key from the environment variable named by routing_key_env.
func NewConfig(c config.Notifier) (Config, error) {
	key, err := config.ReadSecret(c.RoutingKeyEnv, "")
	if err != nil {
		return Config{}, fmt.Errorf("notifier %s: routing_key_env: %w", c.Name, err)
	}
	return Config{Name: c.Name, URL: c.URL.Reveal(), RoutingKey: key}, nil
}
