package decide

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Trigger says why a record is being considered.
type Trigger int

const (
	// Ingest is a record as it arrives.
	Ingest Trigger = iota
	// Feedback is a record reconsidered because feedback arrived; it may use the budget's
	// feedback reserve.
	Feedback
)

// Decision is the outcome for one record.
type Decision struct {
	Sample bool
	// Probability is the inclusion probability of the rule or rate that applied.
	Probability float64
	// Reason is the rule name or "rate" when sampled; the skip reason otherwise
	// (rate, rate_limit, budget, rule).
	Reason string
}

// Decider makes sampling decisions. It is safe for concurrent use.
type Decider struct {
	policy atomic.Pointer[policy] // swapped whole by Update
	// maxWeight holds the float64 bits of the largest MaxWeight of any policy since New.
	maxWeight atomic.Uint64
	budget    *Budget
	now       func() time.Time
	svc       *cardinality.ServiceSet

	sampled *prometheus.CounterVec
	skipped *prometheus.CounterVec
	// Decide's skip counters, resolved once: WithLabelValues per record was half of its cost.
	skipRate, skipRule, skipBudget, skipRateLimit, skipNoContent prometheus.Counter
}

// New returns a Decider for cfg. budget may be nil (no budget), now may be nil (time.Now).
// services bounds the `service` label (nil: a private set of 50). It registers
// ragwatch_sampled_total and ragwatch_sampling_skipped_total on reg (nil: a private registry).
func New(cfg config.Sampling, budget *Budget, services *cardinality.ServiceSet, now func() time.Time, reg prometheus.Registerer) *Decider {
	if now == nil {
		now = time.Now
	}
	if reg == nil {
		reg = prometheus.NewRegistry() // unexported metrics, for callers that do not scrape
	}
	if services == nil {
		services = cardinality.NewServiceSet(50)
	}
	d := &Decider{budget: budget, now: now, svc: services}
	d.Update(cfg)
	d.sampled = promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ragwatch_sampled_total",
		Help: "Records sampled for scoring, by service and reason (rule name or rate).",
	}, []string{"service", "reason"}))
	// An evicted service label (signals.service_ttl) takes its series with it.
	services.OnEvict(func(service string) { d.sampled.DeletePartialMatch(prometheus.Labels{"service": service}) })
	d.skipped = promreg.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ragwatch_sampling_skipped_total",
		Help: "Records not sampled, by reason: rate, rate_limit, budget, rule (a never rule), no_content.",
	}, []string{"reason"}))
	for _, r := range []string{ReasonRate, ReasonRateLimit, ReasonBudget, ReasonRule, ReasonNoContent} {
		d.skipped.WithLabelValues(r)
	}
	d.skipRate, d.skipRule = d.skipped.WithLabelValues(ReasonRate), d.skipped.WithLabelValues(ReasonRule)
	d.skipBudget, d.skipRateLimit = d.skipped.WithLabelValues(ReasonBudget), d.skipped.WithLabelValues(ReasonRateLimit)
	d.skipNoContent = d.skipped.WithLabelValues(ReasonNoContent)
	return d
}

// Match returns the probability and reason that apply to r before any cap: the first matching
// rule, else sampling.rate. never is true when a never rule matched.
func (d *Decider) Match(r *record.Record) (p float64, reason string, never bool) {
	return d.policy.Load().match(r)
}

func (pol *policy) match(r *record.Record) (p float64, reason string, never bool) {
	if r.Labels != nil {
		// Labelled: sampled whatever the rate and probability rules say, but a never rule
		// still keeps the record in the process (its promise is privacy, not cost).
		for _, rule := range pol.rules {
			if rule.Never && rule.Matches(r) {
				return 0, rule.Name, true
			}
		}
		return 1, ReasonLabelled, false
	}
	for _, rule := range pol.rules {
		if rule.Matches(r) {
			if rule.Never {
				return 0, rule.Name, true
			}
			return rule.Probability, rule.Name, false
		}
	}
	return pol.rate, ReasonRate, false
}

// Decide decides for r and counts the outcome. The order is: rules and ratio (free and
// consistent), then the budget, then the token bucket, so a skipped record never spends a token.
func (d *Decider) Decide(r *record.Record, t Trigger) Decision {
	pol := d.policy.Load() // one policy for the whole decision, even during an Update
	p, reason, never := pol.match(r)
	if never {
		d.skipRule.Inc()
		return Decision{Reason: ReasonRule}
	}
	if !Sampled(r.TraceID, p) {
		d.skipRate.Inc()
		return Decision{Probability: p, Reason: ReasonRate}
	}
	if r.Elided {
		// Its documents' texts were not kept (KeepsContent said no when they arrived, and a
		// reload or a label changed that since): a judge would score texts it cannot see.
		d.skipNoContent.Inc()
		return Decision{Probability: p, Reason: ReasonNoContent}
	}
	// A labelled record may use the budget's feedback reserve and is not held back by
	// max_per_minute: only a spent day's budget keeps it from its judges.
	labelled := reason == ReasonLabelled
	if !d.budget.Allow(t == Feedback || labelled) {
		d.skipBudget.Inc()
		return Decision{Probability: p, Reason: ReasonBudget}
	}
	if pol.limiter != nil && !labelled && !pol.limiter.AllowN(d.now(), 1) {
		d.skipRateLimit.Inc()
		return Decision{Probability: p, Reason: ReasonRateLimit}
	}
	d.sampled.WithLabelValues(d.svc.Label(r.Service), reason).Inc()
	return Decision{Sample: true, Probability: p, Reason: reason}
}

// Rules returns how many rules are in force and whether one of them matches on
// negative_feedback: only then can feedback that arrives after a record change the probability
// Match gives it. Without rules, every record's probability is sampling.rate, whatever it holds.
// It is one atomic load, cheap enough for every record.
func (d *Decider) Rules() (n int, feedback bool) {
	pol := d.policy.Load()
	return len(pol.rules), pol.feedback
}

// Skip counts a record not sampled for a reason found outside Decide (no_content).
func (d *Decider) Skip(reason string) { d.skipped.WithLabelValues(reason).Inc() }

// KeepsContent reports whether a record of the OTLP trace id may be sampled under the policy in
// force, labels aside: when a rule is in force (rules read what a record holds, and feedback may
// come later), or when the id is sampled at sampling.rate. Assembly does not copy the
// documents' texts of other traces (assemble.Settings.KeepContent). It is one atomic load and
// a comparison.
func (d *Decider) KeepsContent(traceID [16]byte) bool {
	pol := d.policy.Load()
	if len(pol.rules) > 0 {
		return true
	}
	return sampledBytes(traceID, pol.rate)
}

// Mark returns a shallow copy of r carrying the decision's Sampling; r itself is shared with
// other stages and must not be changed. The probability composes with the record's upstream
// sampling: a trace kept upstream with probability q and sampled here with p was included with
// probability q·p, so its scores weigh 1/(q·p). The weight given raises MaxWeight, so the
// scores of a record sampled upstream are not refused as out of range when they come back.
func (d *Decider) Mark(r *record.Record, dec Decision) *record.Record {
	c := *r
	p := dec.Probability
	if q := r.UpstreamProbability; q > 0 && q <= 1 {
		p *= q
		d.raiseMaxWeight(1 / p)
	}
	c.Sampling = &record.Sampling{Probability: p, Reason: dec.Reason}
	return &c
}

// raiseMaxWeight makes MaxWeight at least w.
func (d *Decider) raiseMaxWeight(w float64) {
	for {
		old := d.maxWeight.Load()
		if !(w > math.Float64frombits(old)) || d.maxWeight.CompareAndSwap(old, math.Float64bits(w)) {
			return
		}
	}
}

// MaxWeight is the largest weight cfg can give a record: 1 / the smallest positive inclusion
// probability of sampling.rate and the rules (1 when nothing is sampled by probability).
func MaxWeight(cfg config.Sampling) float64 {
	minP := 1.0
	for _, r := range cfg.Rules {
		if !r.Never && r.Probability != nil && *r.Probability > 0 {
			minP = min(minP, *r.Probability)
		}
	}
	if cfg.Rate > 0 {
		minP = min(minP, cfg.Rate)
	}
	return 1 / minP
}

// MaxWeight is the largest weight any policy since New could give, or Mark gave to a record
// sampled upstream: results of records sampled before a reload that raised the rate are still
// scored, and carry their old weight.
func (d *Decider) MaxWeight() float64 { return math.Float64frombits(d.maxWeight.Load()) }

// Weight returns 1/p for a sampled record (its Horvitz–Thompson weight), 1 when s is nil or p
// is not in (0, 1].
func Weight(s *record.Sampling) float64 {
	if s == nil || !(s.Probability > 0) || s.Probability > 1 || math.IsNaN(s.Probability) {
		return 1
	}
	return 1 / s.Probability
}

// policy is the reloadable part of the sampling config.
type policy struct {
	rate         float64
	rules        []Rule
	maxPerMinute int
	limiter      *rate.Limiter // nil: no cap
	feedback     bool          // a rule matches on negative_feedback
}

// Update applies sampling.rate, sampling.rules and sampling.max_per_minute from a reloaded
// config; decisions in flight finish with the policy they started with. The token bucket is
// kept (with the tokens it holds) when max_per_minute is unchanged.
func (d *Decider) Update(cfg config.Sampling) {
	d.raiseMaxWeight(MaxWeight(cfg))
	p := &policy{rate: cfg.Rate, rules: CompileRules(cfg.Rules), maxPerMinute: cfg.MaxPerMinute}
	for _, r := range cfg.Rules {
		p.feedback = p.feedback || r.Match.NegativeFeedback
	}
	if old := d.policy.Load(); old != nil && old.maxPerMinute == cfg.MaxPerMinute {
		p.limiter = old.limiter
	} else if cfg.MaxPerMinute > 0 {
		// Burst of one minute's worth; a fresh bucket is full.
		p.limiter = rate.NewLimiter(rate.Limit(float64(cfg.MaxPerMinute)/60), cfg.MaxPerMinute)
	}
	d.policy.Store(p)
}
