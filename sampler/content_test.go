package sampler

import (
	"context"
	"reflect"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// awaiting is a record assembled without its answer, whose answer may still come as a GenAI
// log event: the question and documents came in time.
func awaiting(trace string) *record.Record {
	return &record.Record{TraceID: trace, Service: "chat", Query: "What is the refund window?", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Documents: []record.Document{{ID: "doc-1", Content: "Refunds are accepted within 30 days."}}, AwaitsAnswer: true}
}

const lateAnswer = "Refunds are accepted within 30 days [doc-1]."

func (s *Stage) lateCount(outcome string) float64 {
	return promtestutil.ToFloat64(s.lateContent.WithLabelValues(outcome))
}

// A sampled record that awaits its answer is held, and queued once, with the answer that came
// after it: what is queued is what the record with its answer in time would have queued (the
// question the spans gave stays, the citations are parsed from the answer, the weight is the
// decision's).
func TestLateAnswerGivesWhatAnAnswerInTimeGives(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, o, _ := newStage(t, config.Default().Sampling, c) // rate 0.1: idHigh sampled
	ctx := context.Background()
	if err := s.ConsumeRecord(ctx, awaiting(idHigh)); err != nil {
		t.Fatal(err)
	}
	if len(o.recs) != 0 {
		t.Fatalf("queued before its answer came: %+v", o.recs[0])
	}
	c.t = c.t.Add(5 * time.Second)
	s.Sweep(false) // answer_wait (30s) has not passed
	lc := record.Content{TraceID: idHigh, Service: "chat", Query: "another question", Answer: lateAnswer}
	if err := s.ConsumeContent(ctx, lc); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeContent(ctx, lc); err != nil { // the same event again: queued once
		t.Fatal(err)
	}
	if len(o.recs) != 1 {
		t.Fatalf("%d offers, want 1", len(o.recs))
	}
	late := o.recs[0]

	early, eo, _ := newStage(t, config.Default().Sampling, c)
	inTime := awaiting(idHigh)
	inTime.AwaitsAnswer, inTime.Answer = false, lateAnswer
	inTime.Normalize(inTime.Time)
	if err := early.ConsumeRecord(ctx, inTime); err != nil {
		t.Fatal(err)
	}
	if len(eo.recs) != 1 || !reflect.DeepEqual(late, eo.recs[0]) {
		t.Fatalf("late answer queued\n %+v\nanswer in time queued\n %+v", late, eo.recs)
	}
	if late.Query != "What is the refund window?" || len(late.Citations) != 1 || *late.Sampling != (record.Sampling{Probability: 0.1, Reason: "rate"}) {
		t.Fatalf("queued %+v", late)
	}
	if s.lateCount(LateContentScored) != 1 || s.lateCount(LateContentUnchanged) != 1 ||
		promtestutil.ToFloat64(s.awaited.WithLabelValues(AwaitedAnswered)) != 1 {
		t.Fatalf("scored %v, unchanged %v", s.lateCount(LateContentScored), s.lateCount(LateContentUnchanged))
	}
}

// A record whose answer does not come within answer_wait is queued as it is (its claim
// metrics are not scored for an empty answer); an answer coming after that is too late and
// counted. A record not sampled stays so, and with answer_wait 0 nothing waits.
func TestAnswerThatDoesNotCome(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, o, _ := newStage(t, config.Default().Sampling, c)
	ctx := context.Background()
	for _, id := range []string{idHigh, idLow} {
		if err := s.ConsumeRecord(ctx, awaiting(id)); err != nil {
			t.Fatal(err)
		}
	}
	c.t = c.t.Add(30 * time.Second)
	s.Sweep(false)
	if len(o.recs) != 1 || o.recs[0].TraceID != idHigh || o.recs[0].Answer != "" || o.recs[0].Sampling == nil {
		t.Fatalf("offered %+v", o.recs)
	}
	for _, id := range []string{idHigh, idLow} {
		if err := s.ConsumeContent(ctx, record.Content{TraceID: id, Service: "chat", Answer: lateAnswer}); err != nil {
			t.Fatal(err)
		}
	}
	if len(o.recs) != 1 || s.lateCount(LateContentTooLate) != 1 || s.lateCount(LateContentNotSampled) != 1 ||
		promtestutil.ToFloat64(s.awaited.WithLabelValues(AwaitedWithout)) != 1 {
		t.Fatalf("%d offers, too_late %v, not_sampled %v", len(o.recs), s.lateCount(LateContentTooLate), s.lateCount(LateContentNotSampled))
	}

	// Shutdown queues what still waits.
	if err := s.ConsumeRecord(ctx, awaiting("100000000000000000ffffffffffffff")); err != nil {
		t.Fatal(err)
	}
	s.Sweep(true)
	if len(o.recs) != 2 {
		t.Fatalf("%d offers after the shutdown sweep, want 2", len(o.recs))
	}

	cfg := config.Default().Sampling
	cfg.Recent.AnswerWait = 0
	now, no, _ := newStage(t, cfg, c)
	if err := now.ConsumeRecord(ctx, awaiting(idHigh)); err != nil {
		t.Fatal(err)
	}
	if err := now.ConsumeContent(ctx, record.Content{TraceID: idHigh, Service: "chat", Answer: lateAnswer}); err != nil {
		t.Fatal(err)
	}
	if len(no.recs) != 1 || no.recs[0].Answer != "" || now.lateCount(LateContentTooLate) != 1 {
		t.Fatalf("answer_wait 0: offered %+v, too_late %v", no.recs, now.lateCount(LateContentTooLate))
	}
}

// A record that leaves the cache at its bound while it awaits its answer is queued as it is,
// by the next sweep, not lost.
func TestAwaitingRecordEvictedIsQueued(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := config.Default().Sampling
	cfg.Recent.MaxRecords = 1
	s, o, _ := newStage(t, cfg, c)
	ctx := context.Background()
	for _, id := range []string{idHigh, "100000000000000000ffffffffffffff"} {
		if err := s.ConsumeRecord(ctx, awaiting(id)); err != nil {
			t.Fatal(err)
		}
	}
	s.Sweep(false)
	if len(o.recs) != 1 || o.recs[0].TraceID != idHigh {
		t.Fatalf("offered %+v", o.recs)
	}
	if err := s.ConsumeContent(ctx, record.Content{TraceID: "100000000000000000ffffffffffffff", Service: "chat", Answer: lateAnswer}); err != nil {
		t.Fatal(err)
	}
	if len(o.recs) != 2 || o.recs[1].Answer != lateAnswer {
		t.Fatalf("offered %+v", o.recs)
	}
}

// A record kept open for late feedback (a negative_feedback rule) takes the late answer into
// its kept copy: feedback then sends it to scoring with its answer.
func TestLateAnswerThenFeedback(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, o, _ := newStage(t, feedbackConfig(), c)
	ctx := context.Background()
	if err := s.ConsumeRecord(ctx, awaiting(idLow)); err != nil { // not sampled at 0.1: kept open
		t.Fatal(err)
	}
	if err := s.ConsumeContent(ctx, record.Content{TraceID: idLow, Service: "chat", Answer: lateAnswer}); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeFeedback(ctx, record.Feedback{TraceID: idLow, Service: "chat", Score: -1}); err != nil {
		t.Fatal(err)
	}
	if len(o.recs) != 1 || o.recs[0].Answer != lateAnswer || o.recs[0].Query != "What is the refund window?" || s.lateCount(LateContentMerged) != 1 {
		t.Fatalf("offered %+v, merged %v", o.recs, s.lateCount(LateContentMerged))
	}
}
