package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pairDocs = `[{"id":"d1","content":"The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair."}]`

func pairRecord(id, answer string) string {
	return `{"trace_id":"` + id + `","query":"How tall is the Eiffel Tower?","answer":"` + answer + `","documents":` + pairDocs + `}`
}

const (
	grounded = "The Eiffel Tower is 330 metres tall."
	made     = "The Eiffel Tower is 330 metres tall. It was painted gold by Napoleon in 1650."
)

func TestEvalPairwiseLinesAndGate(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "pairs.jsonl")
	pairs := strings.Join([]string{
		`{"pair_id":"p1","a":` + pairRecord("a1", made) + `,"b":` + pairRecord("b1", grounded) + `}`,
		`{"pair_id":"p2","a":` + pairRecord("a2", grounded) + `,"b":` + pairRecord("b2", made) + `}`,
		``,
		`{"pair_id":"p3","a":` + pairRecord("a3", grounded) + `,"b":` + pairRecord("b3", grounded) + `}`,
	}, "\n") + "\n"
	if err := os.WriteFile(input, []byte(pairs), 0o644); err != nil {
		t.Fatal(err)
	}
	output := filepath.Join(dir, "out.jsonl")
	code, out, errOut := runEvalCmd("--pairwise", "--input", input, "--output", output, "--not-worse-than", "0.8")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// 1 win, 1 loss, 1 tie: (1 + 0.5) / 3 = 0.5, Wilson 95% over 3 pairs [0.1253, 0.8747].
	want := "3 pairs judged (0 failed): b wins 1, a wins 1, ties 1, inconsistent 0\n" +
		"b's win rate over a: 0.5000  95% CI [0.1253, 0.8747] (ties count half)\nPASS\n"
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	data, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d output lines:\n%s", len(lines), data)
	}
	for i, want := range []struct{ id, winner string }{{"p1", "b"}, {"p2", "a"}, {"p3", "tie"}} {
		var l map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		if len(l) != 5 || l["pair_id"] != want.id || l["winner"] != want.winner || l["reasoning"] == "" {
			t.Fatalf("line %d: %s", i+1, lines[i])
		}
		if c, ok := l["confidence"].(float64); !ok || c < 0 || c > 1 || (want.winner != "tie" && c == 0) {
			t.Fatalf("line %d confidence: %s", i+1, lines[i])
		}
		if e, ok := l["errors"].(map[string]any); !ok || len(e) != 0 {
			t.Fatalf("line %d errors: %s", i+1, lines[i])
		}
	}

	// The upper bound 0.8747 is below 0.9: b is shown to win less often than that.
	code, out, _ = runEvalCmd("--pairwise", "--input", input, "--not-worse-than", "0.9")
	if code != 1 || !strings.Contains(out, "FAIL b's win rate: upper bound 0.8747 is below --not-worse-than 0.9000") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// A deploy gate passes only what it can show: a win rate of 0.5 whose interval reaches
	// 0.8747 does not show b winning 0.6 of the time, so --min-win-rate 0.6 fails on the lower
	// bound (it passed on the upper bound before).
	code, out, _ = runEvalCmd("--pairwise", "--input", input, "--min-win-rate", "0.6")
	if code != 1 || !strings.Contains(out, "FAIL b's win rate: lower bound 0.1253 is below --min-win-rate 0.6000") || strings.Contains(out, "PASS") {
		t.Fatalf("--min-win-rate 0.6 on a 0.5 win rate: exit %d\n%s", code, out)
	}
	code, out, _ = runEvalCmd("--pairwise", "--input", input, "--min-win-rate", "0.1")
	if code != 0 || !strings.HasSuffix(out, "PASS\n") {
		t.Fatalf("--min-win-rate 0.1 under the lower bound 0.1253: exit %d\n%s", code, out)
	}
}

func TestEvalPairwiseBadLines(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "pairs.jsonl")
	pairs := `{"pair_id":"ok","a":` + pairRecord("a1", made) + `,"b":` + pairRecord("b1", grounded) + "}\n" +
		`{"pair_id":"no-b","a":` + pairRecord("a2", made) + "}\n" +
		"not json\n" +
		`{"pair_id":"bad-a","a":{"trace_id":"x","documents":[{"id":""}]},"b":` + pairRecord("b3", grounded) + "}\n"
	if err := os.WriteFile(input, []byte(pairs), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runEvalCmd("--pairwise", "--input", input)
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		`invalid pair: line 2: "b" is missing`,
		"invalid pair: line 3: invalid JSON",
		`invalid pair: line 4: record "a": `,
		"3 input lines were not valid pairs",
	} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.HasPrefix(out, "1 pairs judged (0 failed): b wins 1,") {
		t.Fatalf("stdout:\n%s", out)
	}
	if code, _, errOut := runEvalCmd("--input", input, "--min-win-rate", "0.5"); code != 2 || !strings.Contains(errOut, "need --pairwise") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := runEvalCmd("--pairwise", "--input", input, "--not-worse-than", "1.5"); code != 2 || !strings.Contains(errOut, "--not-worse-than must be between 0 and 1, got 1.5") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
