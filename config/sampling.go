package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/offheap"
)

// Sampling configures which records are scored (docs/sampling.md).
type Sampling struct {
	// Rate is the default inclusion probability, decided consistently by trace id.
	Rate float64 `yaml:"rate"`
	// Rules raise or lower the probability per request; the first match wins.
	Rules []SamplingRule `yaml:"rules"`
	// MaxPerMinute caps samples with a token bucket (burst = one minute's worth); 0 is no cap.
	MaxPerMinute int `yaml:"max_per_minute"`
	// Budget caps what scoring spends per UTC day.
	Budget SamplingBudget `yaml:"budget"`
	// Buffer is the in-memory queue between ingestion and the JetStream publisher; when it is
	// full samples are dropped (counted), never waited for.
	Buffer int `yaml:"buffer"`
	// Recent keeps recently seen records so late negative feedback can still send them to scoring.
	Recent RecentRecords `yaml:"recent"`
}

// SamplingRule is one rule: when Match holds, the record is sampled with Probability, or never.
type SamplingRule struct {
	// Name is the `reason` label of records sampled (or skipped) by this rule.
	Name  string        `yaml:"name"`
	Match SamplingMatch `yaml:"match"`
	// Probability replaces sampling.rate for matching records; unset with never: true.
	Probability *float64 `yaml:"probability"`
	// Never keeps matching records out of scoring (and out of the queue) entirely.
	Never bool `yaml:"never"`
}

// SamplingMatch lists conditions that must all hold; a list matches when any item equals the
// record's value. An empty match matches every record.
type SamplingMatch struct {
	NegativeFeedback bool     `yaml:"negative_feedback"` // feedback score < 0
	EmptyRetrieval   bool     `yaml:"empty_retrieval"`   // no documents
	TopScoreBelow    *float64 `yaml:"top_score_below"`   // highest document score < x (no scores: no match)
	Services         []string `yaml:"services"`
	Routes           []string `yaml:"routes"` // attribute `route` (or `http.route`)
	Models           []string `yaml:"models"`
}

// SamplingBudget is the daily cost budget. Spending is priced from the scorers' reported token
// usage with Prices; a model missing from Prices counts the cost the scorer reported.
type SamplingBudget struct {
	// USDPerDay stops sampling for the rest of the UTC day once spent; 0 is no budget.
	USDPerDay float64 `yaml:"usd_per_day"`
	// FeedbackReserveUSD is kept for samples triggered by negative feedback: other samples stop
	// at usd_per_day - feedback_reserve_usd.
	FeedbackReserveUSD float64 `yaml:"feedback_reserve_usd"`
	// Prices maps a judge model name to its price.
	Prices map[string]ModelPrice `yaml:"prices"`
}

// ModelPrice is a model's price in US dollars per million tokens.
type ModelPrice struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
}

// RecentRecords bounds the cache of recent records kept for late feedback. Records keep their
// content there only while feedback may still send them to scoring (a negative_feedback rule, or
// a record skipped by the budget or max_per_minute); others keep a 64-byte decision or nothing.
// MaxHeldRecords bounds the per-record tables sized by a count: sampling.recent.max_records and
// alerting.agreement.max_records. They are internal/offheap tables, whose bound this is;
// 16,777,216 records is 0.7 to 2.3 GB of them.
const MaxHeldRecords = offheap.MaxEntries

type RecentRecords struct {
	MaxRecords int `yaml:"max_records"`
	// MaxBytes bounds the content kept: with a negative_feedback rule, late feedback is caught
	// for about max_bytes / (records per second × bytes per record) seconds (docs/sampling.md).
	MaxBytes int64         `yaml:"max_bytes"`
	TTL      time.Duration `yaml:"ttl"`
	// AnswerWait is how long a sampled record whose answer may still come as a GenAI log
	// event (record.Record.AwaitsAnswer) is held, with its content, before it is queued
	// without it; 0 queues it at once (docs/sampling.md#answers-that-come-after-their-record).
	AnswerWait time.Duration `yaml:"answer_wait"`
}

func defaultSampling() Sampling {
	return Sampling{
		Rate:   0.1,
		Buffer: 1024,
		// 16 MiB: two minutes of late feedback at 20 requests/s of 6 KB records, and a small
		// share of the sidecar's 128 MiB limit at any rate (docs/sampling.md).
		Recent: RecentRecords{MaxRecords: 10000, MaxBytes: 16 << 20, TTL: 10 * time.Minute, AnswerWait: 30 * time.Second},
	}
}

// Validate implements Validator.
func (s Sampling) Validate() error {
	var errs []error
	if !probability(s.Rate) {
		errs = append(errs, Invalid("rate", "must be between 0 and 1, got %v", s.Rate))
	}
	seen := map[string]bool{}
	for i, r := range s.Rules {
		key := fmt.Sprintf("rules[%d]", i)
		switch {
		case r.Name == "":
			errs = append(errs, Invalid(key+".name", "is required (it is the `reason` label)"))
		case !labelWord(r.Name):
			errs = append(errs, Invalid(key+".name", "must be lower-case letters, digits and _, got %q", r.Name))
		case r.Name == "rate" || r.Name == "rate_limit" || r.Name == "budget" || r.Name == "rule" || r.Name == "no_content" || r.Name == "labelled":
			errs = append(errs, Invalid(key+".name", "%q is reserved", r.Name))
		case seen[r.Name]:
			errs = append(errs, Invalid(key+".name", "%q is used by an earlier rule", r.Name))
		}
		seen[r.Name] = true
		switch {
		case r.Never && r.Probability != nil:
			errs = append(errs, Invalid(key, "set either probability or never, not both"))
		case !r.Never && r.Probability == nil:
			errs = append(errs, Invalid(key, "needs probability (0..1) or never: true"))
		case r.Probability != nil && !probability(*r.Probability):
			errs = append(errs, Invalid(key+".probability", "must be between 0 and 1, got %v", *r.Probability))
		}
		if t := r.Match.TopScoreBelow; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0)) {
			errs = append(errs, Invalid(key+".match.top_score_below", "must be a finite number"))
		}
	}
	if s.MaxPerMinute < 0 {
		errs = append(errs, Invalid("max_per_minute", "must not be negative"))
	}
	b := s.Budget
	if b.USDPerDay < 0 || math.IsNaN(b.USDPerDay) {
		errs = append(errs, Invalid("budget.usd_per_day", "must not be negative"))
	}
	if b.FeedbackReserveUSD < 0 || math.IsNaN(b.FeedbackReserveUSD) {
		errs = append(errs, Invalid("budget.feedback_reserve_usd", "must not be negative"))
	} else if b.FeedbackReserveUSD > 0 && b.FeedbackReserveUSD >= b.USDPerDay {
		errs = append(errs, Invalid("budget.feedback_reserve_usd", "must be less than usd_per_day (%v)", b.USDPerDay))
	}
	for m, p := range b.Prices {
		if p.InputPerMTok < 0 || p.OutputPerMTok < 0 || math.IsNaN(p.InputPerMTok) || math.IsNaN(p.OutputPerMTok) {
			errs = append(errs, Invalid("budget.prices."+m, "prices must not be negative"))
		}
	}
	if s.Buffer <= 0 {
		errs = append(errs, Invalid("buffer", "must be positive"))
	}
	if s.Recent.MaxRecords < 0 {
		errs = append(errs, Invalid("recent.max_records", "must not be negative"))
	} else if s.Recent.MaxRecords > MaxHeldRecords {
		errs = append(errs, Invalid("recent.max_records", "must be at most %d, got %d", MaxHeldRecords, s.Recent.MaxRecords))
	}
	if s.Recent.MaxBytes < 0 {
		errs = append(errs, Invalid("recent.max_bytes", "must not be negative"))
	}
	if s.Recent.MaxRecords > 0 && s.Recent.TTL <= 0 {
		errs = append(errs, Invalid("recent.ttl", "must be positive"))
	}
	if s.Recent.AnswerWait < 0 {
		errs = append(errs, Invalid("recent.answer_wait", "must not be negative"))
	}
	return joinErrs(errs)
}

func probability(p float64) bool { return p >= 0 && p <= 1 }

func labelWord(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ScoringRuntime is the part of `scoring` about the queue and the workers.
type ScoringRuntime struct {
	// Workers is how many records are scored at once by this process (`ragwatch run` and
	// `ragwatch worker`); 0 in `run` leaves scoring to worker pods.
	Workers int `yaml:"workers"`
	// ScoreTimeout bounds one attempt at scoring a record (every scorer); queue.ack_wait must
	// be longer.
	ScoreTimeout time.Duration `yaml:"score_timeout"`
	Queue        ScoringQueue  `yaml:"queue"`
}

// ScoringQueue configures the JetStream work queue between the sampler and the workers.
type ScoringQueue struct {
	Stream   string `yaml:"stream"`
	Subject  string `yaml:"subject"`
	Consumer string `yaml:"consumer"`
	// MaxBytes and MaxAge bound the stream; when full, new samples are refused (counted as
	// storage_full) and queued work is kept. MaxBytes also bounds the memory a backlog takes
	// in the embedded server (DefaultScoringQueueMaxBytes).
	MaxBytes int64         `yaml:"max_bytes"`
	MaxAge   time.Duration `yaml:"max_age"`
	// DedupWindow is how long a record key is remembered so the same record is queued once:
	// long enough for a client's re-post and the publisher's resends (seconds). A JetStream
	// intake recognises its own redeliveries after a crash (nats.consume.dedup_window, kept in
	// KV), so they do not reach the sampler again. The embedded server keeps each key in memory
	// (100-200 bytes) for the whole window: at full speed, 2 minutes of keys were ≈ 45 MiB of
	// resident memory more than 30 seconds (docs/performance-history.md).
	DedupWindow time.Duration `yaml:"dedup_window"`
	// AckWait is how long a worker may hold a record before it is redelivered.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxDeliver is how many attempts a record gets before it goes to the dead-letter subject.
	MaxDeliver int `yaml:"max_deliver"`
	// Backoff is the delay before each retry after a failed attempt; the last value repeats.
	Backoff []time.Duration `yaml:"backoff"`
	// DeadLetterSubject receives records that failed max_deliver times, kept in DeadLetterStream.
	DeadLetterSubject string        `yaml:"dead_letter_subject"`
	DeadLetterStream  string        `yaml:"dead_letter_stream"`
	DeadLetterMaxAge  time.Duration `yaml:"dead_letter_max_age"`
	// DeadLetterMaxBytes caps the dead-letter stream; beyond it the oldest records go.
	DeadLetterMaxBytes int64 `yaml:"dead_letter_max_bytes"`
	// ScoresSubjectPrefix is where results go: <prefix>.<service>.
	ScoresSubjectPrefix string `yaml:"scores_subject_prefix"`
	// Encoding is how the publisher writes a record on Subject: "binary" (the default: the
	// record's fields in protobuf's wire format, a fraction of JSON's CPU) or "json" (the
	// form of docs/record.md, for workers older than the binary form while they are
	// upgraded). Workers read both.
	Encoding string `yaml:"encoding"`
	// BatchRecords is how many sampled records the publisher may put in one message of the
	// binary encoding (1: one record a message). BatchWait is how long it waits for more
	// records after the first before it publishes what it has (0: only what is already
	// buffered). Every message costs the server a store, a delivery, an ack and a removal
	// whatever its size, so at full speed a batch costs a fraction of its records sent one by
	// one (docs/performance-history.md); at low rates a batch holds the records that left assembly
	// together. Workers older than batches dead-letter them as undecodable: set batch_records
	// to 1 until every worker is upgraded.
	BatchRecords int           `yaml:"batch_records"`
	BatchWait    time.Duration `yaml:"batch_wait"`
}

// MaxBatchRecords bounds scoring.queue.batch_records.
const MaxBatchRecords = 1000

// DefaultScoringQueueMaxBytes caps the scoring stream: 30 MiB, about 4,800 records of five 1 KB
// documents. The embedded server keeps the file blocks a lagging consumer reads and acks cached
// in memory (10 s after their last use), so when the workers fall behind, up to the whole
// stream sits in the sidecar's heap: with workers: 1 at full speed, RSS reached 343-379 MiB at
// 128 MiB against 141-150 MiB at 30 MiB (docs/performance-history.md). Below 32 MiB the server also
// writes 4 MB blocks instead of 8 MB.
const DefaultScoringQueueMaxBytes = 30 << 20

func defaultScoringRuntime() ScoringRuntime {
	return ScoringRuntime{
		Workers:      4,
		ScoreTimeout: 5 * time.Minute,
		Queue: ScoringQueue{
			Stream:              "RAGWATCH_SCORING",
			Subject:             "ragwatch.scoring.records",
			Consumer:            "ragwatch-scorers",
			MaxBytes:            DefaultScoringQueueMaxBytes,
			MaxAge:              24 * time.Hour,
			DedupWindow:         30 * time.Second,
			AckWait:             6 * time.Minute,
			MaxDeliver:          5,
			Backoff:             []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute},
			DeadLetterSubject:   "ragwatch.scoring.dead",
			DeadLetterStream:    "RAGWATCH_SCORING_DEAD",
			DeadLetterMaxAge:    7 * 24 * time.Hour,
			DeadLetterMaxBytes:  32 << 20,
			ScoresSubjectPrefix: "ragwatch.scores",
			Encoding:            "binary",
			BatchRecords:        32,
			BatchWait:           20 * time.Millisecond,
		},
	}
}

// Validate implements Validator.
func (s ScoringRuntime) Validate() error {
	var errs []error
	if s.Workers < 0 {
		errs = append(errs, Invalid("workers", "must not be negative"))
	}
	if s.ScoreTimeout <= 0 {
		errs = append(errs, Invalid("score_timeout", "must be positive"))
	}
	q := s.Queue
	for key, v := range map[string]string{"queue.stream": q.Stream, "queue.consumer": q.Consumer, "queue.dead_letter_stream": q.DeadLetterStream} {
		if v == "" || strings.ContainsAny(v, " .*>\t") {
			errs = append(errs, Invalid(key, "must be a name without spaces, dots or wildcards, got %q", v))
		}
	}
	for key, v := range map[string]string{"queue.subject": q.Subject, "queue.dead_letter_subject": q.DeadLetterSubject, "queue.scores_subject_prefix": q.ScoresSubjectPrefix} {
		if v == "" || strings.ContainsAny(v, " *>\t") || strings.HasPrefix(v, ".") || strings.HasSuffix(v, ".") || strings.Contains(v, "..") {
			errs = append(errs, Invalid(key, "must be a subject without wildcards, got %q", v))
		}
	}
	if q.Subject != "" && q.Subject == q.DeadLetterSubject {
		errs = append(errs, Invalid("queue.dead_letter_subject", "must differ from queue.subject"))
	}
	if q.Stream != "" && q.Stream == q.DeadLetterStream {
		errs = append(errs, Invalid("queue.dead_letter_stream", "must differ from queue.stream"))
	}
	if q.MaxBytes <= 0 {
		errs = append(errs, Invalid("queue.max_bytes", "must be positive"))
	}
	if q.MaxAge <= 0 {
		errs = append(errs, Invalid("queue.max_age", "must be positive"))
	}
	if q.DedupWindow <= 0 {
		errs = append(errs, Invalid("queue.dedup_window", "must be positive"))
	} else if q.MaxAge > 0 && q.DedupWindow > q.MaxAge {
		errs = append(errs, Invalid("queue.dedup_window", "must not exceed max_age (%s)", q.MaxAge))
	}
	if q.DeadLetterMaxAge <= 0 {
		errs = append(errs, Invalid("queue.dead_letter_max_age", "must be positive"))
	}
	if q.DeadLetterMaxBytes <= 0 {
		errs = append(errs, Invalid("queue.dead_letter_max_bytes", "must be positive"))
	}
	if q.AckWait <= 0 {
		errs = append(errs, Invalid("queue.ack_wait", "must be positive"))
	} else if s.ScoreTimeout > 0 && q.AckWait <= s.ScoreTimeout {
		errs = append(errs, Invalid("queue.ack_wait", "must be longer than scoring.score_timeout (%s), or records are redelivered while still being scored", s.ScoreTimeout))
	}
	if q.MaxDeliver < 1 {
		errs = append(errs, Invalid("queue.max_deliver", "must be at least 1"))
	}
	if q.Encoding != "binary" && q.Encoding != "json" {
		errs = append(errs, Invalid("queue.encoding", `must be "binary" or "json", got %q`, q.Encoding))
	}
	if q.BatchRecords < 1 || q.BatchRecords > MaxBatchRecords {
		errs = append(errs, Invalid("queue.batch_records", "must be between 1 and %d, got %d", MaxBatchRecords, q.BatchRecords))
	}
	if q.BatchWait < 0 || q.BatchWait > 10*time.Second {
		errs = append(errs, Invalid("queue.batch_wait", "must be between 0s and 10s, got %s", q.BatchWait))
	}
	for i, b := range q.Backoff {
		if b <= 0 {
			errs = append(errs, Invalid(fmt.Sprintf("queue.backoff[%d]", i), "must be positive"))
		}
	}
	return joinErrs(errs)
}
