package nli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// teiServer answers /predict like text-embeddings-inference serving an NLI cross-encoder. Its
// "model": entailment 0.9 when every word of the hypothesis is in the premise, contradiction
// 0.8 when the premise holds "never", else neutral.
type teiServer struct {
	mu       sync.Mutex
	bodies   []map[string]any
	override []func(w http.ResponseWriter, r *http.Request) bool
	*httptest.Server
}

func newTEI(t *testing.T) *teiServer {
	s := &teiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/predict" || r.Method != http.MethodPost {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		raw, _ := io.ReadAll(r.Body) // read first, so a client that gives up cancels r.Context()
		s.mu.Lock()
		var o func(http.ResponseWriter, *http.Request) bool
		if len(s.override) > 0 {
			o = s.override[0]
			s.override = s.override[1:]
		}
		s.mu.Unlock()
		if o != nil && o(w, r) {
			return
		}
		var body struct {
			Inputs   [][]string `json:"inputs"`
			Truncate bool       `json:"truncate"`
		}
		var m map[string]any
		json.Unmarshal(raw, &m)
		s.mu.Lock()
		s.bodies = append(s.bodies, m)
		s.mu.Unlock()
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		var out [][]map[string]any
		for _, p := range body.Inputs {
			e, n, c := 0.05, 0.9, 0.05
			switch {
			case strings.Contains(p[0], "never"):
				e, n, c = 0.1, 0.1, 0.8
			case allWordsIn(p[1], p[0]):
				e, n, c = 0.9, 0.05, 0.05
			}
			out = append(out, []map[string]any{{"label": "entailment", "score": e}, {"label": "neutral", "score": n}, {"label": "contradiction", "score": c}})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(s.Close)
	return s
}

func allWordsIn(h, p string) bool {
	for _, w := range strings.Fields(strings.ToLower(strings.Trim(h, "."))) {
		if !strings.Contains(strings.ToLower(p), strings.Trim(w, ".,")) {
			return false
		}
	}
	return true
}

func rec() *record.Record {
	r := &record.Record{TraceID: "t1", Service: "svc",
		Answer: "The museum opens at nine [1]. Tickets cost ten euros [2]. Parking is free for visitors.",
		Documents: []record.Document{
			{ID: "a", Content: "The museum opens at nine every morning."},
			{ID: "b", Content: "Parking is free for visitors of the museum."},
		}}
	r.Normalize(time.Now())
	return r
}

func values(t *testing.T, res []score.Result) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range res {
		if r.Scorer != "nli" || r.TraceID != "t1" || r.Weight != 1 {
			t.Fatalf("result %+v", r)
		}
		out[r.Metric] = r.Value
	}
	return out
}

func TestScores(t *testing.T) {
	srv := newTEI(t)
	s, err := New(Config{URL: srv.URL, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Score(context.Background(), rec())
	if err != nil {
		t.Fatal(err)
	}
	got := values(t, res)
	// Sentences: "opens at nine" (entailed by a), "ten euros" (nothing), "Parking is free" (b):
	// faithfulness 2/3. Citations: [1]→a supports; [2]→b does not; the parking sentence is
	// uncited: precision 1/2, recall 1/3.
	want := map[string]float64{"faithfulness": 2.0 / 3, "citation_precision": 0.5, "citation_recall": 1.0 / 3}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-12 {
			t.Fatalf("%s = %v, want %v (all %v)", k, got[k], v, got)
		}
	}
	if res[0].Explanation != "2 of 3 sentences entailed (threshold 0.70), 0 contradicted" {
		t.Fatalf("explanation %q", res[0].Explanation)
	}
	// 3 claims x 2 documents = 6 pairs in batches of 4, then the 2 citation pairs.
	if len(srv.bodies) != 3 {
		t.Fatalf("%d requests", len(srv.bodies))
	}
	first := srv.bodies[0]
	if first["truncate"] != true || len(first["inputs"].([]any)) != 4 ||
		fmt.Sprint(first["inputs"].([]any)[0]) != "[The museum opens at nine every morning. The museum opens at nine.]" {
		t.Fatalf("request %v", first)
	}
}

// A refusal makes no claim (score.ClaimMetric): no faithfulness, no citation metric, and the
// model server is not asked.
func TestRefusalIsNotScored(t *testing.T) {
	srv := newTEI(t)
	s, err := New(Config{URL: srv.URL, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	r := rec()
	r.Answer = "I couldn't find the opening hours in the documents [1]."
	res, err := s.Score(context.Background(), r)
	if err != nil || len(res) != 0 {
		t.Fatalf("results %+v, err %v; want none", res, err)
	}
	if len(srv.bodies) != 0 {
		t.Fatalf("%d requests to the model server, want 0", len(srv.bodies))
	}
}

func TestThreshold(t *testing.T) {
	srv := newTEI(t)
	s, err := New(Config{URL: srv.URL + "/", Threshold: 0.95, Metrics: []string{"faithfulness"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Score(context.Background(), rec())
	if err != nil || len(res) != 1 || res[0].Value != 0 {
		t.Fatalf("res %+v err %v: 0.9 entailment is below a 0.95 threshold", res, err)
	}
}

func TestRetryAndBadResponses(t *testing.T) {
	srv := newTEI(t)
	var waits []time.Duration
	srv.override = []func(http.ResponseWriter, *http.Request) bool{
		func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "model loading", http.StatusServiceUnavailable)
			return true
		},
	}
	reg := prometheus.NewRegistry()
	s, err := New(Config{URL: srv.URL, MaxRetries: 1, Metrics: []string{"faithfulness"}, Registerer: reg,
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Score(context.Background(), rec())
	if err != nil || len(res) != 1 || fmt.Sprint(waits) != "[2s]" {
		t.Fatalf("res %+v err %v waits %v", res, err, waits)
	}

	bad := []struct{ name, body, want string }{
		{"no entailment label", `[[{"label":"LABEL_0","score":0.9}],[],[],[],[],[]]`, "has no entailment label"},
		{"wrong count", `[]`, "0 predictions for 6 pairs"},
		{"score out of range", `[[{"label":"entailment","score":1.7}],[],[],[],[],[]]`, "outside [0, 1]"},
		{"not json", `<html>`, "not a list of label scores"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			body := b.body
			srv.override = []func(http.ResponseWriter, *http.Request) bool{func(w http.ResponseWriter, r *http.Request) bool {
				io.WriteString(w, body)
				return true
			}}
			res, err := s.Score(context.Background(), rec())
			var f score.Failure
			if len(res) != 0 || !errors.As(err, &f) || f[0].Outcome != "error" || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("res %+v err %v", res, err)
			}
		})
	}
	want := `
# HELP ragwatch_nli_requests_total Requests to the NLI model server by outcome (ok, error, timeout, bad_response).
# TYPE ragwatch_nli_requests_total counter
ragwatch_nli_requests_total{outcome="bad_response"} 4
ragwatch_nli_requests_total{outcome="error"} 1
ragwatch_nli_requests_total{outcome="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestTimeout(t *testing.T) {
	srv := newTEI(t)
	srv.override = []func(http.ResponseWriter, *http.Request) bool{func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done()
		return true
	}}
	s, err := New(Config{URL: srv.URL, Timeout: 30 * time.Millisecond, Metrics: []string{"faithfulness"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Score(context.Background(), rec())
	var f score.Failure
	if !errors.As(err, &f) || f.Outcomes()["faithfulness"] != "timeout" {
		t.Fatalf("err %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := New(Config{URL: "http://x", Metrics: []string{"rubric_accuracy"}}); err == nil || err.Error() != `nli cannot score metric "rubric_accuracy"` {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Config{}); err == nil || err.Error() != "nli url is required" {
		t.Fatalf("err %v", err)
	}
}
