package reqsignal

import (
	"unicode"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/internal/record"
)

// LatencyStage indexes the latency stages of a record (retrieval, generation, total); String is
// the `stage` label value.
type LatencyStage int

// The latency stages.
const (
	LatencyRetrieval LatencyStage = iota
	LatencyGeneration
	LatencyTotal
	NumLatencyStages
)

var stageNames = [NumLatencyStages]string{"retrieval", "generation", "total"}

// String returns the label value of the stage.
func (s LatencyStage) String() string { return stageNames[s] }

// Measurement holds the numbers a record (or feedback) yields, as Measure and MeasureFeedback
// compute them. Every signal of the catalog is a projection of it (Signal.Value), and the
// metrics record its fields directly: the two cannot disagree. It holds no user content and
// is copied by value (no allocation on the ingest path).
type Measurement struct {
	// Retrieved is true when the record's retrieval was seen (not record.RetrievalNotSeen):
	// only then do Documents and the retrieval signals say anything. A record whose trace
	// showed no retrieval is not an empty retrieval.
	Retrieved bool
	Documents int     // documents in the final context
	Scored    bool    // at least one document has a usable score
	MeanScore float64 // mean of the usable document scores
	TopScore  float64 // best usable document score

	// Answered is true when the record has an answer: its text, or output tokens in its usage
	// (an instrumentation that does not capture content still reports the tokens).
	Answered bool
	// AnswerTokens is the answer's length: output tokens from the usage, else the answer's
	// words (Words). Set when Answered.
	AnswerTokens int64
	// OutputTokens and InputTokens are the usage's counts, 0 when not reported.
	OutputTokens int64
	InputTokens  int64

	// CitationsKnown is true when the record says how many citations its answer has: it has
	// the answer's text (citations parsed from its markers, or given) or explicit citations.
	// An answer known only by its tokens cites an unknown number of documents, not zero.
	CitationsKnown bool
	Citations      int // the answer's citations, when CitationsKnown

	// LatencyMS holds the stage durations in milliseconds; 0 means not measured (or unusable:
	// negative, NaN, infinite or absurd).
	LatencyMS [NumLatencyStages]float64

	// HasFeedback is true when the record carries feedback (or this is feedback joined later)
	// with a score; FeedbackScore is that score, clamped to [-1, 1].
	HasFeedback   bool
	FeedbackScore float64
}

// MaxScore bounds the document scores taken into account: a score is usable when
// -MaxScore < s < MaxScore. An infinite or absurd score (a bug upstream) would otherwise turn a
// histogram's sum, or an SLO's window mean, into +Inf for good.
const MaxScore = 1e12

// MaxLatencyMS bounds the stage durations taken into account (ms), like MaxScore.
const MaxLatencyMS = 1e12

// Measure computes the measurement of a record: the one function from a record to its signals.
// It does not allocate. Feedback the record carries inline is measured too.
func Measure(r *record.Record) Measurement {
	var m Measurement
	m.Retrieved = !r.RetrievalNotSeen || len(r.Documents) > 0
	m.Documents = len(r.Documents)
	var sum float64
	n := 0
	for i := range r.Documents {
		p := r.Documents[i].Score
		if p == nil || !(*p > -MaxScore && *p < MaxScore) { // absent, NaN, infinite or absurd
			continue
		}
		v := *p
		if n == 0 || v > m.TopScore {
			m.TopScore = v
		}
		sum += v
		n++
	}
	if n > 0 {
		m.Scored = true
		m.MeanScore = sum / float64(n)
	}
	m.OutputTokens = max(r.Usage.OutputTokens, 0)
	m.InputTokens = max(r.Usage.InputTokens, 0)
	switch {
	case m.OutputTokens > 0:
		m.Answered = true
		m.AnswerTokens = m.OutputTokens
	case r.Answer != "":
		m.Answered = true
		m.AnswerTokens = int64(Words(r.Answer))
	}
	if r.Answer != "" || len(r.Citations) > 0 {
		m.CitationsKnown = true
		m.Citations = len(r.Citations)
	}
	for i, ms := range [NumLatencyStages]float64{r.Latency.Retrieval, r.Latency.Generation, r.Latency.Total} {
		if ms > 0 && ms < MaxLatencyMS { // skips 0 (unmeasured), negative, NaN and absurd values
			m.LatencyMS[i] = ms
		}
	}
	m.measureFeedback(r.Feedback)
	return m
}

// MeasureFeedback computes the measurement of feedback joined after its record: only the
// feedback fields are set.
func MeasureFeedback(f *record.Feedback) Measurement {
	var m Measurement
	m.measureFeedback(f)
	return m
}

func (m *Measurement) measureFeedback(f *record.Feedback) {
	if f != nil && f.Score == f.Score { // NaN is not feedback
		m.HasFeedback = true
		m.FeedbackScore = min(max(f.Score, -1), 1)
	}
}

// asciiSpace marks the ASCII bytes unicode.IsSpace reports.
var asciiSpace = [utf8.RuneSelf]bool{' ': true, '\n': true, '\t': true, '\r': true, '\v': true, '\f': true}

// Words counts the whitespace-separated words of s without allocating: the answer's length
// when the usage reports no output tokens.
func Words(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); {
		c := s[i]
		var space bool
		if c < utf8.RuneSelf {
			space = asciiSpace[c]
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			space = unicode.IsSpace(r)
			i += size
		}
		if space {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}
