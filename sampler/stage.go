package sampler

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/scorers/retrieval"
)

// Offerer takes a sampled record without blocking; *queue.Publisher is the real one. Offer
// counts its own drops.
type Offerer interface {
	Offer(r *record.Record) error
}

// Stage is the sampler's place in the pipeline: a record.Consumer that decides for each record
// and offers the sampled ones (a copy carrying Sampling) to the queue, and a
// record.FeedbackConsumer that lets late negative feedback sample a record it still remembers.
// It never blocks and never fails ingestion: drops are counted by the Offerer.
type Stage struct {
	d      *decide.Decider
	out    Offerer
	recent *recent
	now    func() time.Time
	// always scores every record with relevance labels in process (the retrieval metrics) and
	// hands the results to scores; both nil when retrieval metrics are off.
	always score.Scorer
	scores score.Consumer
	// ranks keeps the last records' rankings for relevance labels arriving after their
	// record (nil: none kept); late counts those labels by outcome.
	ranks *rankings
	late  *prometheus.CounterVec
	// fallback finds a ranking ranks no longer holds (the export store's records); nil: none.
	fallback func(traceID, spanID string) *record.Record
	// answerWait is sampling.recent.answer_wait: how long a sampled record awaiting its answer
	// is held before it is queued without it (0: queued at once).
	answerWait time.Duration
	// lateContent counts content that came after its record, by outcome; awaited counts the
	// sampled records that awaited their answer, by how they were queued.
	lateContent *prometheus.CounterVec
	awaited     *prometheus.CounterVec
}

var (
	_ record.Consumer         = (*Stage)(nil)
	_ record.FeedbackConsumer = (*Stage)(nil)
	_ record.LabelConsumer    = (*Stage)(nil)
	_ record.ContentConsumer  = (*Stage)(nil)
)

// Outcomes of ragwatch_awaited_answer_records_total: how a sampled record that awaited its
// answer was queued.
const (
	AwaitedAnswered = "answered" // with the answer that came after it
	AwaitedWithout  = "without"  // without it: after answer_wait, at a bound of sampling.recent, or at shutdown
)

// Outcomes of relevance labels that arrive after their record, the `outcome` label of
// ragwatch_late_relevance_labels_total.
const (
	LateLabelScored  = "scored"   // scored against the record's ranking, kept here
	LateLabelNotKept = "not_kept" // no ranking kept for its record: gone past the bound, or never seen here
)

// NewStage returns the stage. cfg bounds the cache of recent records kept for late feedback
// (sampling.recent); now may be nil (time.Now).
func NewStage(d *decide.Decider, out Offerer, cfg config.RecentRecords, now func() time.Time) *Stage {
	if now == nil {
		now = time.Now
	}
	s := &Stage{d: d, out: out, recent: newRecent(cfg.MaxRecords, cfg.MaxBytes, cfg.TTL), now: now, answerWait: cfg.AnswerWait,
		lateContent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_late_content_total",
			Help: "GenAI content (answer, question, history) that came as log events after its record, by outcome: scored (the answer a sampled record awaited: queued with it), merged (into a record kept waiting, for its answer or for feedback), unchanged (the record had it, from its spans, or came with its answer), too_late (the record was queued without it, after sampling.recent.answer_wait), not_sampled (the record was not sampled), not_kept (not kept by sampling.recent: past its bounds, or never seen by this process).",
		}, []string{"outcome"}),
		awaited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_awaited_answer_records_total",
			Help: "Sampled records that awaited their answer (their trace's generation gave no output while GenAI events come as log records), by how they were queued: answered (with the answer that came after them), without (after sampling.recent.answer_wait, at a bound of sampling.recent, or at shutdown).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{LateContentScored, LateContentMerged, LateContentUnchanged, LateContentTooLate, LateContentNotSampled, LateContentNotKept} {
		s.lateContent.WithLabelValues(o)
	}
	s.awaited.WithLabelValues(AwaitedAnswered)
	s.awaited.WithLabelValues(AwaitedWithout)
	return s
}

// Register registers the stage's late-content counters with reg.
func (s *Stage) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{s.lateContent, s.awaited} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("sampler: register metrics: %w", err)
		}
	}
	return nil
}

// ScoreAlways makes the stage score every record that carries relevance labels (its own or a
// person's, Record.Labels) with sc, in process and outside the sampled path, handing the
// results to out. sc is the retrieval scorer: cheap, and exact only when it sees every labelled
// record. Its results weigh 1/upstream probability. Call before the first record.
func (s *Stage) ScoreAlways(sc score.Scorer, out score.Consumer) {
	s.always, s.scores = sc, out
}

// KeepRankings makes the stage, with ScoreAlways, keep the rankings (document ids, no content)
// of the last n records with documents, so that relevance labels arriving after their record
// (ConsumeLabel) are scored as if they came with it. Call before the first record.
func (s *Stage) KeepRankings(n int, reg prometheus.Registerer) error {
	late := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ragwatch_late_relevance_labels_total",
		Help: "Relevance labels that arrived after their record, by outcome: scored (retrieval metrics computed against the record's ranking), not_kept (no ranking kept for the record: past sampling.recent.max_records records ago and not in the export store, or never seen by this process).",
	}, []string{"outcome"})
	if reg != nil {
		if err := reg.Register(late); err != nil {
			return fmt.Errorf("sampler: register metrics: %w", err)
		}
	}
	late.WithLabelValues(LateLabelScored)
	late.WithLabelValues(LateLabelNotKept)
	s.ranks, s.late = newRankings(n), late
	return nil
}

// RankingsFrom gives the stage a second source of rankings for late relevance labels, asked
// when its own no longer hold the record: the export store, whose records survive restarts.
// f returns a record carrying the document ids in order, or nil. Call before the first label.
func (s *Stage) RankingsFrom(f func(traceID, spanID string) *record.Record) { s.fallback = f }

// ConsumeLabel implements record.LabelConsumer: a label with relevance grades that arrived
// after its record is scored by the retrieval metrics against the record's ranking, kept by
// KeepRankings, and the results go where those of a label that came with the record go. It
// always returns nil.
func (s *Stage) ConsumeLabel(ctx context.Context, l record.Label) error {
	if s.always == nil || s.ranks == nil || len(l.Relevance) == 0 {
		return nil
	}
	r := s.ranks.record(l.TraceID, l.SpanID)
	if r == nil && s.fallback != nil {
		r = s.fallback(l.TraceID, l.SpanID)
	}
	if r == nil {
		s.late.WithLabelValues(LateLabelNotKept).Inc()
		return nil
	}
	lc := l
	lc.TraceID, lc.SpanID, lc.Service, lc.Variant = "", "", "", ""
	r.Labels = &lc
	s.scoreAlways(ctx, r)
	s.late.WithLabelValues(LateLabelScored).Inc()
	return nil
}

// ConsumeRecord implements record.Consumer. It always returns nil.
//
// What the recent cache keeps for late feedback depends on what feedback could still change
// (the rules in force, read per record so a reload applies at once):
//   - a sampled record: the decision only, so feedback does not queue it twice;
//   - a record skipped by the budget or max_per_minute: its content, since feedback may retry it
//     (with the budget's feedback reserve);
//   - with a negative_feedback rule, any other record: its content, since feedback may raise its
//     probability;
//   - without one but with other rules: the decision only (feedback cannot change it);
//   - without any rule: nothing. The record's probability is sampling.rate whatever it holds,
//     and its trace id was not sampled at that rate, so feedback (which carries no content from
//     the join) changes nothing with or without an entry.
func (s *Stage) ConsumeRecord(ctx context.Context, r *record.Record) error {
	if s.always != nil {
		if len(retrieval.Relevance(r)) > 0 {
			s.scoreAlways(ctx, r)
		}
		s.ranks.put(r) // for relevance labels arriving later
	}
	trigger := decide.Ingest
	if r.Feedback != nil && r.Feedback.Score < 0 {
		trigger = decide.Feedback // already joined: it may use the feedback reserve
	}
	dec := s.d.Decide(r, trigger)
	if dec.Sample {
		now := s.now()
		if prev, known := s.recent.get(r, now); known && prev.sampled {
			// The same record again (a client re-posting it) while the cache remembers it was
			// queued: the publisher batches records, so the server's Nats-Msg-Id no longer
			// tells every copy apart.
			return nil
		}
		m := s.d.Mark(r, dec)
		st := stateSampled
		if r.Answer == "" {
			st = stateQueuedWithout // an answer coming later is too late for it
		}
		if r.AwaitsAnswer {
			// Its answer may still come as a log event (ConsumeContent): held, marked, to be
			// queued with it, or after answer_wait without it (Sweep).
			if s.answerWait > 0 && s.recent.put(m, dec.Probability, stateAwaiting, true, now) {
				return nil
			}
			st = stateQueuedWithout
			s.awaited.WithLabelValues(AwaitedWithout).Inc()
		}
		if err := s.out.Offer(m); err != nil {
			return nil // dropped at once, and counted by the Offerer: a copy posted again may be queued
		}
		s.recent.put(r, dec.Probability, st, false, now)
		return nil
	}
	if dec.Reason == decide.ReasonBudget || dec.Reason == decide.ReasonRateLimit {
		s.recent.put(r, 0, stateOpen, true, s.now()) // p 0: feedback may try again
		return nil
	}
	p := dec.Probability // 0 for a never rule: feedback may still try
	switch n, feedback := s.d.Rules(); {
	case feedback:
		s.recent.put(r, p, stateOpen, true, s.now())
	case n > 0:
		s.recent.put(r, p, stateSettled, false, s.now())
	}
	return nil
}

// ConsumeFeedback implements record.FeedbackConsumer. The record is reconsidered with its
// feedback when the feedback raises its probability (a negative_feedback rule): with the same
// trace-id randomness, a record sampled at the higher probability p has inclusion probability
// p overall, so the weight stays exact. It always returns nil.
func (s *Stage) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	// What is known of the request without the cache: its ids and the feedback, which the
	// record carries without ids of its own, as it does when feedback comes with the record.
	fb := f
	fb.TraceID, fb.SpanID, fb.Service, fb.Variant = "", "", "", ""
	r := &record.Record{TraceID: f.TraceID, SpanID: f.SpanID, Service: f.Service, Variant: f.Variant, Feedback: &fb}
	now := s.now()
	prev, known := s.recent.get(r, now)
	if known && prev.sampled {
		return nil // already queued
	}
	if known && prev.settled {
		if _, feedback := s.d.Rules(); !feedback {
			return nil // decided under rules feedback cannot change, and it still cannot
		}
		// A reload added a negative_feedback rule since: the content was not kept.
	}
	full := r
	if known && prev.rec != nil {
		c := *prev.rec
		c.Feedback = r.Feedback
		full = &c
	}
	p, _, never := s.d.Match(full)
	if never || (known && p <= prev.p) {
		return nil // the feedback changes nothing
	}
	if !hasContent(full) {
		if decide.Sampled(full.TraceID, p) {
			s.d.Skip(decide.ReasonNoContent)
		}
		return nil
	}
	dec := s.d.Decide(full, decide.Feedback)
	if dec.Sample {
		_ = s.out.Offer(s.d.Mark(full, dec))
		if known {
			s.recent.markSampled(r, dec.Probability)
		} else {
			s.recent.put(full, dec.Probability, stateSampled, false, now)
		}
	}
	return nil
}

// ConsumeContent implements record.ContentConsumer: what GenAI events that came after their
// record say of its turn (the join names the record) is merged into the record kept here
// (record.MergeContent: what the spans gave stays). A sampled record that awaited its answer
// and now has it is queued with it, marked as it was when sampled: it is scored once, as if
// the answer had come in time. A record kept open for feedback keeps the merged copy, which
// feedback may then send to scoring. Nothing else changes: the sampling decision does not
// read the answer. It always returns nil.
func (s *Stage) ConsumeContent(_ context.Context, c record.Content) error {
	key := &record.Record{TraceID: c.TraceID, SpanID: c.SpanID, Service: c.Service, Variant: c.Variant}
	queue, outcome, known := s.recent.mergeContent(key, &c, s.now())
	if !known {
		outcome = LateContentNotKept
		if p, _, never := s.d.Match(key); never || !decide.Sampled(c.TraceID, p) {
			outcome = LateContentNotSampled
		}
	}
	if queue != nil {
		_ = s.out.Offer(queue) // a drop is counted by the Offerer
		s.awaited.WithLabelValues(AwaitedAnswered).Inc()
	}
	s.lateContent.WithLabelValues(outcome).Inc()
	return nil
}

// Sweep queues the sampled records that awaited their answer for sampling.recent.answer_wait
// without it, and those that left the cache at a bound meanwhile; with all (shutdown), every
// record still awaiting. The Runtime runs it every second.
func (s *Stage) Sweep(all bool) {
	for _, r := range s.recent.sweep(s.now(), s.answerWait, all) {
		_ = s.out.Offer(r) // a drop is counted by the Offerer
		s.awaited.WithLabelValues(AwaitedWithout).Inc()
	}
}

// scoreAlways scores r with the always-on scorer. The record is marked with probability 1 so
// the results carry only the upstream weight (and raise MaxWeight to it, like Mark).
func (s *Stage) scoreAlways(ctx context.Context, r *record.Record) {
	m := s.d.Mark(r, decide.Decision{Sample: true, Probability: 1, Reason: ReasonRelevance})
	res, _ := s.always.Score(ctx, m) // retrieval never fails
	for i := range res {
		res[i].Variant, res[i].Turn = r.Variant, r.Turn
	}
	if len(res) > 0 {
		_ = s.scores.ConsumeScores(ctx, res) // a core NATS publish: buffered, never blocks long
	}
}

// ReasonRelevance marks the records scored because they carry relevance labels (never counted
// as sampled: they do not go through the queue).
const ReasonRelevance = "relevance"

// SampledScorers drops the scorers the sampling stage runs on every record itself (retrieval),
// leaving what workers run on sampled records.
func SampledScorers(ss []score.Scorer) []score.Scorer {
	out := make([]score.Scorer, 0, len(ss))
	for _, sc := range ss {
		if sc.Name() != "retrieval" {
			out = append(out, sc)
		}
	}
	return out
}

func hasContent(r *record.Record) bool {
	return !r.Elided && (r.Query != "" || r.Answer != "" || len(r.Documents) > 0)
}
