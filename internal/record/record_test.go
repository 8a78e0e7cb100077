package record

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// docExample is the record's JSON form as docs/record.md shows it.
const docExample = `{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","service":"support-bot","session_id":"s-1",
 "user_id":"u-9","time":"2026-11-29T12:00:00Z","query":"How long do refunds take?",
 "documents":[{"id":"d1","score":0.82,"content":"Refunds take 5 days.","metadata":{"source":"faq.md"}}],
 "answer":"Five days.","citations":[{"text":"a claim","document_ids":["d1"]}],
 "model":"gpt-4o-mini","usage":{"input_tokens":412,"output_tokens":27},
 "latency_ms":{"retrieval":35.2,"generation":812.0,"total":870.1},
 "feedback":{"score":1,"comment":""},"reference":"gold answer","relevance":{"d1":2},
 "attributes":{"route":"faq"}}`

func TestJSONForm(t *testing.T) {
	recs, err := DecodeJSON([]byte(docExample), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	score := 0.82
	want := &Record{
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "support-bot", SessionID: "s-1", UserID: "u-9",
		Time:      time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Query:     "How long do refunds take?",
		Documents: []Document{{ID: "d1", Score: &score, Content: "Refunds take 5 days.", Metadata: map[string]any{"source": "faq.md"}}},
		Answer:    "Five days.",
		Citations: []Citation{{Text: "a claim", DocumentIDs: []string{"d1"}}},
		Model:     "gpt-4o-mini",
		Usage:     Usage{InputTokens: 412, OutputTokens: 27},
		Latency:   Latency{Retrieval: 35.2, Generation: 812, Total: 870.1},
		Feedback:  &Feedback{Score: 1},
		Reference: "gold answer", Relevance: map[string]int{"d1": 2},
		Attributes: map[string]string{"route": "faq"},
	}
	if len(recs) != 1 || !reflect.DeepEqual(recs[0], want) {
		t.Fatalf("decoded %#v\nwant %#v", recs[0], want)
	}
	// Round trip: encoding and decoding again gives the same record.
	b, err := json.Marshal(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeJSON(b, time.Time{})
	if err != nil || !reflect.DeepEqual(again[0], want) {
		t.Fatalf("round trip %s: %v", b, err)
	}
	// Zero values are left out, except usage and latency_ms which are always present.
	min, _ := json.Marshal(&Record{TraceID: "t", Time: want.Time})
	if string(min) != `{"trace_id":"t","time":"2026-11-29T12:00:00Z","usage":{},"latency_ms":{}}` {
		t.Errorf("minimal JSON = %s", min)
	}
}

func TestDecodeJSONNormalizes(t *testing.T) {
	now := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	recs, err := DecodeJSON([]byte("\n [{\"trace_id\":\"a\",\"documents\":[{\"id\":\"d1\"},{\"id\":\"d2\"}],\"answer\":\"Yes [2].\"},"+
		"{\"trace_id\":\"b\",\"query\":\"q\",\"answer\":\"x [1]\",\"citations\":[{\"text\":\"given\",\"document_ids\":[\"z\"]}]}]"), now)
	if err != nil {
		t.Fatal(err)
	}
	if !recs[0].Time.Equal(now) || !reflect.DeepEqual(recs[0].Citations, []Citation{{"Yes.", []string{"d2"}}}) {
		t.Errorf("first = %+v", recs[0])
	}
	if !reflect.DeepEqual(recs[1].Citations, []Citation{{"given", []string{"z"}}}) {
		t.Errorf("explicit citations replaced: %+v", recs[1].Citations)
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	long := strings.Repeat("x", MaxIDLength+1)
	cases := []struct {
		name, in, want string
	}{
		{"empty", "  ", "empty body"},
		{"empty array", "[]", "empty array"},
		{"not JSON", "{", "invalid JSON: unexpected end of JSON input"},
		{"wrong type", `{"trace_id":5}`, "invalid JSON: json: cannot unmarshal number into Go struct field Record.trace_id of type string"},
		{"null in array", `[null,{"trace_id":"a","query":"q"}]`, "[0]: null record"},
		{"no content", `{"trace_id":"a"}`, "record: needs at least one of query, answer or documents"},
		{"every problem of one record", `{"span_id":"` + long + `","query":"q","documents":[{"id":""}],"usage":{"input_tokens":-1},"latency_ms":{"total":-2},"feedback":{"score":-1.5}}`,
			"trace_id: is required\nspan_id: longer than 256 bytes\ndocuments[0].id: is required\nfeedback.score: must be between -1 and 1\nusage: token counts must not be negative\nlatency_ms: durations must not be negative"},
		{"index on every problem", `[{"trace_id":"a","query":"q"},{"documents":[{"id":"d"}],"feedback":{"score":2}}]`,
			"[1]: trace_id: is required\n[1]: feedback.score: must be between -1 and 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, err := DecodeJSON([]byte(c.in), time.Time{})
			if err == nil || err.Error() != c.want {
				t.Errorf("err = %v\nwant %s", err, c.want)
			}
			if recs != nil {
				t.Errorf("records returned with an error: %v", recs)
			}
		})
	}
}

func TestValidateLimits(t *testing.T) {
	nan := math.NaN()
	r := &Record{TraceID: "t", Answer: strings.Repeat("a", MaxTextBytes+1), Documents: []Document{{ID: "d", Score: &nan}}}
	for i := 0; i <= MaxAttributes; i++ {
		if r.Attributes == nil {
			r.Attributes = map[string]string{}
		}
		r.Attributes[strings.Repeat("k", i+1)] = "v"
	}
	want := "answer: longer than 1048576 bytes\ndocuments[0].score: must be a finite number\nattributes: more than 128 attributes"
	if err := r.Validate(); err == nil || err.Error() != want {
		t.Errorf("err = %v", err)
	}
}

// Feedback handed on alone names its request; attached to a record, its JSON is the record's
// `feedback` object of docs/record.md, without those ids.
func TestFeedbackJSONLeavesIDsToTheRecord(t *testing.T) {
	f := Feedback{TraceID: "t", SpanID: "s", Service: "web", Score: -1, Comment: "wrong", Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	b, err := json.Marshal(Record{TraceID: "t", Time: f.Time, Query: "q", Feedback: &f})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"trace_id":"t","time":"2026-11-29T12:00:00Z","query":"q","usage":{},"latency_ms":{},"feedback":{"score":-1,"comment":"wrong","time":"2026-11-29T12:00:00Z"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	recs, err := DecodeJSON([]byte(`{"trace_id":"a","query":"q","feedback":{"score":1,"trace_id":"b"}}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *recs[0].Feedback; got != (Feedback{Score: 1}) {
		t.Fatalf("decoded feedback %+v: ids come from the record only", got)
	}
}

func TestRecordHelpers(t *testing.T) {
	a, b := 0.5, 0.25
	r := &Record{TraceID: "t", Documents: []Document{{ID: "1", Score: &a}, {ID: "2"}, {ID: "3", Score: &b}}}
	if top, sum, n := r.ScoreStats(); r.Key() != "t" || top != 0.5 || sum != 0.75 || n != 2 {
		t.Errorf("Key %q ScoreStats %v %v %d", r.Key(), top, sum, n)
	}
	r.SpanID = "s"
	if r.Key() != "t/s" {
		t.Errorf("Key = %q", r.Key())
	}
	for score, want := range map[float64]string{1: "positive", 0.2: "positive", 0: "neutral", -0.5: "negative"} {
		if got := (Feedback{Score: score}).Sentiment(); got != want {
			t.Errorf("Sentiment(%v) = %s", score, got)
		}
	}
}

func TestFanout(t *testing.T) {
	var got []string
	f := Fanout{
		ConsumerFunc(func(_ context.Context, r *Record) error {
			got = append(got, "a:"+r.TraceID)
			return errors.New("a failed")
		}),
		ConsumerFunc(func(_ context.Context, r *Record) error { got = append(got, "b:"+r.TraceID); return nil }),
		Discard,
		ConsumerFunc(func(context.Context, *Record) error { return errors.New("c failed") }),
	}
	err := f.ConsumeRecord(context.Background(), &Record{TraceID: "t"})
	if err == nil || err.Error() != "a failed\nc failed" || !reflect.DeepEqual(got, []string{"a:t", "b:t"}) {
		t.Errorf("err %v, calls %v", err, got)
	}
	if err := (Fanout{}).ConsumeRecord(context.Background(), &Record{}); err != nil {
		t.Error(err)
	}
}

// FuzzDecodeJSON feeds arbitrary bodies to the decoder the API and NATS use: it never panics,
// and what it accepts is valid, normalized and round-trips through JSON.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(docExample))
	f.Add([]byte(`[{"trace_id":"a","query":"q"},{"trace_id":"b","answer":"x [1]","documents":[{"id":"d"}]}]`))
	f.Add([]byte(`[null]`))
	f.Add([]byte(`{"trace_id":"t","documents":[{"id":"d","score":1e400}]}`))
	f.Add([]byte(`[[[[[[{}]]]]]]`))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		recs, err := DecodeJSON(body, now)
		if err != nil {
			if recs != nil {
				t.Fatalf("records with an error: %v", err)
			}
			return
		}
		for _, r := range recs {
			if verr := r.Validate(); verr != nil {
				t.Fatalf("accepted an invalid record: %v", verr)
			}
			if r.Time.IsZero() {
				t.Fatal("time not filled")
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("accepted record does not encode: %v", err)
			}
			if _, err := DecodeJSON(b, now); err != nil {
				t.Fatalf("accepted record does not decode again: %v\n%s", err, b)
			}
		}
	})
}

func TestTrimHistory(t *testing.T) {
	h := []Message{{RoleUser, "aaaa"}, {RoleAssistant, "bbbb"}, {RoleUser, "cc"}, {RoleAssistant, "d"}}
	for _, tc := range []struct {
		turns, bytes, dropped int
	}{
		{0, 0, 0}, {10, 100, 0}, {2, 0, 2}, {0, 7, 1}, {0, 6, 2}, {0, 3, 2}, {3, 11, 1}, {0, 2, 3}, {1, 0, 3},
	} {
		kept, dropped := TrimHistory(h, tc.turns, tc.bytes)
		if dropped != tc.dropped || len(kept) != len(h)-tc.dropped {
			t.Errorf("TrimHistory(%d, %d) dropped %d kept %d, want dropped %d", tc.turns, tc.bytes, dropped, len(kept), tc.dropped)
		}
	}
}

func TestValidateConversationFields(t *testing.T) {
	r := Record{TraceID: "t", Query: "q", Turn: -1, Variant: strings.Repeat("v", 129),
		History: []Message{{Role: "system", Content: "x"}}, Labels: &Label{Values: map[string]float64{"faithfulness": 2}}}
	err := r.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"variant: longer than 128", "turn: must be 1", "history[0].role", "labels: values.faithfulness: must be between 0 and 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestScoreStatsMatchesTheScores(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, docs := range [][]Document{
		nil,
		{{ID: "a"}},
		{{ID: "a", Score: f(0.2)}},
		{{ID: "a", Score: f(-3)}, {ID: "b"}, {ID: "c", Score: f(-1)}, {ID: "d", Score: f(-2)}},
		{{ID: "a", Score: f(0.5)}, {ID: "b", Score: f(math.NaN())}, {ID: "c", Score: f(0.9)}},
	} {
		r := &Record{Documents: docs}
		top, sum, n := r.ScoreStats()
		var scores []float64
		for _, d := range docs {
			if d.Score != nil {
				scores = append(scores, *d.Score)
			}
		}
		if n != len(scores) {
			t.Fatalf("%v: n = %d, want %d", scores, n, len(scores))
		}
		if n == 0 {
			if top != 0 || sum != 0 {
				t.Fatalf("no scores: top %v sum %v", top, sum)
			}
			continue
		}
		wantTop, wantSum := slices.Max(scores), 0.0
		for _, s := range scores {
			wantSum += s
		}
		if !(top == wantTop || math.IsNaN(top) && math.IsNaN(wantTop)) || !(sum == wantSum || math.IsNaN(sum) && math.IsNaN(wantSum)) {
			t.Fatalf("%v: top %v sum %v, want %v %v", scores, top, sum, wantTop, wantSum)
		}
	}
}

// A record may say its retrieval was not seen, never together with documents; only then is a
// record without documents no empty retrieval.
func TestRetrievalNotSeen(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	recs, err := DecodeJSON([]byte(`{"trace_id":"t","answer":"Hi [1].","retrieval_not_seen":true}`), now)
	if err != nil || len(recs) != 1 || !recs[0].RetrievalNotSeen || recs[0].EmptyRetrieval() {
		t.Fatalf("decode: %+v %v", recs, err)
	}
	out, _ := json.Marshal(recs[0])
	if !strings.Contains(string(out), `"retrieval_not_seen":true`) {
		t.Errorf("JSON %s", out)
	}
	if r, _ := DecodeJSON([]byte(`{"trace_id":"t","answer":"Hi."}`), now); !r[0].EmptyRetrieval() {
		t.Error("a record without documents that does not say otherwise is an empty retrieval")
	}
	_, err = DecodeJSON([]byte(`{"trace_id":"t","documents":[{"id":"d"}],"retrieval_not_seen":true}`), now)
	if err == nil || !strings.Contains(err.Error(), "retrieval_not_seen: a record with documents has seen its retrieval") {
		t.Errorf("documents with retrieval_not_seen: %v", err)
	}
}
