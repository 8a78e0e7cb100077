package decide

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/score"
)

var _ score.Consumer = (*Budget)(nil)

// Budget tracks what scoring spent in the current UTC day against sampling.budget.usd_per_day.
// Workers report spending with Spend (or Charge); the Decider asks Allow before sampling. It
// resets at 00:00 UTC. It is safe for concurrent use.
type Budget struct {
	now    func() time.Time
	logger *slog.Logger

	mu        sync.Mutex // guards the fields below
	perDay    float64
	reserve   float64
	prices    map[string]config.ModelPrice
	day       time.Time // midnight UTC of the day being counted
	spent     float64
	exhausted bool // the one log line for the day was written
}

// NewBudget returns the budget for cfg. now may be nil (time.Now). It registers
// ragwatch_sampling_budget_remaining_usd (+Inf without a budget).
func NewBudget(cfg config.SamplingBudget, now func() time.Time, reg prometheus.Registerer, logger *slog.Logger) *Budget {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	b := &Budget{perDay: cfg.USDPerDay, reserve: cfg.FeedbackReserveUSD, prices: cfg.Prices, now: now, logger: logger}
	if reg != nil {
		promreg.MustRegister(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ragwatch_sampling_budget_remaining_usd",
			Help: "Scoring budget left for the current UTC day in US dollars (+Inf without a budget).",
		}, b.Remaining))
	}
	return b
}

// roll starts a new day when the UTC date changed. Callers hold mu.
func (b *Budget) roll() {
	today := b.now().UTC().Truncate(24 * time.Hour)
	if !today.Equal(b.day) {
		b.day, b.spent, b.exhausted = today, 0, false
	}
}

// Allow reports whether another sample may be taken today. Feedback-triggered samples may use
// the feedback reserve; others stop at usd_per_day - feedback_reserve_usd.
func (b *Budget) Allow(feedback bool) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.perDay <= 0 {
		return true
	}
	b.roll()
	limit := b.perDay
	if !feedback {
		limit -= b.reserve
	}
	return b.spent < limit
}

// Limited reports whether a daily budget is configured.
func (b *Budget) Limited() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.perDay > 0
}

// Price returns the cost of a scorer call from the price table, and whether the model is in it.
func (b *Budget) Price(model string, inputTokens, outputTokens int64) (float64, bool) {
	if b == nil {
		return 0, false
	}
	b.mu.Lock()
	p, ok := b.prices[model]
	b.mu.Unlock()
	if !ok {
		return 0, false
	}
	return (float64(inputTokens)*p.InputPerMTok + float64(outputTokens)*p.OutputPerMTok) / 1e6, true
}

// Charge prices a scorer call (the price table first, else the cost the scorer reported),
// spends it and returns the cost.
func (b *Budget) Charge(model string, inputTokens, outputTokens int64, reportedUSD float64) float64 {
	usd, ok := b.Price(model, inputTokens, outputTokens)
	if !ok {
		usd = reportedUSD
	}
	b.Spend(usd)
	return usd
}

// Spend adds usd to today's spending and logs once per day when the budget runs out.
func (b *Budget) Spend(usd float64) {
	if b == nil || !(usd > 0) || math.IsInf(usd, 0) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll()
	b.spent += usd
	if b.perDay > 0 && !b.exhausted && b.spent >= b.perDay-b.reserve {
		b.exhausted = true
		b.logger.Warn("scoring budget spent; sampling paused until 00:00 UTC",
			"usd_per_day", b.perDay, "feedback_reserve_usd", b.reserve, "spent_usd", b.spent,
			"resumes", b.day.Add(24*time.Hour))
	}
}

// ConsumeScores implements score.Consumer: it spends each result's CostUSD. A sidecar whose
// scoring runs in worker pods feeds its budget this way from ragwatch.scores.>, so sampling
// stops when the fleet's published spending reaches the budget. Do not also charge the same
// results with Charge.
func (b *Budget) ConsumeScores(_ context.Context, results []score.Result) error {
	for i := range results {
		b.Spend(results[i].CostUSD)
	}
	return nil
}

// Remaining returns what is left today in US dollars (+Inf without a budget; never negative).
func (b *Budget) Remaining() float64 {
	if b == nil {
		return math.Inf(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.perDay <= 0 {
		return math.Inf(1)
	}
	b.roll()
	return math.Max(0, b.perDay-b.spent)
}

// Spent returns today's spending in US dollars.
func (b *Budget) Spent() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll()
	return b.spent
}

// Update applies sampling.budget from a reloaded config. What was spent today is kept, so a
// lowered budget may be spent already; the day's one "budget spent" log line may come again.
func (b *Budget) Update(cfg config.SamplingBudget) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.perDay, b.reserve, b.prices = cfg.USDPerDay, cfg.FeedbackReserveUSD, cfg.Prices
	b.exhausted = false
}
