package config

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// SLO kinds.
const (
	SLOThreshold = "threshold"
	SLOBurnRate  = "burn_rate"
)

// Drift methods.
const (
	DriftPSI = "psi"
	DriftKS  = "ks"
	DriftJS  = "js"
)

// Notifier types.
const (
	NotifierAlertmanager = "alertmanager"
	NotifierPagerDuty    = "pagerduty"
	NotifierSlack        = "slack"
	NotifierWebhook      = "webhook"
)

// SLO is one service-level objective on a signal or eval metric (docs/alerts.md).
//
// A threshold SLO fires when the 95% confidence interval of the weighted (1/p) mean over Window
// lies entirely on the wrong side of AlertBelow/AlertAbove for For. A burn-rate SLO classifies
// each sample as good or bad with GoodWhen and alerts on the multi-window burn rates of BurnRates.
type SLO struct {
	Name    string `yaml:"name"`
	Kind    string `yaml:"kind"` // threshold | burn_rate
	Metric  string `yaml:"metric"`
	Service string `yaml:"service"` // only this service; "" = each service separately

	Objective  float64  `yaml:"objective"`
	AlertBelow *float64 `yaml:"alert_below"`
	AlertAbove *float64 `yaml:"alert_above"`
	// Hysteresis is the margin the point estimate must recover past the threshold to resolve.
	Hysteresis float64 `yaml:"hysteresis"`

	GoodWhen  string           `yaml:"good_when"` // burn_rate: ">= 0.5", "< 2.5", ...
	Period    model.Duration   `yaml:"period"`    // burn_rate: the error budget's period
	BurnRates []BurnRateWindow `yaml:"burn_rates"`

	Window        model.Duration `yaml:"window"`
	MinSamples    int            `yaml:"min_samples"`
	For           model.Duration `yaml:"for"`
	KeepFiringFor model.Duration `yaml:"keep_firing_for"`

	Severity     string            `yaml:"severity"` // page | ticket | info
	Labels       map[string]string `yaml:"labels"`
	RunbookURL   string            `yaml:"runbook_url"`
	DashboardURL string            `yaml:"dashboard_url"`
	Notifiers    []string          `yaml:"notifiers"` // none = all
}

// BurnRateWindow is one alert of the multi-window multi-burn-rate scheme: it fires when the
// error budget burns faster than Factor over both LongWindow and ShortWindow.
type BurnRateWindow struct {
	Severity    string         `yaml:"severity"`
	LongWindow  model.Duration `yaml:"long_window"`
	ShortWindow model.Duration `yaml:"short_window"`
	Factor      float64        `yaml:"factor"`
}

// DefaultBurnRates are the SRE workbook's alerts for a 30-day budget.
func DefaultBurnRates() []BurnRateWindow {
	return []BurnRateWindow{
		{Severity: "page", LongWindow: model.Duration(time.Hour), ShortWindow: model.Duration(5 * time.Minute), Factor: 14.4},
		{Severity: "page", LongWindow: model.Duration(6 * time.Hour), ShortWindow: model.Duration(30 * time.Minute), Factor: 6},
		{Severity: "ticket", LongWindow: model.Duration(72 * time.Hour), ShortWindow: model.Duration(6 * time.Hour), Factor: 1},
	}
}

// UnmarshalYAML fills defaults before decoding.
func (s *SLO) UnmarshalYAML(n *yaml.Node) error {
	type plain SLO
	p := plain{Kind: SLOThreshold, MinSamples: 30, Severity: "page"}
	if err := n.Decode(&p); err != nil {
		return err
	}
	has := mappingKeys(n)
	if p.Kind == SLOBurnRate {
		if !has["window"] {
			p.Window = 0
		}
		if !has["period"] {
			p.Period = model.Duration(30 * 24 * time.Hour)
		}
		if !has["burn_rates"] {
			p.BurnRates = DefaultBurnRates()
		}
	} else if !has["window"] {
		p.Window = model.Duration(15 * time.Minute)
	}
	if !has["keep_firing_for"] {
		p.KeepFiringFor = max(p.For, model.Duration(time.Minute))
	}
	*s = SLO(p)
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

var reservedLabels = map[string]bool{"alertname": true, "slo": true, "service": true, "severity": true, "detector": true}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate implements Validator.
func (s SLO) Validate() error {
	var errs []error
	if !nameRE.MatchString(s.Name) {
		errs = append(errs, Invalid("name", "must be 1-64 letters, digits, '_', '.' or '-', got %q", s.Name))
	}
	if s.Metric == "" {
		errs = append(errs, Invalid("metric", "is required"))
	}
	if s.MinSamples < 1 {
		errs = append(errs, Invalid("min_samples", "must be at least 1"))
	}
	if s.For < 0 {
		errs = append(errs, Invalid("for", "must not be negative"))
	}
	if s.KeepFiringFor < 0 {
		errs = append(errs, Invalid("keep_firing_for", "must not be negative"))
	}
	if s.Hysteresis < 0 || math.IsNaN(s.Hysteresis) {
		errs = append(errs, Invalid("hysteresis", "must not be negative"))
	}
	errs = append(errs, checkLabels(s.Labels)...)
	errs = append(errs, checkAlertURL("runbook_url", s.RunbookURL)...)
	errs = append(errs, checkAlertURL("dashboard_url", s.DashboardURL)...)
	switch s.Kind {
	case SLOThreshold:
		if s.Window <= 0 {
			errs = append(errs, Invalid("window", "must be positive"))
		}
		if (s.AlertBelow == nil) == (s.AlertAbove == nil) {
			errs = append(errs, Invalid("alert_below", "set exactly one of alert_below or alert_above"))
		}
		if !validSeverity(s.Severity) {
			errs = append(errs, Invalid("severity", "must be page, ticket or info, got %q", s.Severity))
		}
		if s.GoodWhen != "" {
			errs = append(errs, Invalid("good_when", "is only for kind burn_rate"))
		}
	case SLOBurnRate:
		if !(s.Objective > 0 && s.Objective < 1) {
			errs = append(errs, Invalid("objective", "must be between 0 and 1 (exclusive) for a burn_rate SLO, got %v", s.Objective))
		}
		if _, _, err := ParseGoodWhen(s.GoodWhen); err != nil {
			errs = append(errs, Invalid("good_when", "%v", err))
		}
		if s.AlertBelow != nil || s.AlertAbove != nil {
			errs = append(errs, Invalid("alert_below", "alert_below/alert_above are only for kind threshold"))
		}
		if s.Period <= 0 {
			errs = append(errs, Invalid("period", "must be positive"))
		}
		if len(s.BurnRates) == 0 {
			errs = append(errs, Invalid("burn_rates", "needs at least one window pair"))
		}
		for i, b := range s.BurnRates {
			k := fmt.Sprintf("burn_rates[%d]", i)
			if !validSeverity(b.Severity) {
				errs = append(errs, Invalid(k+".severity", "must be page, ticket or info, got %q", b.Severity))
			}
			if b.ShortWindow <= 0 || b.LongWindow <= 0 {
				errs = append(errs, Invalid(k, "`long_window` and `short_window` must be positive"))
			} else if b.ShortWindow >= b.LongWindow {
				errs = append(errs, Invalid(k+".short_window", "must be shorter than long_window (%s)", b.LongWindow))
			}
			if b.LongWindow > s.Period && s.Period > 0 {
				errs = append(errs, Invalid(k+".long_window", "must not exceed period (%s)", s.Period))
			}
			if !(b.Factor > 0) {
				errs = append(errs, Invalid(k+".factor", "must be positive"))
			}
		}
	default:
		errs = append(errs, Invalid("kind", "must be threshold or burn_rate, got %q", s.Kind))
	}
	return joinErrs(errs)
}

// ParseGoodWhen parses a burn-rate SLO's `good_when` (">= 0.5", "<250").
func ParseGoodWhen(s string) (op string, v float64, err error) {
	s = strings.TrimSpace(s)
	for _, o := range []string{">=", "<=", ">", "<"} {
		if rest, ok := strings.CutPrefix(s, o); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return "", 0, fmt.Errorf("must be an operator (>=, >, <=, <) and a number, got %q", s)
			}
			return o, v, nil
		}
	}
	return "", 0, fmt.Errorf("must be an operator (>=, >, <=, <) and a number, got %q", s)
}

// Drift configures the drift detectors: each compares a signal's distribution over the current
// Window with a reference, either the trailing ReferenceWindow before it or a pinned baseline
// written by `ragwatch baseline` (BaselineFile).
type Drift struct {
	Window          model.Duration  `yaml:"window"`
	ReferenceWindow model.Duration  `yaml:"reference_window"`
	BaselineFile    string          `yaml:"baseline_file"` // set: the reference is this snapshot
	Detectors       []DriftDetector `yaml:"detectors"`
}

// DriftDetector compares one signal's distribution with its reference by one method.
type DriftDetector struct {
	Name                string            `yaml:"name"`
	Signal              string            `yaml:"signal"`
	Service             string            `yaml:"service"`
	Method              string            `yaml:"method"`    // psi | ks | js
	Threshold           float64           `yaml:"threshold"` // alert above
	Buckets             []float64         `yaml:"buckets"`   // bin edges; default per signal
	MinSamples          int               `yaml:"min_samples"`
	MinReferenceSamples int               `yaml:"min_reference_samples"`
	For                 model.Duration    `yaml:"for"`
	KeepFiringFor       model.Duration    `yaml:"keep_firing_for"`
	Severity            string            `yaml:"severity"`
	Labels              map[string]string `yaml:"labels"`
	RunbookURL          string            `yaml:"runbook_url"`
	DashboardURL        string            `yaml:"dashboard_url"`
	Notifiers           []string          `yaml:"notifiers"`
}

// DefaultDriftThreshold is the alert level of each method: PSI 0.2 is the usual "significant
// shift"; KS is the largest CDF gap; JS is in bits (0..1).
func DefaultDriftThreshold(method string) float64 {
	switch method {
	case DriftKS:
		return 0.1
	case DriftJS:
		return 0.1
	}
	return 0.2
}

func defaultDetector(name, signal string) DriftDetector {
	return DriftDetector{
		Name: name, Signal: signal, Method: DriftPSI, Threshold: 0.2,
		MinSamples: 100, MinReferenceSamples: 200,
		For: model.Duration(5 * time.Minute), KeepFiringFor: model.Duration(5 * time.Minute),
		Severity: "ticket",
	}
}

func defaultDrift() Drift {
	return Drift{
		Window:          model.Duration(time.Hour),
		ReferenceWindow: model.Duration(24 * time.Hour),
		Detectors: []DriftDetector{
			defaultDetector("retrieval-score-psi", "retrieval_score"),
			defaultDetector("retrieved-documents-psi", "retrieved_documents"),
			defaultDetector("answer-tokens-psi", "answer_tokens"),
		},
	}
}

// UnmarshalYAML fills defaults before decoding.
func (d *DriftDetector) UnmarshalYAML(n *yaml.Node) error {
	type plain DriftDetector
	p := plain(defaultDetector("", ""))
	if err := n.Decode(&p); err != nil {
		return err
	}
	has := mappingKeys(n)
	if !has["threshold"] {
		p.Threshold = DefaultDriftThreshold(p.Method)
	}
	if !has["keep_firing_for"] && has["for"] {
		p.KeepFiringFor = max(p.For, model.Duration(time.Minute))
	}
	*d = DriftDetector(p)
	return nil
}

// Validate implements Validator.
func (d Drift) Validate() error {
	var errs []error
	if d.Window <= 0 {
		errs = append(errs, Invalid("window", "must be positive"))
	}
	if d.ReferenceWindow < d.Window {
		errs = append(errs, Invalid("reference_window", "must be at least `window` (%s)", d.Window))
	}
	seen := map[string]bool{}
	for i, det := range d.Detectors {
		if seen[det.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("detectors[%d].name", i), "%q is used twice", det.Name))
		}
		seen[det.Name] = true
	}
	return joinErrs(errs)
}

// Validate implements Validator.
func (d DriftDetector) Validate() error {
	var errs []error
	if !nameRE.MatchString(d.Name) {
		errs = append(errs, Invalid("name", "must be 1-64 letters, digits, '_', '.' or '-', got %q", d.Name))
	}
	if d.Signal == "" {
		errs = append(errs, Invalid("signal", "is required"))
	}
	switch d.Method {
	case DriftPSI, DriftKS, DriftJS:
	default:
		errs = append(errs, Invalid("method", "must be psi, ks or js, got %q", d.Method))
	}
	if !(d.Threshold > 0) {
		errs = append(errs, Invalid("threshold", "must be positive"))
	}
	for i := 1; i < len(d.Buckets); i++ {
		if !(d.Buckets[i] > d.Buckets[i-1]) {
			errs = append(errs, Invalid("buckets", "must be strictly increasing"))
			break
		}
	}
	if len(d.Buckets) > 200 {
		errs = append(errs, Invalid("buckets", "must have at most 200 edges"))
	}
	if d.MinSamples < 1 {
		errs = append(errs, Invalid("min_samples", "must be at least 1"))
	}
	if d.MinReferenceSamples < 1 {
		errs = append(errs, Invalid("min_reference_samples", "must be at least 1"))
	}
	if d.For < 0 || d.KeepFiringFor < 0 {
		errs = append(errs, Invalid("for", "`for` and `keep_firing_for` must not be negative"))
	}
	if !validSeverity(d.Severity) {
		errs = append(errs, Invalid("severity", "must be page, ticket or info, got %q", d.Severity))
	}
	errs = append(errs, checkLabels(d.Labels)...)
	errs = append(errs, checkAlertURL("runbook_url", d.RunbookURL)...)
	errs = append(errs, checkAlertURL("dashboard_url", d.DashboardURL)...)
	return joinErrs(errs)
}

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

// Alerting holds engine-wide alert settings.
type Alerting struct {
	EvaluationInterval time.Duration `yaml:"evaluation_interval"`
	// ResolvedRetention is how long /api/v1/alerts lists a resolved alert.
	ResolvedRetention model.Duration `yaml:"resolved_retention"`
	// TraceURLTemplate links evidence to a trace viewer; {trace_id} and {service} are replaced
	// (query-escaped), e.g. http://grafana:3000/explore?...{trace_id}...
	TraceURLTemplate string `yaml:"trace_url_template"`
	// DashboardURL is the default `dashboard_url` annotation.
	DashboardURL string `yaml:"dashboard_url"`
	// StateBucket is the JetStream KV bucket holding window state across restarts; "" keeps
	// state in memory only.
	StateBucket  string        `yaml:"state_bucket"`
	SaveInterval time.Duration `yaml:"save_interval"`
	// StateMaxBytes caps the state bucket (one small key per SLO and detector).
	StateMaxBytes int64 `yaml:"state_max_bytes"`
}

func defaultAlerting() Alerting {
	return Alerting{
		EvaluationInterval: 15 * time.Second,
		ResolvedRetention:  model.Duration(24 * time.Hour),
		StateBucket:        "ragwatch_alerts",
		SaveInterval:       30 * time.Second,
		StateMaxBytes:      8 << 20,
	}
}

var bucketRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate implements Validator.
func (a Alerting) Validate() error {
	var errs []error
	if a.EvaluationInterval < time.Second {
		errs = append(errs, Invalid("evaluation_interval", "must be at least 1s"))
	}
	if a.ResolvedRetention < 0 {
		errs = append(errs, Invalid("resolved_retention", "must not be negative"))
	}
	if a.TraceURLTemplate != "" && !strings.Contains(a.TraceURLTemplate, "{trace_id}") {
		errs = append(errs, Invalid("trace_url_template", "must contain {trace_id}"))
	}
	errs = append(errs, checkAlertURL("dashboard_url", a.DashboardURL)...)
	if a.StateBucket != "" && !bucketRE.MatchString(a.StateBucket) {
		errs = append(errs, Invalid("state_bucket", "must be letters, digits, '_' or '-', got %q", a.StateBucket))
	}
	if a.SaveInterval <= 0 {
		errs = append(errs, Invalid("save_interval", "must be positive"))
	}
	if a.StateBucket != "" && a.StateMaxBytes <= 0 {
		errs = append(errs, Invalid("state_max_bytes", "must be positive"))
	}
	return joinErrs(errs)
}

// CheckAlertRefs checks what no single section can: SLO and detector names are unique and
// every `notifiers:` entry names a configured notifier. The alert engine calls it when built.
func CheckAlertRefs(c *Config) error {
	var errs []error
	names := map[string]bool{}
	for i, n := range c.Notifiers {
		if names[n.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("notifiers[%d].name", i), "%q is used twice", n.Name))
		}
		names[n.Name] = true
	}
	check := func(prefix string, refs []string) {
		for j, r := range refs {
			if !names[r] {
				errs = append(errs, Invalid(fmt.Sprintf("%s.notifiers[%d]", prefix, j), "names no configured notifier: %q", r))
			}
		}
	}
	slos := map[string]bool{}
	for i, s := range c.SLOs {
		if slos[s.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("slos[%d].name", i), "%q is used twice", s.Name))
		}
		slos[s.Name] = true
		check(fmt.Sprintf("slos[%d]", i), s.Notifiers)
	}
	for i, d := range c.Drift.Detectors {
		check(fmt.Sprintf("drift.detectors[%d]", i), d.Notifiers)
	}
	return joinErrs(errs)
}

func validSeverity(s string) bool { return s == "page" || s == "ticket" || s == "info" }

func checkLabels(l map[string]string) []error {
	var errs []error
	for k := range l {
		if reservedLabels[k] {
			errs = append(errs, Invalid("labels."+k, "is set by ragwatch and cannot be overridden"))
		} else if !labelNameRE.MatchString(k) {
			errs = append(errs, Invalid("labels."+k, "is not a valid Prometheus label name"))
		}
	}
	return errs
}

func checkAlertURL(key, s string) []error {
	if s == "" {
		return nil
	}
	if u, err := url.Parse(s); err != nil || u.Scheme == "" || u.Host == "" {
		return []error{Invalid(key, "must be an absolute URL")}
	}
	return nil
}

func mappingKeys(n *yaml.Node) map[string]bool {
	out := map[string]bool{}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = true
		}
	}
	return out
}
