package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Threshold SLO decisions.
const (
	DecisionConfidence = "confidence" // the whole 95% interval is past the limit
	DecisionMean       = "mean"       // the weighted mean is past the limit
)

// SLO kinds.
const (
	SLOThreshold = "threshold"
	SLOBurnRate  = "burn_rate"
	// SLOChange detects a change of the mean sequentially (alerts/changepoint): configured by
	// FalseAlarms and MinShift instead of Window and For.
	SLOChange = "change"
)

// Change SLO directions: which way of the mean is bad.
const (
	DirectionDown = "down"
	DirectionUp   = "up"
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
	// MinTurn limits the SLO to records (and their scores) at this turn of a conversation or
	// later; 0 counts every record. Records of unknown turn, and feedback, are left out.
	MinTurn int `yaml:"min_turn"`
	// Variant keeps only the records and scores of this variant (docs/variants.md); "" = all.
	Variant string `yaml:"variant"`

	Objective  float64  `yaml:"objective"`
	AlertBelow *float64 `yaml:"alert_below"`
	AlertAbove *float64 `yaml:"alert_above"`
	// Hysteresis is the margin the point estimate must recover past the threshold to resolve.
	Hysteresis float64 `yaml:"hysteresis"`
	// Decision is what must be past the limit for a threshold SLO to breach: confidence (the
	// whole 95% interval, the default) or mean (the point estimate).
	Decision string `yaml:"decision"`

	GoodWhen  GoodWhen         `yaml:"good_when"` // burn_rate: ">= 0.5", "< 2.5", ...
	Period    model.Duration   `yaml:"period"`    // burn_rate: the error budget's period
	BurnRates []BurnRateWindow `yaml:"burn_rates"`

	// Change SLOs (kind change): the bad Direction (down or up), the smallest change worth
	// paging for (MinShift, in the metric's units), the target rate of false alarms per series
	// (FalseAlarms, "1/30d") and the half-life of the learned reference level (Reference).
	Direction   string         `yaml:"direction"`
	MinShift    float64        `yaml:"min_shift"`
	FalseAlarms FalseAlarmRate `yaml:"false_alarms"`
	Reference   model.Duration `yaml:"reference"`

	Window        model.Duration `yaml:"window"`
	MinSamples    int            `yaml:"min_samples"`
	For           model.Duration `yaml:"for"`
	KeepFiringFor model.Duration `yaml:"keep_firing_for"`

	Severity     string            `yaml:"severity"` // page | ticket | info
	Labels       map[string]string `yaml:"labels"`
	RunbookURL   SecretURL         `yaml:"runbook_url"`   // may carry a token, as every *_url
	DashboardURL SecretURL         `yaml:"dashboard_url"` // (a dashboard's ?auth_token=)
	Notifiers    []string          `yaml:"notifiers"`     // none = all
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
	} else if p.Kind == SLOChange {
		if !has["direction"] {
			p.Direction = DirectionDown
		}
		if !has["min_shift"] {
			p.MinShift = 0.1
		}
		if !has["false_alarms"] {
			p.FalseAlarms = DefaultFalseAlarms()
		}
		if !has["reference"] {
			p.Reference = model.Duration(3 * time.Hour)
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
	if s.MinTurn < 0 || s.MinTurn > 1000 {
		errs = append(errs, Invalid("min_turn", "must be between 0 and 1000, got %d", s.MinTurn))
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
		if s.GoodWhen.given() {
			errs = append(errs, Invalid("good_when", "is only for kind burn_rate"))
		}
		if s.Decision != "" && s.Decision != DecisionConfidence && s.Decision != DecisionMean {
			errs = append(errs, Invalid("decision", "must be confidence or mean, got %q", s.Decision))
		}
	case SLOBurnRate:
		if !(s.Objective > 0 && s.Objective < 1) {
			errs = append(errs, Invalid("objective", "must be between 0 and 1 (exclusive) for a burn_rate SLO, got %v", s.Objective))
		}
		if s.GoodWhen.Op == "" {
			_, err := ParseGoodWhen(s.GoodWhen.invalid)
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
	case SLOChange:
		errs = append(errs, s.validateChange()...)
	default:
		errs = append(errs, Invalid("kind", "must be threshold, burn_rate or change, got %q", s.Kind))
	}
	return joinErrs(errs)
}

// GoodWhen is a burn-rate SLO's `good_when` (">= 0.5", "<250"): which values of the metric are
// good. It is parsed once, when the config loads; the alert engine reads Op and Value.
type GoodWhen struct {
	Op    string // >=, >, <=, <; "" when not given or not valid
	Value float64
	// invalid holds the text as written when it did not parse, for Validate's message (a
	// decoding error would stop the load at the first mistake instead of listing them all).
	invalid string
}

// given reports whether the key was set (valid or not).
func (g GoodWhen) given() bool { return g.Op != "" || g.invalid != "" }

// String is the condition as ragwatch reads it (">= 0.5"); "" when not given.
func (g GoodWhen) String() string {
	if g.Op == "" {
		return g.invalid
	}
	return g.Op + " " + strconv.FormatFloat(g.Value, 'g', -1, 64)
}

// MarshalText implements encoding.TextMarshaler (YAML and JSON output of the config).
func (g GoodWhen) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalYAML parses the condition; text that does not parse is kept for Validate.
func (g *GoodWhen) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*g = GoodWhen{}
	if s == "" {
		return nil
	}
	parsed, err := ParseGoodWhen(s)
	if err != nil {
		g.invalid = s
		return nil
	}
	*g = parsed
	return nil
}

// ParseGoodWhen parses a burn-rate SLO's `good_when` (">= 0.5", "<250").
func ParseGoodWhen(s string) (GoodWhen, error) {
	s = strings.TrimSpace(s)
	for _, o := range []string{">=", "<=", ">", "<"} {
		if rest, ok := strings.CutPrefix(s, o); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return GoodWhen{}, fmt.Errorf("must be an operator (>=, >, <=, <) and a number, got %q", s)
			}
			return GoodWhen{Op: o, Value: v}, nil
		}
	}
	return GoodWhen{}, fmt.Errorf("must be an operator (>=, >, <=, <) and a number, got %q", s)
}

// validateChange checks a change SLO's keys, and that the keys of the windowed kinds are not
// set on it (they would be silently ignored).
func (s SLO) validateChange() []error {
	var errs []error
	if s.Direction != DirectionDown && s.Direction != DirectionUp {
		errs = append(errs, Invalid("direction", "must be down or up, got %q", s.Direction))
	}
	if !(s.MinShift > 0 && s.MinShift < 1) {
		errs = append(errs, Invalid("min_shift", "must be between 0 and 1 (exclusive): the smallest change of the metric worth paging for, got %v", s.MinShift))
	}
	if s.FalseAlarms.Every <= 0 {
		errs = append(errs, Invalid("false_alarms", "must be a count per duration such as 1/30d, got %q", s.FalseAlarms.String()))
	} else if s.FalseAlarms.Every < time.Hour {
		errs = append(errs, Invalid("false_alarms", "must be at most one per hour, got %q", s.FalseAlarms.String()))
	}
	if s.Reference <= 0 {
		errs = append(errs, Invalid("reference", "must be positive"))
	}
	if !validSeverity(s.Severity) {
		errs = append(errs, Invalid("severity", "must be page, ticket or info, got %q", s.Severity))
	}
	if s.MinSamples < 2 {
		errs = append(errs, Invalid("min_samples", "must be at least 2 for a change SLO"))
	}
	for key, set := range map[string]bool{"alert_below": s.AlertBelow != nil, "alert_above": s.AlertAbove != nil,
		"window": s.Window != 0, "good_when": s.GoodWhen.given(), "decision": s.Decision != "", "burn_rates": len(s.BurnRates) > 0} {
		if set {
			errs = append(errs, Invalid(key, "is not for kind change (it sets direction, min_shift and false_alarms)"))
		}
	}
	return errs
}

// FalseAlarmRate is a change SLO's `false_alarms`: "1/30d" is one false alarm per 30 days per
// series; Every is the mean time between them (0 when the text did not parse).
type FalseAlarmRate struct {
	Every time.Duration
	text  string // as written
}

// DefaultFalseAlarms is one false alarm per 30 days per series.
func DefaultFalseAlarms() FalseAlarmRate {
	return FalseAlarmRate{Every: 30 * 24 * time.Hour, text: "1/30d"}
}

// ParseFalseAlarms parses "N/duration" ("1/30d", "2/7d").
func ParseFalseAlarms(text string) (FalseAlarmRate, error) {
	n, d, ok := strings.Cut(strings.TrimSpace(text), "/")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || count < 1 {
		return FalseAlarmRate{text: text}, fmt.Errorf("must be a count per duration such as 1/30d, got %q", text)
	}
	dur, err := model.ParseDuration(strings.TrimSpace(d))
	if err != nil || dur <= 0 {
		return FalseAlarmRate{text: text}, fmt.Errorf("must be a count per duration such as 1/30d, got %q", text)
	}
	return FalseAlarmRate{Every: time.Duration(dur) / time.Duration(count), text: text}, nil
}

// String is the rate as written.
func (f FalseAlarmRate) String() string { return f.text }

// MarshalText implements encoding.TextMarshaler (YAML and JSON output of the config).
func (f FalseAlarmRate) MarshalText() ([]byte, error) { return []byte(f.text), nil }

// UnmarshalYAML parses the rate; text that does not parse is kept for Validate's message.
func (f *FalseAlarmRate) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*f, _ = ParseFalseAlarms(s)
	return nil
}
