package httpin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/httpapi"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// sink keeps what reaches each consumer; err fails every consume.
type sink struct {
	mu       sync.Mutex
	recs     []*record.Record
	feedback []record.Feedback
	labels   []record.Label
	err      error
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

func (s *sink) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.feedback = append(s.feedback, f)
	return s.err
}

func (s *sink) ConsumeLabel(_ context.Context, l record.Label) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.labels = append(s.labels, l)
	return s.err
}

func (s *sink) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

type harness struct {
	in   *Intake
	sink *sink
	reg  *prometheus.Registry
	base string // the httpapi server the intake is mounted on, as the service mounts it
}

func start(t *testing.T, maxBody int64) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := ingest.NewMetrics(reg)
	sk := &sink{}
	in, err := New(Settings{Records: sk, Feedback: sk, Labels: sk, Metrics: m, MaxBodyBytes: maxBody, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Settings{Endpoint: "127.0.0.1:0", Gatherer: reg, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	in.Mount(srv)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &harness{in: in, sink: sk, reg: reg, base: "http://" + srv.Addr().String()}
}

func rejected(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": reason})
}

func TestPostRecords(t *testing.T) {
	h := start(t, 0)
	one := `{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","service":"support-bot","query":"How do refunds work?",
	 "documents":[{"id":"d1","score":0.82,"content":"Refunds take 5 days."},{"id":"d2","score":0.4}],
	 "answer":"Refunds take five days [1]. Ask support [d2].","usage":{"output_tokens":9}}`
	code, hdr, body := testutil.Do(t, "POST", h.base+RecordsPath, "application/json", one)
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

	code, _, body = testutil.Do(t, "POST", h.base+RecordsPath, "application/json", `[{"trace_id":"a","query":"q"},{"trace_id":"b","answer":"x","time":"2026-11-28T10:00:00Z"}]`)
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
		{"too deep", "POST", "application/json", strings.Repeat("[", 65), 400, `{"error":"over a limit","errors":["JSON nests deeper than the limit of 64"]}`, ingest.ReasonLimits},
		{"oversized", "POST", "application/json", `{"trace_id":"t","query":"` + strings.Repeat("q", 5000) + `"}`, 413, `{"error":"body is over the limit of 4096 bytes"}`, ingest.ReasonTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := rejected(t, h.reg, c.reason)
			code, _, body := testutil.Do(t, c.method, h.base+RecordsPath, c.contentType, c.body)
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

	h.sink.set(fmt.Errorf("queue: %w", ingest.ErrOverloaded))
	code, hdr, body := testutil.Do(t, "POST", h.base+RecordsPath, "application/json", `{"trace_id":"t","query":"q"}`)
	if code != 429 || hdr.Get("Retry-After") != "1" || strings.TrimSpace(body) != `{"error":"overloaded: 0 of 1 records accepted, retry the rest later"}` {
		t.Errorf("overloaded = %d %q", code, body)
	}
	if got := rejected(t, h.reg, ingest.ReasonOverloaded); got != 1 {
		t.Errorf("rejected overloaded = %v", got)
	}
	var eb struct {
		Error  string   `json:"error"`
		Errors []string `json:"errors"`
	}
	h.sink.set(errors.New("boom"))
	code, _, body = testutil.Do(t, "POST", h.base+RecordsPath, "application/json", `{"trace_id":"t","query":"q"}`)
	if err := json.Unmarshal([]byte(body), &eb); err != nil || code != 500 || eb.Error != "0 of 1 records accepted" || !reflect.DeepEqual(eb.Errors, []string{"boom"}) {
		t.Errorf("failing downstream = %d %q", code, body)
	}
}

// post sends a POST to a handler served on its own (no httpapi guard in front), so the
// handler's own method, content-type and size checks answer.
func post(t *testing.T, url, ct, body string) (int, string) {
	t.Helper()
	code, _, b := testutil.Do(t, "POST", url, ct, body)
	return code, strings.TrimSpace(b)
}

func TestFeedback(t *testing.T) {
	h := start(t, 0)
	srv := httptest.NewServer(h.in.feedbackHandler())
	defer srv.Close()

	code, body := post(t, srv.URL, "application/json", `[{"trace_id":"h1","thumbs":"down","time":"2026-11-29T12:00:00Z"},{"trace_id":"h2","score":0.25}]`)
	if code != http.StatusAccepted || body != `{"accepted":2}` {
		t.Fatalf("valid: %d %s", code, body)
	}
	want := []record.Feedback{{TraceID: "h1", Score: -1, Time: now}, {TraceID: "h2", Score: 0.25}}
	if !reflect.DeepEqual(h.sink.feedback, want) {
		t.Fatalf("feedback = %+v\nwant %+v", h.sink.feedback, want)
	}
	code, body = post(t, srv.URL, "application/json; charset=utf-8", `{"trace_id":"h3","score":1.5,"thumbs":"up"}`)
	if code != http.StatusBadRequest || body != `{"error":"invalid feedback","reasons":["score and thumbs: give only one of them"]}` {
		t.Fatalf("invalid: %d %s", code, body)
	}
	code, body = post(t, srv.URL, "", `{"score":7}`)
	if code != http.StatusBadRequest || body != `{"error":"invalid feedback","reasons":["trace_id: is required","score: must be between -1 and 1"]}` {
		t.Fatalf("invalid: %d %s", code, body)
	}
	code, body = post(t, srv.URL, "application/json", `{"trace_id":`)
	if code != http.StatusBadRequest || body != `{"error":"invalid feedback","reasons":["invalid JSON: unexpected EOF"]}` {
		t.Fatalf("malformed: %d %s", code, body)
	}
	code, body = post(t, srv.URL, "text/plain", `{"trace_id":"x","thumbs":"up"}`)
	if code != http.StatusUnsupportedMediaType || body != `{"error":"Content-Type must be application/json"}` {
		t.Fatalf("content type: %d %s", code, body)
	}
	code, body = post(t, srv.URL, "application/json", `{"trace_id":"x","comment":"`+strings.Repeat("a", maxSmallBodyBytes)+`"}`)
	if code != http.StatusRequestEntityTooLarge || body != `{"error":"body larger than 1 MiB"}` {
		t.Fatalf("too large: %d %s", code, body)
	}
	code, hdr, _ := testutil.Do(t, "GET", srv.URL, "", "")
	if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST" {
		t.Fatalf("GET: %d allow=%q", code, hdr.Get("Allow"))
	}
	if r := func(s string) float64 { return rejected(t, h.reg, s) }; r("invalid") != 2 || r("malformed") != 1 || r("content_type") != 1 || r("too_large") != 1 {
		t.Fatalf("rejected invalid=%v malformed=%v content_type=%v too_large=%v", r("invalid"), r("malformed"), r("content_type"), r("too_large"))
	}

	// A consumer that fails after validation does not fail the request: the join has the
	// feedback by then.
	h.sink.set(errors.New("signals down"))
	if code, body := post(t, srv.URL, "application/json", `{"trace_id":"h4","thumbs":"up"}`); code != http.StatusAccepted || body != `{"accepted":1}` {
		t.Fatalf("failing consumer: %d %s", code, body)
	}
}

func TestLabels(t *testing.T) {
	h := start(t, 0)
	srv := httptest.NewServer(h.in.labelsHandler())
	defer srv.Close()
	cases := []struct {
		name, ct, body string
		code           int
		resp           string
	}{
		{"one", "application/json", `{"trace_id":"t-seen","values":{"faithfulness":0.5},"labeler":"ann"}`, 202, `{"accepted":1}`},
		{"array", "application/json; charset=utf-8", `[{"trace_id":"t-1","relevance":{"d1":2}},{"trace_id":"t-2","reference":"gold"}]`, 202, `{"accepted":2}`},
		{"bad JSON", "application/json", `{"trace_id":`, 400, `{"error":"invalid labels","reasons":["invalid JSON: unexpected EOF"]}`},
		{"unknown key", "application/json", `{"trace_id":"t","score":1}`, 400, `{"error":"invalid labels","reasons":["invalid JSON: json: unknown field \"score\""]}`},
		{"bad values", "application/json", `[{"trace_id":"t","values":{"faithfulness":2}},{"values":{"x":0.5}},{"trace_id":"t"}]`, 400,
			`{"error":"invalid labels","reasons":["[0].values.faithfulness: must be between 0 and 1","[1].trace_id: is required","[2].label: needs at least one of values, relevance or reference"]}`},
		{"content type", "text/plain", `{"trace_id":"t","reference":"x"}`, 415, `{"error":"Content-Type must be application/json"}`},
	}
	for _, tc := range cases {
		if code, body := post(t, srv.URL, tc.ct, tc.body); code != tc.code || body != tc.resp {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.code, tc.resp)
		}
	}
	want := []record.Label{
		{TraceID: "t-seen", Values: map[string]float64{"faithfulness": 0.5}, Labeler: "ann"},
		{TraceID: "t-1", Relevance: map[string]int{"d1": 2}}, {TraceID: "t-2", Reference: "gold"},
	}
	if !reflect.DeepEqual(h.sink.labels, want) {
		t.Fatalf("labels = %+v\nwant %+v", h.sink.labels, want)
	}
	if r := func(s string) float64 { return rejected(t, h.reg, s) }; r("malformed") != 2 || r("invalid") != 1 || r("content_type") != 1 {
		t.Fatalf("rejected malformed=%v invalid=%v content_type=%v", r("malformed"), r("invalid"), r("content_type"))
	}
}

// Mounted on the server as the service mounts them: feedback and labels take POST only (the
// server's mux answers other methods), writes must be JSON (the server's guard), and an
// endpoint without a consumer does not exist.
func TestMount(t *testing.T) {
	h := start(t, 0)
	if code, _, body := testutil.Do(t, "POST", h.base+FeedbackPath, "application/json", `{"trace_id":"m1","thumbs":"up"}`); code != 202 || body != "{\"accepted\":1}\n" {
		t.Errorf("POST feedback = %d %q", code, body)
	}
	if code, _, body := testutil.Do(t, "POST", h.base+LabelsPath, "application/json", `{"trace_id":"m1","reference":"r"}`); code != 202 || body != "{\"accepted\":1}\n" {
		t.Errorf("POST labels = %d %q", code, body)
	}
	if code, _, _ := testutil.Do(t, "GET", h.base+FeedbackPath, "", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET feedback = %d, want 405", code)
	}
	before := rejected(t, h.reg, ingest.ReasonContentType)
	if code, _, body := testutil.Do(t, "POST", h.base+LabelsPath, "", `{"trace_id":"m2","reference":"r"}`); code != http.StatusUnsupportedMediaType ||
		!strings.Contains(body, "use application/json") || rejected(t, h.reg, ingest.ReasonContentType) != before+1 {
		t.Errorf("POST labels without a Content-Type = %d %q", code, body)
	}
	if len(h.sink.feedback) != 1 || len(h.sink.labels) != 1 {
		t.Errorf("feedback %d, labels %d; want 1 each", len(h.sink.feedback), len(h.sink.labels))
	}

	reg := prometheus.NewRegistry()
	m := ingest.NewMetrics(reg)
	in, err := New(Settings{Labels: h.sink, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Settings{Endpoint: "127.0.0.1:0", Gatherer: reg, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	in.Mount(srv)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	for path, want := range map[string]int{RecordsPath: 404, FeedbackPath: 404, LabelsPath: 202} {
		if code, _, body := testutil.Do(t, "POST", "http://"+srv.Addr().String()+path, "application/json", `{"trace_id":"x","reference":"r"}`); code != want {
			t.Errorf("POST %s with only a labels consumer = %d %q, want %d", path, code, body, want)
		}
	}

	if _, err := New(Settings{}); err == nil {
		t.Error("New without Metrics succeeded")
	}
}
