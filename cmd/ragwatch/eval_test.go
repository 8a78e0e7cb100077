package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const evalRecords = `{"trace_id":"r1","query":"What is the capital of France?","answer":"Paris is the capital of France [1].","documents":[{"id":"d1","content":"Paris is the capital and largest city of France."},{"id":"d2","content":"Lyon is known for food."}],"reference":"Paris is the capital of France.","relevance":{"d1":1},"unknown":"ignored"}
{"trace_id":"r2","query":"How tall is Mont Blanc?","answer":"Mont Blanc is 4,806 metres tall [1].","documents":[{"id":"m1","content":"Mont Blanc rises 4,806 metres above sea level."}],"relevance":{"m1":1}}
{"trace_id":"r3","query":"Who wrote Hamlet?","answer":"Hamlet was written by Charles Dickens in 1900.","documents":[{"id":"x","content":"Unrelated."},{"id":"h1","content":"Hamlet is a tragedy written by William Shakespeare around 1600."}],"relevance":{"x":0,"h1":2}}
`

func evalFiles(t *testing.T) (dir, input string) {
	t.Helper()
	dir = t.TempDir()
	input = filepath.Join(dir, "records.jsonl")
	if err := os.WriteFile(input, []byte(evalRecords), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, input
}

func runEvalCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), append([]string{"eval"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestEvalBuiltinBaselineGate(t *testing.T) {
	dir, input := evalFiles(t)
	scores := filepath.Join(dir, "scores.jsonl")
	base := filepath.Join(dir, "baseline.json")
	code, out, errOut := runEvalCmd("--input", input, "--output", scores, "--write-baseline", base)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.HasPrefix(out, "3 records scored\nmetric ") || !strings.Contains(out, "\nmrr                             3  0.8333 ") {
		t.Fatalf("stdout:\n%s", out)
	}
	data, err := os.ReadFile(scores)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(scores); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the scores are written with mode %v (err %v), want -rw-------", fi.Mode(), err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d output lines", len(lines))
	}
	var faith [3]float64
	for i, l := range lines {
		var v struct {
			TraceID string             `json:"trace_id"`
			Scores  map[string]float64 `json:"scores"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		if v.TraceID != fmt.Sprintf("r%d", i+1) {
			t.Fatalf("line %d trace %q", i, v.TraceID)
		}
		faith[i] = v.Scores["faithfulness"]
		if _, ok := v.Scores["ndcg@10"]; !ok {
			t.Fatalf("line %d lacks retrieval metrics: %s", i, l)
		}
	}
	if !(faith[2] < faith[0] && faith[2] < faith[1]) {
		t.Fatalf("the wrong answer (r3) should be least faithful: %v", faith)
	}
	// Same records against their own baseline pass.
	code, out, _ = runEvalCmd("--input", input, "--baseline", base, "--max-drop", "0")
	if code != 0 || !strings.HasSuffix(out, "PASS\n") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// A baseline claiming better means fails the gate, naming each metric.
	var b struct {
		Metrics map[string]map[string]any `json:"metrics"`
	}
	raw, _ := os.ReadFile(base)
	json.Unmarshal(raw, &b)
	b.Metrics["mrr"]["mean"] = 0.9
	b.Metrics["faithfulness"]["mean"] = b.Metrics["faithfulness"]["mean"].(float64) + 0.015
	raw, _ = json.Marshal(b)
	os.WriteFile(base, raw, 0o644)
	code, out, _ = runEvalCmd("--input", input, "--baseline", base)
	if code != 1 || !strings.Contains(out, "FAIL mrr: dropped 0.0667 (0.9000 -> 0.8333, allowed 0.0200)\n") ||
		strings.Contains(out, "FAIL faithfulness") || strings.Contains(out, "PASS") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestEvalJudgeErrorsAndBadInput(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"I think it deserves a 4","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()
	dir, input := evalFiles(t)
	cfg := filepath.Join(dir, "ragwatch.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("scoring:\n  backend: openai\n  openai: {base_url: %s/v1/, model: m}\n  metrics: [rubric_accuracy, mrr]\n", srv.URL)), 0o644)
	f, _ := os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"trace_id\": \"broken\"\n")
	f.Close()
	scores := filepath.Join(dir, "scores.jsonl")
	code, out, errOut := runEvalCmd("-c", cfg, "--input", input, "--output", scores)
	if code != 1 || !strings.Contains(errOut, "invalid record: line 4: invalid JSON") ||
		!strings.Contains(errOut, "1 input lines were not valid records") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	data, _ := os.ReadFile(scores)
	first := strings.SplitN(string(data), "\n", 2)[0]
	if first != `{"trace_id":"r1","scores":{"mrr":1},"errors":{"rubric_accuracy":"parse_error"}}` {
		t.Fatalf("first line %s", first)
	}
	if !strings.Contains(out, "rubric_accuracy                 0       -                 -       3") {
		t.Fatalf("table:\n%s", out)
	}
}

func TestEvalUsage(t *testing.T) {
	if code, _, errOut := runEvalCmd(); code != 2 || !strings.Contains(errOut, "--input is required") {
		t.Fatalf("%d %s", code, errOut)
	}
	_, input := evalFiles(t)
	if code, _, errOut := runEvalCmd("--input", input, "--baseline", "/nonexistent/b.json"); code != 2 || !strings.Contains(errOut, "read baseline") {
		t.Fatalf("%d %s", code, errOut)
	}
}

// The deploy gate: a floor and a tolerance fail with the metric named and exit 1; a gate that
// holds passes; a bad gate file or a max_drop without --baseline is a usage error (exit 2).
func TestEvalDeployGate(t *testing.T) {
	dir, input := evalFiles(t)
	base := filepath.Join(dir, "baseline.json")
	if code, out, errOut := runEvalCmd("--input", input, "--write-baseline", base); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The baseline had mrr 0.8333; pretend it was 0.95.
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Metrics map[string]map[string]any `json:"metrics"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	b.Metrics["mrr"]["mean"] = 0.95
	data, _ = json.Marshal(b)
	if err := os.WriteFile(base, data, 0o644); err != nil {
		t.Fatal(err)
	}
	gate := func(body string) string {
		p := filepath.Join(dir, "gate.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	code, out, _ := runEvalCmd("--input", input, "--baseline", base, "--gate",
		gate(`{"mrr": {"max_drop": 0.05}, "precision@1": {"min": 0.9}, "hit@1": {"min": 0.5}}`))
	for _, want := range []string{
		"FAIL mrr: dropped 0.1167 (0.9500 -> 0.8333, allowed 0.0500)\n",
		"FAIL precision@1: mean 0.6667 is below the floor 0.9000\n",
		"DO NOT DEPLOY: 2 metric checks failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if code != 1 || strings.Contains(out, "FAIL hit@1") {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if code, out, _ := runEvalCmd("--input", input, "--gate", gate(`{"mrr": {"min": 0.8}}`)); code != 0 || !strings.HasSuffix(out, "PASS\n") {
		t.Fatalf("passing gate: exit %d\n%s", code, out)
	}
	if code, _, errOut := runEvalCmd("--input", input, "--gate", gate(`{"mrr": {"max_drop": 0.1}}`)); code != 2 ||
		!strings.Contains(errOut, "sets max_drop: --baseline is required") {
		t.Fatalf("max_drop without baseline: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := runEvalCmd("--input", input, "--gate", gate(`{"mrr": {"minimum": 0.8}}`)); code != 2 ||
		!strings.Contains(errOut, `unknown field "minimum"`) {
		t.Fatalf("bad gate: exit %d\n%s", code, errOut)
	}
}
