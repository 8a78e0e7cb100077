package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSamplingDefaults(t *testing.T) {
	c := Default()
	if err := c.validate(nil); err != nil {
		t.Fatal(err)
	}
	want := Sampling{
		Rate:   0.1,
		Buffer: 1024,
		Recent: RecentRecords{MaxRecords: 10000, MaxBytes: 16 << 20, TTL: 10 * time.Minute, AnswerWait: 30 * time.Second},
	}
	if !reflect.DeepEqual(c.Sampling, want) {
		t.Fatalf("sampling defaults:\n got %+v\nwant %+v", c.Sampling, want)
	}
	if c.Scoring.Workers != 4 || c.Scoring.ScoreTimeout != 5*time.Minute || c.Scoring.Queue.AckWait != 6*time.Minute {
		t.Fatalf("runtime defaults: %+v", c.Scoring.ScoringRuntime)
	}
}

func TestSamplingFull(t *testing.T) {
	c, err := Parse([]byte(`
sampling:
  rate: 0.05
  max_per_minute: 120
  buffer: 64
  rules:
    - name: negative_feedback
      match: {negative_feedback: true}
      probability: 1
    - name: weak_retrieval
      match: {top_score_below: 0.3, services: [chat]}
      probability: 0.5
    - name: private
      match: {routes: [/admin], models: [m1]}
      never: true
  budget:
    usd_per_day: 20
    feedback_reserve_usd: 2
    prices:
      gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6}
  recent: {max_records: 10, max_bytes: 1000, ttl: 1m, answer_wait: 5s}
scoring:
  workers: 2
  score_timeout: 30s
  queue:
    ack_wait: 45s
    max_deliver: 3
    backoff: [1s, 2s]
    encoding: json
`))
	if err != nil {
		t.Fatal(err)
	}
	one, half, low := 1.0, 0.5, 0.3
	want := Sampling{
		Rate:         0.05,
		MaxPerMinute: 120,
		Buffer:       64,
		Rules: []SamplingRule{
			{Name: "negative_feedback", Match: SamplingMatch{NegativeFeedback: true}, Probability: &one},
			{Name: "weak_retrieval", Match: SamplingMatch{TopScoreBelow: &low, Services: []string{"chat"}}, Probability: &half},
			{Name: "private", Match: SamplingMatch{Routes: []string{"/admin"}, Models: []string{"m1"}}, Never: true},
		},
		Budget: SamplingBudget{USDPerDay: 20, FeedbackReserveUSD: 2, Prices: map[string]ModelPrice{
			"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.6},
		}},
		Recent: RecentRecords{MaxRecords: 10, MaxBytes: 1000, TTL: time.Minute, AnswerWait: 5 * time.Second},
	}
	if !reflect.DeepEqual(c.Sampling, want) {
		t.Fatalf("sampling:\n got %+v\nwant %+v", c.Sampling, want)
	}
	q := defaultScoringRuntime().Queue
	if q.Encoding != "binary" || q.BatchRecords != 32 || q.BatchWait != 20*time.Millisecond {
		t.Fatalf("default scoring.queue encoding %q, batch_records %d, batch_wait %s", q.Encoding, q.BatchRecords, q.BatchWait)
	}
	q.AckWait, q.MaxDeliver, q.Backoff, q.Encoding = 45*time.Second, 3, []time.Duration{time.Second, 2 * time.Second}, "json"
	wantRT := ScoringRuntime{Workers: 2, ScoreTimeout: 30 * time.Second, Queue: q}
	if !reflect.DeepEqual(c.Scoring.ScoringRuntime, wantRT) {
		t.Fatalf("runtime:\n got %+v\nwant %+v", c.Scoring.ScoringRuntime, wantRT)
	}
}

func TestSamplingInvalid(t *testing.T) {
	_, err := Parse([]byte(`
sampling:
  rate: 1.5
  max_per_minute: -1
  buffer: 0
  rules:
    - match: {negative_feedback: true}
      probability: 2
    - name: Bad-Name
      never: true
      probability: 0.5
    - name: rate
    - name: ok_rule
      never: true
    - name: ok_rule
      never: true
  budget:
    usd_per_day: 1
    feedback_reserve_usd: 1
  recent:
    max_records: 16777217
    answer_wait: -1s
scoring:
  workers: -1
  score_timeout: 1m
  queue:
    ack_wait: 1m
    max_deliver: 0
    subject: ragwatch.scoring.*
    backoff: [0s]
    encoding: protobuf
    batch_records: 0
    batch_wait: 11s
`))
	if err == nil {
		t.Fatal("want errors")
	}
	want := []string{
		"`sampling.rate` must be between 0 and 1, got 1.5",
		"`sampling.max_per_minute` must not be negative",
		"`sampling.buffer` must be positive",
		"`sampling.rules[0].name` is required (it is the `reason` label)",
		"`sampling.rules[0].probability` must be between 0 and 1, got 2",
		"`sampling.rules[1].name` must be lower-case letters, digits and _, got \"Bad-Name\"",
		"`sampling.rules[1]` set either probability or never, not both",
		"`sampling.rules[2].name` \"rate\" is reserved",
		"`sampling.rules[2]` needs probability (0..1) or never: true",
		"`sampling.rules[4].name` \"ok_rule\" is used by an earlier rule",
		"`sampling.budget.feedback_reserve_usd` must be less than usd_per_day (1)",
		"`sampling.recent.max_records` must be at most 16777216, got 16777217",
		"`sampling.recent.answer_wait` must not be negative",
		"`scoring.workers` must not be negative",
		"`scoring.queue.ack_wait` must be longer than scoring.score_timeout (1m0s), or records are redelivered while still being scored",
		"`scoring.queue.max_deliver` must be at least 1",
		"`scoring.queue.subject` must be a subject without wildcards, got \"ragwatch.scoring.*\"",
		"`scoring.queue.backoff[0]` must be positive",
		"`scoring.queue.encoding` must be \"binary\" or \"json\", got \"protobuf\"",
		"`scoring.queue.batch_records` must be between 1 and 1000, got 0",
		"`scoring.queue.batch_wait` must be between 0s and 10s, got 11s",
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", n, len(want), msg)
	}
}

func TestEvaluationSectionsValidate(t *testing.T) {
	c := Default()
	c.Variants.MaxValues = 0
	c.Conversation.MaxHistoryTurns = -1
	c.Pairs.Wait = 0
	err := c.validate(nil)
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"variants.max_values", "conversation.max_history_turns", "pairs.wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
