package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"
)

// Record is one RAG turn: a retrieval followed by a generation. Its JSON form is documented in
// docs/record.md and is shared by the NATS subjects, the HTTP API and the offline evaluator.
type Record struct {
	TraceID string `json:"trace_id"`
	// SpanID is the turn's span: the span a trace backend shows the turn as, and where the
	// record's evaluations are placed (sampler/evalexport). Assembly sets it for every turn
	// whose span (or a child's reference to it) arrived; a record from the API may leave it
	// out. Key includes it.
	SpanID  string `json:"span_id,omitempty"`
	Service string `json:"service,omitempty"`
	// ResponseID is the provider's id of the model response that gave the answer
	// (gen_ai.response.id), when the trace names one: evaluations carry it, so a backend can
	// place them on that call.
	ResponseID string    `json:"response_id,omitempty"`
	SessionID  string    `json:"session_id,omitempty"`
	UserID     string    `json:"user_id,omitempty"`
	Time       time.Time `json:"time"`

	Query     string     `json:"query,omitempty"`
	Documents []Document `json:"documents,omitempty"`
	// RetrievalNotSeen says that the record's trace showed no retrieval at all (no retrieval
	// span, no documents found in a step's output): its lack of documents is not an empty
	// retrieval, and it stays out of every retrieval signal (EmptyRetrieval). Assembly sets
	// it; a record from outside may too, never together with documents.
	RetrievalNotSeen bool       `json:"retrieval_not_seen,omitempty"`
	Answer           string     `json:"answer,omitempty"`
	Citations        []Citation `json:"citations,omitempty"`
	Model            string     `json:"model,omitempty"`
	Usage            Usage      `json:"usage"`
	Latency          Latency    `json:"latency_ms"`
	Feedback         *Feedback  `json:"feedback,omitempty"`

	// Variant names the version of the app that served the turn (model, prompt, index,
	// reranker...): `rag.variant`, else the first of variants.attributes the trace carries.
	// Metric labels cap it to variants.max_values distinct values.
	Variant string `json:"variant,omitempty"`
	// PairID joins the two answers of a shadow pair: the app ran two variants on one request
	// and gave both records the same `rag.pair_id`. They are judged together once both arrive.
	PairID string `json:"pair_id,omitempty"`
	// Turn is the turn's position in its conversation, from 1; 0 means unknown.
	Turn int `json:"turn,omitempty"`
	// History holds the conversation's previous turns, oldest first, without system messages
	// and without the current question; bounded by conversation.max_history_turns and
	// conversation.max_history_bytes (TrimHistory).
	History []Message `json:"history,omitempty"`
	// Labels are human labels joined to the record (POST /api/v1/labels, NATS
	// ragwatch.labels.>), or given with it in an offline evaluation set.
	Labels *Label `json:"labels,omitempty"`

	// Reference is a gold answer (canary or offline traffic); Relevance maps document id to a
	// graded relevance label (trec_eval convention: grades below 1 are not relevant).
	Reference string         `json:"reference,omitempty"`
	Relevance map[string]int `json:"relevance,omitempty"`

	// Attributes holds low-cardinality context such as the route; never used as metric labels
	// except for keys the operator configures.
	Attributes map[string]string `json:"attributes,omitempty"`

	// UpstreamProbability is the probability with which the trace was kept by sampling before
	// it reached ragwatch (the tracestate's ot=th, or receivers.otlp.upstream_sampling_probability);
	// 0 means it was not sampled upstream. Signal counts weight the record by its inverse, and
	// the sampler multiplies it into Sampling.Probability.
	UpstreamProbability float64 `json:"upstream_probability,omitempty"`

	// Sampling is set by the sampler on records chosen for scoring.
	Sampling *Sampling `json:"sampling,omitempty"`

	// Elided is set by assembly when documents' texts of the record's trace were not kept,
	// because nothing was to score it when they arrived (its trace id outside the sampling
	// probability, no rule, no label waiting, no export: docs/sampling.md). Its documents
	// keep their ids, scores and metadata, and the citations parsed from its answer their
	// document ids but not their claims (Text ""): signals and alerts count them. The sampler
	// never scores it (no_content). It is not part of the record's JSON.
	Elided bool `json:"-"`

	// AwaitsAnswer is set by assembly when the record has no answer and its trace's
	// generation gave no output while its GenAI events come as OTLP log records: the answer
	// may still come, after the record (record.Content). The sampler keeps the content of
	// such a record it queues, to queue it again with its answer. Not part of the JSON.
	AwaitsAnswer bool `json:"-"`
	// AnswerSpanID is the span of the generation that answers the turn (the last one, when
	// none gave text), set by assembly for a record without an answer: a late answer's events
	// name that span (Content.SpanID), and the join finds the turn by it when a trace holds
	// several. Not part of the JSON.
	AnswerSpanID string `json:"-"`
}

// UpstreamWeight is how many traces of the traffic the record stands for: 1/UpstreamProbability,
// or 1 when it is unset or not a probability in (0, 1].
func (r *Record) UpstreamWeight() float64 {
	if p := r.UpstreamProbability; p > 0 && p <= 1 {
		return 1 / p
	}
	return 1
}

// Document is one retrieved (or reranked) passage in the order the application used it.
type Document struct {
	ID       string         `json:"id"`
	Score    *float64       `json:"score,omitempty"`
	Content  string         `json:"content,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Citation links a claim of the answer to the documents cited for it.
type Citation struct {
	Text        string   `json:"text"`
	DocumentIDs []string `json:"document_ids"`
}

// Usage is the generation's token usage.
type Usage struct {
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
}

// Latency holds stage durations in milliseconds; zero means not measured.
type Latency struct {
	Retrieval  float64 `json:"retrieval,omitempty"`
	Generation float64 `json:"generation,omitempty"`
	Total      float64 `json:"total,omitempty"`
}

// Feedback is a user's verdict on one answer: Score in [-1, 1] (thumbs down = -1, up = 1), an
// optional comment, and when it was given. It is the one form feedback takes inside ragwatch:
// attached to its Record, and handed alone to a FeedbackConsumer, where TraceID, SpanID (the
// turn, when a trace holds several) and Service name the request it judges. Those three never
// appear in the record's JSON `feedback` object (docs/record.md): there the record says whose
// feedback it is. Variant, like them, is set only on feedback handed alone: the variant of
// the record the join met it with ("" when it met none).
type Feedback struct {
	TraceID string    `json:"-"`
	SpanID  string    `json:"-"`
	Service string    `json:"-"`
	Variant string    `json:"-"`
	Score   float64   `json:"score"`
	Comment string    `json:"comment,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

// Message is one message of a conversation's history.
type Message struct {
	Role    string `json:"role"` // "user" or "assistant"
	Content string `json:"content"`
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Label is a person's judgement of one record: values for any metric (`faithfulness`,
// `judge_tone`, ...; each in [0, 1]), graded relevance per document id, a reference answer, and
// who labelled it. Like Feedback it is the one form labels take inside ragwatch: attached to
// its record, or alone (naming its record by TraceID, SpanID and Service) to a LabelConsumer.
type Label struct {
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	Service string `json:"service,omitempty"`
	// Variant is set by the join on a label handed alone after its record: the record's
	// variant. Never read from or written to JSON: a label does not choose its variant.
	Variant   string             `json:"-"`
	Values    map[string]float64 `json:"values,omitempty"`
	Relevance map[string]int     `json:"relevance,omitempty"`
	Reference string             `json:"reference,omitempty"`
	Labeler   string             `json:"labeler,omitempty"`
	Time      time.Time          `json:"time,omitzero"`
}

// Validate checks a label received from outside and returns every problem.
func (l *Label) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(l.TraceID) > MaxIDLength {
		bad("trace_id", "longer than %d bytes", MaxIDLength)
	}
	if len(l.SpanID) > MaxIDLength {
		bad("span_id", "longer than %d bytes", MaxIDLength)
	}
	if len(l.Values) == 0 && len(l.Relevance) == 0 && l.Reference == "" {
		bad("label", "needs at least one of values, relevance or reference")
	}
	if len(l.Values) > MaxAttributes {
		bad("values", "more than %d metrics", MaxAttributes)
	}
	for m, v := range l.Values {
		if m == "" || len(m) > MaxIDLength {
			bad("values", "metric names must be 1 to %d bytes", MaxIDLength)
		}
		if math.IsNaN(v) || v < 0 || v > 1 {
			bad("values."+truncID(m), "must be between 0 and 1")
		}
	}
	if len(l.Relevance) > MaxRelevanceLabel {
		bad("relevance", "more than %d labels", MaxRelevanceLabel)
	}
	if len(l.Reference) > MaxTextBytes {
		bad("reference", "longer than %d bytes", MaxTextBytes)
	}
	if len(l.Labeler) > MaxIDLength {
		bad("labeler", "longer than %d bytes", MaxIDLength)
	}
	return errors.Join(errs...)
}

func truncID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// TrimHistory bounds a conversation history to the newest maxTurns messages and maxBytes of
// content (0 disables a bound), dropping the oldest first. It returns the kept suffix of h (not
// a copy) and how many messages were dropped.
func TrimHistory(h []Message, maxTurns, maxBytes int) (kept []Message, dropped int) {
	start := 0
	if maxTurns > 0 && len(h) > maxTurns {
		start = len(h) - maxTurns
	}
	if maxBytes > 0 {
		size := 0
		for i := len(h) - 1; i >= start; i-- {
			size += len(h[i].Content)
			if size > maxBytes {
				start = i + 1
				break
			}
		}
	}
	return h[start:], start
}

// Sentiment buckets a feedback score for metric labels.
func (f Feedback) Sentiment() string {
	switch {
	case f.Score > 0:
		return "positive"
	case f.Score < 0:
		return "negative"
	default:
		return "neutral"
	}
}

// Sampling records why and with which inclusion probability a record was chosen for scoring:
// ragwatch's own probability times the record's UpstreamProbability, when one is declared.
// Aggregates over scores weight each record by 1/Probability.
type Sampling struct {
	Probability float64 `json:"probability"`
	Reason      string  `json:"reason"`
}

// EmptyRetrieval reports whether the record is an empty retrieval: a retrieval was seen (not
// RetrievalNotSeen) and the final context holds no document.
func (r *Record) EmptyRetrieval() bool { return !r.RetrievalNotSeen && len(r.Documents) == 0 }

// Key identifies the record: the trace id, plus the turn's span id when it has one.
func (r *Record) Key() string {
	if r.SpanID == "" {
		return r.TraceID
	}
	return r.TraceID + "/" + r.SpanID
}

// ScoreStats summarises the document scores that are present: the highest (NaN if one is, as
// max has it), their sum and how many documents have one (n = 0: top and sum are 0). It builds
// no slice: the signals read it for every record.
func (r *Record) ScoreStats() (top, sum float64, n int) {
	for i := range r.Documents {
		if s := r.Documents[i].Score; s != nil {
			if n == 0 {
				top = *s
			}
			top = max(top, *s)
			sum += *s
			n++
		}
	}
	return top, sum, n
}

// Limits bound what a record from outside may hold.
const (
	MaxIDLength       = 256
	MaxDocuments      = 1000
	MaxTextBytes      = 1 << 20 // query, answer, reference, one document's content
	MaxAttributes     = 128
	MaxRelevanceLabel = 10000
	MaxVariantLength  = 128
	MaxHistory        = 1000 // messages in a record's history from outside
)

// Validate checks a record received from outside (HTTP API, NATS) and returns every problem.
func (r *Record) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case r.TraceID == "":
		bad("trace_id", "is required")
	case len(r.TraceID) > MaxIDLength:
		bad("trace_id", "longer than %d bytes", MaxIDLength)
	}
	if len(r.SpanID) > MaxIDLength {
		bad("span_id", "longer than %d bytes", MaxIDLength)
	}
	if len(r.ResponseID) > MaxIDLength {
		bad("response_id", "longer than %d bytes", MaxIDLength)
	}
	if len(r.Variant) > MaxVariantLength {
		bad("variant", "longer than %d bytes", MaxVariantLength)
	}
	if len(r.PairID) > MaxIDLength {
		bad("pair_id", "longer than %d bytes", MaxIDLength)
	}
	if r.Turn < 0 {
		bad("turn", "must be 1 or more (0 or absent: unknown)")
	}
	if len(r.History) > MaxHistory {
		bad("history", "more than %d messages", MaxHistory)
	}
	for i, m := range r.History {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			bad(fmt.Sprintf("history[%d].role", i), "must be %q or %q", RoleUser, RoleAssistant)
		}
		if len(m.Content) > MaxTextBytes {
			bad(fmt.Sprintf("history[%d].content", i), "longer than %d bytes", MaxTextBytes)
		}
	}
	if r.Labels != nil {
		if err := r.Labels.Validate(); err != nil {
			bad("labels", "%v", err)
		}
	}
	if r.Query == "" && r.Answer == "" && len(r.Documents) == 0 {
		bad("record", "needs at least one of query, answer or documents")
	}
	for name, s := range map[string]string{"query": r.Query, "answer": r.Answer, "reference": r.Reference} {
		if len(s) > MaxTextBytes {
			bad(name, "longer than %d bytes", MaxTextBytes)
		}
	}
	if r.RetrievalNotSeen && len(r.Documents) > 0 {
		bad("retrieval_not_seen", "a record with documents has seen its retrieval: drop retrieval_not_seen or the documents")
	}
	if len(r.Documents) > MaxDocuments {
		bad("documents", "more than %d documents", MaxDocuments)
	}
	for i, d := range r.Documents {
		if d.ID == "" {
			bad(fmt.Sprintf("documents[%d].id", i), "is required")
		}
		if len(d.ID) > MaxIDLength {
			bad(fmt.Sprintf("documents[%d].id", i), "longer than %d bytes", MaxIDLength)
		}
		if len(d.Content) > MaxTextBytes {
			bad(fmt.Sprintf("documents[%d].content", i), "longer than %d bytes", MaxTextBytes)
		}
		if d.Score != nil && (math.IsNaN(*d.Score) || math.IsInf(*d.Score, 0)) {
			bad(fmt.Sprintf("documents[%d].score", i), "must be a finite number")
		}
	}
	if r.Feedback != nil && (math.IsNaN(r.Feedback.Score) || r.Feedback.Score < -1 || r.Feedback.Score > 1) {
		bad("feedback.score", "must be between -1 and 1")
	}
	if r.Usage.InputTokens < 0 || r.Usage.OutputTokens < 0 {
		bad("usage", "token counts must not be negative")
	}
	if r.Latency.Retrieval < 0 || r.Latency.Generation < 0 || r.Latency.Total < 0 {
		bad("latency_ms", "durations must not be negative")
	}
	if len(r.Attributes) > MaxAttributes {
		bad("attributes", "more than %d attributes", MaxAttributes)
	}
	if len(r.Relevance) > MaxRelevanceLabel {
		bad("relevance", "more than %d labels", MaxRelevanceLabel)
	}
	return errors.Join(errs...)
}

// DecodeJSON decodes one record or a JSON array of records (NATS `ragwatch.records.>`, POST
// /api/v1/records), validates each and fills parsed citations and the time when absent.
// Errors name the array index; see codec.go for their kinds.
func DecodeJSON(data []byte, now time.Time) ([]*Record, error) {
	data = trimSpace(data)
	if len(data) == 0 {
		return nil, malformed("empty body")
	}
	var recs []*Record
	if data[0] == '[' {
		if err := json.Unmarshal(data, &recs); err != nil {
			return nil, invalidJSON(err)
		}
		if len(recs) == 0 {
			return nil, malformed("empty array")
		}
	} else {
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, invalidJSON(err)
		}
		recs = []*Record{&r}
	}
	var errs []error
	for i, r := range recs {
		if r == nil {
			errs = append(errs, fmt.Errorf("[%d]: null record", i))
			continue
		}
		if err := r.Validate(); err != nil {
			if len(recs) == 1 {
				errs = append(errs, err)
				continue
			}
			// Name the index on every problem of the record, not only on the first line.
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					errs = append(errs, fmt.Errorf("[%d]: %w", i, e))
				}
			} else {
				errs = append(errs, fmt.Errorf("[%d]: %w", i, err))
			}
			continue
		}
		r.Normalize(now)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return recs, nil
}

// Normalize fills what the record did not say: the time, and citations parsed from the answer
// (for an Elided record, their document ids without their claims).
func (r *Record) Normalize(now time.Time) {
	if r.Time.IsZero() {
		r.Time = now
	}
	if len(r.Citations) == 0 && r.Answer != "" {
		r.Citations = parseCitations(r.Answer, r.Documents, !r.Elided)
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// MergeLabels merges labels (in arrival order) onto base, if any, into a new Label: later
// values per metric win, relevance maps merge (later grades per document win), the last
// non-empty reference and labeler win, and the time is the latest. The ids are left empty: on
// a record, the record says whose labels they are.
func MergeLabels(base *Label, more ...*Label) *Label {
	out := &Label{}
	for _, l := range append([]*Label{base}, more...) {
		if l == nil {
			continue
		}
		if len(l.Values) > 0 {
			if out.Values == nil {
				out.Values = make(map[string]float64, len(l.Values))
			}
			maps.Copy(out.Values, l.Values)
		}
		if len(l.Relevance) > 0 {
			if out.Relevance == nil {
				out.Relevance = make(map[string]int, len(l.Relevance))
			}
			maps.Copy(out.Relevance, l.Relevance)
		}
		if l.Reference != "" {
			out.Reference = l.Reference
		}
		if l.Labeler != "" {
			out.Labeler = l.Labeler
		}
		if l.Time.After(out.Time) {
			out.Time = l.Time
		}
	}
	return out
}
