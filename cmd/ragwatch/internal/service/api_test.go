package service_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestRecordsAPIAndExemplars posts records to the running app: they go through the same
// fan-out as assembled ones (signals, statsd), and /metrics in OpenMetrics carries their trace
// ids as exemplars.
func TestRecordsAPIAndExemplars(t *testing.T) {
	e := startEnv(t, testConfig(t))
	body := `[{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","service":"api-app","time":"2026-11-29T12:00:00Z",
	  "query":"How long do refunds take?","documents":[{"id":"d1","score":0.8},{"id":"d2","score":0.4}],
	  "answer":"Five days [1].","latency_ms":{"total":250}},
	 {"trace_id":"00000000000000000000000000000abc","service":"api-app","query":"q","answer":"a b c","feedback":{"score":-1}}]`
	resp, err := http.Post(e.base+"/api/v1/records", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(answer) != "{\"accepted\":2}\n" {
		t.Fatalf("POST = %d %s", resp.StatusCode, answer)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "two records", func() bool { return e.sink.len() == 2 })
	score := 0.8
	want := &record.Record{
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "api-app", Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Query:     "How long do refunds take?",
		Documents: []record.Document{{ID: "d1", Score: &score}, {ID: "d2", Score: fp(0.4)}},
		Answer:    "Five days [1].",
		Citations: []record.Citation{{Text: "Five days.", DocumentIDs: []string{"d1"}}},
		Latency:   record.Latency{Total: 250},
	}
	if got := e.sink.get(want.TraceID); got == nil || asJSON(t, got) != asJSON(t, want) {
		t.Fatalf("record = %v\nwant %s", got, asJSON(t, want))
	}

	m := scrape(t, e.base)
	for k, v := range map[string]float64{
		`ragwatch_requests_total{service="api-app"}`:                                   2,
		`ragwatch_retrieved_documents_sum{service="api-app"}`:                          2,
		`ragwatch_retrieval_score_sum{service="api-app"}`:                              0.6,
		`ragwatch_answer_tokens_sum{service="api-app"}`:                                6,
		`ragwatch_empty_retrievals_total{service="api-app"}`:                           1,
		`ragwatch_feedback_total{sentiment="negative",service="api-app"}`:              1,
		`ragwatch_request_duration_seconds_sum{service="api-app",stage="total"}`:       0.25,
		`ragwatch_request_duration_seconds_count{service="api-app",stage="retrieval"}`: 0,
	} {
		if got, ok := m[k]; !ok || !near(got, v) {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "statsd", func() bool { return e.statsd.count("rag.requests:1|c|#service:api-app") == 2 })

	// OpenMetrics: the duration histogram carries the record's trace id as an exemplar.
	req, _ := http.NewRequest(http.MethodGet, e.base+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	om, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	var line []byte
	for _, l := range bytes.Split(om, []byte("\n")) {
		if bytes.HasPrefix(l, []byte(`ragwatch_request_duration_seconds_bucket{service="api-app",stage="total",variant="",le="0.25"}`)) {
			line = l
		}
	}
	if !bytes.Contains(line, []byte(`# {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 0.25`)) {
		t.Errorf("no trace exemplar on the 0.25 s bucket: %q", line)
	}
}
