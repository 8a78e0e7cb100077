package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/alerts/slo"
)

// The comparisons (config `comparisons:`) are alerts/comparison's; the engine feeds them the
// values of the metrics they watch, evaluates them with its rules, lists their alerts and
// statuses, and persists their state in its store.

// ComparisonsResponse is the body of GET /api/v1/comparisons.
type ComparisonsResponse struct {
	Comparisons []comparison.Status `json:"comparisons"`
}

// Comparisons lists every comparison's state, by comparison, service, candidate and metric.
func (e *Engine) Comparisons() []comparison.Status {
	return e.cmp.Statuses()
}

// ComparisonsHandler serves GET /api/v1/comparisons.
func (e *Engine) ComparisonsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ComparisonsResponse{Comparisons: e.Comparisons()})
	})
}

// observeVariant feeds the comparisons watching metric (the Set checks the value and weight).
// Called with e.mu held.
func (e *Engine) observeVariant(metric string, svc *serviceLabel, variant string, x, w float64, s slo.Sample, now time.Time) {
	if variant == "" || !e.cmp.Watches(metric) {
		return
	}
	e.cmp.Observe(metric, svc.name, e.labelOf(svc), variant, x, w, s, now)
}

// saveComparisons writes every comparison's experiments (Save), one key each.
func (e *Engine) saveComparisons(ctx context.Context) []error {
	if e.store == nil {
		return nil
	}
	var errs []error
	for name, s := range e.cmp.Snapshot() {
		data, err := json.Marshal(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("encode comparison state %s: %w", name, err))
			continue
		}
		if err := e.store.Save(ctx, comparison.Key(name), data); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// loadComparisons restores what saveComparisons wrote (Load).
func (e *Engine) loadComparisons(ctx context.Context) []error {
	if e.store == nil {
		return nil
	}
	var errs []error
	for _, name := range e.cmp.Names() {
		key := comparison.Key(name)
		data, err := e.store.Load(ctx, key)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var s comparison.Saved
		if err := json.Unmarshal(data, &s); err != nil || s.Version < 1 || s.Version > comparison.SavedVersion {
			e.logger.Warn("dropping unreadable comparison state", "key", key, "error", err)
			continue
		}
		if err := e.cmp.Restore(name, s); err != nil {
			e.logger.Warn("dropping comparison state of another definition", "comparison", name)
		}
	}
	return errs
}
