// Package recentscores keeps a bounded in-memory ring of recent scores and serves the worst of them at
// GET /api/v1/scores?metric=&below=&limit=.
package recentscores

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Limits of the API.
const (
	DefaultLimit      = 20
	MaxLimit          = 1000
	MaxExplanation    = 200 // bytes of explanation returned
	MaxContentPreview = 500 // bytes of query and answer kept when content is enabled
)

// Entry is one recent score as the API returns it.
type Entry struct {
	TraceID     string    `json:"trace_id"`
	SpanID      string    `json:"span_id,omitempty"`
	Service     string    `json:"service"`
	Metric      string    `json:"metric"`
	Value       float64   `json:"value"`
	Scorer      string    `json:"scorer"`
	Model       string    `json:"model,omitempty"`
	Explanation string    `json:"explanation,omitempty"`
	Time        time.Time `json:"time"`
	// Method and JudgeVersion are a judge's (score.Result).
	Method       string `json:"method,omitempty"`
	JudgeVersion string `json:"judge_version,omitempty"`
	// Raw and Calibration trace a value changed by a service's calibration map
	// (score.Result): the scorer's own value and the map's version.
	Raw         *float64 `json:"raw,omitempty"`
	Calibration uint64   `json:"calibration,omitempty"`
	// Query and Answer are set only when the ring was built with content enabled and saw the
	// record (ConsumeRecord).
	Query  string `json:"query,omitempty"`
	Answer string `json:"answer,omitempty"`
}

type content struct{ query, answer string }

// Ring is a bounded ring of the most recent results; it is a score.Consumer and, for the
// optional content, a record.Consumer. Safe for concurrent use.
type Ring struct {
	withContent bool

	mu      sync.Mutex // guards all below
	buf     []score.Result
	next    int
	full    bool
	content map[string]content // by record key, only when withContent
	order   []string           // content keys, a ring of len(buf)
	cnext   int
}

var (
	_ score.Consumer  = (*Ring)(nil)
	_ record.Consumer = (*Ring)(nil)
)

// New returns a ring holding the last size results (size <= 0 gives 1000). withContent keeps a
// short preview of each record's query and answer for the API; off, no record content is kept.
func New(size int, withContent bool) *Ring {
	if size <= 0 {
		size = 1000
	}
	r := &Ring{withContent: withContent, buf: make([]score.Result, size)}
	if withContent {
		r.content = map[string]content{}
		r.order = make([]string, size)
	}
	return r
}

// ConsumeScores implements score.Consumer; the oldest results are overwritten.
func (r *Ring) ConsumeScores(_ context.Context, results []score.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range results {
		res.Explanation = cut(res.Explanation, MaxExplanation)
		r.buf[r.next] = res
		r.next++
		if r.next == len(r.buf) {
			r.next, r.full = 0, true
		}
	}
	return nil
}

// ConsumeRecord implements record.Consumer: with content enabled it remembers a preview of the
// record's query and answer (bounded like the scores); otherwise it does nothing.
func (r *Ring) ConsumeRecord(_ context.Context, rec *record.Record) error {
	if !r.withContent {
		return nil
	}
	key := rec.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.content[key]; !ok {
		if old := r.order[r.cnext]; old != "" {
			delete(r.content, old)
		}
		r.order[r.cnext] = key
		r.cnext = (r.cnext + 1) % len(r.order)
	}
	r.content[key] = content{query: cut(rec.Query, MaxContentPreview), answer: cut(rec.Answer, MaxContentPreview)}
	return nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Query returns up to limit results, lowest value first (newest first among equal values),
// keeping only metric (when not "") and values strictly below below (when not NaN).
func (r *Ring) Query(metric string, below float64, limit int) []Entry {
	r.mu.Lock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	var out []Entry
	for i := 0; i < n; i++ {
		// Walk newest to oldest so the stable sort keeps newest first among ties.
		res := r.buf[(r.next-1-i+len(r.buf))%len(r.buf)]
		if (metric != "" && res.Metric != metric) || (!math.IsNaN(below) && !(res.Value < below)) {
			continue
		}
		e := Entry{TraceID: res.TraceID, SpanID: res.SpanID, Service: res.Service, Metric: res.Metric, Value: res.Value,
			Scorer: res.Scorer, Model: res.Model, Explanation: res.Explanation, Time: res.Time,
			Method: res.Method, JudgeVersion: res.JudgeVersion, Raw: res.Raw, Calibration: res.Calibration}
		if r.withContent {
			key := res.TraceID
			if res.SpanID != "" {
				key += "/" + res.SpanID
			}
			c := r.content[key]
			e.Query, e.Answer = c.query, c.answer
		}
		out = append(out, e)
	}
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Handler serves GET /api/v1/scores?metric=faithfulness&below=0.5&limit=20 as
// {"scores": [Entry...]}, worst first. Bad parameters get 400 with {"error": "..."}.
func (r *Ring) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		metric := q.Get("metric")
		if len(metric) > 64 {
			httpError(w, "`metric` is longer than 64 bytes")
			return
		}
		below := math.NaN()
		if s := q.Get("below"); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				httpError(w, fmt.Sprintf("`below` must be a number, got %q", s))
				return
			}
			below = v
		}
		limit := DefaultLimit
		if s := q.Get("limit"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 || v > MaxLimit {
				httpError(w, fmt.Sprintf("`limit` must be an integer from 1 to %d, got %q", MaxLimit, s))
				return
			}
			limit = v
		}
		entries := r.Query(metric, below, limit)
		if entries == nil {
			entries = []Entry{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(map[string]any{"scores": entries})
	})
}

func httpError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
