package export

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// traffic feeds 100 records: chat/v1 60 scored high, chat/v2 30 scored low (one of them kept
// upstream at 1 in 2), search 10 never scored.
func traffic(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	add := func(id, service, variant string, up float64, scores map[string]float64) {
		r := &record.Record{TraceID: id, Service: service, Variant: variant, Time: t0, UpstreamProbability: up,
			Query: "mail me at jane.doe@example.com", Answer: "ok", Documents: []record.Document{{ID: "d", Content: "call +1 415 555 0100",
				Metadata: map[string]any{"owner": "jane.doe@example.com"}}},
			Sampling: &record.Sampling{Probability: 0.1, Reason: "rate"}}
		if err := s.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
		var res []score.Result
		for m, v := range scores {
			res = append(res, score.Result{TraceID: id, Service: service, Metric: m, Value: v})
		}
		_ = s.ConsumeScores(ctx, res)
	}
	for i := range 60 {
		add(fmt.Sprintf("a%02d", i), "chat", "v1", 0, map[string]float64{"faithfulness": 0.9, "mrr": 1})
	}
	for i := range 30 {
		up := 0.0
		if i == 0 {
			up = 0.5
		}
		add(fmt.Sprintf("b%02d", i), "chat", "v2", up, map[string]float64{"faithfulness": 0.3, "answer_relevancy": 0.5, "mrr": 1})
	}
	for i := range 10 {
		add(fmt.Sprintf("c%02d", i), "search", "", 0, nil)
	}
}

func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	r, err := redact.New(redact.Builtins, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Redact = r.String
	return New(o)
}

func TestSelectStratifiesAndWeights(t *testing.T) {
	s := newStore(t, Options{})
	traffic(t, s)
	lines := s.Select(10, time.Time{})
	count := map[string]int{}
	weight := map[string]float64{}
	total := 0.0
	for _, l := range lines {
		count[l.Stratum]++
		weight[l.Stratum] += l.Weight
		total += l.Weight
		if math.Abs(l.Sampling.Probability*l.Weight-1) > 1e-12 || l.Sampling.Reason != ReasonExport {
			t.Errorf("%s: sampling %+v with weight %v", l.Key(), l.Sampling, l.Weight)
		}
	}
	// 10 of 100: shares 6, 3 and 1.
	want := map[string]int{"chat/v1/high": 6, "chat/v2/low": 3, "search//unscored": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("stratum %s: %d records, want %d (all: %v)", k, count[k], n, count)
		}
	}
	// Every stratum's weights add up to the traffic it stands for: 60, 30 (one record of
	// which stood for 2 traces upstream, when chosen) and 10.
	if math.Abs(weight["chat/v1/high"]-60) > 1e-9 || math.Abs(weight["search//unscored"]-10) > 1e-9 {
		t.Errorf("weights %v", weight)
	}
	if w := weight["chat/v2/low"]; math.Abs(w-30) > 1e-9 && math.Abs(w-40) > 1e-9 {
		t.Errorf("chat/v2/low weight %v, want 30 (or 40 with the upstream-sampled record)", w)
	}
	// The same traffic gives the same set.
	again := s.Select(10, time.Time{})
	for i := range lines {
		if lines[i].Key() != again[i].Key() {
			t.Fatalf("selection not reproducible at %d: %s vs %s", i, lines[i].Key(), again[i].Key())
		}
	}
	// A small size still gives each stratum one record; a large one gives everything, weight 1
	// (2 for the record kept upstream at 1 in 2).
	if got := s.Select(3, time.Time{}); len(got) != 3 || got[0].Stratum == got[1].Stratum || got[1].Stratum == got[2].Stratum {
		t.Errorf("size 3: %d lines", len(got))
	}
	all := s.Select(1000, time.Time{})
	if len(all) != 100 {
		t.Fatalf("size 1000: %d lines", len(all))
	}
	for _, l := range all {
		if want := l.UpstreamWeight(); l.Weight != want {
			t.Errorf("%s: weight %v, want %v", l.Key(), l.Weight, want)
		}
	}
}

func TestExportRedactsAndServesEvalRecords(t *testing.T) {
	s := newStore(t, Options{})
	traffic(t, s)
	srv := httptest.NewServer(s.Handler(func() time.Time { return t0.Add(time.Hour) }))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "?size=5&since=2h")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		for _, leak := range []string{"jane.doe@example.com", "415 555 0100", "owner"} {
			if strings.Contains(line, leak) {
				t.Fatalf("exported line leaks %q: %s", leak, line)
			}
		}
		if !strings.Contains(line, "[REDACTED:email]") || !strings.Contains(line, "[REDACTED:phone]") {
			t.Fatalf("line not redacted: %s", line)
		}
		// It is a record `ragwatch eval` reads.
		var r record.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); err != nil || r.Query == "" || len(r.Documents) != 1 || r.Sampling == nil {
			t.Fatalf("record %+v: %v", r, err)
		}
	}
	if n != 5 {
		t.Fatalf("%d lines, want 5", n)
	}
	// Records older than since are left out.
	resp2, err := http.Get(srv.URL + "?since=30m")
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	_, _ = bufio.NewReader(resp2.Body).WriteTo(body)
	resp2.Body.Close()
	if body.Len() != 0 {
		t.Fatalf("since 30m exported %d bytes of records from an hour ago", body.Len())
	}
	for _, q := range []string{"size=0", "size=x", "since=yesterday"} {
		resp, err := http.Get(srv.URL + "?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s", q, resp.Status)
		}
	}
}

func TestStoreBounded(t *testing.T) {
	s := New(Options{MaxRecords: 5})
	ctx := context.Background()
	for i := range 8 {
		_ = s.ConsumeRecord(ctx, &record.Record{TraceID: fmt.Sprint("t", i), Query: "q"})
	}
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "empty"}) // nothing to evaluate: not kept
	if n := len(s.Select(100, time.Time{})); n != 5 {
		t.Fatalf("%d kept, want 5", n)
	}
	if _, ok := s.byKey["t2"]; ok {
		t.Fatal("oldest not evicted")
	}
	b := New(Options{MaxBytes: 1000})
	for i := range 8 {
		_ = b.ConsumeRecord(ctx, &record.Record{TraceID: fmt.Sprint("t", i), Query: strings.Repeat("x", 300)})
	}
	if b.bytes > 1000 || b.order.Len() != 1 {
		t.Fatalf("max_bytes: %d bytes in %d records", b.bytes, b.order.Len())
	}
}

func TestBand(t *testing.T) {
	for _, c := range []struct {
		scores map[string]float64
		want   string
	}{
		{nil, BandUnscored},
		{map[string]float64{"mrr": 0.1, "ndcg@10": 0.2}, BandUnscored},                        // retrieval only: not judged
		{map[string]float64{"faithfulness": 0.3, "answer_relevancy": 0.6, "mrr": 1}, BandLow}, // mean 0.45
		{map[string]float64{"faithfulness": 0.5}, BandMid},
		{map[string]float64{"faithfulness": 0.9, "answer_relevancy": 0.7, "precision@10": 0.1}, BandHigh}, // mean 0.8
	} {
		if got := Band(c.scores); got != c.want {
			t.Errorf("Band(%v) = %s, want %s", c.scores, got, c.want)
		}
	}
}

// Labels posted after their record join the kept record's labels (later values win), the
// record seen again keeps them, and the exported record carries them with the reference
// redacted; labels for records not kept change nothing.
func TestLateLabelsRideOnExportedRecords(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	r := &record.Record{TraceID: "t1", SpanID: "s1", Service: "chat", Time: t0, Query: "q", Answer: "a",
		Labels: &record.Label{Values: map[string]float64{"faithfulness": 0}, Labeler: "early"}}
	if err := s.ConsumeRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
	before := s.bytes
	for _, l := range []record.Label{
		{TraceID: "t1", SpanID: "s1", Service: "chat", Variant: "v2", Values: map[string]float64{"faithfulness": 1}, Relevance: map[string]int{"d1": 2}, Labeler: "ann", Time: t0},
		{TraceID: "t1", SpanID: "s1", Reference: "write to jane.doe@example.com", Time: t0.Add(time.Minute)},
		{TraceID: "t1", SpanID: "other", Values: map[string]float64{"faithfulness": 0.5}},
		{TraceID: "gone", Values: map[string]float64{"faithfulness": 0.5}},
	} {
		if err := s.ConsumeLabel(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if s.bytes <= before {
		t.Errorf("labels not counted in the store's bytes: %d → %d", before, s.bytes)
	}
	_ = s.ConsumeRecord(ctx, r) // the record again, with its early label only
	lines := s.Select(10, time.Time{})
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	l := lines[0].Labels
	if l == nil || l.Values["faithfulness"] != 1 || l.Relevance["d1"] != 2 || l.Labeler != "ann" ||
		!l.Time.Equal(t0.Add(time.Minute)) || l.TraceID != "" || l.Variant != "" {
		t.Fatalf("labels = %+v", l)
	}
	if strings.Contains(l.Reference, "jane.doe") || !strings.Contains(l.Reference, "write to") {
		t.Errorf("reference not redacted: %q", l.Reference)
	}
}
