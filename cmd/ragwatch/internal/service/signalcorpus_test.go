package service_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts/engine"
	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// TestSignalsAndSLOsSeeTheSameValues runs a generated corpus of records (no documents, absurd
// and non-finite scores and latencies, no usage, empty answers, citations with and without an
// answer, inline feedback out of range or NaN, ...) through the two consumers that read the
// request signals: the metrics (collector/signals, read back from its Prometheus registry) and
// the alert engine (an SLO on every signal of the catalog, read back from its evaluation).
// Each record has its own service, so each (signal, service) holds at most that one record's
// value, and both must agree on whether the record has a value and what it is.
func TestSignalsAndSLOsSeeTheSameValues(t *testing.T) {
	const n = 400
	recs := signalCorpus(rand.New(rand.NewPCG(47, 1)), n)

	reg := prometheus.NewRegistry()
	sig, err := signals.New(signals.Settings{
		Signals:    config.Signals{MaxServices: n + 1},
		Services:   cardinality.NewServiceSet(n + 1),
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	var yaml strings.Builder
	yaml.WriteString("drift: {detectors: []}\nslos:\n")
	for i := range reqsignal.All {
		// Every value a record can give lies above -1e15: each instance with a value fires at
		// once with its mean, the one value.
		fmt.Fprintf(&yaml, "  - {name: eq-%s, metric: %s, alert_above: -1e15, window: 1h, min_samples: 1, for: 0s, decision: mean}\n",
			reqsignal.All[i].Name, reqsignal.All[i].Name)
	}
	cfg, err := config.Parse([]byte(yaml.String()))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	eng, err := engine.New(engine.Options{Sections: engine.SectionsOf(cfg), Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now },
		Services: cardinality.NewServiceSet(n + 1)})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	for _, r := range recs {
		if err := sig.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := eng.ConsumeRecord(ctx, r); err != nil { // the metrics took it: the SLOs must too
			t.Errorf("the alert engine refused %s: %v\nrecord %s", r.Service, err, describe(r))
		}
	}

	// What the SLOs saw: signal → service → (value, samples).
	slo := map[string]map[string][2]float64{}
	for _, a := range eng.Evaluate(ctx) {
		name := strings.TrimPrefix(a.Rule, "eq-")
		if slo[name] == nil {
			slo[name] = map[string][2]float64{}
		}
		slo[name][a.Service] = [2]float64{a.Value, float64(a.N)}
	}
	prom := gatherByService(t, reg)

	seen := map[string]int{} // records with a value, per signal: the corpus must exercise both sides
	for i := range reqsignal.All {
		s := &reqsignal.All[i]
		if s.Metric == nil {
			continue // input_tokens, feedback_score: no metric shows them, nothing to disagree with
		}
		for _, r := range recs {
			want, wantOK := promValue(prom, s, r.Service)
			got, gotOK := slo[s.Name][r.Service]
			if gotOK && got[1] != 1 {
				t.Fatalf("%s %s: the SLO window holds %v values, want at most 1", s.Name, r.Service, got[1])
			}
			if wantOK != gotOK || (wantOK && got[0] != want) {
				t.Errorf("%s of %s: metrics show %v (%v), the SLO saw %v (%v)\nrecord %+v", s.Name, r.Service, want, wantOK, got[0], gotOK, describe(r))
			}
			if gotOK {
				seen[s.Name]++
			}
		}
		if seen[s.Name] == 0 || seen[s.Name] == len(recs) && s.ID != reqsignal.RetrievedDocuments && s.ID != reqsignal.EmptyRetrievalRate {
			t.Errorf("%s: %d of %d records have a value: the corpus does not exercise both cases", s.Name, seen[s.Name], len(recs))
		}
	}
}

// signalCorpus generates n records, record i of service "svc-i".
func signalCorpus(rng *rand.Rand, n int) []*record.Record {
	pick := func(vs ...float64) float64 { return vs[rng.IntN(len(vs))] }
	scores := []float64{0.1, 0.42, 0.9, 1, -0.3, 12.5, 1e11, -1e11, 1e12, -1e12, 1e13, math.NaN(), math.Inf(1), math.Inf(-1)}
	latencies := []float64{0, 0, 35.5, 812, 1e11, 1e12, 1e13, -4, math.NaN(), math.Inf(1)}
	answers := []string{"", "", "Five days [1].", strings.TrimSpace(strings.Repeat("word ", 40)),
		"I don't know: the documents do not say.", " héllo\u00a0wörld  ok ", "\u2003"}
	out := make([]*record.Record, n)
	for i := range out {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: fmt.Sprintf("svc-%d", i), Query: "q"}
		for range rng.IntN(5) {
			d := record.Document{ID: fmt.Sprintf("d%d", len(r.Documents))}
			if rng.IntN(4) > 0 {
				v := scores[rng.IntN(len(scores))]
				d.Score = &v
			}
			r.Documents = append(r.Documents, d)
		}
		r.Answer = answers[rng.IntN(len(answers))]
		for range rng.IntN(3) * rng.IntN(2) {
			r.Citations = append(r.Citations, record.Citation{Text: "c", DocumentIDs: []string{"d0"}})
		}
		r.Usage.OutputTokens = int64(pick(0, 0, 27, 1500, -3))
		r.Usage.InputTokens = int64(pick(0, 412, -1))
		r.Latency = record.Latency{Retrieval: latencies[rng.IntN(len(latencies))],
			Generation: latencies[rng.IntN(len(latencies))], Total: latencies[rng.IntN(len(latencies))]}
		if rng.IntN(3) == 0 {
			r.Feedback = &record.Feedback{Score: pick(-1, -0.5, 0, 0.5, 1, 3, -2, math.NaN())}
		}
		out[i] = r
	}
	return out
}

func describe(r *record.Record) string {
	var scores []string
	for _, d := range r.Documents {
		if d.Score == nil {
			scores = append(scores, "nil")
		} else {
			scores = append(scores, fmt.Sprint(*d.Score))
		}
	}
	fb := "none"
	if r.Feedback != nil {
		fb = fmt.Sprint(r.Feedback.Score)
	}
	return fmt.Sprintf("{scores %v answer %q citations %d usage %+v latency %+v feedback %s}", scores, r.Answer, len(r.Citations), r.Usage, r.Latency, fb)
}

// promSeries is one series' reading: a counter's value, or a histogram's count, sum and
// count in its first bucket.
type promSeries struct{ value, count, sum, first float64 }

// gatherByService reads reg as metric{other labels} → service → series.
func gatherByService(t *testing.T, reg *prometheus.Registry) map[string]map[string]promSeries {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]promSeries{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key, service := mf.GetName(), ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "service":
					service = l.GetValue()
				case "variant":
				default:
					key += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
				}
			}
			var s promSeries
			if h := m.GetHistogram(); h != nil {
				s = promSeries{count: float64(h.GetSampleCount()), sum: h.GetSampleSum()}
				if b := h.GetBucket(); len(b) > 0 {
					s.first = float64(b[0].GetCumulativeCount())
				}
			} else if c := m.GetCounter(); c != nil {
				s.value = c.GetValue()
			}
			if out[key] == nil {
				out[key] = map[string]promSeries{}
			}
			out[key][service] = s
		}
	}
	return out
}

// promValue is the signal's value for service as its Prometheus metric shows it
// (reqsignal.Signal.Metric and Shows), and whether the metric shows one.
func promValue(prom map[string]map[string]promSeries, s *reqsignal.Signal, service string) (float64, bool) {
	name := s.Metric.Name
	switch s.ID {
	case reqsignal.LatencySeconds, reqsignal.RetrievalLatencySeconds, reqsignal.GenerationLatencySeconds:
		name += "{" + s.Shows + "}" // stage="…"
	case reqsignal.EmptyRetrievalRate: // the counter's share of requests
		return prom[name][service].value / prom[reqsignal.MetricRequests.Name][service].value, true
	case reqsignal.UncitedAnswerRate: // the le="0" bucket's share of the answers
		h := prom[name][service]
		return h.first / h.count, h.count > 0
	case reqsignal.NegativeFeedbackRate: // the negative sentiment's share of the feedback
		var all float64
		for _, sent := range []string{"positive", "negative", "neutral"} {
			all += prom[fmt.Sprintf("%s{sentiment=%q}", name, sent)][service].value
		}
		return prom[name+`{sentiment="negative"}`][service].value / all, all > 0
	}
	h := prom[name][service]
	return h.sum / h.count, h.count > 0
}
