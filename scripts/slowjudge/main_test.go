package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/openai"
)

func serve(t *testing.T, j *judge) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(j)
	t.Cleanup(srv.Close)
	return srv
}

func scorer(t *testing.T, url string, embeddings string, o llm.JudgeOptions) *llm.Scorer {
	t.Helper()
	be := openai.New(openai.Config{BaseURL: url + "/v1", Model: "judge", EmbeddingsModel: embeddings})
	sc, err := llm.NewScorer(llm.NewJudge(be, o), llm.ScorerOptions{Embedder: be.Embedder()})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func rec() *record.Record {
	return &record.Record{
		TraceID: "t1", Service: "bot",
		Query:  "When was the Eiffel Tower finished?",
		Answer: "It was finished in 1889 [d1]. It is 330 m tall.",
		Documents: []record.Document{
			{ID: "d1", Content: "The Eiffel Tower was completed in March 1889."},
			{ID: "d2", Content: "Paris is the capital of France."},
			{ID: "d3", Content: "The tower is 330 metres tall."},
		},
		Citations: []record.Citation{{Text: "It was finished in 1889", DocumentIDs: []string{"d1"}}},
		Reference: "It was completed in 1889.",
	}
}

// The ok judge's verdicts pass ragwatch's schema checks: every metric of the openai judge gets
// a score, with and without embeddings, after the configured latency.
func TestOKJudgeVerdictsScoreEveryMetric(t *testing.T) {
	for _, emb := range []string{"", "embed"} {
		j := &judge{mode: ModeOK, wait: 20 * time.Millisecond}
		srv := serve(t, j)
		start := time.Now()
		res, err := scorer(t, srv.URL, emb, llm.JudgeOptions{}).Score(context.Background(), rec())
		if err != nil {
			t.Fatalf("embeddings %q: %v", emb, err)
		}
		var got []string
		var tokens int64
		for _, r := range res {
			if r.Value < 0 || r.Value > 1 {
				t.Errorf("embeddings %q: %+v", emb, r)
			}
			tokens += r.InputTokens + r.OutputTokens
			got = append(got, r.Metric)
		}
		if tokens <= 0 {
			t.Errorf("embeddings %q: no tokens counted", emb)
		}
		sort.Strings(got)
		want := append([]string(nil), llm.MetricNames...)
		sort.Strings(want)
		if len(got) != len(want) {
			t.Fatalf("embeddings %q: scored %v, want %v", emb, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("embeddings %q: scored %v, want %v", emb, got, want)
			}
		}
		if n := j.answered.Load(); n == 0 || n != j.received.Load() {
			t.Errorf("embeddings %q: answered %d of %d", emb, n, j.received.Load())
		}
		if min := time.Duration(j.answered.Load()) * j.wait; time.Since(start) < min {
			t.Errorf("embeddings %q: %d calls took %s, want at least %s", emb, j.answered.Load(), time.Since(start), min)
		}
	}
}

func TestSlowJudgeAnswers503AfterDelay(t *testing.T) {
	j := &judge{mode: ModeSlow, wait: 30 * time.Millisecond}
	srv := serve(t, j)
	start := time.Now()
	_, err := scorer(t, srv.URL, "", llm.JudgeOptions{}).Score(context.Background(), rec())
	var f score.Failure
	if !errors.As(err, &f) || len(f) != len(llm.MetricNames) {
		t.Fatalf("err %v, want every metric failed", err)
	}
	for _, e := range f {
		var ae *llm.APIError
		if !errors.As(e, &ae) || ae.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s: %v, want a 503", e.Metric, e.Err)
		}
	}
	// One request: after it failed the judge asks nothing more for the record.
	if time.Since(start) < j.wait || j.received.Load() != 1 || j.answered.Load() != 0 {
		t.Fatalf("after %s, %d received, %d answered", time.Since(start), j.received.Load(), j.answered.Load())
	}
}

func TestDeadJudgeNeverAnswers(t *testing.T) {
	j := &judge{mode: ModeDead}
	srv := serve(t, j)
	_, err := scorer(t, srv.URL, "", llm.JudgeOptions{Timeout: 50 * time.Millisecond}).Score(context.Background(), rec())
	var f score.Failure
	if !errors.As(err, &f) || len(f) == 0 {
		t.Fatalf("err %v, want a Failure", err)
	}
	for _, e := range f {
		if e.Outcome != score.OutcomeTimeout {
			t.Fatalf("%s: outcome %s (%v), want a timeout", e.Metric, e.Outcome, e.Err)
		}
	}
	if j.answered.Load() != 0 || j.received.Load() == 0 {
		t.Fatalf("received %d, answered %d", j.received.Load(), j.answered.Load())
	}
}

func TestItems(t *testing.T) {
	for in, want := range map[string]int{"": 0, "one verdict per index (0 to 4).": 5, "(0 to 0)": 1, "(0 to 1) then (0 to 2)": 3} {
		if got := items(in); got != want {
			t.Errorf("items(%q) = %d, want %d", in, got, want)
		}
	}
}
