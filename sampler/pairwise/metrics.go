package pairwise

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
)

// MaxComparisons bounds the distinct `comparison` label values; pairs of further comparisons
// are counted as "other". Comparison names come from the config, so the bound only matters
// when a worker pod's config lags behind the sidecars'.
const MaxComparisons = 64

// OtherComparison is the label of comparisons beyond MaxComparisons.
const OtherComparison = "other"

// WinRates counts pair outcomes (ragwatch_pairwise_total) and keeps each comparison's weighted
// win rate with its 95 % interval (ragwatch_pairwise_win_rate and GET /api/v1/pairwise). It
// is safe for concurrent use. The rates are those of the pairs this process judged since it
// started.
type WinRates struct {
	total *prometheus.CounterVec
	rate  *prometheus.GaugeVec

	mu      sync.Mutex // guards tallies
	tallies map[string]*Tally
}

// NewWinRates registers (or finds) the pairwise metrics on reg (nil: unexported).
func NewWinRates(reg prometheus.Registerer) *WinRates {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	return &WinRates{
		total: promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_pairwise_total",
			Help: "Judged shadow pairs by comparison (the configured comparison naming the pair's variants, none otherwise) and outcome from the candidate's side: win, loss, tie, inconsistent (the two position orders disagreed; counted as a tie). Unweighted.",
		}, []string{"comparison", "outcome"})),
		rate: promreg.MustRegister(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ragwatch_pairwise_win_rate",
			Help: "Weighted share of judged pairs the candidate won (ties and inconsistent pairs count half) since start, by comparison; bound=estimate, lower, upper (95 % Wilson interval over the effective sample size).",
		}, []string{"comparison", "bound"})),
		tallies: map[string]*Tally{},
	}
}

// Record counts one judged pair of comparison with weight w (1/p of the pair's sampling
// probability) and updates the comparison's win-rate gauges.
func (r *WinRates) Record(comparison, outcome string, w float64) {
	if comparison == "" {
		comparison = NoComparison
	}
	r.mu.Lock()
	t, ok := r.tallies[comparison]
	if !ok {
		if len(r.tallies) >= MaxComparisons {
			comparison = OtherComparison
			t = r.tallies[comparison]
		}
		if t == nil {
			t = &Tally{}
			r.tallies[comparison] = t
		}
	}
	t.Add(outcome, w)
	rate := t.Rate(comparison)
	r.mu.Unlock()
	r.total.WithLabelValues(comparison, outcome).Inc()
	r.rate.WithLabelValues(comparison, "estimate").Set(rate.Estimate)
	r.rate.WithLabelValues(comparison, "lower").Set(rate.Lower)
	r.rate.WithLabelValues(comparison, "upper").Set(rate.Upper)
}

// Rates returns every comparison's win rate, sorted by name.
func (r *WinRates) Rates() []Rate {
	r.mu.Lock()
	out := make([]Rate, 0, len(r.tallies))
	for name, t := range r.tallies {
		out = append(out, t.Rate(name))
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Comparison < out[j].Comparison })
	return out
}

// Handler serves GET /api/v1/pairwise: {"comparisons": [Rate...]}.
func (r *WinRates) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Comparisons []Rate `json:"comparisons"`
		}{r.Rates()})
	})
}
