package worker

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// PairScorer is the `scorer` label of pair jobs in ragwatch_scoring_attempts_total and
// ragwatch_scoring_duration_seconds.
const PairScorer = "pairwise"

// handlePair judges one pair job and settles its message as handle does a record: the
// outcome is counted (weighted 1/p) before the ack; a failed judgement is retried after the
// backoff and dead-lettered after the last attempt.
func (p *Pool) handlePair(ctx context.Context, msg jetstream.Msg, delivered uint64) {
	job, err := queue.DecodePair(msg.Data())
	if err != nil {
		p.deadLetter(ctx, msg, "", err.Error(), delivered)
		return
	}
	key := job.Key()
	if delivered > uint64(p.cfg.Queue.MaxDeliver) {
		p.deadLetter(ctx, msg, key, "attempts did not finish (worker stopped or timed out while judging)", delivered)
		return
	}
	if p.opts.PairJudge == nil {
		p.deadLetter(ctx, msg, key, "no pairwise judge in this worker (pairs.judge)", delivered)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, p.cfg.ScoreTimeout)
	start := time.Now()
	v, err := p.opts.PairJudge.JudgePair(sctx, &job.A, &job.B)
	p.m.duration.WithLabelValues(PairScorer).Observe(time.Since(start).Seconds())
	usage := score.Result{Model: v.Model, InputTokens: v.InputTokens, OutputTokens: v.OutputTokens, CostUSD: v.CostUSD}
	p.charge(&usage) // both positions' calls, also on failure
	outcome, _ := classify(sctx, err)
	cancel()
	if ctx.Err() != nil {
		_ = msg.Nak() // shutting down: let another worker take it now
		return
	}
	p.m.attempts.WithLabelValues(PairScorer, outcome).Inc()
	if err == nil {
		// The outcome as a score of the candidate's record, for SLOs on the win rate; handed
		// on before the pair is counted and acked, so a failure retries the whole pair.
		b := &job.B
		res := []score.Result{{TraceID: b.TraceID, SpanID: b.SpanID, ResponseID: b.ResponseID, Service: b.Service, Variant: b.Variant,
			Metric: score.PairwiseWinRate, Value: pairwise.Credit(v.Outcome), Weight: 1 / job.Probability,
			Scorer: PairScorer, Model: v.Model, Explanation: v.Outcome + " against " + job.A.Variant + " (trace " + job.A.TraceID + ")",
			Time: time.Now(), Turn: b.Turn}}
		if err := p.sink.ConsumeScores(ctx, res); err != nil {
			delay := p.backoff(delivered)
			p.opts.Logger.Warn("hand on a judged pair's outcome; will retry", "trace_id", job.A.TraceID, "retry_in", delay, "err", err)
			_ = msg.NakWithDelay(delay)
			return
		}
		p.opts.Pairwise.Record(job.Comparison, v.Outcome, 1/job.Probability)
		if p.pairVerdict != nil {
			p.pairVerdict.ConsumePairVerdict(ctx, job.Comparison, &job.A, &job.B, v, 1/job.Probability)
		}
		if err := msg.Ack(); err != nil { // not confirmed, as a scored record's (handle)
			p.opts.Logger.Warn("ack judged pair", "trace_id", job.A.TraceID, "err", err)
		}
		return
	}
	if delivered >= uint64(p.cfg.Queue.MaxDeliver) {
		p.deadLetter(ctx, msg, key, "pairwise judge: "+err.Error(), delivered)
		return
	}
	delay := p.backoff(delivered)
	p.opts.Logger.Info("pairwise judging failed; will retry", "trace_id", job.A.TraceID, "attempt", delivered, "retry_in", delay, "err", err)
	_ = msg.NakWithDelay(delay)
}
