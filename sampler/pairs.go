package sampler

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// PairOfferer takes a pair job without blocking; *queue.Publisher is the real one. OfferPair
// counts its own drops.
type PairOfferer interface {
	OfferPair(j *queue.PairJob) error
}

// Reasons of ragwatch_pairwise_skipped_total.
const (
	PairSkipNotSampled = "not_sampled" // the baseline record's trace id is outside its sampling probability, or a never rule matched
	PairSkipBudget     = "budget"      // the daily scoring budget is spent
)

// PairStage is the sampler's record.PairConsumer: the shadow-pair join hands it the two records
// of a pair once both arrived, and it queues one pair job on the scoring stream for a worker to
// judge. It orients the pair by the configured comparisons (baseline a, candidate b).
//
// Pairs are sampled like records, consistently: a pair is judged when its baseline record's
// trace id is sampled at the probability sampling.rate and sampling.rules give that record,
// and while the budget allows; its outcome then weighs 1/p. It never blocks and always returns
// nil: drops are counted by the publisher.
type PairStage struct {
	d       *decide.Decider // nil judges every pair
	budget  *decide.Budget  // nil: no budget
	out     PairOfferer
	comps   atomic.Pointer[[]config.Comparison]
	skipped *prometheus.CounterVec
}

var _ record.PairConsumer = (*PairStage)(nil)

// NewPairStage returns the stage. d and budget may be nil (every pair is judged).
func NewPairStage(comps []config.Comparison, d *decide.Decider, budget *decide.Budget, out PairOfferer, reg prometheus.Registerer) *PairStage {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &PairStage{d: d, budget: budget, out: out}
	s.skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ragwatch_pairwise_skipped_total",
		Help: "Joined shadow pairs not sent to the pairwise judge, by reason: not_sampled, budget.",
	}, []string{"reason"})
	s.skipped = promreg.MustRegister(reg, s.skipped)
	for _, r := range []string{PairSkipNotSampled, PairSkipBudget} {
		s.skipped.WithLabelValues(r)
	}
	s.Update(comps)
	return s
}

// Update swaps the comparisons pairs are oriented by (a reload).
func (s *PairStage) Update(comps []config.Comparison) {
	c := append([]config.Comparison(nil), comps...)
	s.comps.Store(&c)
}

// ConsumePair implements record.PairConsumer. a and b are copied (shallowly, as Mark does:
// stages treat records as read-only) into the job.
func (s *PairStage) ConsumePair(_ context.Context, a, b *record.Record) error {
	if a == nil || b == nil {
		return nil
	}
	base, cand, name := pairwise.Orient(*s.comps.Load(), a, b)
	p := 1.0
	if s.d != nil {
		var never bool
		p, _, never = s.d.Match(base)
		if never || p <= 0 || !decide.Sampled(base.TraceID, p) {
			s.skipped.WithLabelValues(PairSkipNotSampled).Inc()
			return nil
		}
		p = min(p, 1)
	}
	if !s.budget.Allow(false) {
		s.skipped.WithLabelValues(PairSkipBudget).Inc()
		return nil
	}
	_ = s.out.OfferPair(&queue.PairJob{Comparison: name, Probability: p, A: *base, B: *cand})
	return nil
}
