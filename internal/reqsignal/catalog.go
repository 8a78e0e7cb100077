package reqsignal

import "github.com/ragwatch/ragwatch/internal/score"

// Metric is a Prometheus metric of the online signals (collector/signals registers it; its
// OTLP instrument is named so that the OTLP→Prometheus translation gives Name back).
type Metric struct {
	Name    string
	Help    string
	Buckets []float64 // histogram bucket upper bounds; nil for a counter
	// OTLPName and OTLPUnit name the OTLP instrument.
	OTLPName string
	OTLPUnit string
}

// Histogram bucket upper bounds, shared by Prometheus and OTLP so both backends show the same
// distribution. docs/metrics-signals.md explains each choice.
var (
	// DocumentBuckets: a RAG context holds a handful of documents; 0 is its own bucket so empty
	// retrievals stand out.
	DocumentBuckets = []float64{0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100}
	// ScoreBuckets: similarity and reranker scores normalised to [0, 1] (cosine, relevance
	// probability), finer near the top where retrieval quality is judged. Raw scores above 1
	// (BM25, logits) fall into +Inf.
	ScoreBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1}
	// TokenBuckets: answer lengths from a one-liner to a long report, roughly doubling.
	TokenBuckets = []float64{10, 25, 50, 100, 200, 300, 500, 800, 1200, 2000, 4000, 8000}
	// CitationBuckets: 0 (an answer citing nothing) is its own bucket.
	CitationBuckets = []float64{0, 1, 2, 3, 4, 5, 7, 10, 15, 20}
	// DurationBuckets (seconds) cover a vector search (ms) and a long generation (a minute).
	DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60}
)

// The Prometheus metrics of the online signals, each with the `service` and `variant` labels
// (and `stage` or `sentiment` where said).
var (
	MetricRequests = Metric{Name: "ragwatch_requests_total",
		Help:     "RAG requests seen, by service: each record counts 1/p when only a sample with probability p reaches ragwatch (tracestate ot=th, receivers.otlp.upstream_sampling_probability).",
		OTLPName: "ragwatch.requests", OTLPUnit: "{request}"}
	MetricDocuments = Metric{Name: "ragwatch_retrieved_documents",
		Help:    "Documents in the final context of a request.",
		Buckets: DocumentBuckets, OTLPName: "ragwatch.retrieved_documents", OTLPUnit: "{document}"}
	MetricScore = Metric{Name: "ragwatch_retrieval_score",
		Help:    "Mean document score of a request (requests whose documents carry scores).",
		Buckets: ScoreBuckets, OTLPName: "ragwatch.retrieval.score"} // no unit: scores are not always ratios
	MetricTopScore = Metric{Name: "ragwatch_retrieval_top_score",
		Help:    "Best document score of a request (requests whose documents carry scores).",
		Buckets: ScoreBuckets, OTLPName: "ragwatch.retrieval.top_score"}
	MetricTokens = Metric{Name: "ragwatch_answer_tokens",
		Help:    "Answer length: output tokens from usage, else words of the answer.",
		Buckets: TokenBuckets, OTLPName: "ragwatch.answer.tokens", OTLPUnit: "{token}"}
	// MetricFeedback has the `sentiment` label.
	MetricFeedback = Metric{Name: "ragwatch_feedback_total",
		Help:     "User feedback received, by sentiment (score > 0 positive, < 0 negative, 0 neutral).",
		OTLPName: "ragwatch.feedback", OTLPUnit: "{feedback}"}
	// MetricDuration has the `stage` label (LatencyStage).
	MetricDuration = Metric{Name: "ragwatch_request_duration_seconds",
		Help:    "Duration of a request's stages (retrieval, generation, total); unmeasured stages are not observed.",
		Buckets: DurationBuckets, OTLPName: "ragwatch.request.duration", OTLPUnit: "s"}
	MetricEmpty = Metric{Name: "ragwatch_empty_retrievals_total",
		Help:     "Requests whose retrieval was seen and whose final context holds no document (weighted like ragwatch_requests_total).",
		OTLPName: "ragwatch.empty_retrievals", OTLPUnit: "{request}"}
	MetricNotSeen = Metric{Name: "ragwatch_retrievals_not_seen_total",
		Help:     "Requests whose trace showed no retrieval at all (no retrieval span, no documents in a step's output), weighted like ragwatch_requests_total: left out of the documents histogram, the empty retrievals and the retrieval scores.",
		OTLPName: "ragwatch.retrievals_not_seen", OTLPUnit: "{request}"}
	MetricCitations = Metric{Name: "ragwatch_citations_per_answer",
		Help:    "Citations per answer (requests with an answer).",
		Buckets: CitationBuckets, OTLPName: "ragwatch.citations_per_answer", OTLPUnit: "{citation}"}
	MetricRefusals = Metric{Name: "ragwatch_refusals_total",
		Help:     "Requests whose answer declines to answer for lack of information (\"I don't know\", \"the documents do not say\"), weighted like ragwatch_requests_total.",
		OTLPName: "ragwatch.refusals", OTLPUnit: "{request}"}
)

// Metrics lists the metrics above, in registration order.
var Metrics = []*Metric{&MetricRequests, &MetricDocuments, &MetricScore, &MetricTopScore, &MetricTokens,
	&MetricFeedback, &MetricDuration, &MetricEmpty, &MetricCitations, &MetricRefusals, &MetricNotSeen}

// ID indexes the catalog (All): record signals first, then feedback signals.
type ID uint8

// The signals.
const (
	RetrievalScoreTop ID = iota
	RetrievalScoreMean
	RetrievalScore // deprecated name of RetrievalScoreTop
	RetrievedDocuments
	EmptyRetrievalRate
	AnswerTokens
	InputTokens
	LatencySeconds
	RetrievalLatencySeconds
	GenerationLatencySeconds
	CitationCount
	UncitedAnswerRate
	NegativeFeedbackRate
	FeedbackScore
	Num

	// NumRecord is the number of record signals: IDs below it are read from a record, the
	// others from feedback (inline on a record or joined later).
	NumRecord = NegativeFeedbackRate
)

// Signal is one per-request value an SLO, drift detector or comparison can watch by Name, with
// the Prometheus metric that shows it.
type Signal struct {
	ID   ID
	Name string // the SLO/drift `metric` name (internal/score's Signal* constants)
	Unit string // of one value
	Help string // what one value is
	// Deprecated is the name to use instead, for an old name still accepted.
	Deprecated string
	// Metric is the Prometheus metric that shows the signal (nil: none does) and Shows how:
	// which series, or how the rate is read from it.
	Metric *Metric
	Shows  string
	// DriftEdges are a drift detector's default bin edges; nil: 0 to 1 by 0.05.
	DriftEdges []float64
}

// Value returns the signal's value in m, and whether m has one (a record without scored
// documents has no retrieval score; a record signal of feedback joined alone has none).
// It is a switch rather than a function in the table so that m, passed to no unknown function,
// stays on the caller's stack.
func (s *Signal) Value(m *Measurement) (float64, bool) {
	switch s.ID {
	case RetrievalScoreTop:
		return m.TopScore, m.Scored
	case RetrievalScoreMean:
		return m.MeanScore, m.Scored
	case RetrievalScore:
		return m.TopScore, m.Scored
	case RetrievedDocuments:
		return float64(m.Documents), m.Retrieved
	case EmptyRetrievalRate:
		return b2f(m.Documents == 0), m.Retrieved
	case AnswerTokens:
		return float64(m.AnswerTokens), m.Answered
	case InputTokens:
		return float64(m.InputTokens), m.InputTokens > 0
	case LatencySeconds:
		return stage(m, LatencyTotal)
	case RetrievalLatencySeconds:
		return stage(m, LatencyRetrieval)
	case GenerationLatencySeconds:
		return stage(m, LatencyGeneration)
	case CitationCount:
		return float64(m.Citations), m.CitationsKnown
	case UncitedAnswerRate:
		return b2f(m.Citations == 0), m.CitationsKnown
	case NegativeFeedbackRate:
		return b2f(m.FeedbackScore < 0), m.HasFeedback
	case FeedbackScore:
		return m.FeedbackScore, m.HasFeedback
	}
	return 0, false
}

// Feedback reports whether the signal is read from feedback.
func (s *Signal) Feedback() bool { return s.ID >= NumRecord }

// All is the catalog, indexed by ID.
var All = [Num]Signal{
	{ID: RetrievalScoreTop, Name: score.SignalRetrievalScoreTop, Unit: "score",
		Help:   "the highest document score (documents whose score is finite and below 1e12 in magnitude)",
		Metric: &MetricTopScore},
	{ID: RetrievalScoreMean, Name: score.SignalRetrievalScoreMean, Unit: "score",
		Help:   "the mean of the usable document scores (as for retrieval_score_top)",
		Metric: &MetricScore},
	{ID: RetrievalScore, Name: score.SignalRetrievalScore, Unit: "score", Deprecated: score.SignalRetrievalScoreTop,
		Help:   "the deprecated name of retrieval_score_top",
		Metric: &MetricTopScore},
	{ID: RetrievedDocuments, Name: score.SignalRetrievedDocuments, Unit: "documents",
		Help:       "the number of documents in the final context (records whose retrieval was seen)",
		Metric:     &MetricDocuments,
		DriftEdges: halves(20)},
	{ID: EmptyRetrievalRate, Name: score.SignalEmptyRetrievalRate, Unit: "ratio",
		Help:   "1 when the final context holds no document, else 0 (records whose retrieval was seen)",
		Metric: &MetricEmpty, Shows: "divided by ragwatch_requests_total minus ragwatch_retrievals_not_seen_total"},
	{ID: AnswerTokens, Name: score.SignalAnswerTokens, Unit: "tokens",
		Help:       "the answer's output tokens from the usage, else the answer's words (records with an answer)",
		Metric:     &MetricTokens,
		DriftEdges: doubling(8, 16384)},
	{ID: InputTokens, Name: score.SignalInputTokens, Unit: "tokens",
		Help:       "the generation's input tokens (when the usage reports them)",
		DriftEdges: doubling(8, 16384)},
	{ID: LatencySeconds, Name: score.SignalLatencySeconds, Unit: "seconds",
		Help:   "the whole request's duration (when measured)",
		Metric: &MetricDuration, Shows: `stage="total"`, DriftEdges: latencyEdges},
	{ID: RetrievalLatencySeconds, Name: score.SignalRetrievalLatencySeconds, Unit: "seconds",
		Help:   "the retrieval stage's duration (when measured)",
		Metric: &MetricDuration, Shows: `stage="retrieval"`, DriftEdges: latencyEdges},
	{ID: GenerationLatencySeconds, Name: score.SignalGenerationLatencySeconds, Unit: "seconds",
		Help:   "the generation stage's duration (when measured)",
		Metric: &MetricDuration, Shows: `stage="generation"`, DriftEdges: latencyEdges},
	{ID: CitationCount, Name: score.SignalCitationCount, Unit: "citations",
		Help:       "the answer's citations (records with the answer's text or explicit citations)",
		Metric:     &MetricCitations,
		DriftEdges: halves(20)},
	{ID: UncitedAnswerRate, Name: score.SignalUncitedAnswerRate, Unit: "ratio",
		Help:   "1 when the answer cites nothing, else 0 (records as for citation_count)",
		Metric: &MetricCitations, Shows: `the le="0" bucket divided by the count`},
	{ID: NegativeFeedbackRate, Name: score.SignalNegativeFeedbackRate, Unit: "ratio",
		Help:   "1 when the feedback's score is negative, else 0 (each feedback, inline or joined later)",
		Metric: &MetricFeedback, Shows: `sentiment="negative" divided by all sentiments`},
	{ID: FeedbackScore, Name: score.SignalFeedbackScore, Unit: "score",
		Help: "the feedback's score in [-1, 1] (statsd rag.user_feedback)"},
}

// ByName returns the signal named name (a deprecated name too).
func ByName(name string) (*Signal, bool) {
	for i := range All {
		if All[i].Name == name {
			return &All[i], true
		}
	}
	return nil, false
}

// Names lists the names of the signals, deprecated ones left out, in catalog order.
func Names() []string {
	out := make([]string, 0, Num)
	for i := range All {
		if All[i].Deprecated == "" {
			out = append(out, All[i].Name)
		}
	}
	return out
}

// Deprecated maps each deprecated signal name to the name to use.
func Deprecated() map[string]string {
	out := map[string]string{}
	for i := range All {
		if d := All[i].Deprecated; d != "" {
			out[All[i].Name] = d
		}
	}
	return out
}

var latencyEdges = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64}

// halves are the edges 0.5, 1.5, …, n+0.5: one bin per count up to n.
func halves(n int) []float64 {
	out := make([]float64, 0, n+1)
	for i := 0; i <= n; i++ {
		out = append(out, float64(i)+0.5)
	}
	return out
}

// doubling are the edges from, 2·from, … up to to.
func doubling(from, to float64) []float64 {
	var out []float64
	for v := from; v <= to; v *= 2 {
		out = append(out, v)
	}
	return out
}

func stage(m *Measurement, s LatencyStage) (float64, bool) {
	ms := m.LatencyMS[s]
	return ms / 1000, ms > 0
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
