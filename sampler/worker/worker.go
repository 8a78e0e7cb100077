package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// Headers set on dead-lettered records.
const (
	HeaderError      = "Ragwatch-Error"
	HeaderDeliveries = "Ragwatch-Deliveries"
)

// Options are the pool's collaborators; zero values get defaults.
type Options struct {
	// Replicas of the streams Setup creates (nats.replicas); 0 means 1.
	Replicas int
	// Budget is charged with what scoring spends; nil charges nothing.
	Budget *decide.Budget
	// Services bounds the `service` label; nil gets a private set of 50.
	Services *cardinality.ServiceSet
	// Variants bounds the `variant` label (variants.max_values); nil gets a private set of 8.
	Variants   *cardinality.VariantSet
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// FetchWait is how long one pull waits for a record (default 5s); Shutdown does not wait
	// for it.
	FetchWait time.Duration
	// DepthInterval is how often the queue depth gauge is polled (default 5s).
	DepthInterval time.Duration
	// Now is the clock for result times (default time.Now).
	Now func() time.Time
	// PairJudge judges pair jobs (queue.KindPair); nil dead-letters them. Pairwise counts
	// their outcomes; nil creates it on Registerer.
	PairJudge pairwise.Judge
	Pairwise  *pairwise.WinRates
	// Calibrator maps results before they are counted and handed on: the service's
	// calibration maps fitted on its team's labels (labelcal.Learner); nil maps nothing.
	Calibrator Calibrator
}

// Calibrator changes results in place after the scorers ran: the published Value becomes the
// calibrated one, Raw and Calibration record what was done (sampler/labelcal).
type Calibrator interface {
	Calibrate(results []score.Result)
}

// Pool is N workers sharing the durable consumer. Several pools (processes, pods) may share the
// same consumer: JetStream hands each record to one of them at a time.
type Pool struct {
	js      jetstream.JetStream
	cfg     config.ScoringRuntime
	scorers []score.Scorer
	sink    score.Consumer
	opts    Options
	m       *metrics
	qm      *queue.Metrics
	models  *cardinality.ServiceSet

	// pairVerdict, when set, receives each judged pair (OnPairVerdict); labels, the human
	// labels of each scored record (OnRecordLabels).
	pairVerdict PairVerdictConsumer
	labels      record.LabelConsumer

	mu      sync.Mutex // guards cancel, started, stopped
	cancel  context.CancelFunc
	started bool
	stopped bool
	wg      sync.WaitGroup
}

// PairVerdictConsumer receives the verdict on a shadow pair the pool judged: a is the
// baseline, b the candidate, weight 1/p of the pair's sampling. It must not block or keep the
// records.
type PairVerdictConsumer interface {
	ConsumePairVerdict(ctx context.Context, comparison string, a, b *record.Record, v pairwise.Verdict, weight float64)
}

// OnPairVerdict hands each pair verdict to c as well as to the pairwise recorder (the
// evaluation export). Call it before Start.
func (p *Pool) OnPairVerdict(c PairVerdictConsumer) { p.pairVerdict = c }

// OnRecordLabels hands c the human labels a record carried into scoring (they arrived before
// it), naming the record, once its results were handed on: the evaluation export sends them
// next to the scores. Call it before Start.
func (p *Pool) OnRecordLabels(c record.LabelConsumer) { p.labels = c }

// New returns a pool of cfg.Workers workers running scorers on each record and handing the
// results to sink (typically score.Fanout{queue.NewScorePublisher(...), ...}).
func New(js jetstream.JetStream, cfg config.ScoringRuntime, scorers []score.Scorer, sink score.Consumer, opts Options) *Pool {
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Services == nil {
		opts.Services = cardinality.NewServiceSet(50)
	}
	if opts.Variants == nil {
		opts.Variants = cardinality.NewVariantSet(8, 0, nil)
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = 5 * time.Second
	}
	if opts.DepthInterval <= 0 {
		opts.DepthInterval = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if sink == nil {
		sink = score.Fanout(nil)
	}
	if opts.Pairwise == nil {
		opts.Pairwise = pairwise.NewWinRates(opts.Registerer)
	}
	m := newMetrics(opts.Registerer)
	// An evicted service label (signals.service_ttl) takes its series with it.
	opts.Services.OnEvict(func(service string) {
		for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.evalScore, m.evalWX, m.evalW} {
			v.DeletePartialMatch(prometheus.Labels{"service": service})
		}
	})
	opts.Variants.OnEvict(func(variant string) {
		for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.evalScore, m.evalWX, m.evalW} {
			v.DeletePartialMatch(prometheus.Labels{"variant": variant})
		}
	})
	return &Pool{
		js: js, cfg: cfg, scorers: scorers, sink: sink, opts: opts,
		m: m, qm: queue.NewMetrics(opts.Registerer),
		models: cardinality.NewServiceSet(32),
	}
}

// Start creates the stream and consumer if needed (bounded by ctx) and starts the workers.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return nil
	}
	cons, err := queue.Setup(ctx, p.js, p.cfg.Queue, p.opts.Replicas)
	if err != nil {
		return err
	}
	p.started = true
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(p.cfg.Workers + 1)
	for i := 0; i < p.cfg.Workers; i++ {
		go func() { defer p.wg.Done(); p.run(runCtx, cons) }()
	}
	go func() {
		defer p.wg.Done()
		queue.PollDepth(runCtx, p.js, p.cfg.Queue.Stream, p.opts.DepthInterval, p.qm)
	}()
	if len(p.scorers) == 0 {
		p.opts.Logger.Warn("scoring workers have no scorers: sampled records are taken off the queue without results; enable metrics under `scoring`")
	}
	p.opts.Logger.Info("scoring workers started", "workers", p.cfg.Workers, "scorers", len(p.scorers),
		"stream", p.cfg.Queue.Stream, "consumer", p.cfg.Queue.Consumer)
	return nil
}

// Shutdown stops pulling, interrupts records being scored (they are nak'ed for another worker)
// and waits for the workers until ctx ends. It is idempotent and safe without Start.
func (p *Pool) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.stopped = true
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Pool) run(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, p.opts.FetchWait)
		msg, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				p.opts.Logger.Debug("pull from scoring queue", "err", err)
				select { // not connected or the consumer is gone: do not spin
				case <-ctx.Done():
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
			continue
		}
		p.handle(ctx, msg)
	}
}

// handle settles one message of the scoring stream: a pair job goes to handlePair, a record
// or a batch of them to handleRecords.
func (p *Pool) handle(ctx context.Context, msg jetstream.Msg) {
	delivered := uint64(1)
	if meta, err := msg.Metadata(); err == nil {
		delivered = meta.NumDelivered
	}
	if queue.IsPair(msg.Headers()) {
		p.handlePair(ctx, msg, delivered)
		return
	}
	retry, isRetry := queue.RetryOf(msg.Headers())
	p.handleRecords(ctx, msg, delivered, retry, isRetry)
}

func (p *Pool) backoff(delivered uint64) time.Duration {
	b := p.cfg.Queue.Backoff
	if len(b) == 0 {
		return 0
	}
	i := int(delivered) - 1
	if i >= len(b) {
		i = len(b) - 1
	}
	return b[i]
}

// scoreAll runs every scorer on r. It returns the results and, when a scorer failed in a way a
// retry may fix, the failure; the results of a failed attempt are not handed on (the retry
// scores the record again) but their cost is counted.
func (p *Pool) scoreAll(ctx context.Context, r *record.Record) ([]score.Result, error) {
	var out []score.Result
	var errs []error
	service := p.opts.Services.Label(r.Service)
	weight := decide.Weight(r.Sampling)
	for _, s := range p.scorers {
		name := s.Name()
		start := time.Now()
		res, err := s.Score(ctx, r)
		p.m.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
		for i := range res {
			p.charge(&res[i])
		}
		valid := res[:0]
		for _, x := range res {
			if x.Metric == "" || math.IsNaN(x.Value) || x.Value < 0 || x.Value > 1 {
				p.m.attempts.WithLabelValues(name, OutcomeInvalid).Inc()
				p.opts.Logger.Warn("scorer returned an invalid result; dropped", "scorer", name, "metric", x.Metric, "value", x.Value)
				continue
			}
			valid = append(valid, x)
		}
		outcome, retry := classify(ctx, err)
		p.m.attempts.WithLabelValues(name, outcome).Inc()
		if retry {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		for i := range valid {
			x := &valid[i]
			x.TraceID, x.SpanID, x.ResponseID, x.Variant = r.TraceID, r.SpanID, r.ResponseID, r.Variant
			if x.Service == "" {
				x.Service = r.Service
			}
			if x.Scorer == "" {
				x.Scorer = name
			}
			x.Weight = weight
			x.Turn = r.Turn
			if x.Time.IsZero() {
				x.Time = p.opts.Now()
			}
		}
		switch {
		case len(valid) == 0:
		case out == nil:
			out = slices.Clip(valid) // the scorer's own array: one scorer's results are not copied
		default:
			out = append(out, valid...)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if p.opts.Calibrator != nil {
		p.opts.Calibrator.Calibrate(out) // the metrics below and every consumer see the published value
	}
	variant, _ := p.opts.Variants.Label(r.Variant)
	for _, x := range out {
		p.m.evalScore.WithLabelValues(service, variant, x.Metric).Observe(x.Value)
		if b := score.TurnBucket(x.Turn); b != "" {
			p.m.byTurn.WithLabelValues(service, x.Metric, b).Observe(x.Value)
		}
		w := x.Weight
		if w == 0 {
			w = 1
		}
		p.m.evalWX.WithLabelValues(service, variant, x.Metric).Add(w * x.Value)
		p.m.evalW.WithLabelValues(service, variant, x.Metric).Add(w)
	}
	return out, nil
}

// charge prices one result's token usage, spends it on the budget and counts cost and tokens.
func (p *Pool) charge(x *score.Result) {
	if x.InputTokens <= 0 && x.OutputTokens <= 0 && x.CostUSD <= 0 {
		return
	}
	usd := x.CostUSD
	if p.opts.Budget != nil {
		usd = p.opts.Budget.Charge(x.Model, x.InputTokens, x.OutputTokens, x.CostUSD)
	}
	x.CostUSD = usd
	model := p.models.Label(x.Model)
	if usd > 0 {
		p.m.cost.WithLabelValues(model).Add(usd)
	}
	if x.InputTokens > 0 {
		p.m.tokens.WithLabelValues(model, "input").Add(float64(x.InputTokens))
	}
	if x.OutputTokens > 0 {
		p.m.tokens.WithLabelValues(model, "output").Add(float64(x.OutputTokens))
	}
}

// classify names a scorer call's outcome and whether the record should be retried. A Failure
// whose every metric was refused is final: the partial results stand.
func classify(ctx context.Context, err error) (outcome string, retry bool) {
	if err == nil {
		return OutcomeOK, false
	}
	var f score.Failure
	if errors.As(err, &f) && len(f) > 0 {
		retry = false
		for _, e := range f {
			if e.Outcome != score.OutcomeRefused {
				retry = true
			}
		}
		return f[0].Outcome, retry
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return score.OutcomeTimeout, true
	}
	return score.OutcomeError, true
}

// handleRecords scores the record of a message, or the records of a batch
// (queue.SplitBatch) one after the other, and settles the message once: ack on success, nak
// with backoff on failure, dead-letter after the last attempt. Results are handed on before
// the ack, so a crash between the two redelivers the message (at-least-once; consumers dedup
// by trace id + metric). The ack is a plain one, not a confirmed one (DoubleAck): an ack the
// server did not record redelivers the message after ack_wait either way, and waiting for the
// confirmation cost a round trip per message.
//
// The records of a batch share the message's attempts: the delivery count, or for a batch
// published again (queue.Retry) the attempts it had before plus its deliveries after the
// first, which only waits for the retry's time. A record scored is handed on and done; the
// others are retried or dead-lettered as a record of its own is:
//   - every record failed: the message is nak'ed with the next backoff delay;
//   - some failed: those are published again as a batch of their own (their attempts, and the
//     backoff delay as the time of the next) and the batch is acked, so that the records
//     scored are not scored again;
//   - after the last attempt, each failed record is dead-lettered on its own, as its JSON.
//
// A dead-letter or retry publish that fails naks the whole message with the backoff delay: its
// records are scored again (at-least-once, as a crash between results and ack). While a batch
// takes long (LLM judges), the worker tells the server it is still working on it before each
// record that could otherwise outlast ack_wait.
func (p *Pool) handleRecords(ctx context.Context, msg jetstream.Msg, delivered uint64, retry queue.Retry, isRetry bool) {
	attempt := int(delivered)
	if isRetry {
		if delivered == 1 {
			_ = msg.NakWithDelay(max(0, time.Until(retry.At)))
			return
		}
		attempt = retry.Attempts + int(delivered) - 1
	}
	entries, batch := [][]byte{msg.Data()}, queue.IsBatch(msg.Data())
	if batch {
		var err error
		if entries, err = queue.SplitBatch(msg.Data()); err != nil {
			p.deadLetter(ctx, msg, "", fmt.Sprintf("undecodable batch: %v", err), uint64(attempt))
			return
		}
	}
	maxDeliver := p.cfg.Queue.MaxDeliver
	var (
		redo    [][]byte // failed this attempt, to be retried
		settled int      // scored or dead-lettered
		lastErr error
	)
	deadLetter := func(e []byte, key, reason string) bool {
		if err := p.publishDeadLetter(ctx, deadLetterBody(e), key, reason, uint64(attempt)); err != nil {
			p.opts.Logger.Error("dead-letter a record; its batch stays queued", "err", err)
			_ = msg.NakWithDelay(p.backoff(uint64(attempt)))
			return false
		}
		settled++
		return true
	}
	lastSignal := time.Now()
	for i, e := range entries {
		var rec record.Record
		if err := queue.DecodeRecord(e, &rec); err != nil || rec.TraceID == "" {
			if err == nil {
				err = errors.New("trace_id is missing")
			}
			key := "" // the message's sequence, and the record's place in a batch
			if meta, merr := msg.Metadata(); merr == nil {
				key = "seq-" + strconv.FormatUint(meta.Sequence.Stream, 10)
				if batch {
					key += "-" + strconv.Itoa(i)
				}
			}
			if !deadLetter(e, key, fmt.Sprintf("undecodable record: %v", err)) {
				return
			}
			continue
		}
		if attempt > maxDeliver {
			if !deadLetter(e, rec.Key(), "attempts did not finish (worker stopped or timed out while scoring)") {
				return
			}
			continue
		}
		if i > 0 && time.Since(lastSignal)+p.cfg.ScoreTimeout >= p.cfg.Queue.AckWait {
			_ = msg.InProgress() // the next record could outlast ack_wait
			lastSignal = time.Now()
		}
		sctx, cancel := context.WithTimeout(ctx, p.cfg.ScoreTimeout)
		results, failure := p.scoreAll(sctx, &rec)
		cancel()
		if ctx.Err() != nil {
			// Shutting down: what is left goes to another worker now, as a record is nak'ed.
			redo = append(redo, entries[i:]...)
			if settled == 0 {
				_ = msg.Nak()
				return
			}
			p.retryBatch(ctx, msg, redo, attempt, time.Now())
			return
		}
		if failure == nil {
			if err := p.sink.ConsumeScores(ctx, results); err != nil {
				failure = fmt.Errorf("hand on results: %w", err)
			} else if rec.Labels != nil && p.labels != nil {
				l := *rec.Labels
				l.TraceID, l.SpanID, l.Service = rec.TraceID, rec.SpanID, rec.Service
				_ = p.labels.ConsumeLabel(ctx, l) // a consumer that cannot take it counts it
			}
		}
		if failure == nil {
			settled++
			continue
		}
		if attempt >= maxDeliver {
			if !deadLetter(e, rec.Key(), failure.Error()) {
				return
			}
			continue
		}
		p.opts.Logger.Info("scoring failed; will retry", "trace_id", rec.TraceID, "attempt", attempt,
			"retry_in", p.backoff(uint64(attempt)), "err", failure)
		redo, lastErr = append(redo, e), failure
	}
	switch {
	case len(redo) == 0:
		if err := msg.Ack(); err != nil {
			p.opts.Logger.Warn("ack scored records", "records", len(entries), "err", err)
		}
	case settled == 0:
		_ = msg.NakWithDelay(p.backoff(uint64(attempt))) // the whole message again
	default:
		p.opts.Logger.Debug("records of a batch to retry", "records", len(redo), "of", len(entries), "err", lastErr)
		p.retryBatch(ctx, msg, redo, attempt, time.Now().Add(p.backoff(uint64(attempt))))
	}
}

// retryBatch publishes entries again as a batch that has had attempts attempts and may be tried
// again at at, then acks msg; if the publish fails it naks msg with the backoff delay.
func (p *Pool) retryBatch(ctx context.Context, msg jetstream.Msg, entries [][]byte, attempts int, at time.Time) {
	id := ""
	if meta, err := msg.Metadata(); err == nil {
		// The same id for the same batch's same attempt: a publish repeated is stored once.
		id = "retry:" + strconv.FormatUint(meta.Sequence.Stream, 10) + ":" + strconv.Itoa(attempts)
	}
	out := queue.NewRetryMsg(p.cfg.Queue.Subject, id, entries, attempts, at)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := p.js.PublishMsg(pctx, out); err != nil {
		p.opts.Logger.Error("queue a batch's records to retry; the whole batch stays queued", "records", len(entries), "err", err)
		_ = msg.NakWithDelay(p.backoff(uint64(attempts)))
		return
	}
	if err := msg.DoubleAck(pctx); err != nil {
		p.opts.Logger.Warn("ack a batch whose records to retry were queued again", "err", err)
	}
}

// deadLetterBody is what the dead-letter subject keeps of a queued record: the JSON of one in
// the binary form, which operators read and can publish to the queue again as it is; anything
// else as it is.
func deadLetterBody(data []byte) []byte {
	if queue.IsBinaryRecord(data) {
		var queued record.Record
		if queue.DecodeRecord(data, &queued) == nil {
			if j, err := json.Marshal(&queued); err == nil {
				return j
			}
		}
	}
	return data
}

// deadLetter moves the message to the dead-letter subject (kept in the dead-letter stream) and
// removes it from the queue. If the dead-letter publish fails the record stays queued.
func (p *Pool) deadLetter(ctx context.Context, msg jetstream.Msg, key, reason string, delivered uint64) {
	p.deadLetterData(ctx, msg, msg.Data(), key, reason, delivered)
}

func (p *Pool) deadLetterData(ctx context.Context, msg jetstream.Msg, data []byte, key, reason string, delivered uint64) {
	if key == "" {
		if meta, err := msg.Metadata(); err == nil {
			key = "seq-" + strconv.FormatUint(meta.Sequence.Stream, 10)
		}
	}
	if err := p.publishDeadLetter(ctx, data, key, reason, delivered); err != nil {
		p.opts.Logger.Error("dead-letter a record; it stays queued", "err", err)
		_ = msg.NakWithDelay(p.backoff(delivered))
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(pctx); err != nil {
		p.opts.Logger.Warn("ack dead-lettered record", "err", err)
	}
}

// publishDeadLetter publishes one record's data to the dead-letter subject, with key (when
// known) as its Nats-Msg-Id, and counts it.
func (p *Pool) publishDeadLetter(ctx context.Context, data []byte, key, reason string, delivered uint64) error {
	if len(reason) > 512 {
		reason = reason[:512]
	}
	dl := nats.NewMsg(p.cfg.Queue.DeadLetterSubject)
	dl.Data = data
	dl.Header.Set(HeaderError, reason)
	dl.Header.Set(HeaderDeliveries, strconv.FormatUint(delivered, 10))
	if key != "" {
		dl.Header.Set(jetstream.MsgIDHeader, key)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := p.js.PublishMsg(pctx, dl); err != nil {
		return err
	}
	p.qm.DeadLetter.Inc()
	p.opts.Logger.Warn("record moved to the dead-letter subject", "trace_id", key,
		"subject", p.cfg.Queue.DeadLetterSubject, "deliveries", delivered, "reason", reason)
	return nil
}
