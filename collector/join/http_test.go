package join

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestHTTPHandler(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, nil, clk, reg)
	m := ingest.NewMetrics(reg)
	srv := httptest.NewServer(j.Handler(m))
	defer srv.Close()

	post := func(ct, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/feedback", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	code, body := post("application/json", `[{"trace_id":"h1","thumbs":"down","time":"2026-11-29T12:00:00Z"},{"trace_id":"h2","score":0.25}]`)
	if code != http.StatusAccepted || body != `{"accepted":2}` {
		t.Fatalf("valid: %d %s", code, body)
	}
	if j.Pending() != 2 {
		t.Fatalf("pending = %d", j.Pending())
	}
	code, body = post("application/json; charset=utf-8", `{"trace_id":"h3","score":1.5,"thumbs":"up"}`)
	if code != http.StatusBadRequest || body != `{"error":"invalid feedback","reasons":["score and thumbs: give only one of them"]}` {
		t.Fatalf("invalid: %d %s", code, body)
	}
	code, body = post("", `{"score":7}`)
	if code != http.StatusBadRequest || body != `{"error":"invalid feedback","reasons":["trace_id: is required","score: must be between -1 and 1"]}` {
		t.Fatalf("invalid: %d %s", code, body)
	}
	code, body = post("application/json", `{"trace_id":`)
	if code != http.StatusBadRequest || body != `{"error":"invalid feedback","reasons":["invalid JSON: unexpected EOF"]}` {
		t.Fatalf("malformed: %d %s", code, body)
	}
	code, _ = post("text/plain", `{"trace_id":"x","thumbs":"up"}`)
	if code != http.StatusUnsupportedMediaType {
		t.Fatalf("content type: %d", code)
	}
	code, _ = post("application/json", `{"trace_id":"x","comment":"`+strings.Repeat("a", MaxBodyBytes)+`"}`)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large: %d", code)
	}
	resp, err := http.Get(srv.URL + "/api/v1/feedback")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}

	rej := func(reason string) float64 {
		return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": reason})
	}
	if rej("invalid") != 2 || rej("malformed") != 1 || rej("content_type") != 1 || rej("too_large") != 1 {
		t.Fatalf("rejected invalid=%v malformed=%v content_type=%v too_large=%v", rej("invalid"), rej("malformed"), rej("content_type"), rej("too_large"))
	}

	// The accepted feedback joins its record when it comes.
	clk.Add(time.Second)
	if err := j.ConsumeRecord(t.Context(), rec("h1")); err != nil {
		t.Fatal(err)
	}
	if s.records[0].Feedback == nil || s.records[0].Feedback.Score != -1 || !s.records[0].Feedback.Time.Equal(t0) {
		t.Fatalf("record = %+v", s.records[0])
	}
}
