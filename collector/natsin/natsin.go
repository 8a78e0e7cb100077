// Package natsin reads ragwatch's NATS subjects: records (JSON), OTLP traces and logs (protobuf
// ExportTraceServiceRequest, ExportLogsServiceRequest), user feedback and human labels (JSON), through a core queue subscription or a
// JetStream durable consumer with explicit acks, and hands them to the pipeline.
package natsin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

// TracesConsumer takes OTLP traces; the assembler implements it.
type TracesConsumer interface {
	ConsumeTraces(ctx context.Context, td ptrace.Traces) error
}

// TracesConsumerFunc adapts a function to TracesConsumer.
type TracesConsumerFunc func(ctx context.Context, td ptrace.Traces) error

// ConsumeTraces calls f.
func (f TracesConsumerFunc) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return f(ctx, td)
}

// LogsConsumer takes OTLP log exports as protobuf (the assembler implements it): it answers
// as collector/otlp's LogsConsumer, a *span.Error for a message it refuses.
type LogsConsumer interface {
	ConsumeLogs(ctx context.Context, body []byte, lim span.Limits) (records int, err error)
}

// Message kinds, the `kind` label of ragwatch_nats_messages_total.
const (
	KindRecords  = "records"
	KindOTLP     = "otlp"
	KindOTLPLogs = "otlp_logs"
	KindFeedback = "feedback"
	KindLabels   = "labels"
)

// Message outcomes, the `outcome` label of ragwatch_nats_messages_total.
const (
	OutcomeAccepted  = "accepted"  // consumed (acked in jetstream mode)
	OutcomeRejected  = "rejected"  // bad message: counted in ragwatch_ingest_rejected_total, terminated
	OutcomeDuplicate = "duplicate" // everything in it was consumed before
	OutcomeRetry     = "retry"     // a downstream stage failed: nak'ed for redelivery
	OutcomeFailed    = "failed"    // a downstream stage failed on the last delivery (or core mode)
)

// Settings configure a Subscriber. A nil consumer disables its subject.
type Settings struct {
	NC     *nats.Conn
	JS     jetstream.JetStream // required in jetstream mode
	Config config.NATS

	Records  record.Consumer
	Traces   TracesConsumer
	Logs     LogsConsumer
	Feedback record.FeedbackConsumer
	Labels   record.LabelConsumer

	// Metrics is the process's shared intake counters (receiver "nats").
	Metrics *ingest.Metrics
	// DedupKV persists the duplicate window in jetstream mode; nil keeps it in memory.
	DedupKV    jetstream.KeyValue
	Registerer prometheus.Registerer
	// Refuse, when set, is asked before each message is decoded (the memory limit): true naks
	// a JetStream message with RefuseDelay (default 5s) so it comes back later, and drops a
	// core NATS message; both count as reason "overloaded".
	Refuse      func() bool
	RefuseDelay time.Duration
	// OTLPLimits bound an OTLP message exactly as the OTLP receivers bound a request (spans,
	// attributes, value sizes; MaxRequestBytes does not apply: max_payload does); zero fields
	// take their defaults.
	OTLPLimits span.Limits
	// MaxJSONDepth and MaxRecordsPerBatch bound a records message before it is decoded; 0
	// takes record.DefaultMaxJSONDepth and record.DefaultMaxBatch.
	MaxJSONDepth, MaxRecordsPerBatch int
	Logger                           *slog.Logger
	Now                              func() time.Time
}

// Subscriber consumes the configured subjects. Start subscribes; Shutdown drains.
type Subscriber struct {
	s     Settings
	cfg   config.NATS
	log   *slog.Logger
	now   func() time.Time
	dedup *dedup

	messages *prometheus.CounterVec
	// sharedReplies counts messages whose reply subject came from ragwatch's own account;
	// lastSharedWarn (unix nanoseconds) bounds the warning about them.
	sharedReplies  prometheus.Counter
	lastSharedWarn atomic.Int64

	mu       sync.Mutex // guards the fields below
	started  bool
	subs     []*nats.Subscription
	consumes []jetstream.ConsumeContext
}

// New validates the settings and registers the metrics.
func New(s Settings) (*Subscriber, error) {
	if s.NC == nil {
		return nil, errors.New("natsin: nil NATS connection")
	}
	if s.Metrics == nil {
		return nil, errors.New("natsin: nil ingest metrics")
	}
	if s.Config.Consume.Mode == config.NATSModeJetStream && s.JS == nil {
		return nil, errors.New("natsin: jetstream mode needs JetStream")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Registerer == nil {
		s.Registerer = prometheus.NewRegistry()
	}
	s.OTLPLimits = s.OTLPLimits.WithDefaults()
	window, maxEntries := s.Config.Consume.DedupWindow, s.Config.Consume.DedupMax
	if window <= 0 {
		window = 10 * time.Minute
	}
	if maxEntries <= 0 {
		maxEntries = 100000
	}
	var kv jetstream.KeyValue
	if s.Config.Consume.Mode == config.NATSModeJetStream {
		kv = s.DedupKV
	}
	sub := &Subscriber{
		s:     s,
		cfg:   s.Config,
		log:   s.Logger.With("receiver", ingest.ReceiverNATS),
		now:   s.Now,
		dedup: newDedup(window, maxEntries, kv, s.Now),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_nats_messages_total",
			Help: "NATS messages consumed, by kind (records, otlp, otlp_logs, feedback, labels) and outcome (accepted, rejected, duplicate, retry, failed).",
		}, []string{"kind", "outcome"}),
		sharedReplies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_nats_shared_account_replies_total",
			Help: "Messages on the ingest subjects whose reply subject was not rewritten by a service import: their publisher shares ragwatch's NATS account, so a reply could make the server write into ragwatch's streams and buckets.",
		}),
	}
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ragwatch_nats_dropped_messages_total",
		Help: "Messages the NATS client dropped because a core subscription fell behind (slow consumer).",
	}, sub.droppedCount)
	if err := s.Registerer.Register(sub.messages); err != nil {
		return nil, fmt.Errorf("natsin: register metrics: %w", err)
	}
	if err := s.Registerer.Register(dropped); err != nil {
		return nil, fmt.Errorf("natsin: register metrics: %w", err)
	}
	if err := s.Registerer.Register(sub.sharedReplies); err != nil {
		return nil, fmt.Errorf("natsin: register metrics: %w", err)
	}
	return sub, nil
}

type binding struct {
	kind    string
	subject string
	handle  func(ctx context.Context, data []byte, m msgInfo) result
}

// msgInfo is what a handler needs to know about the message's delivery.
type msgInfo struct {
	subject     string
	streamSeq   uint64 // 0 in core mode
	stream      string
	redelivered bool
	lastTry     bool
}

// result is a handler's verdict: err != nil with reason set is a bad message; err != nil
// without reason is a downstream failure.
type result struct {
	reason     string // ingest reason of a rejected message
	err        error
	duplicates int
	consumed   int
}

func (s *Subscriber) bindings() []binding {
	var out []binding
	if s.s.Records != nil && s.cfg.Subjects.Records != "" {
		out = append(out, binding{KindRecords, s.cfg.Subjects.Records, s.handleRecords})
	}
	if s.s.Traces != nil && s.cfg.Subjects.OTLP != "" {
		out = append(out, binding{KindOTLP, s.cfg.Subjects.OTLP, s.handleOTLP})
	}
	if s.s.Logs != nil && s.cfg.Subjects.OTLPLogs != "" {
		out = append(out, binding{KindOTLPLogs, s.cfg.Subjects.OTLPLogs, s.handleOTLPLogs})
	}
	if s.s.Feedback != nil && s.cfg.Subjects.Feedback != "" {
		out = append(out, binding{KindFeedback, s.cfg.Subjects.Feedback, s.handleFeedback})
	}
	if s.s.Labels != nil && s.cfg.Subjects.Labels != "" {
		out = append(out, binding{KindLabels, s.cfg.Subjects.Labels, s.handleLabels})
	}
	return out
}

// Start subscribes to the enabled subjects (and in jetstream mode creates the stream and the
// durable consumers). A failed start undoes what it did.
func (s *Subscriber) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("natsin: already started")
	}
	s.started = true
	s.mu.Unlock()
	bs := s.bindings()
	if len(bs) == 0 {
		return nil
	}
	var err error
	if s.cfg.Consume.Mode == config.NATSModeJetStream {
		err = s.startJetStream(ctx, bs)
	} else {
		err = s.startCore(bs)
	}
	if err != nil {
		return errors.Join(err, s.Shutdown(ctx))
	}
	return nil
}

func (s *Subscriber) startCore(bs []binding) error {
	for _, b := range bs {
		handler := func(m *nats.Msg) {
			s.checkReply(m)
			info := msgInfo{subject: m.Subject, lastTry: true}
			if s.refused(b.kind, OutcomeFailed) {
				return // core NATS cannot redeliver: the drop is counted
			}
			res := s.process(b, m.Data, info)
			s.outcome(b.kind, res, info)
		}
		var sub *nats.Subscription
		var err error
		if s.cfg.Consume.QueueGroup != "" {
			sub, err = s.s.NC.QueueSubscribe(b.subject, s.cfg.Consume.QueueGroup, handler)
		} else {
			sub, err = s.s.NC.Subscribe(b.subject, handler)
		}
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", b.subject, err)
		}
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
		s.log.Info("NATS subscription", "subject", b.subject, "queue_group", s.cfg.Consume.QueueGroup)
	}
	if err := s.s.NC.Flush(); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

func (s *Subscriber) startJetStream(ctx context.Context, bs []binding) error {
	c := s.cfg.Consume
	subjects := make([]string, 0, len(bs))
	for _, b := range bs {
		subjects = append(subjects, b.subject)
	}
	if c.CreateStream {
		_, err := s.s.JS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        c.Stream,
			Description: "ragwatch intake: records, OTLP traces and logs, feedback and labels",
			Subjects:    subjects,
			Storage:     jetstream.FileStorage,
			MaxAge:      c.StreamMaxAge,
			MaxBytes:    c.StreamMaxBytes, // the oldest go first: acked ones, kept for max_age
			Replicas:    max(s.cfg.Replicas, 1),
			MaxMsgSize:  int32(min(s.cfg.MaxPayload, 1<<30)),
		})
		if err != nil {
			return fmt.Errorf("create JetStream stream %s over %s (`nats.consume.stream`; set `create_stream: false` to use an existing one): %w",
				c.Stream, strings.Join(subjects, ", "), err)
		}
	} else if _, err := s.s.JS.Stream(ctx, c.Stream); err != nil {
		return fmt.Errorf("JetStream stream %s (`nats.consume.stream`, create_stream: false): %w", c.Stream, err)
	}
	for _, b := range bs {
		durable := c.Durable + "_" + b.kind
		cons, err := s.s.JS.CreateOrUpdateConsumer(ctx, c.Stream, jetstream.ConsumerConfig{
			Durable:       durable,
			Description:   "ragwatch " + b.kind,
			FilterSubject: b.subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       c.AckWait,
			MaxDeliver:    c.MaxDeliver,
			MaxAckPending: c.MaxAckPending,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return fmt.Errorf("create JetStream consumer %s on stream %s: %w", durable, c.Stream, err)
		}
		b := b
		cc, err := cons.Consume(func(m jetstream.Msg) { s.handleJS(b, m) },
			// A small pull buffer: ack_wait runs from delivery to the client, so a long buffer
			// of waiting messages would be redelivered before they are handled.
			jetstream.PullMaxMessages(min(c.MaxAckPending, 100)),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				s.log.Debug("JetStream consume", "consumer", durable, "err", err)
			}))
		if err != nil {
			return fmt.Errorf("consume %s: %w", durable, err)
		}
		s.mu.Lock()
		s.consumes = append(s.consumes, cc)
		s.mu.Unlock()
		s.log.Info("JetStream consumer", "stream", c.Stream, "durable", durable, "subject", b.subject)
	}
	if !s.cfg.IsEmbedded() {
		return s.probeReplies(bs)
	}
	return nil
}

// replyProbeMessages is how many messages per subject a JetStream intake on an external
// cluster looks at, besides its consumers, for replies from ragwatch's own account.
const replyProbeMessages = 100

// probeReplies watches the first replyProbeMessages messages of each subject as they are
// published (a plain subscription that the server ends by itself) for a reply subject from
// ragwatch's own account. The stream's copy does not keep the publisher's reply, but the
// stream answered it: in ragwatch's account unless a service import rewrote it. The embedded
// server needs no probe: its app has an account of its own (natsconn).
func (s *Subscriber) probeReplies(bs []binding) error {
	for _, b := range bs {
		sub, err := s.s.NC.Subscribe(b.subject, s.checkReply)
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", b.subject, err)
		}
		s.mu.Lock()
		s.subs = append(s.subs, sub)
		s.mu.Unlock()
		if err := sub.AutoUnsubscribe(replyProbeMessages); err != nil {
			return fmt.Errorf("subscribe to %s: %w", b.subject, err)
		}
	}
	if err := s.s.NC.Flush(); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// sharedWarnEvery bounds the warning about replies from ragwatch's own account.
const sharedWarnEvery = 10 * time.Minute

// checkReply counts and warns about a message whose reply subject was chosen in ragwatch's
// own account. A publisher in an account of its own reaches ragwatch's through a service
// import, which replaces the reply with a one-time _R_ subject that routes back to the
// publisher's account; any other reply is the publisher's own, in ragwatch's account, and a
// stream capturing the subject sends its acknowledgement there: into a KV bucket, the
// scoring queue, the scores subject, whatever the reply names (docs/security.md, NATS).
func (s *Subscriber) checkReply(m *nats.Msg) {
	if m.Reply == "" || serviceReply(m.Reply) {
		return
	}
	now := s.now().UnixNano()
	if last := s.lastSharedWarn.Load(); (last == 0 || now-last >= int64(sharedWarnEvery)) && s.lastSharedWarn.CompareAndSwap(last, now) {
		s.log.Warn("NATS message with a reply subject in ragwatch's own account: its publisher shares ragwatch's account, "+
			"so a reply can make the server write into ragwatch's streams and KV buckets; give the applications an account of "+
			"their own that imports the ingest subjects as services (docs/security.md, NATS; logged at most every 10 minutes, "+
			"counted in ragwatch_nats_shared_account_replies_total)", "subject", m.Subject)
	}
	// Counted after the warning: whoever sees the count sees the warning too.
	s.sharedReplies.Inc()
}

// serviceReply reports whether reply is a service import's response subject (_R_.), also
// when a gateway prefixed it for its way back (_GR_.<cluster hash>.<server hash>.).
func serviceReply(reply string) bool {
	if rest, ok := strings.CutPrefix(reply, "_GR_."); ok {
		if _, after, ok := strings.Cut(rest, "."); ok {
			if _, after, ok = strings.Cut(after, "."); ok {
				reply = after
			}
		}
	}
	return strings.HasPrefix(reply, "_R_.")
}

func (s *Subscriber) handleJS(b binding, m jetstream.Msg) {
	if s.refused(b.kind, OutcomeRetry) {
		delay := s.s.RefuseDelay
		if delay <= 0 {
			delay = 5 * time.Second
		}
		if err := m.NakWithDelay(delay); err != nil {
			s.log.Warn("JetStream nak", "subject", m.Subject(), "err", err)
		}
		return
	}
	info := msgInfo{subject: m.Subject(), lastTry: true}
	if md, err := m.Metadata(); err == nil {
		info.stream, info.streamSeq = md.Stream, md.Sequence.Stream
		info.redelivered = md.NumDelivered > 1
		max := s.cfg.Consume.MaxDeliver
		info.lastTry = max > 0 && md.NumDelivered >= uint64(max)
	}
	res := s.process(b, m.Data(), info)
	s.outcome(b.kind, res, info)
	var err error
	switch {
	case res.err != nil && res.reason != "":
		err = m.TermWithReason(res.reason) // a bad message never gets better
	case res.err != nil && !info.lastTry:
		err = m.NakWithDelay(time.Second)
	case res.err != nil:
		err = m.TermWithReason("downstream failed on the last delivery")
	default:
		// A plain ack: a lost one means a redelivery, which the dedup mark written before it
		// recognises; waiting for the server's confirmation would double the cost per message.
		err = m.Ack()
	}
	if err != nil {
		s.log.Warn("JetStream ack", "subject", info.subject, "err", err)
	}
}

// refused reports and counts a message refused by Settings.Refuse.
func (s *Subscriber) refused(kind, outcome string) bool {
	if s.s.Refuse == nil || !s.s.Refuse() {
		return false
	}
	s.s.Metrics.Rejected(ingest.ReceiverNATS, ingest.ReasonOverloaded)
	s.messages.WithLabelValues(kind, outcome).Inc()
	return true
}

// process runs the handler; a message over max_payload is rejected before decoding.
func (s *Subscriber) process(b binding, data []byte, info msgInfo) result {
	if s.cfg.MaxPayload > 0 && len(data) > s.cfg.MaxPayload {
		return result{reason: ingest.ReasonTooLarge, err: fmt.Errorf("%d bytes, over max_payload %d", len(data), s.cfg.MaxPayload)}
	}
	return b.handle(context.Background(), data, info)
}

func (s *Subscriber) outcome(kind string, res result, info msgInfo) {
	for range res.duplicates {
		s.s.Metrics.Rejected(ingest.ReceiverNATS, ingest.ReasonDuplicate)
	}
	switch {
	case res.err != nil && res.reason != "":
		s.s.Metrics.Rejected(ingest.ReceiverNATS, res.reason)
		s.messages.WithLabelValues(kind, OutcomeRejected).Inc()
		// The reason and the decoder's message, never the payload.
		s.log.Warn("NATS message rejected", "subject", info.subject, "reason", res.reason, "err", res.err)
	case res.err != nil && !info.lastTry:
		s.messages.WithLabelValues(kind, OutcomeRetry).Inc()
		s.log.Warn("NATS message failed downstream; will be redelivered", "subject", info.subject, "err", res.err)
	case res.err != nil:
		s.messages.WithLabelValues(kind, OutcomeFailed).Inc()
		s.log.Error("NATS message failed downstream", "subject", info.subject, "err", res.err)
	case res.consumed == 0 && res.duplicates > 0:
		s.messages.WithLabelValues(kind, OutcomeDuplicate).Inc()
	default:
		s.messages.WithLabelValues(kind, OutcomeAccepted).Inc()
	}
}

func (s *Subscriber) handleRecords(ctx context.Context, data []byte, info msgInfo) result {
	recs, err := record.DecodeJSONLimits(data, s.now(), s.s.MaxJSONDepth, s.s.MaxRecordsPerBatch)
	if err != nil {
		return result{reason: ingest.DecodeReason(err), err: err}
	}
	var res result
	var errs []error
	for _, r := range recs {
		key := "r_" + r.Key()
		dup, err := s.dedup.seenBefore(ctx, key, info.redelivered)
		if err != nil {
			s.log.Warn("read duplicate marks", "err", err)
		}
		if dup {
			res.duplicates++
			continue
		}
		if err := s.s.Records.ConsumeRecord(ctx, r); err != nil {
			errs = append(errs, err)
			continue
		}
		res.consumed++
		if err := s.dedup.mark(ctx, key); err != nil {
			s.log.Warn("write duplicate mark", "err", err)
		}
	}
	res.err = errors.Join(errs...)
	return res
}

func (s *Subscriber) handleOTLP(ctx context.Context, data []byte, info msgInfo) result {
	key, dup := s.messageDup(ctx, info)
	if dup {
		return result{duplicates: 1}
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(data); err != nil {
		return result{reason: ingest.ReasonMalformed, err: fmt.Errorf("OTLP ExportTraceServiceRequest: %w", err)}
	}
	td := req.Traces()
	n, rej := s.s.OTLPLimits.Check(td)
	if rej != nil {
		return result{reason: rej.Reason, err: fmt.Errorf("OTLP ExportTraceServiceRequest: %w", rej)}
	}
	if err := s.s.Traces.ConsumeTraces(ctx, td); err != nil {
		return result{err: err}
	}
	s.s.Metrics.Spans(ingest.ReceiverNATS, n)
	s.markMessage(ctx, key)
	return result{consumed: 1}
}

// handleOTLPLogs hands an OTLP log export to the LogsConsumer, which decodes it at the wire
// level with OTLPLimits (records per message as spans per request).
func (s *Subscriber) handleOTLPLogs(ctx context.Context, data []byte, info msgInfo) result {
	key, dup := s.messageDup(ctx, info)
	if dup {
		return result{duplicates: 1}
	}
	n, err := s.s.Logs.ConsumeLogs(ctx, data, s.s.OTLPLimits)
	var rej *span.Error
	switch {
	case errors.As(err, &rej):
		return result{reason: rej.Reason, err: fmt.Errorf("OTLP ExportLogsServiceRequest: %w", rej)}
	case err != nil:
		return result{err: err}
	}
	s.s.Metrics.LogRecords(ingest.ReceiverNATS, n)
	s.markMessage(ctx, key)
	return result{consumed: 1}
}

func (s *Subscriber) handleFeedback(ctx context.Context, data []byte, info msgInfo) result {
	return handleEach(ctx, s, data, info, record.DecodeFeedback, s.s.Feedback.ConsumeFeedback)
}

func (s *Subscriber) handleLabels(ctx context.Context, data []byte, info msgInfo) result {
	return handleEach(ctx, s, data, info, record.DecodeLabels, s.s.Labels.ConsumeLabel)
}

// handleEach decodes a message of items (feedback, labels) and hands each to consume; a
// JetStream redelivery of a message consumed before is counted, not consumed again.
func handleEach[T any](ctx context.Context, s *Subscriber, data []byte, info msgInfo,
	decode func([]byte) ([]T, error), consume func(context.Context, T) error) result {
	items, err := decode(data)
	if err != nil {
		return result{reason: ingest.DecodeReason(err), err: err}
	}
	key, dup := s.messageDup(ctx, info)
	if dup {
		return result{duplicates: 1}
	}
	var errs []error
	for _, it := range items {
		if err := consume(ctx, it); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return result{err: err}
	}
	s.markMessage(ctx, key)
	return result{consumed: len(items)}
}

// messageDup detects a JetStream redelivery of a message consumed before, by stream
// sequence. Core messages have no identity and are never duplicates.
func (s *Subscriber) messageDup(ctx context.Context, info msgInfo) (string, bool) {
	if info.streamSeq == 0 {
		return "", false
	}
	key := "m_" + info.stream + "_" + strconv.FormatUint(info.streamSeq, 10)
	if !info.redelivered {
		return key, false
	}
	dup, err := s.dedup.seenBefore(ctx, key, true)
	if err != nil {
		s.log.Warn("read duplicate marks", "err", err)
	}
	return key, dup
}

func (s *Subscriber) markMessage(ctx context.Context, key string) {
	if key == "" {
		return
	}
	if err := s.dedup.mark(ctx, key); err != nil {
		s.log.Warn("write duplicate mark", "err", err)
	}
}

func (s *Subscriber) droppedCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int
	for _, sub := range s.subs {
		if d, err := sub.Dropped(); err == nil {
			n += d
		}
	}
	return float64(n)
}

// Shutdown stops taking messages and lets the ones in hand finish (core subscriptions drain,
// JetStream consumers drain; unacked messages are redelivered to the next consumer).
// Idempotent and safe without Start.
func (s *Subscriber) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	subs, consumes := s.subs, s.consumes
	s.subs, s.consumes = nil, nil
	s.mu.Unlock()
	// Draining needs the server; while disconnected, stop at once (unacked JetStream
	// messages are redelivered, core messages in hand are lost either way).
	up := s.s.NC.IsConnected()
	for _, cc := range consumes {
		if up {
			cc.Drain()
		} else {
			cc.Stop()
		}
	}
	for _, sub := range subs {
		if !up {
			_ = sub.Unsubscribe()
			continue
		}
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			s.log.Warn("drain subscription", "subject", sub.Subject, "err", err)
		}
	}
	var errs []error
	for _, cc := range consumes {
		select {
		case <-cc.Closed():
		case <-ctx.Done():
			cc.Stop()
			errs = append(errs, fmt.Errorf("natsin: drain JetStream consumer: %w", ctx.Err()))
		}
	}
	for _, sub := range subs {
		for sub.IsValid() && s.s.NC.IsConnected() {
			if ctx.Err() != nil {
				_ = sub.Unsubscribe()
				errs = append(errs, fmt.Errorf("natsin: drain %s: %w", sub.Subject, ctx.Err()))
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}
