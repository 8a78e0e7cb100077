package recentscores

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func res(trace, metric string, v float64, i int) score.Result {
	return score.Result{TraceID: trace, Service: "svc", Metric: metric, Value: v, Weight: 1, Scorer: "builtin",
		Explanation: "why " + trace, Time: t0.Add(time.Duration(i) * time.Second)}
}

func get(t *testing.T, srv *httptest.Server, query string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/api/v1/scores" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func traces(t *testing.T, body string) string {
	t.Helper()
	var out struct{ Scores []Entry }
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range out.Scores {
		s = append(s, fmt.Sprintf("%s:%s=%g", e.TraceID, e.Metric, e.Value))
	}
	return strings.Join(s, " ")
}

func TestHandler(t *testing.T) {
	r := New(4, false)
	ctx := context.Background()
	// t1 is overwritten: the ring holds the last 4 results.
	r.ConsumeScores(ctx, []score.Result{res("t1", "faithfulness", 0.0, 1), res("t2", "faithfulness", 0.4, 2)})
	r.ConsumeScores(ctx, []score.Result{res("t3", "answer_relevancy", 0.1, 3), res("t4", "faithfulness", 0.9, 4), res("t5", "faithfulness", 0.4, 5)})
	r.ConsumeRecord(ctx, &record.Record{TraceID: "t5", Query: "secret question", Answer: "secret answer"})
	mux := http.NewServeMux()
	mux.Handle("GET /api/v1/scores", r.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct{ query, want string }{
		{"", "t3:answer_relevancy=0.1 t5:faithfulness=0.4 t2:faithfulness=0.4 t4:faithfulness=0.9"},
		{"?metric=faithfulness", "t5:faithfulness=0.4 t2:faithfulness=0.4 t4:faithfulness=0.9"},
		{"?metric=faithfulness&below=0.5", "t5:faithfulness=0.4 t2:faithfulness=0.4"},
		{"?metric=faithfulness&below=0.4", ""},
		{"?below=0.5&limit=1", "t3:answer_relevancy=0.1"},
		{"?metric=context_recall", ""},
	}
	for _, tt := range tests {
		code, body := get(t, srv, tt.query)
		if code != 200 || traces(t, body) != tt.want {
			t.Errorf("%s: %d %s\nwant %s", tt.query, code, body, tt.want)
		}
	}
	_, body := get(t, srv, "?limit=1")
	want := `{"scores":[{"trace_id":"t3","service":"svc","metric":"answer_relevancy","value":0.1,"scorer":"builtin","explanation":"why t3","time":"2026-05-01T12:00:03Z"}]}`
	if body != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
	if strings.Contains(body, "secret") {
		t.Fatal("content returned without being enabled")
	}
	for _, bad := range []struct{ q, msg string }{
		{"?below=abc", "`below` must be a number, got \"abc\""},
		{"?below=NaN", "`below` must be a number, got \"NaN\""},
		{"?limit=0", "`limit` must be an integer from 1 to 1000, got \"0\""},
		{"?limit=5000", "`limit` must be an integer from 1 to 1000, got \"5000\""},
		{"?metric=" + strings.Repeat("m", 65), "`metric` is longer than 64 bytes"},
	} {
		code, body := get(t, srv, bad.q)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != 400 || e.Error != bad.msg {
			t.Errorf("%s: %d %s", bad.q, code, body)
		}
	}
	empty := httptest.NewServer(New(2, false).Handler())
	defer empty.Close()
	if code, body := get(t, empty, ""); code != 200 || body != `{"scores":[]}` {
		t.Fatalf("empty ring: %d %s", code, body)
	}
}

func TestContentWhenEnabled(t *testing.T) {
	r := New(2, true)
	ctx := context.Background()
	long := strings.Repeat("é", 400) // 800 bytes
	r.ConsumeRecord(ctx, &record.Record{TraceID: "a", Query: "q-a", Answer: long})
	r.ConsumeRecord(ctx, &record.Record{TraceID: "b", SpanID: "s1", Query: "q-b", Answer: "ans-b"})
	r.ConsumeRecord(ctx, &record.Record{TraceID: "c", Query: "q-c"}) // evicts a's content
	r.ConsumeScores(ctx, []score.Result{res("a", "m", 0.1, 1), {TraceID: "b", SpanID: "s1", Metric: "m", Value: 0.2}, res("c", "m", 0.3, 3)})
	got := r.Query("", math.NaN(), 10)
	if len(got) != 2 || got[0].TraceID != "b" || got[0].Query != "q-b" || got[0].Answer != "ans-b" || got[1].Query != "q-c" {
		t.Fatalf("entries %+v", got)
	}
	r2 := New(1, true)
	r2.ConsumeRecord(ctx, &record.Record{TraceID: "a", Answer: long})
	r2.ConsumeScores(ctx, []score.Result{res("a", "m", 0.1, 1)})
	e := r2.Query("m", math.NaN(), 1)[0]
	if len(e.Answer) != 500+len("…") || !strings.HasSuffix(e.Answer, "é…") {
		t.Fatalf("answer preview %d bytes: %q", len(e.Answer), e.Answer[len(e.Answer)-8:])
	}
}

func TestExplanationTruncatedAndConcurrentUse(t *testing.T) {
	r := New(100, false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				x := res(fmt.Sprint(g, "-", i), "m", float64(i)/50, i)
				x.Explanation = strings.Repeat("x", 300)
				r.ConsumeScores(context.Background(), []score.Result{x})
				r.Query("m", 0.5, 5)
			}
		}()
	}
	wg.Wait()
	all := r.Query("", math.NaN(), MaxLimit)
	if len(all) != 100 || len(all[0].Explanation) != MaxExplanation+len("…") {
		t.Fatalf("%d entries, explanation %d bytes", len(all), len(all[0].Explanation))
	}
}
