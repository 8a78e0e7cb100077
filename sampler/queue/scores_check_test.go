package queue

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// Anyone who could publish on the scores subjects used to own an SLO window with one result of
// weight 1e300. Forged results are rejected, counted per reason and never reach the consumer;
// a valid one still does.
func TestSubscribeScoresRejectsForgedResults(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, _ := testutil.Connect(t, s)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var got []score.Result
	sub, err := SubscribeScores(nc, "", score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, rs...)
		return nil
	}), ScoreChecks{MaxWeight: func() float64 { return 10 }, Ingest: ingest.NewMetrics(reg)}, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	const tid = `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`
	forged := []struct {
		name, reason, msg string
	}{
		{"huge weight", ingest.ReasonWeightRange, `{` + tid + `,"metric":"faithfulness","value":0.1,"weight":1e300}`},
		{"weight above 1/min rate", ingest.ReasonWeightRange, `{` + tid + `,"metric":"faithfulness","value":0.1,"weight":11}`},
		{"weight below 1", ingest.ReasonWeightRange, `{` + tid + `,"metric":"faithfulness","value":0.1,"weight":0.5}`},
		{"value 7", ingest.ReasonValueRange, `{` + tid + `,"metric":"faithfulness","value":7,"weight":1}`},
		{"negative value", ingest.ReasonValueRange, `{` + tid + `,"metric":"faithfulness","value":-0.1,"weight":1}`},
		{"unknown metric", ingest.ReasonUnknownMetric, `{` + tid + `,"metric":"made_up","value":0.5,"weight":1}`},
		{"signal name", ingest.ReasonUnknownMetric, `{` + tid + `,"metric":"negative_feedback_rate","value":0.5,"weight":1}`},
		{"k out of range", ingest.ReasonUnknownMetric, `{` + tid + `,"metric":"precision@0","value":0.5,"weight":1}`},
		{"no trace id", ingest.ReasonInvalid, `{"metric":"faithfulness","value":0.5,"weight":1}`},
		{"zero trace id", ingest.ReasonInvalid, `{"trace_id":"00000000000000000000000000000000","metric":"faithfulness","value":0.5,"weight":1}`},
		{"long trace id", ingest.ReasonInvalid, `{"trace_id":"` + strings.Repeat("a", 300) + `","metric":"faithfulness","value":0.5,"weight":1}`},
		{"control character", ingest.ReasonInvalid, `{"trace_id":"a\nb","metric":"faithfulness","value":0.5,"weight":1}`},
		{"not json", ingest.ReasonMalformed, `{`},
	}
	want := map[string]float64{}
	for _, f := range forged {
		if err := nc.Publish("ragwatch.scores.support", []byte(f.msg)); err != nil {
			t.Fatal(err)
		}
		want[f.reason]++
	}
	valid := []string{
		`{` + tid + `,"service":"support","metric":"faithfulness","value":0.25,"weight":10}`,
		`{"trace_id":"t-1","service":"support","metric":"precision@3","value":1,"weight":1}`,
		`{"trace_id":"t-2","service":"support","metric":"rubric_accuracy","value":0,"weight":0}`, // 0: unset, as before
	}
	for _, v := range valid {
		if err := nc.Publish("ragwatch.scores.support", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(valid) &&
			testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats"}) == float64(len(forged))
	})
	for reason, n := range want {
		if c := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason}); c != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, c, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got[0].Metric != "faithfulness" || got[0].Weight != 10 || got[1].Metric != "precision@3" || got[2].Metric != "rubric_accuracy" {
		t.Fatalf("accepted = %+v", got)
	}
}

// Every metric a configured scorer can produce passes the check, so validation never drops a
// real result.
func TestEveryScorerMetricIsKnown(t *testing.T) {
	var all []string
	all = append(all, config.LLMMetrics...)
	all = append(all, config.BuiltinMetrics...)
	all = append(all, config.NLIMetrics...)
	for _, k := range config.Default().Scoring.RetrievalK {
		for _, m := range config.RetrievalMetrics {
			all = append(all, strings.Replace(m, "@k", "@"+strconv.Itoa(k), 1))
		}
	}
	for _, m := range all {
		if !score.KnownMetric(m) {
			t.Errorf("%s is produced by a scorer but rejected from NATS", m)
		}
	}
}
