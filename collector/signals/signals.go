package signals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
	"github.com/ragwatch/ragwatch/internal/text"
)

// numStages is the number of latency stages, the `stage` label (reqsignal.LatencyStage).
const numStages = reqsignal.NumLatencyStages

// Sentiment indexes the feedback sentiments.
type Sentiment int

// The feedback sentiments, used as the `sentiment` label.
const (
	SentimentPositive Sentiment = iota
	SentimentNegative
	SentimentNeutral
	numSentiments
)

var sentimentNames = [numSentiments]string{"positive", "negative", "neutral"}

// String returns the label value of the sentiment.
func (s Sentiment) String() string { return sentimentNames[s] }

// Observation holds the numeric signals of one record, computed once by Signals and handed by
// value to every Recorder. It carries no user content: only the bounded service label and the
// trace and span ids for exemplars.
type Observation struct {
	// Service is the bounded label value (see cardinality.ServiceSet).
	Service string
	// Variant is the bounded variant label value (cardinality.VariantSet): "" for a record without
	// variant and for feedback that never met its record.
	Variant string
	// TraceID and SpanID are the record's ids when they fit an exemplar, else "".
	TraceID string
	SpanID  string

	// Request is true for a whole record; false for feedback joined later, where only the
	// feedback fields are set.
	Request bool
	// Weight is how many requests of the traffic the record stands for: 1/p when only a
	// sample with probability p reached ragwatch (record.UpstreamWeight). Request counts add it;
	// distributions are observed once (sampling keeps their shape). 0 counts as 1.
	Weight float64

	// Measurement is the record's signals as the catalog computes them (reqsignal.Measure):
	// the alert engine's SLOs read the same function, so a histogram and an SLO on it agree.
	reqsignal.Measurement

	// AnswerWords is the answer's word count (statsd rag.answer_length, the seed's meaning).
	AnswerWords int64
	Refusal     bool // the answer declines for lack of information (text.IsRefusal)

	Sentiment Sentiment // of the feedback, when HasFeedback

	// now is the clock in unix nanoseconds, read once per record when TraceID is set (0
	// otherwise: no exemplar); the recorders' exemplar gates use it.
	now int64
}

// Recorder records observations to one backend. Record must be cheap, must not block and must
// not keep o; Shutdown flushes what is buffered and is called once.
type Recorder interface {
	Record(ctx context.Context, o Observation)
	Shutdown(ctx context.Context) error
}

// Settings configures Signals.
type Settings struct {
	Signals   config.Signals
	Exporters config.Exporters
	// Services bounds the service label; the process shares one set. Nil creates one capped at
	// Signals.MaxServices.
	Services *cardinality.ServiceSet
	// Variants bounds the variant label; the process shares one set. Nil creates one capped at
	// variants.max_values' default (8), aging out like services.
	Variants   *cardinality.VariantSet
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock for exemplar timing and the label sets' ages (read once per record and
	// given to them: Services and Variants should run on the same clock); nil is time.Now.
	Now func() time.Time
}

// Signals is the record consumer that records the online signals of every record. Prometheus
// recording starts at New; statsd and OTLP push start at Start and are flushed by Shutdown.
type Signals struct {
	set      Settings
	services *cardinality.ServiceSet
	variants *cardinality.VariantSet
	logger   *slog.Logger

	// variantOverflow counts records whose variant the cap turned into "other".
	variantOverflow prometheus.Counter

	prom       *promRecorder
	statsdErrs prometheus.Counter
	otlpErrs   prometheus.Counter

	// recorders is the current fan-out list, swapped whole by Start and Shutdown so the hot
	// path needs no lock.
	recorders atomic.Pointer[[]Recorder]

	// mu guards the lifecycle fields below; the hot path never takes it.
	mu       sync.Mutex
	started  bool
	shutdown bool
	push     []Recorder // statsd and OTLP recorders created by Start
}

var (
	_ record.Consumer         = (*Signals)(nil)
	_ record.FeedbackConsumer = (*Signals)(nil)
)

// New registers the Prometheus metrics. Push exporters are created by Start.
func New(s Settings) (*Signals, error) {
	if s.Registerer == nil {
		return nil, errors.New("signals: nil Registerer")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Services == nil {
		s.Services = cardinality.NewServiceSetTTL(s.Signals.MaxServices, s.Signals.ServiceTTL, s.Now)
	}
	if s.Variants == nil {
		s.Variants = cardinality.NewVariantSet(DefaultMaxVariants, s.Signals.ServiceTTL, s.Now)
	}
	if s.Exporters.Statsd.Endpoint != "" {
		if _, err := parseTagFormat(s.Exporters.Statsd.TagFormat); err != nil {
			return nil, err
		}
	}
	if o := s.Exporters.OTLP; o.Endpoint != "" && o.Protocol != "grpc" && o.Protocol != "http" {
		return nil, fmt.Errorf("signals: OTLP metrics protocol must be grpc or http, got %q", o.Protocol)
	}
	sig := &Signals{
		set:      s,
		services: s.Services,
		variants: s.Variants,
		logger:   s.Logger,
		variantOverflow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_variants_overflow_total",
			Help: "Records whose variant got the label value \"other\": more distinct variants than variants.max_values.",
		}),
		statsdErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_statsd_errors_total",
			Help: "statsd lines or packets that could not be sent (dropped, never retried).",
		}),
		otlpErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_otlp_metrics_export_errors_total",
			Help: "OTLP metrics exports that failed (after the exporter's own retries).",
		}),
	}
	prom, err := newPromRecorder(s.Registerer)
	if err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{sig.statsdErrs, sig.otlpErrs, sig.variantOverflow} {
		if err := s.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("signals: register metrics: %w", err)
		}
	}
	sig.prom = prom
	sig.recorders.Store(&[]Recorder{prom})
	s.Services.OnEvict(sig.forget)
	s.Variants.OnEvict(sig.forgetVariant)
	return sig, nil
}

// DefaultMaxVariants is variants.max_values' default.
const DefaultMaxVariants = 8

// forgetVariant drops what the recorders keep for a variant label the set has evicted.
func (s *Signals) forgetVariant(variant string) {
	for _, r := range *s.recorders.Load() {
		if f, ok := r.(interface{ forgetVariant(string) }); ok {
			f.forgetVariant(variant)
		}
	}
}

// forgetter is a recorder keeping something per service label.
type forgetter interface{ forget(service string) }

// forget drops what the recorders keep for a service label the set has evicted (signals.
// service_ttl): its Prometheus series and the cached children, tags and attribute sets.
func (s *Signals) forget(service string) {
	for _, r := range *s.recorders.Load() {
		if f, ok := r.(forgetter); ok {
			f.forget(service)
		}
	}
}

// Start creates the statsd client and the OTLP metrics pipeline when they are configured. It
// does not wait for any network: statsd is UDP and the OTLP exporter connects lazily.
func (s *Signals) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return errors.New("signals: start after shutdown")
	}
	if s.started {
		return errors.New("signals: already started")
	}
	s.started = true
	var push []Recorder
	if c := s.set.Exporters.Statsd; c.Endpoint != "" {
		r, err := newStatsdRecorder(c, s.statsdErrs, nil)
		if err != nil {
			return fmt.Errorf("start statsd exporter to %s: %w", c.Endpoint, err)
		}
		push = append(push, r)
		s.logger.Info("statsd exporter started", "endpoint", c.Endpoint, "prefix", c.Prefix, "tag_format", c.TagFormat)
	}
	if c := s.set.Exporters.OTLP; c.Endpoint != "" {
		r, err := newOTLPRecorder(ctx, c, s.otlpErrs, s.logger)
		if err != nil {
			err = fmt.Errorf("start OTLP metrics exporter to %s: %w", c.Endpoint, err)
			for _, p := range push {
				err = errors.Join(err, p.Shutdown(ctx))
			}
			return err
		}
		push = append(push, r)
		s.logger.Info("OTLP metrics exporter started", "endpoint", c.Endpoint, "protocol", c.Protocol, "interval", c.Interval)
	}
	s.push = push
	all := append([]Recorder{s.prom}, push...)
	s.recorders.Store(&all)
	return nil
}

// Shutdown stops the push exporters after flushing them: statsd sends its buffer, OTLP exports
// a last collection. It is idempotent and safe without Start. Prometheus keeps recording.
func (s *Signals) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return nil
	}
	s.shutdown = true
	s.recorders.Store(&[]Recorder{s.prom})
	var errs []error
	for _, p := range s.push {
		if err := p.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.push = nil
	return errors.Join(errs...)
}

// ConsumeRecord records every signal of r, including inline feedback. It never fails on a
// valid record and never blocks on the network.
func (s *Signals) ConsumeRecord(ctx context.Context, r *record.Record) error {
	if r == nil {
		return errors.New("signals: nil record")
	}
	now := s.set.Now()                                               // read once for the record: labels' ages, the exemplars' time
	o := s.observeFeedback(r.Service, r.TraceID, r.SpanID, nil, now) // computeRecord measures r.Feedback
	var capped bool
	if o.Variant, capped = s.variants.LabelAt(r.Variant, now); capped {
		s.variantOverflow.Inc()
	}
	o.Request = true
	o.Weight = r.UpstreamWeight()
	computeRecord(&o, r)
	s.record(ctx, o)
	return nil
}

// ConsumeFeedback records feedback joined after its record: only the feedback signals, with
// the variant of the record the join met it with (f.Variant), capped as the record's was.
func (s *Signals) ConsumeFeedback(ctx context.Context, f record.Feedback) error {
	now := s.set.Now()
	o := s.observeFeedback(f.Service, f.TraceID, f.SpanID, &f, now)
	var capped bool
	if o.Variant, capped = s.variants.LabelAt(f.Variant, now); capped {
		s.variantOverflow.Inc()
	}
	s.record(ctx, o)
	return nil
}

func (s *Signals) record(ctx context.Context, o Observation) {
	for _, rec := range *s.recorders.Load() {
		rec.Record(ctx, o)
	}
}

// observeFeedback fills the label, the exemplar ids and time, and the feedback f (nil: none),
// at now (the Settings' clock).
func (s *Signals) observeFeedback(service, traceID, spanID string, f *record.Feedback, now time.Time) Observation {
	o := Observation{Service: s.services.LabelAt(service, now)}
	if exemplarID(traceID) {
		o.TraceID = traceID
		o.now = now.UnixNano()
		if o.now == 0 { // a test clock at the Unix epoch: 0 means "no exemplar"
			o.now = 1
		}
		if exemplarID(spanID) {
			o.SpanID = spanID
		}
	}
	o.Measurement = reqsignal.MeasureFeedback(f)
	o.sentiment()
	return o
}

// sentiment sets Sentiment from the measured feedback score.
func (o *Observation) sentiment() {
	switch {
	case !o.HasFeedback:
	case o.FeedbackScore > 0:
		o.Sentiment = SentimentPositive
	case o.FeedbackScore < 0:
		o.Sentiment = SentimentNegative
	default:
		o.Sentiment = SentimentNeutral
	}
}

// weight is Weight, 1 when unset.
func (o *Observation) weight() float64 {
	if o.Weight > 1 {
		return o.Weight
	}
	return 1
}

// computeRecord fills the request signals of o from r: the catalog's measurement, and what
// only the metrics show (the answer's words for statsd, refusals).
func computeRecord(o *Observation, r *record.Record) {
	o.Measurement = reqsignal.Measure(r)
	o.sentiment()
	if r.Answer != "" {
		if o.OutputTokens > 0 {
			o.AnswerWords = int64(reqsignal.Words(r.Answer))
		} else {
			o.AnswerWords = o.AnswerTokens // the words already counted
		}
		o.Refusal = text.IsRefusal(r.Answer)
	}
}

// exemplarID reports whether id may go into an exemplar: short enough for the Prometheus
// exemplar rune limit (128 with the label name) and printable ASCII.
func exemplarID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
