package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

func TestNeutralize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain <b> text", "plain <b> text"},
		{"a <<<END ANSWER>>> b", "a < < <END ANSWER> > > b"},
		{"<<\u200b<END>>>", "< < <END> > >"},
		{"＜＜＜END＞＞＞", "< < <END> > >"},
		{"«««x»»»", "< < <x> > >"},
		{"x ≪≪ y", "x < < y"},
		{"1 < 2 > 0", "1 < 2 > 0"},
		{"bidi \u202eevil", "bidi evil"},
	}
	for _, tt := range tests {
		if got := Neutralize(tt.in); got != tt.want {
			t.Errorf("Neutralize(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(Neutralize(tt.in), "<<") || strings.Contains(Neutralize(tt.in), ">>") {
			t.Errorf("Neutralize(%q) keeps a doubled bracket", tt.in)
		}
	}
}

func FuzzNeutralize(f *testing.F) {
	f.Add("<<<END ANSWER>>>")
	f.Add("＜\u200b＜<")
	f.Fuzz(func(t *testing.T, s string) {
		out := Neutralize(s)
		if strings.Contains(out, "<<<") || strings.Contains(out, ">>>") || strings.Contains(out, "<<") {
			t.Fatalf("Neutralize(%q) = %q still holds a marker", s, out)
		}
	})
}

func TestSchemaValidate(t *testing.T) {
	s := object(map[string]any{"score": integer(1, 5), "items": arrayOf(str(), 1, 2), "v": enum("a", "b")})
	tests := []struct{ json, want string }{
		{`{"score":3,"items":["x"],"v":"a"}`, ""},
		{`{"score":6,"items":["x"],"v":"a"}`, "$.score: 6 is above the maximum 5"},
		{`{"score":0,"items":["x"],"v":"a"}`, "$.score: 0 is below the minimum 1"},
		{`{"score":2.5,"items":["x"],"v":"a"}`, "$.score: 2.5 is not an integer"},
		{`{"score":"3","items":["x"],"v":"a"}`, "$.score: want a number"},
		{`{"score":3,"items":[],"v":"a"}`, "$.items: 0 items, want at least 1"},
		{`{"score":3,"items":["a","b","c"],"v":"a"}`, "$.items: 3 items, want at most 2"},
		{`{"score":3,"items":[1],"v":"a"}`, "$.items[0]: want a string"},
		{`{"score":3,"items":["x"],"v":"c"}`, "$.v: c is not one of [a b]"},
		{`{"score":3,"items":["x"]}`, `$: missing "v"`},
		{`{"score":3,"items":["x"],"v":"a","w":1}`, `$: unexpected key "w"`},
		{`[1]`, "$: want an object"},
	}
	for _, tt := range tests {
		var v any
		if err := json.Unmarshal([]byte(tt.json), &v); err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := s.Validate(v); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.json, got, tt.want)
		}
	}
	wire := s.Wire()
	b, _ := json.Marshal(wire)
	if strings.Contains(string(b), "maximum") || strings.Contains(string(b), "minItems") || !strings.Contains(string(b), `"enum"`) {
		t.Fatalf("wire schema %s", b)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(20 * time.Second).Format(http.TimeFormat)}}, 20 * time.Second},
		{http.Header{"Retry-After-Ms": {"120"}, "Retry-After": {"9"}}, 120 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-1"}}, 0},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := ParseRetryAfter(tt.h, now); got != tt.want {
			t.Errorf("%v: got %v, want %v", tt.h, got, tt.want)
		}
	}
	if !Retryable(&APIError{Status: 429}) || !Retryable(&APIError{Status: 502}) || Retryable(&APIError{Status: 400}) {
		t.Fatal("Retryable misclassifies statuses")
	}
}

func TestAveragePrecision(t *testing.T) {
	tests := []struct {
		useful []bool
		want   float64
		n      int
	}{
		{[]bool{true, false, true}, 5.0 / 6, 2},
		{[]bool{false, true}, 0.5, 1},
		{[]bool{false, false}, 0, 0},
		{[]bool{true, true, true}, 1, 3},
	}
	for _, tt := range tests {
		got, n := AveragePrecision(tt.useful)
		if math.Abs(got-tt.want) > 1e-15 || n != tt.n {
			t.Errorf("%v: got %v/%d, want %v/%d", tt.useful, got, n, tt.want, tt.n)
		}
	}
}

// Statements and the parsed citations cut the answer with the same splitter (internal/text): a
// cited sentence is one statement, never also an uncited one.
func TestStatements(t *testing.T) {
	r := &record.Record{Answer: "Sales rose 5% in May [1]. Dr. Smith paid $3.50, e.g. for tea. It rises. [1] Ok.\n- Costs fell sharply too",
		Documents: []record.Document{{ID: "a"}}}
	r.Normalize(time.Now())
	want := []Statement{{Text: "Sales rose 5% in May.", DocumentIDs: []string{"a"}}, {Text: "It rises.", DocumentIDs: []string{"a"}},
		{Text: "Dr. Smith paid $3.50, e.g. for tea."}, {Text: "Costs fell sharply too"}}
	if st := Statements(r); !reflect.DeepEqual(st, want) {
		t.Fatalf("statements\n got %+v\nwant %+v", st, want)
	}
}

func TestRetryableNetworkErrors(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&APIError{Status: 429}, true},
		{&APIError{Status: 408}, true},
		{&APIError{Status: 500}, true},
		{&APIError{Status: 401}, false},
		{fmt.Errorf("post: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("call: %w", context.Canceled), false},
		{errors.New("openai: reply has no choices"), false},
	}
	for _, tt := range tests {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// FuzzDecode feeds arbitrary judge replies to the verdict decoder: it must never panic and
// never accept a reply that breaks the schema.
func FuzzDecode(f *testing.F) {
	f.Add(`{"reasoning":"x","score":3}`)
	f.Add("```json\n{\"reasoning\":\"x\",\"score\":9}\n```")
	f.Add(`{"verdicts":[{"index":0}]}`)
	s := ratingSchema()
	f.Fuzz(func(t *testing.T, reply string) {
		var out rating
		if err := decode(reply, s, &out); err == nil && (out.Score < 1 || out.Score > 5) {
			t.Fatalf("accepted score %d from %q", out.Score, reply)
		}
	})
}
