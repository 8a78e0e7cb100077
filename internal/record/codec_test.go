package record

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodeFeedback(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	good, err := DecodeFeedback([]byte(`{"trace_id":"abc","thumbs":"up","comment":"nice","time":"2026-11-29T12:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Feedback{{TraceID: "abc", Score: 1, Comment: "nice", Time: t0}}; !reflect.DeepEqual(good, want) {
		t.Fatalf("got %+v", good)
	}
	scored, err := DecodeFeedback([]byte(`[{"trace_id":"abc","span_id":"00f067aa0ba902b7","service":"web","score":-0.5},{"trace_id":"abc","thumbs":"down"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Feedback{{TraceID: "abc", SpanID: "00f067aa0ba902b7", Service: "web", Score: -0.5}, {TraceID: "abc", Score: -1}}; !reflect.DeepEqual(scored, want) {
		t.Fatalf("got %+v", scored)
	}
	tests := []struct {
		in, want  string
		malformed bool
	}{
		{``, "empty body", true},
		{`[]`, "empty array", true},
		{`{"trace_id":`, "invalid JSON: unexpected EOF", true},
		{`{"trace_id":"a","thumbs":"up","stars":5}`, `invalid JSON: json: unknown field "stars"`, true},
		{`{"thumbs":"up"}`, "trace_id: is required", false},
		{`{"trace_id":"a"}`, "score or thumbs: one of them is required", false},
		{`{"trace_id":"a","score":1,"thumbs":"up"}`, "score and thumbs: give only one of them", false},
		{`{"trace_id":"a","score":1.5}`, "score: must be between -1 and 1", false},
		{`{"trace_id":"a","thumbs":"sideways"}`, `thumbs: must be up or down, got "sideways"`, false},
		{`[{"trace_id":"a","thumbs":"up"},{"score":2}]`, "[1].trace_id: is required\n[1].score: must be between -1 and 1", false},
		{`{"trace_id":"a","thumbs":"up"} {}`, "invalid JSON: trailing data after the value", true},
	}
	for _, tt := range tests {
		_, err := DecodeFeedback([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("DecodeFeedback(%s) error = %v, want %s", tt.in, err, tt.want)
			continue
		}
		if IsMalformed(err) != tt.malformed || IsLimit(err) {
			t.Errorf("DecodeFeedback(%s): IsMalformed = %v, IsLimit = %v; want %v, false", tt.in, IsMalformed(err), IsLimit(err), tt.malformed)
		}
	}
}

func TestDecodeLabels(t *testing.T) {
	ls, err := DecodeLabels([]byte(`[{"trace_id":"t-1","relevance":{"d1":2}},{"trace_id":"t-2","service":"web","reference":"gold","labeler":"ann"}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Label{{TraceID: "t-1", Relevance: map[string]int{"d1": 2}}, {TraceID: "t-2", Service: "web", Reference: "gold", Labeler: "ann"}}
	if !reflect.DeepEqual(ls, want) {
		t.Fatalf("got %+v", ls)
	}
	tests := []struct {
		in, want  string
		malformed bool
	}{
		{` `, "empty body", true},
		{`{"trace_id":`, "invalid JSON: unexpected EOF", true},
		{`{"trace_id":"t","score":1}`, `invalid JSON: json: unknown field "score"`, true},
		{`[{"trace_id":"t","values":{"faithfulness":2}},{"values":{"x":0.5}},{"trace_id":"t"}]`,
			"[0].values.faithfulness: must be between 0 and 1\n[1].trace_id: is required\n[2].label: needs at least one of values, relevance or reference", false},
		{`{"trace_id":"t","service":"` + strings.Repeat("s", MaxIDLength+1) + `","reference":"r"}`, "service: longer than 256 bytes", false},
	}
	for _, tt := range tests {
		_, err := DecodeLabels([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("DecodeLabels(%.60s) error = %v, want %s", tt.in, err, tt.want)
			continue
		}
		if IsMalformed(err) != tt.malformed {
			t.Errorf("DecodeLabels(%.60s): IsMalformed = %v, want %v", tt.in, IsMalformed(err), tt.malformed)
		}
	}
}

// Every decoder tells the three kinds of bad input apart the same way: a limit before
// decoding, malformed JSON, or an invalid value.
func TestDecodersErrorKinds(t *testing.T) {
	deep := strings.Repeat("[", DefaultMaxJSONDepth+1)
	decoders := map[string]func([]byte) error{
		"records":  func(b []byte) error { _, err := DecodeJSONLimits(b, time.Unix(0, 0), 0, 0); return err },
		"feedback": func(b []byte) error { _, err := DecodeFeedback(b); return err },
		"labels":   func(b []byte) error { _, err := DecodeLabels(b); return err },
	}
	for name, decode := range decoders {
		for _, c := range []struct {
			in             string
			limit, badJSON bool
		}{
			{deep, true, false},
			{"[" + strings.Repeat("{},", DefaultMaxBatch) + "{}]", true, false},
			{"", false, true},
			{"[]", false, true},
			{"{", false, true},
			{`{"trace_id":""}`, false, false},
		} {
			err := decode([]byte(c.in))
			if err == nil {
				t.Errorf("%s(%.20q) = nil", name, c.in)
				continue
			}
			if IsLimit(err) != c.limit || IsMalformed(err) != c.badJSON {
				t.Errorf("%s(%.20q) = %v: IsLimit %v IsMalformed %v, want %v %v", name, c.in, err, IsLimit(err), IsMalformed(err), c.limit, c.badJSON)
			}
		}
	}
}

func FuzzDecodeFeedback(f *testing.F) {
	f.Add([]byte(`{"trace_id":"abc","thumbs":"up"}`))
	f.Add([]byte(`[{"trace_id":"a","score":-1,"comment":"x"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := DecodeFeedback(data)
		if err != nil {
			return
		}
		for _, e := range evs {
			if e.TraceID == "" || len(e.TraceID) > MaxIDLength || len(e.Comment) > MaxCommentBytes {
				t.Fatalf("decoded invalid feedback %+v", e)
			}
			if s := e.Score; s < -1 || s > 1 {
				t.Fatalf("score %v out of range", s)
			}
		}
	})
}

func FuzzDecodeLabels(f *testing.F) {
	f.Add([]byte(`{"trace_id":"abc","values":{"faithfulness":0.5}}`))
	f.Add([]byte(`[{"trace_id":"a","relevance":{"d1":2},"reference":"r","labeler":"ann"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := DecodeLabels(data)
		if err != nil {
			return
		}
		for _, l := range ls {
			if l.TraceID == "" || len(l.TraceID) > MaxIDLength || len(l.Service) > MaxIDLength || l.Validate() != nil {
				t.Fatalf("decoded an invalid label %+v", l)
			}
			for _, v := range l.Values {
				if v < 0 || v > 1 {
					t.Fatalf("value %v out of range", v)
				}
			}
		}
	})
}
