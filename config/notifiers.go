package config

import (
	"net/url"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Notifier types.
const (
	NotifierAlertmanager = "alertmanager"
	NotifierPagerDuty    = "pagerduty"
	NotifierSlack        = "slack"
	NotifierWebhook      = "webhook"
)

// Notifier is one alert delivery target. Its credentials are best named by environment
// variable (url_env, secret_env, routing_key_env) and read when the notifier is built; a URL
// written in the file is a SecretURL and prints redacted.
type Notifier struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"` // alertmanager | pagerduty | slack | webhook
	// URL is where alerts go. Slack and webhook URLs embed their token, so it is a SecretURL.
	URL SecretURL `yaml:"url"`
	// URLEnv names a variable holding the URL, for URLs that are credentials (Slack webhooks).
	URLEnv        string `yaml:"url_env"`
	SecretEnv     string `yaml:"secret_env"`      // webhook: HMAC-SHA256 key
	RoutingKeyEnv string `yaml:"routing_key_env"` // pagerduty: integration key

	Timeout        time.Duration  `yaml:"timeout"`
	RepeatInterval model.Duration `yaml:"repeat_interval"` // 0 = only on changes
	RatePerMinute  float64        `yaml:"rate_per_minute"`
	MaxRetries     int            `yaml:"max_retries"`
	RetryBackoff   time.Duration  `yaml:"retry_backoff"`
}

// UnmarshalYAML fills the defaults of the notifier's type.
func (n *Notifier) UnmarshalYAML(node *yaml.Node) error {
	type plain Notifier
	p := plain{Timeout: 10 * time.Second, RatePerMinute: 60, MaxRetries: 5, RetryBackoff: time.Second}
	if err := node.Decode(&p); err != nil {
		return err
	}
	has := mappingKeys(node)
	if !has["repeat_interval"] {
		switch p.Type {
		case NotifierAlertmanager:
			p.RepeatInterval = model.Duration(time.Minute)
		case NotifierSlack, NotifierWebhook:
			p.RepeatInterval = model.Duration(4 * time.Hour)
		}
	}
	if p.Type == NotifierPagerDuty && !has["url"] {
		p.URL = "https://events.pagerduty.com/v2/enqueue"
	}
	*n = Notifier(p)
	return nil
}

// Validate implements Validator.
func (n Notifier) Validate() error {
	var errs []error
	if !nameRE.MatchString(n.Name) {
		errs = append(errs, Invalid("name", "must be 1-64 letters, digits, '_', '.' or '-', got %q", n.Name))
	}
	switch n.Type {
	case NotifierAlertmanager, NotifierWebhook, NotifierSlack:
		if (n.URL == "") == (n.URLEnv == "") {
			errs = append(errs, Invalid("url", "set exactly one of url or url_env"))
		}
	case NotifierPagerDuty:
		if n.RoutingKeyEnv == "" {
			errs = append(errs, Invalid("routing_key_env", "is required for type pagerduty"))
		}
	default:
		errs = append(errs, Invalid("type", "must be alertmanager, pagerduty, slack or webhook, got %q", n.Type))
	}
	if n.URL != "" {
		if u, err := url.Parse(n.URL.Reveal()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, Invalid("url", "must be an http(s) URL"))
		}
	}
	if n.SecretEnv != "" && n.Type != NotifierWebhook {
		errs = append(errs, Invalid("secret_env", "is only for type webhook"))
	}
	if n.RoutingKeyEnv != "" && n.Type != NotifierPagerDuty {
		errs = append(errs, Invalid("routing_key_env", "is only for type pagerduty"))
	}
	if n.Timeout <= 0 {
		errs = append(errs, Invalid("timeout", "must be positive"))
	}
	if n.RepeatInterval < 0 {
		errs = append(errs, Invalid("repeat_interval", "must not be negative"))
	}
	if !(n.RatePerMinute > 0) {
		errs = append(errs, Invalid("rate_per_minute", "must be positive"))
	}
	if n.MaxRetries < 0 {
		errs = append(errs, Invalid("max_retries", "must not be negative"))
	}
	if n.RetryBackoff <= 0 {
		errs = append(errs, Invalid("retry_backoff", "must be positive"))
	}
	return joinErrs(errs)
}
