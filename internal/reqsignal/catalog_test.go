package reqsignal

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

func TestCatalogShape(t *testing.T) {
	want := []string{score.SignalRetrievalScoreTop, score.SignalRetrievalScoreMean, score.SignalRetrievalScore,
		score.SignalRetrievedDocuments, score.SignalEmptyRetrievalRate, score.SignalAnswerTokens, score.SignalInputTokens,
		score.SignalLatencySeconds, score.SignalRetrievalLatencySeconds, score.SignalGenerationLatencySeconds,
		score.SignalCitationCount, score.SignalUncitedAnswerRate, score.SignalNegativeFeedbackRate, score.SignalFeedbackScore}
	full := Measure(&record.Record{Documents: []record.Document{{Score: fp(0.5)}}, Answer: "a", Usage: record.Usage{InputTokens: 1},
		Latency: record.Latency{Retrieval: 1, Generation: 1, Total: 1}, Feedback: &record.Feedback{Score: 1}})
	var names []string
	for i := range All {
		s := &All[i]
		if s.ID != ID(i) {
			t.Errorf("All[%d] has ID %d", i, s.ID)
		}
		if s.Unit == "" || s.Help == "" {
			t.Errorf("%s: unit %q, help %q", s.Name, s.Unit, s.Help)
		}
		if _, ok := s.Value(&full); !ok {
			t.Errorf("%s has no value in a measurement that has every field", s.Name)
		}
		if got, ok := ByName(s.Name); !ok || got != s {
			t.Errorf("ByName(%s) = %v, %v", s.Name, got, ok)
		}
		if s.Deprecated != "" {
			if d, ok := ByName(s.Deprecated); !ok || d.Deprecated != "" {
				t.Errorf("%s is deprecated for %q, which is not a current signal", s.Name, s.Deprecated)
			}
		}
		names = append(names, s.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("catalog names %v\nwant %v", names, want)
	}
	if got := Names(); slices.Contains(got, score.SignalRetrievalScore) || len(got) != len(want)-1 {
		t.Errorf("Names() = %v: want every name but the deprecated one", got)
	}
	if d := Deprecated(); len(d) != 1 || d[score.SignalRetrievalScore] != score.SignalRetrievalScoreTop {
		t.Errorf("Deprecated() = %v", d)
	}
	if _, ok := ByName("faithfulness"); ok {
		t.Error("ByName found an eval metric")
	}
	for id := ID(0); id < Num; id++ {
		fb := strings.Contains(All[id].Name, "feedback")
		if All[id].Feedback() != fb {
			t.Errorf("%s: Feedback() = %v", All[id].Name, All[id].Feedback())
		}
	}
}

// TestMetricNames: each OTLP instrument gives back its Prometheus name under the standard
// OTLP→Prometheus translation (dots to underscores, _seconds from unit s, _total on counters).
func TestMetricNames(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Metrics {
		if seen[m.Name] || !strings.HasPrefix(m.Name, "ragwatch_") || m.Help == "" {
			t.Errorf("metric %q: duplicate, unprefixed or without help", m.Name)
		}
		seen[m.Name] = true
		got := strings.ReplaceAll(m.OTLPName, ".", "_")
		if m.OTLPUnit == "s" {
			got += "_seconds"
		}
		if m.Buckets == nil {
			got += "_total"
		}
		if got != m.Name {
			t.Errorf("OTLP %s translates to %s, want %s", m.OTLPName, got, m.Name)
		}
		if m.Buckets == nil != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: a counter's name ends in _total, a histogram's does not", m.Name)
		}
	}
	for i := range All {
		if m := All[i].Metric; m != nil && !seen[m.Name] {
			t.Errorf("%s is shown by %s, which is not in Metrics", All[i].Name, m.Name)
		}
	}
}

func fp(v float64) *float64 { return &v }

// values is every signal of m, by name, that m has a value for.
func values(m Measurement, from, to ID) map[string]float64 {
	out := map[string]float64{}
	for id := from; id < to; id++ {
		if v, ok := All[id].Value(&m); ok {
			out[All[id].Name] = v
		}
	}
	return out
}

// TestMeasure pins the decisions the two copies used to disagree on: answer_tokens falls back to
// the answer's words; NaN, infinite and absurd scores and latencies are left out; citations
// count when the answer's text or explicit citations are known; feedback is clamped, NaN is none.
func TestMeasure(t *testing.T) {
	words40 := strings.TrimSpace(strings.Repeat("word ", 40))
	tests := []struct {
		name string
		r    record.Record
		want map[string]float64
	}{
		{"empty record", record.Record{}, map[string]float64{"retrieved_documents": 0, "empty_retrieval_rate": 1}},
		{"answer without usage: its words", record.Record{Answer: words40}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1, "answer_tokens": 40, "citation_count": 0, "uncited_answer_rate": 1}},
		{"usage wins over words", record.Record{Answer: "a b", Usage: record.Usage{OutputTokens: 27, InputTokens: 412}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1, "answer_tokens": 27, "input_tokens": 412, "citation_count": 0, "uncited_answer_rate": 1}},
		{"tokens only: citations unknown", record.Record{Usage: record.Usage{OutputTokens: 9}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1, "answer_tokens": 9}},
		{"explicit citations without the answer's text", record.Record{Citations: []record.Citation{{Text: "x"}, {Text: "y"}}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1, "citation_count": 2, "uncited_answer_rate": 0}},
		{"negative usage is none", record.Record{Usage: record.Usage{OutputTokens: -3, InputTokens: -1}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1}},
		{"unusable scores left out", record.Record{Documents: []record.Document{{Score: fp(math.NaN())}, {Score: fp(math.Inf(1))},
			{Score: fp(1e12)}, {Score: fp(-1e13)}, {}, {Score: fp(0.2)}, {Score: fp(0.6)}}}, map[string]float64{
			"retrieved_documents": 7, "empty_retrieval_rate": 0, "retrieval_score_top": 0.6, "retrieval_score": 0.6, "retrieval_score_mean": 0.4}},
		{"no usable score", record.Record{Documents: []record.Document{{Score: fp(math.NaN())}, {}}}, map[string]float64{
			"retrieved_documents": 2, "empty_retrieval_rate": 0}},
		{"latencies", record.Record{Latency: record.Latency{Retrieval: 35, Generation: math.NaN(), Total: 1e12}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1, "retrieval_latency_seconds": 0.035}},
		{"feedback clamped", record.Record{Feedback: &record.Feedback{Score: -3}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1, "negative_feedback_rate": 1, "feedback_score": -1}},
		{"NaN feedback is none", record.Record{Feedback: &record.Feedback{Score: math.NaN()}}, map[string]float64{
			"retrieved_documents": 0, "empty_retrieval_rate": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := values(Measure(&tt.r), 0, Num)
			if len(got) != len(tt.want) {
				t.Fatalf("values %v\nwant %v", got, tt.want)
			}
			for k, v := range tt.want {
				if g, ok := got[k]; !ok || math.Abs(g-v) > 1e-12 {
					t.Errorf("%s = %v (%v), want %v", k, g, ok, v)
				}
			}
		})
	}
	// Feedback joined alone: a consumer reads only the feedback signals (IDs from NumRecord).
	m := MeasureFeedback(&record.Feedback{Score: 0.5})
	if got := values(m, NumRecord, Num); len(got) != 2 || got["feedback_score"] != 0.5 || got["negative_feedback_rate"] != 0 {
		t.Errorf("MeasureFeedback: %v", got)
	}
}

func TestMeasureDoesNotAllocate(t *testing.T) {
	r := &record.Record{Documents: []record.Document{{Score: fp(0.5)}, {Score: fp(0.7)}}, Answer: strings.Repeat("héllo wörld ", 100),
		Citations: []record.Citation{{Text: "x"}}, Latency: record.Latency{Total: 870}, Feedback: &record.Feedback{Score: 1}}
	var m Measurement
	if n := testing.AllocsPerRun(100, func() { m = Measure(r) }); n != 0 {
		t.Errorf("Measure: %v allocations", n)
	}
	if m.AnswerTokens != 200 {
		t.Errorf("answer tokens %d, want 200 words", m.AnswerTokens)
	}
}

func BenchmarkMeasure(b *testing.B) {
	r := &record.Record{Documents: []record.Document{{Score: fp(0.5)}, {Score: fp(0.7)}, {Score: fp(0.2)}, {Score: fp(0.9)}, {Score: fp(0.1)}},
		Answer: strings.Repeat("a fairly ordinary answer word ", 20), Latency: record.Latency{Retrieval: 35, Generation: 812, Total: 870}}
	b.ReportAllocs()
	for b.Loop() {
		_ = Measure(r)
	}
}
