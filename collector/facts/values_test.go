package facts

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ragwatch/ragwatch/collector/span"
)

func TestValueText(t *testing.T) {
	for _, tc := range []struct{ s, mime, want string }{
		{"plain text", "text/plain", "plain text"},
		{`{"question":"q?"}`, "application/json", "q?"},
		{`{"question":"q?"}`, "", "q?"},
		{`[1, 2]`, "", "[1, 2]"},
		{`{"n": 1}`, "application/json", ""},
		{`{"broken"`, "", `{"broken"`},
		{`{"inputs": {"query": "deep"}}`, "", "deep"},
		{`[{"role":"user","content":"last"}]`, "", "last"},
	} {
		if got := valueText(tc.s, tc.mime, []string{"query", "question", "input", "inputs", "content", "messages"}); got != tc.want {
			t.Errorf("valueText(%q, %q) = %q, want %q", tc.s, tc.mime, got, tc.want)
		}
	}
}

func TestPyLiteral(t *testing.T) {
	got, ok := parsePyLiteral(`{'a': "it's", 'b': (1, -2.5e1), 'c': {'d': None, 'e': False}, 'f': 'x\'y'}`)
	if !ok || jsIndent(got) != `{
  "a": "it's",
  "b": [
    1,
    -25
  ],
  "c": {
    "d": null,
    "e": false
  },
  "f": "x'y"
}` {
		t.Fatalf("parsePyLiteral = %s, %v", jsIndent(got), ok)
	}
	for _, bad := range []string{"{'a': }", "{'a' 1}", "[1, 2", "'open", "nan", ""} {
		if _, ok := parsePyLiteral(bad); ok {
			t.Errorf("parsePyLiteral(%q) accepted", bad)
		}
	}
}

// js is x as indented JSON.
func jsIndent(x any) string {
	b, _ := json.MarshalIndent(x, "", "  ")
	return string(b)
}

// FuzzParsers checks the hand-written parsers: the flat-object fast path agrees with
// encoding/json whenever it accepts, MetadataString with the map ParseMetadata builds, and the
// Python literal parser never panics.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{`{"a":"b","n":1.5,"t":true,"z":null}`, `{}`, `{"a":{"b":1}}`, `{"a":"\u00e9"}`,
		"{'a': 'b', 'c': [1, (2, 3)], 'd': True}", `{"a":1,}`, `{"a":-0.5e3}`,
		`{"a":"b","a":1}`, `{"a":1,"a":"c"}`, ` {"a":"x", "b":[1]} `, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parsePyLiteral(s)
		md := parseMetadata(span.Str(s))
		for _, k := range []string{"a", "route"} {
			if got, want := metadataString(span.Str(s), k), span.AsString(md[k]); got != want {
				t.Fatalf("metadataString(%q, %q) = %q, ParseMetadata gives %q", s, k, got, want)
			}
		}
		fast, ok := parseFlatObject(s)
		if !ok {
			return
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			// The fast path may accept a number encoding/json refuses (leading zeros); it
			// must not accept anything structurally broken.
			return
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("parseFlatObject(%q) = %v, encoding/json = %v", s, fast, want)
		}
	})
}
