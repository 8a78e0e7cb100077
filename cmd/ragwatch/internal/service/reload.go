package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts/engine"
	"github.com/ragwatch/ragwatch/config"
)

// What a reload applies. Everything else needs a restart: a reload that changes it applies the
// rest, keeps the running value and names the key in a warning and in the API answer.
var reloadable = map[string]map[string]bool{
	// section → its reloadable keys; nil: the whole section.
	"slos":      nil,
	"notifiers": nil,
	"drift":     {"window": true, "reference_window": true, "detectors": true},
	"sampling":  {"rate": true, "rules": true, "max_per_minute": true, "budget": true},
	"alerting":  {"resolved_retention": true, "trace_url_template": true, "dashboard_url": true},
	"log":       {"level": true},
	"judges":    nil, // the judges of in-process scorers; worker pods need a restart
}

// WithConfigSource sets how Reload reads the config again: `ragwatch run` loads its file and
// applies its command-line overrides. Without it, Reload fails and nothing changes.
func WithConfigSource(load func() (*config.Config, error)) Option {
	return func(o *options) { o.reload.load = load }
}

// WithLogLevel lets Reload set the process logger's level from log.level. Without it (or when
// the level is fixed on the command line) log.level is not reloaded.
func WithLogLevel(v *slog.LevelVar) Option {
	return func(o *options) { o.reload.level = v }
}

type reloadOptions struct {
	load  func() (*config.Config, error)
	level *slog.LevelVar
}

// reloader serialises reloads and exports their outcome the way Prometheus does.
type reloader struct {
	opts    reloadOptions
	now     func() time.Time
	mu      sync.Mutex // serialises Reload; guards App.cfg after New
	ok      prometheus.Gauge
	okTime  prometheus.Gauge
	reloads *prometheus.CounterVec
	logger  *slog.Logger
}

func newReloader(opts reloadOptions, now func() time.Time, reg prometheus.Registerer, logger *slog.Logger) (*reloader, error) {
	r := &reloader{opts: opts, now: now, logger: logger,
		ok: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ragwatch_config_last_reload_successful",
			Help: "Whether the last configuration reload succeeded (1) or was rejected (0)."}),
		okTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ragwatch_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration load (the start counts as one)."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_config_reloads_total",
			Help: "Configuration reloads by outcome (success, failure)."}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{r.ok, r.okTime, r.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register reload metrics: %w", err)
		}
	}
	r.ok.Set(1)
	r.okTime.Set(float64(now().UnixNano()) / 1e9)
	r.reloads.WithLabelValues("success")
	r.reloads.WithLabelValues("failure")
	return r, nil
}

// ReloadError is a rejected reload: the config could not be read, is invalid, or names
// something that cannot be built (e.g. a notifier secret variable that is unset). The running
// config stays in force.
type ReloadError struct {
	// Problems lists every problem, one line each, with its key and line where known.
	Problems []string
}

func (e *ReloadError) Error() string {
	return "config reload rejected: " + strings.Join(e.Problems, "; ")
}

func rejected(err error) *ReloadError {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return &ReloadError{Problems: lines}
}

// ReloadResult is an applied reload.
type ReloadResult struct {
	// RestartRequired names the changed keys that were not applied (they need a restart).
	RestartRequired []string `json:"restart_required"`
}

// Reload reads the config again (SIGHUP, POST /api/v1/reload) and applies what can change
// while running: the bearer-token files and TLS certificates of every listener (read again at
// their running paths, so a rotated certificate is served from the next handshake and a token
// removed from its file stops working when Reload returns), SLOs, drift detectors (and drift windows), notifiers, alerting.trace_url_template,
// alerting.dashboard_url, alerting.resolved_retention, sampling rate, rules, max_per_minute and
// budget, and log.level. Alert window state is kept for every SLO and detector whose window is
// unchanged. Changes to other keys are not applied: they are listed in the result and logged
// as a warning. A config that cannot be read, is invalid or cannot be built is rejected with a
// *ReloadError, logged at error level, and nothing changes.
func (a *App) Reload() (*ReloadResult, error) {
	r := a.reload
	if r == nil {
		return nil, &ReloadError{Problems: []string{"ragwatch worker does not reload its config: restart it"}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := a.reloadLocked()
	if err != nil {
		r.ok.Set(0)
		r.reloads.WithLabelValues("failure").Inc()
		var re *ReloadError
		if !errors.As(err, &re) {
			re = rejected(err)
		}
		r.logger.Error("config reload rejected; the running config stays in force", "problems", re.Problems)
		return nil, re
	}
	r.ok.Set(1)
	r.okTime.Set(float64(r.now().UnixNano()) / 1e9)
	r.reloads.WithLabelValues("success").Inc()
	if len(res.RestartRequired) > 0 {
		r.logger.Warn("config reloaded; changed keys that need a restart keep their running values",
			"restart_required", strings.Join(res.RestartRequired, ", "))
	} else {
		r.logger.Info("config reloaded")
	}
	return res, nil
}

func (a *App) reloadLocked() (*ReloadResult, error) {
	if a.reload.opts.load == nil {
		return nil, &ReloadError{Problems: []string{"no config source to reload from"}}
	}
	next, err := a.reload.opts.load()
	if err != nil {
		return nil, rejected(err)
	}
	if next == nil {
		return nil, &ReloadError{Problems: []string{"the config source returned no config"}}
	}
	old := a.cfg
	restart := keepRestartOnly(old, next)
	if a.reload.opts.level == nil && next.Log.Level != old.Log.Level {
		next.Log.Level = old.Log.Level
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(next.Log.Level)); err != nil {
		return nil, &ReloadError{Problems: []string{fmt.Sprintf("`log.level` must be debug, info, warn or error, got %q", next.Log.Level)}}
	}
	// A budget turned on while worker pods do the scoring needs the subscription that charges
	// it from their published costs, which Start opens.
	if next.Scoring.Workers == 0 && !a.Sampler.Budget.Limited() && next.Sampling.Budget.USDPerDay > 0 {
		next.Sampling.Budget = old.Sampling.Budget
		restart = append(restart, "sampling.budget")
	}

	// Token files and certificates are read before anything is applied: one that cannot be
	// read rejects the reload, and a success never leaves a revoked token working.
	commits := make([]func(), 0, len(a.secretFiles))
	for _, f := range a.secretFiles {
		commit, err := f.prepare()
		if err != nil {
			return nil, &ReloadError{Problems: []string{fmt.Sprintf("%s: %v", f.key, err)}}
		}
		commits = append(commits, commit)
	}

	// Judges: examples files are read and the backends checked before anything is applied.
	commitJudges := func() {}
	if a.Judges != nil {
		c, err := a.Judges.Prepare(next.Judges, next.Scoring)
		if err != nil {
			return nil, &ReloadError{Problems: []string{err.Error()}}
		}
		commitJudges = c
	}

	// Apply. next was validated when it loaded (references between sections included); if the
	// notifiers then cannot be built, the engine goes back to the running config so nothing
	// changes.
	a.Alerts.Update(engine.SectionsOf(next))
	if err := a.Notify.Update(next.Notifiers); err != nil {
		a.Alerts.Update(engine.SectionsOf(old))
		return nil, rejected(err)
	}
	a.Agreement.Update(agreementSettings(next.Alerting))
	a.Sampler.Decider.Update(next.Sampling)
	a.Sampler.Budget.Update(next.Sampling.Budget)
	a.Sampler.Pairs.Update(next.Comparisons)
	if a.reload.opts.level != nil {
		a.reload.opts.level.Set(level)
	}
	for _, commit := range commits {
		commit()
	}
	commitJudges()
	a.cfg = next
	return &ReloadResult{RestartRequired: restart}, nil
}

// keepRestartOnly copies every changed key that needs a restart from old into next, so next is
// the config in force, and returns those keys (YAML paths).
func keepRestartOnly(old, next *config.Config) []string {
	var keys []string
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem()
	t := ov.Type()
	for i := 0; i < t.NumField(); i++ {
		section := yamlKey(t.Field(i))
		if section == "" || reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			continue
		}
		sub, listed := reloadable[section]
		switch {
		case listed && sub == nil: // wholly reloadable
		case listed && ov.Field(i).Kind() == reflect.Struct:
			st := ov.Field(i).Type()
			for j := 0; j < st.NumField(); j++ {
				key := yamlKey(st.Field(j))
				of, nf := ov.Field(i).Field(j), nv.Field(i).Field(j)
				if key == "" || sub[key] || reflect.DeepEqual(of.Interface(), nf.Interface()) {
					continue
				}
				nf.Set(of)
				keys = append(keys, section+"."+key)
			}
		default:
			nv.Field(i).Set(ov.Field(i))
			keys = append(keys, section)
		}
	}
	return keys
}

func yamlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

// Config returns the config in force: the one the App was built with, changed by successful
// reloads (keys that need a restart keep their running values). Do not modify it.
func (a *App) Config() *config.Config {
	if a.reload == nil { // worker mode: the config never changes
		return a.cfg
	}
	a.reload.mu.Lock()
	defer a.reload.mu.Unlock()
	return a.cfg
}

// reloadHandler serves POST /api/v1/reload: 200 with the keys that need a restart, or 400 with
// every problem of a rejected config.
func (a *App) reloadHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		res, err := a.Reload()
		w.Header().Set("Content-Type", "application/json")
		var re *ReloadError
		switch {
		case errors.As(err, &re):
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errors": re.Problems})
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errors": []string{err.Error()}})
		default:
			if res.RestartRequired == nil {
				res.RestartRequired = []string{}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "restart_required": res.RestartRequired})
		}
	})
}

// configInForce serves GET /api/v1/config from the config in force, so the endpoint shows what
// reloads changed (redacted as configHandler does).
func (a *App) configInForce() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		configHandler(a.Config()).ServeHTTP(w, r)
	})
}
