package assemble

import "testing"

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
		if got := valueText(tc.s, tc.mime, queryKeys); got != tc.want {
			t.Errorf("valueText(%q, %q) = %q, want %q", tc.s, tc.mime, got, tc.want)
		}
	}
}

func TestPyLiteral(t *testing.T) {
	got, ok := parsePyLiteral(`{'a': "it's", 'b': (1, -2.5e1), 'c': {'d': None, 'e': False}, 'f': 'x\'y'}`)
	if !ok || js(got) != `{
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
		t.Fatalf("parsePyLiteral = %s, %v", js(got), ok)
	}
	for _, bad := range []string{"{'a': }", "{'a' 1}", "[1, 2", "'open", "nan", ""} {
		if _, ok := parsePyLiteral(bad); ok {
			t.Errorf("parsePyLiteral(%q) accepted", bad)
		}
	}
}

func TestContentText(t *testing.T) {
	for in, want := range map[string]string{
		`[{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"text","text":"b"}]`: "a\nb",
		`[1] is the answer [2]`: `[1] is the answer [2]`,
		`[1, 2]`:                `[1, 2]`,
		`[{"no":"type"}]`:       `[{"no":"type"}]`,
		`plain`:                 `plain`,
	} {
		if got := contentText(Str(in)); got != want {
			t.Errorf("contentText(%q) = %q, want %q", in, got, want)
		}
	}
}
