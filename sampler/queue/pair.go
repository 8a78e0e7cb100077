package queue

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/ragwatch/ragwatch/internal/record"
)

// HeaderKind marks a message of the scoring stream that is not a sampled record; KindPair is
// a pair job. Messages without the header are records, so older workers see no change in
// what they already handle.
const (
	HeaderKind = "Ragwatch-Kind"
	KindPair   = "pair"
)

// PairJob asks a worker to judge the two records of a shadow pair together. A is the baseline,
// B the candidate (pairwise.Orient); Comparison names the configured comparison ("none" when
// none matched); Probability is the chance the pair was judged at all, so its outcome weighs
// 1/Probability.
type PairJob struct {
	Comparison  string        `json:"comparison"`
	Probability float64       `json:"probability"`
	A           record.Record `json:"a"`
	B           record.Record `json:"b"`
}

// Key is the job's Nats-Msg-Id: the two records' keys, so a pair offered twice within the
// dedup window is queued once.
func (j *PairJob) Key() string { return "pair:" + j.A.Key() + "|" + j.B.Key() }

// IsPair reports whether a message of the scoring stream is a pair job.
func IsPair(h nats.Header) bool { return h != nil && h.Get(HeaderKind) == KindPair }

// DecodePair decodes and checks a pair job.
func DecodePair(data []byte) (*PairJob, error) {
	var j PairJob
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("undecodable pair job: %w", err)
	}
	if j.A.TraceID == "" || j.B.TraceID == "" {
		return nil, errors.New("pair job: a record's trace_id is missing")
	}
	if !(j.Probability > 0 && j.Probability <= 1) {
		return nil, fmt.Errorf("pair job: probability %v outside (0, 1]", j.Probability)
	}
	return &j, nil
}

// OfferPair queues a pair job like Offer queues a record: it never blocks, and drops are
// counted on ragwatch_scoring_dropped_total. j must not be changed afterwards.
func (p *Publisher) OfferPair(j *PairJob) error { return p.offer(item{pair: j}) }
