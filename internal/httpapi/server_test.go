package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type sink struct {
	mu   sync.Mutex
	recs []*record.Record
	err  error
}

func (s *sink) ConsumeRecord(_ context.Context, r *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.recs = append(s.recs, r)
	return nil
}

type harness struct {
	s    *Server
	sink *sink
	reg  *prometheus.Registry
	base string
}

func start(t *testing.T, maxBody int64) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	sk := &sink{}
	s, err := New(Settings{
		Endpoint:     "127.0.0.1:0",
		Gatherer:     reg,
		Records:      sk,
		Metrics:      ingest.NewMetrics(reg),
		MaxBodyBytes: maxBody,
		Now:          func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &harness{s: s, sink: sk, reg: reg, base: "http://" + s.Addr().String()}
}

func do(t *testing.T, method, url, contentType, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func rejected(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": reason})
}

func TestHealthReadyAndMount(t *testing.T) {
	h := start(t, 0)
	if code, _, body := do(t, "GET", h.base+"/healthz", "", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _, body := do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\n" {
		t.Errorf("/readyz with no checks = %d %q", code, body)
	}
	var mu sync.Mutex
	listening := false
	h.s.AddReadinessCheck("otlp", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !listening {
			return fmt.Errorf("receivers not listening")
		}
		return nil
	})
	h.s.AddReadinessCheck("nats", func() error { return nil })
	if code, _, body := do(t, "GET", h.base+"/readyz", "", ""); code != 503 || body != "not ready\notlp: receivers not listening\n" {
		t.Errorf("/readyz failing = %d %q", code, body)
	}
	mu.Lock()
	listening = true
	mu.Unlock()
	if code, _, body := do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\n" {
		t.Errorf("/readyz = %d %q", code, body)
	}

	// A status check (an external NATS cluster down) shows in the answer but keeps it ready.
	var natsDown error
	h.s.AddStatusCheck("nats", func() error { mu.Lock(); defer mu.Unlock(); return natsDown })
	mu.Lock()
	natsDown = fmt.Errorf("NATS is not connected")
	mu.Unlock()
	if code, _, body := do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\ndegraded: nats: NATS is not connected\n" {
		t.Errorf("/readyz with NATS down = %d %q, want 200 and the degraded line", code, body)
	}
	mu.Lock()
	listening = false
	mu.Unlock()
	if code, _, body := do(t, "GET", h.base+"/readyz", "", ""); code != 503 ||
		body != "not ready\notlp: receivers not listening\ndegraded: nats: NATS is not connected\n" {
		t.Errorf("/readyz failing and degraded = %d %q", code, body)
	}
	mu.Lock()
	listening, natsDown = true, nil
	mu.Unlock()
	if code, _, body := do(t, "GET", h.base+"/readyz", "", ""); code != 200 || body != "ready\n" {
		t.Errorf("/readyz recovered = %d %q", code, body)
	}

	// Others mount their endpoints after the server runs.
	h.s.Mount("GET /api/v1/scores", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, 200, map[string]int{"scores": 0})
	}))
	if code, hdr, body := do(t, "GET", h.base+"/api/v1/scores", "", ""); code != 200 || body != "{\"scores\":0}\n" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("mounted = %d %q %q", code, body, hdr.Get("Content-Type"))
	}
	if code, _, _ := do(t, "GET", h.base+"/nope", "", ""); code != 404 {
		t.Errorf("unknown path = %d", code)
	}
}

func TestMetricsOpenMetricsWithExemplars(t *testing.T) {
	h := start(t, 0)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "ragwatch_requests_total", Help: "Requests."})
	h.reg.MustRegister(c)
	c.(prometheus.ExemplarAdder).AddWithExemplar(1, prometheus.Labels{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})

	code, hdr, body := do(t, "GET", h.base+"/metrics", "", "", "Accept", "application/openmetrics-text; version=1.0.0")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("/metrics = %d %q", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(body, `ragwatch_requests_total 1.0 # {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 1.0`) {
		t.Errorf("no exemplar in:\n%s", body)
	}
	// A plain scrape gets the text format.
	code, hdr, body = do(t, "GET", h.base+"/metrics", "", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || !strings.Contains(body, "ragwatch_requests_total 1\n") {
		t.Errorf("/metrics text = %d %q\n%s", code, hdr.Get("Content-Type"), body)
	}
}

func TestPostRecords(t *testing.T) {
	h := start(t, 0)
	one := `{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","service":"support-bot","query":"How do refunds work?",
	 "documents":[{"id":"d1","score":0.82,"content":"Refunds take 5 days."},{"id":"d2","score":0.4}],
	 "answer":"Refunds take five days [1]. Ask support [d2].","usage":{"output_tokens":9}}`
	code, hdr, body := do(t, "POST", h.base+RecordsPath, "application/json", one)
	if code != 202 || body != "{\"accepted\":1}\n" || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("one record = %d %q", code, body)
	}
	score := func(f float64) *float64 { return &f }
	want := &record.Record{
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "support-bot", Time: now, Query: "How do refunds work?",
		Documents: []record.Document{{ID: "d1", Score: score(0.82), Content: "Refunds take 5 days."}, {ID: "d2", Score: score(0.4)}},
		Answer:    "Refunds take five days [1]. Ask support [d2].",
		Citations: []record.Citation{{Text: "Refunds take five days.", DocumentIDs: []string{"d1"}}, {Text: "Ask support.", DocumentIDs: []string{"d2"}}},
		Usage:     record.Usage{OutputTokens: 9},
	}
	if len(h.sink.recs) != 1 || !reflect.DeepEqual(h.sink.recs[0], want) {
		t.Fatalf("record = %+v\nwant %+v", h.sink.recs, want)
	}

	code, _, body = do(t, "POST", h.base+RecordsPath, "application/json", `[{"trace_id":"a","query":"q"},{"trace_id":"b","answer":"x","time":"2026-11-28T10:00:00Z"}]`)
	if code != 202 || body != "{\"accepted\":2}\n" {
		t.Fatalf("array = %d %q", code, body)
	}
	if r := h.sink.recs[2]; r.TraceID != "b" || !r.Time.Equal(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("second record = %+v", r)
	}
}

func TestPostRecordsRejects(t *testing.T) {
	h := start(t, 4096)
	cases := []struct {
		name, method, contentType, body string
		code                            int
		answer                          string
		reason                          string
	}{
		{"GET", "GET", "", "", 405, `{"error":"method GET not allowed, use POST"}`, ""},
		{"content type", "POST", "text/csv", `a,b`, 415, `{"error":"unsupported Content-Type \"text/csv\": use application/json"}`, ingest.ReasonContentType},
		{"invalid JSON", "POST", "application/json", `{"trace_id":`, 400, `{"error":"malformed JSON","errors":["invalid JSON: unexpected end of JSON input"]}`, ingest.ReasonMalformed},
		{"empty", "POST", "application/json", ` `, 400, `{"error":"malformed JSON","errors":["empty body"]}`, ingest.ReasonMalformed},
		{"every problem", "POST", "application/json", `[{"query":"q"},{"trace_id":"t","documents":[{"score":1}],"feedback":{"score":3}}]`, 400,
			`{"error":"invalid record","errors":["[0]: trace_id: is required","[1]: documents[0].id: is required","[1]: feedback.score: must be between -1 and 1"]}`, ingest.ReasonInvalid},
		{"oversized", "POST", "application/json", `{"trace_id":"t","query":"` + strings.Repeat("q", 5000) + `"}`, 413, `{"error":"body is over the limit of 4096 bytes"}`, ingest.ReasonTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := rejected(t, h.reg, c.reason)
			code, _, body := do(t, c.method, h.base+RecordsPath, c.contentType, c.body)
			if code != c.code || strings.TrimSpace(body) != c.answer {
				t.Errorf("= %d %s\nwant %d %s", code, body, c.code, c.answer)
			}
			if c.reason != "" {
				if got := rejected(t, h.reg, c.reason); got != before+1 {
					t.Errorf("rejected{reason=%s} = %v, want %v", c.reason, got, before+1)
				}
			}
		})
	}
	if len(h.sink.recs) != 0 {
		t.Errorf("sink got %d records", len(h.sink.recs))
	}

	h.sink.err = fmt.Errorf("queue: %w", ingest.ErrOverloaded)
	code, hdr, body := do(t, "POST", h.base+RecordsPath, "application/json", `{"trace_id":"t","query":"q"}`)
	if code != 429 || hdr.Get("Retry-After") != "1" || strings.TrimSpace(body) != `{"error":"overloaded: 0 of 1 records accepted, retry the rest later"}` {
		t.Errorf("overloaded = %d %q", code, body)
	}
	if got := rejected(t, h.reg, ingest.ReasonOverloaded); got != 1 {
		t.Errorf("rejected overloaded = %v", got)
	}
	var eb errorBody
	h.sink.err = fmt.Errorf("boom")
	code, _, body = do(t, "POST", h.base+RecordsPath, "application/json", `{"trace_id":"t","query":"q"}`)
	if err := json.Unmarshal([]byte(body), &eb); err != nil || code != 500 || eb.Error != "0 of 1 records accepted" || !reflect.DeepEqual(eb.Errors, []string{"boom"}) {
		t.Errorf("failing downstream = %d %q", code, body)
	}
}

func TestLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Endpoint: "127.0.0.1:0", Gatherer: reg, Metrics: ingest.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err == nil {
			t.Error("second Start succeeded")
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// No records consumer: the endpoint does not exist.
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if code, _, _ := do(t, "POST", "http://"+s.Addr().String()+RecordsPath, "application/json", "{}"); code != 404 {
		t.Errorf("records without consumer = %d", code)
	}
	if _, err := New(Settings{Gatherer: reg}); err == nil {
		t.Error("New without Metrics succeeded")
	}
}
