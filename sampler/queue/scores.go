package queue

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// DefaultScoresPrefix is the default scoring.queue.scores_subject_prefix.
const DefaultScoresPrefix = "ragwatch.scores"

// SubjectToken turns a service name into one subject token: characters other than letters,
// digits, '-' and '_' become '_', "" becomes "unknown", and names are cut at 128 bytes.
func SubjectToken(service string) string {
	if service == "" {
		return "unknown"
	}
	if len(service) > 128 {
		service = service[:128]
	}
	b := []byte(service)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ScoresSubject returns <prefix>.<service token>.
func ScoresSubject(prefix, service string) string {
	return prefix + "." + SubjectToken(service)
}

// MaxScoresPerMessage bounds the results one message on the scores subjects may carry: a
// subscriber refuses a longer array (reason limits) before decoding it, so one message cannot
// make it allocate without bound. A record's results are far fewer (one per metric).
const MaxScoresPerMessage = 256

// ScorePublisher is a score.Consumer that publishes the results it is given on
// <prefix>.<service>, one message per service: a JSON array of the results, or the result
// object alone when there is one (as one-result publishers always sent). A worker hands on one
// record's results at a time, so a record's results travel in one message (split only past
// MaxScoresPerMessage results or the server's max payload). Core NATS, not JetStream: results
// are a live feed; the durable part is the record queue.
type ScorePublisher struct {
	nc       *nats.Conn
	prefix   string
	loopback *Loopback
}

var _ score.Consumer = (*ScorePublisher)(nil)

// NewScorePublisher returns a publisher of results under prefix (e.g. "ragwatch.scores").
func NewScorePublisher(nc *nats.Conn, prefix string) *ScorePublisher {
	if prefix == "" {
		prefix = DefaultScoresPrefix
	}
	return &ScorePublisher{nc: nc, prefix: prefix}
}

// WithLoopback makes p hand each message's results to l once the message is published, and
// mark the message for l's subscription to skip (Loopback). It returns p.
func (p *ScorePublisher) WithLoopback(l *Loopback) *ScorePublisher {
	p.loopback = l
	return p
}

// ConsumeScores implements score.Consumer: results are grouped by subject, in the order of
// their first result, keeping their order within a group.
func (p *ScorePublisher) ConsumeScores(_ context.Context, results []score.Result) error {
	if len(results) == 0 {
		return nil
	}
	subject := ScoresSubject(p.prefix, results[0].Service)
	mixed := false
	for i := 1; i < len(results) && !mixed; i++ {
		mixed = results[i].Service != results[0].Service && ScoresSubject(p.prefix, results[i].Service) != subject
	}
	if !mixed { // a record's results: one service
		return p.publish(subject, results)
	}
	var subjects []string
	groups := map[string][]score.Result{}
	for i := range results {
		s := ScoresSubject(p.prefix, results[i].Service)
		if _, ok := groups[s]; !ok {
			subjects = append(subjects, s)
		}
		groups[s] = append(groups[s], results[i])
	}
	for _, s := range subjects {
		if err := p.publish(s, groups[s]); err != nil {
			return err
		}
	}
	return nil
}

// publish sends results on subject in messages of at most MaxScoresPerMessage results that fit
// the server's max payload; a message over it is split in two until it fits or holds one
// result (which the server then refuses, as it would have before results were grouped).
func (p *ScorePublisher) publish(subject string, results []score.Result) error {
	for len(results) > MaxScoresPerMessage {
		if err := p.publish(subject, results[:MaxScoresPerMessage]); err != nil {
			return err
		}
		results = results[MaxScoresPerMessage:]
	}
	var v any = results
	if len(results) == 1 {
		v = &results[0]
	}
	// The pooled buffer can go back as soon as Publish returns: it copies the data into the
	// connection's buffer.
	buf, err := encode(v)
	if err != nil {
		return fmt.Errorf("encode score results: %w", err)
	}
	defer releaseBuf(buf)
	data := buf.Bytes()
	if limit := p.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit && len(results) > 1 {
		half := len(results) / 2
		if err := p.publish(subject, results[:half]); err != nil {
			return err
		}
		return p.publish(subject, results[half:])
	}
	// The message comes back to this connection's subscription unless the server does not
	// echo it (no_echo) or the subscription skips it (marked): then it is delivered here.
	// A server without headers (before NATS 2.2) gets the message unmarked, and without
	// no_echo the subscription reads it back.
	mark := p.loopback != nil && p.nc.HeadersSupported()
	loop := mark || (p.loopback != nil && p.nc.Opts.NoEcho)
	msg := &nats.Msg{Subject: subject, Data: data}
	if mark {
		msg.Header = nats.Header{OriginHeader: []string{p.loopback.origin}}
	}
	if err := p.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("publish score results: %w", err)
	}
	if loop {
		p.loopback.deliver(subject, results)
	}
	return nil
}

// OriginHeader marks a message on the scores subjects with the process that published it,
// for that process's own subscription to skip (Loopback). Other subscribers may ignore it.
const OriginHeader = "Ragwatch-Origin"

// Loopback hands the results a process publishes on the scores subjects to the consumer its
// own subscription (SubscribeScores) feeds, without reading them back through NATS and JSON:
// the ScorePublisher marks each message with the loopback's origin and, once the message is
// published, hands its results over, checked as the subscription checks them; the
// subscription skips messages with that origin. A result reaches the consumer once, and only
// if it was published, as before. Results of worker pods and of other processes still
// arrive through the subscription. ragwatch's own connection (internal/natsconn) is also
// opened with no_echo, so the server does not route the marked messages back at all; the
// mark covers connections opened without it.
type Loopback struct {
	origin string
	in     *scoresIn
}

// NewLoopback returns a Loopback to consumer, checking results with checks and counting the
// rejected as SubscribeScores does. Give it to SubscribeScores (ScoreChecks.Loopback) and to
// the process's ScorePublisher (WithLoopback).
func NewLoopback(consumer score.Consumer, checks ScoreChecks, reg prometheus.Registerer, logger *slog.Logger) *Loopback {
	return &Loopback{origin: rand.Text(), in: newScoresIn(consumer, checks, reg, logger)}
}

// deliver checks results and hands the valid ones on.
func (l *Loopback) deliver(subject string, results []score.Result) {
	maxWeight := l.in.checks.maxWeight()
	valid := results
	if !allValid(results, maxWeight) {
		valid = make([]score.Result, 0, len(results))
		for i := range results {
			if reason, err := checkResult(&results[i], maxWeight); err != nil {
				l.in.reject(subject, rejection{index: i, reason: reason, err: err})
				continue
			}
			valid = append(valid, results[i])
		}
	}
	l.in.deliver(valid)
}

// scoresIn is what SubscribeScores and a Loopback do with results: count and log the
// rejected, hand the valid on.
type scoresIn struct {
	consumer score.Consumer
	checks   ScoreChecks
	m        *Metrics
	logger   *slog.Logger
}

func newScoresIn(consumer score.Consumer, checks ScoreChecks, reg prometheus.Registerer, logger *slog.Logger) *scoresIn {
	if logger == nil {
		logger = slog.Default()
	}
	return &scoresIn{consumer: consumer, checks: checks, m: NewMetrics(reg), logger: logger}
}

func (in *scoresIn) reject(subject string, r rejection) {
	in.m.InvalidScores.Inc()
	if in.checks.Ingest != nil {
		in.checks.Ingest.Rejected(ingest.ReceiverNATS, r.reason)
	}
	if r.index < 0 {
		in.logger.Warn("invalid score result", "subject", subject, "reason", r.reason, "err", r.err)
	} else {
		in.logger.Warn("invalid score result", "subject", subject, "index", r.index, "reason", r.reason, "err", r.err)
	}
}

func (in *scoresIn) deliver(results []score.Result) {
	if len(results) == 0 {
		return
	}
	if err := in.consumer.ConsumeScores(context.Background(), results); err != nil {
		in.logger.Warn("score consumer failed", "err", err)
	}
}

// ScoreChecks bound what a result read from the scores subjects may claim. Results arrive from
// outside the process (worker pods, or anyone allowed to publish there), so they are validated
// like any input before they can move an SLO.
type ScoreChecks struct {
	// MaxWeight returns the largest weight the sampler can give, 1 / its smallest inclusion
	// probability (decide.Decider.MaxWeight); nil or below 1 allows weight 1 only. Weight 0
	// (unset) means 1, as in the alert engine.
	MaxWeight func() float64
	// Ingest counts each rejected result in ragwatch_ingest_rejected_total{receiver="nats"};
	// nil counts it only in ragwatch_scores_invalid_total.
	Ingest *ingest.Metrics
	// Loopback, when set, delivered the messages marked with its origin: SubscribeScores
	// skips them.
	Loopback *Loopback
}

func (c ScoreChecks) maxWeight() float64 {
	if c.MaxWeight == nil {
		return 1
	}
	return max(c.MaxWeight(), 1)
}

// SubscribeScores decodes the results published under prefix (every service) and hands those
// of each message to consumer in one call, in message order. The alert engine uses it whether
// scoring ran in this process or in worker pods, so there is one code path; the results this
// process publishes come through checks.Loopback instead, with the same checks. A message is one
// result object or an array of 1 to MaxScoresPerMessage of them (decodeResults). An invalid
// result is counted (ragwatch_scores_invalid_total, and ragwatch_ingest_rejected_total by
// reason when checks.Ingest is set) and logged without its content, never passed on; the valid
// results of the same message still are. A message that is not such JSON counts once.
// Unsubscribe (or Drain) the returned subscription to stop.
func SubscribeScores(nc *nats.Conn, prefix string, consumer score.Consumer, checks ScoreChecks, reg prometheus.Registerer, logger *slog.Logger) (*nats.Subscription, error) {
	if prefix == "" {
		prefix = DefaultScoresPrefix
	}
	in := newScoresIn(consumer, checks, reg, logger)
	own := ""
	if checks.Loopback != nil {
		own = checks.Loopback.origin
	}
	sub, err := nc.Subscribe(prefix+".>", func(msg *nats.Msg) {
		if own != "" && msg.Header != nil && msg.Header.Get(OriginHeader) == own {
			return // this process's: its Loopback delivered them
		}
		results, rejected := decodeResults(msg.Data, checks.maxWeight())
		for _, r := range rejected {
			in.reject(msg.Subject, r)
		}
		in.deliver(results)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s.>: %w", prefix, err)
	}
	// Results arrive in bursts (one message per scored record); allow a deep backlog before the
	// slow-consumer cut.
	if err := sub.SetPendingLimits(100000, 64<<20); err != nil {
		return nil, errors.Join(err, sub.Unsubscribe())
	}
	return sub, nil
}

// rejection is one result a message on the scores subjects did not deliver: the result at
// index of its array (-1: the message itself, or its only result), the ingest reason and the
// problem, without content of the result.
type rejection struct {
	index  int
	reason string
	err    error
}

// errNotObject rejects an array element that is not a JSON object, null included.
var errNotObject = errors.New("an array element is not a JSON object")

// arrayResult decodes one element of an array of results. Not being an object fails the whole
// message (it is not an array of results); any other problem is kept as err, so it rejects
// this element only.
type arrayResult struct {
	r   score.Result
	err error
}

func (a *arrayResult) UnmarshalJSON(data []byte) error {
	if len(data) == 0 || data[0] != '{' {
		return errNotObject
	}
	a.err = json.Unmarshal(data, &a.r)
	return nil
}

// decodeResults decodes a message of the scores subjects, one result object or an array of 1
// to MaxScoresPerMessage of them, and returns the results that pass checkResult, in order, and
// a rejection for every one that does not. A message that is not one of these forms is one
// rejection: limits for a longer array, otherwise malformed (not JSON, trailing data after the
// value included; neither an object nor an array; an empty array; an array with an element
// that is not an object). Unknown keys are ignored, so results of a newer scorer still decode.
func decodeResults(data []byte, maxWeight float64) ([]score.Result, []rejection) {
	data = bytes.TrimLeft(data, " \t\r\n")
	malformed := func(err error) ([]score.Result, []rejection) {
		return nil, []rejection{{index: -1, reason: ingest.ReasonMalformed, err: err}}
	}
	if len(data) == 0 {
		return malformed(errors.New("empty message"))
	}
	switch data[0] {
	case '{':
		var r score.Result
		if err := json.Unmarshal(data, &r); err != nil {
			return malformed(err)
		}
		if reason, err := checkResult(&r, maxWeight); err != nil {
			return nil, []rejection{{index: -1, reason: reason, err: err}}
		}
		return []score.Result{r}, nil
	case '[':
	default:
		return malformed(errors.New("not a JSON object or array"))
	}
	// Bound the array before decoding it; over the bound is over a limit, as for the other
	// NATS inputs.
	if err := record.CheckJSON(data, 0, MaxScoresPerMessage); err != nil {
		return nil, []rejection{{index: -1, reason: ingest.ReasonLimits, err: err}}
	}
	// What publishers send, an array of valid results, decodes in one pass. Anything else is
	// decoded again element by element, to tell which elements to reject and why.
	// Every result has a "trace_id" key: counting them sizes the slice once instead of growing
	// it (a count that is off only costs that growth).
	results := make([]score.Result, 0, min(bytes.Count(data, []byte(`"trace_id"`)), MaxScoresPerMessage))
	if json.Unmarshal(data, &results) == nil && len(results) > 0 && allValid(results, maxWeight) {
		return results, nil
	}
	var elems []arrayResult
	if err := json.Unmarshal(data, &elems); err != nil {
		return malformed(err)
	}
	if len(elems) == 0 {
		return malformed(errors.New("empty array"))
	}
	results = make([]score.Result, 0, len(elems))
	var rejected []rejection
	for i := range elems {
		e := &elems[i]
		if e.err != nil {
			rejected = append(rejected, rejection{index: i, reason: ingest.ReasonMalformed, err: e.err})
			continue
		}
		if reason, err := checkResult(&e.r, maxWeight); err != nil {
			rejected = append(rejected, rejection{index: i, reason: reason, err: err})
			continue
		}
		results = append(results, e.r)
	}
	return results, rejected
}

// allValid reports whether every result passes checkResult.
func allValid(results []score.Result, maxWeight float64) bool {
	for i := range results {
		if _, err := checkResult(&results[i], maxWeight); err != nil {
			return false
		}
	}
	return true
}

// checkResult checks a result could come from a scorer of this deployment; otherwise it
// returns the ingest reason and the problem, without content of the result.
func checkResult(r *score.Result, maxWeight float64) (reason string, _ error) {
	switch {
	case !wellFormedID(r.TraceID):
		return ingest.ReasonInvalid, fmt.Errorf("trace_id must be 1 to %d printable bytes, not an all-zero OTLP id", record.MaxIDLength)
	case r.SpanID != "" && !wellFormedID(r.SpanID):
		return ingest.ReasonInvalid, fmt.Errorf("span_id must be 1 to %d printable bytes, not an all-zero OTLP id", record.MaxIDLength)
	case len(r.Service) > record.MaxIDLength:
		return ingest.ReasonInvalid, fmt.Errorf("service is longer than %d bytes", record.MaxIDLength)
	case len(r.ResponseID) > record.MaxIDLength:
		return ingest.ReasonInvalid, fmt.Errorf("response_id is longer than %d bytes", record.MaxIDLength)
	case !score.KnownMetric(r.Metric):
		return ingest.ReasonUnknownMetric, errors.New("metric is not one a scorer produces")
	case !(r.Value >= 0 && r.Value <= 1):
		return ingest.ReasonValueRange, fmt.Errorf("value %v is outside [0, 1]", r.Value)
	case r.Weight != 0 && !(r.Weight >= 1 && r.Weight <= maxWeight*(1+1e-9)):
		return ingest.ReasonWeightRange, fmt.Errorf("weight %v is outside [1, %v] (1 / the smallest sampling probability)", r.Weight, maxWeight)
	}
	return "", nil
}

// wellFormedID accepts what a record's trace or span id may be (docs/record.md): 1 to
// record.MaxIDLength bytes of printable UTF-8, except an all-zero hex id, which OTLP defines as
// invalid.
func wellFormedID(id string) bool {
	if id == "" || len(id) > record.MaxIDLength || !utf8.ValidString(id) {
		return false
	}
	zero := true
	for _, c := range id {
		if !unicode.IsPrint(c) {
			return false
		}
		zero = zero && c == '0'
	}
	return !(zero && (len(id) == 32 || len(id) == 16))
}
