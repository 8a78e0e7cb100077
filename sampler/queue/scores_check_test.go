package queue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	sink := subscribeSink(t, nc, ScoreChecks{MaxWeight: func() float64 { return 10 }, Ingest: ingest.NewMetrics(reg)}, reg)

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
		return len(sink.results()) == len(valid) &&
			testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats"}) == float64(len(forged))
	})
	for reason, n := range want {
		if c := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason}); c != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, c, n)
		}
	}
	got := sink.results()
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

// A message may carry an array of results. Each element is checked on its own: the invalid
// ones are counted per reason and the valid ones of the same message still reach the consumer,
// in one call. A message that is not an object or an array of objects counts once as
// malformed, an array over MaxScoresPerMessage once as over the limits; neither delivers
// anything.
func TestSubscribeScoresArrays(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, _ := testutil.Connect(t, s)
	reg := prometheus.NewRegistry()
	sink := subscribeSink(t, nc, ScoreChecks{MaxWeight: func() float64 { return 10 }, Ingest: ingest.NewMetrics(reg)}, reg)

	valid := func(i int) string {
		return fmt.Sprintf(`{"trace_id":"t-%d","service":"support","metric":"faithfulness","value":0.5,"weight":2}`, i)
	}
	many := func(n int) string {
		elems := make([]string, n)
		for i := range elems {
			elems[i] = valid(i)
		}
		return "[" + strings.Join(elems, ",") + "]"
	}
	msgs := []string{
		// 1: two valid results around three invalid ones.
		`[` + valid(1) + `,
		  {"trace_id":"t-2","metric":"faithfulness","value":0.5,"weight":1e300},
		  ` + valid(3) + `,
		  {"trace_id":"t-4","metric":"made_up","value":0.5},
		  {"trace_id":"t-5","metric":"faithfulness","value":"high"}]`,
		// 2: one object, as one-result publishers send.
		valid(6),
		// 3: the bound itself is fine.
		many(MaxScoresPerMessage),
		// Over the limits, then malformed, once each, nothing delivered:
		many(MaxScoresPerMessage + 1),
		`not json`,
		`[1,2,3]`,
		`[` + valid(7) + `,null]`,
		`[]`,
		valid(8) + ` trailing`,
		// 4: a valid array after all that.
		`[` + valid(9) + `,` + valid(10) + `]`,
	}
	for _, m := range msgs {
		if err := nc.Publish("ragwatch.scores.support", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "every message handled", func() bool {
		return len(sink.received()) == 4
	})
	want := map[string]float64{ingest.ReasonWeightRange: 1, ingest.ReasonUnknownMetric: 1, ingest.ReasonMalformed: 1 + 5, ingest.ReasonLimits: 1}
	for reason, n := range want {
		if c := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason}); c != n {
			t.Errorf("rejected{reason=%q} = %v, want %v", reason, c, n)
		}
	}
	if c := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats"}); c != 9 {
		t.Errorf("rejected = %v, want 9", c)
	}
	if c := testutil.Sum(t, reg, "ragwatch_scores_invalid_total", nil); c != 9 {
		t.Errorf("ragwatch_scores_invalid_total = %v, want 9", c)
	}
	calls := sink.received()
	traces := func(rs []score.Result) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.TraceID)
		}
		return out
	}
	if got := traces(calls[0]); !slices.Equal(got, []string{"t-1", "t-3"}) {
		t.Errorf("call 1 = %v, want t-1, t-3", got)
	}
	if got := traces(calls[1]); !slices.Equal(got, []string{"t-6"}) {
		t.Errorf("call 2 = %v, want t-6", got)
	}
	if len(calls[2]) != MaxScoresPerMessage || calls[2][0].TraceID != "t-0" || calls[2][MaxScoresPerMessage-1].TraceID != fmt.Sprintf("t-%d", MaxScoresPerMessage-1) {
		t.Errorf("call 3 holds %d results, want the %d of the array in order", len(calls[2]), MaxScoresPerMessage)
	}
	if got := traces(calls[3]); !slices.Equal(got, []string{"t-9", "t-10"}) {
		t.Errorf("call 4 = %v, want t-9, t-10", got)
	}
	if r := calls[0][1]; r.Metric != "faithfulness" || r.Value != 0.5 || r.Weight != 2 || r.Service != "support" {
		t.Errorf("decoded %+v", r)
	}
}

// The decoder's verdict on each form a message may take. A single object keeps the checks it
// always had, except that data after it is now malformed (it was ignored), and so is a bare
// null (it was an invalid, empty result).
func TestDecodeResults(t *testing.T) {
	const ok = `{"trace_id":"t","metric":"mrr","value":1}`
	tests := []struct {
		name, in string
		results  int
		rejected []rejection // errors not compared
	}{
		{"object", ok, 1, nil},
		{"object with spaces around", " \n" + ok + "\n ", 1, nil},
		{"object with unknown keys", `{"trace_id":"t","metric":"mrr","value":1,"new_key":[1,{"x":2}]}`, 1, nil},
		{"invalid object", `{"trace_id":"t","metric":"mrr","value":2}`, 0, []rejection{{index: -1, reason: ingest.ReasonValueRange}}},
		{"object with trailing data", ok + `x`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"two objects", ok + ok, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"null", `null`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"number", `1`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"empty", ``, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"array of one", `[` + ok + `]`, 1, nil},
		{"array", `[` + ok + `, ` + ok + ` ]`, 2, nil},
		{"array with bad elements", `[{"trace_id":"","metric":"mrr","value":1},` + ok + `,{"trace_id":"t","metric":"mrr","value":"1"}]`, 1,
			[]rejection{{index: 0, reason: ingest.ReasonInvalid}, {index: 2, reason: ingest.ReasonMalformed}}},
		{"empty array", `[]`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"array of strings", `["a"]`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"array with null", `[` + ok + `,null]`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"nested array", `[[` + ok + `]]`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"unterminated array", `[` + ok, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"array with trailing data", `[` + ok + `]]`, 0, []rejection{{index: -1, reason: ingest.ReasonMalformed}}},
		{"array at the bound", `[` + strings.Repeat(ok+`,`, MaxScoresPerMessage-1) + ok + `]`, MaxScoresPerMessage, nil},
		{"array over the bound", `[` + strings.Repeat(ok+`,`, MaxScoresPerMessage) + ok + `]`, 0, []rejection{{index: -1, reason: ingest.ReasonLimits}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results, rejected := decodeResults([]byte(tt.in), 1)
			if len(results) != tt.results {
				t.Errorf("%d results, want %d", len(results), tt.results)
			}
			for _, r := range results {
				if r.TraceID != "t" || r.Metric != "mrr" || r.Value != 1 {
					t.Errorf("result %+v", r)
				}
			}
			if len(rejected) != len(tt.rejected) {
				t.Fatalf("rejected %+v, want %+v", rejected, tt.rejected)
			}
			for i, r := range rejected {
				if r.index != tt.rejected[i].index || r.reason != tt.rejected[i].reason || r.err == nil {
					t.Errorf("rejection %d = %+v, want %+v", i, r, tt.rejected[i])
				}
			}
		})
	}
}
