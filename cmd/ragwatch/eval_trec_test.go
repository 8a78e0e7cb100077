package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The collection of sampler/eval/trec's hand-worked test, as BEIR files.
const (
	beirQrels = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq1\td3\t1\nq1\td4\t1\nq2\td5\t1\nq2\td6\t0\nq3\td7\t0\nq4\td9\t1\n"
	beirRun   = `{"q1": {"d2": 0.9, "d1": 0.8, "d9": 0.8, "d3": 0.5, "d8": 0.1}, "q2": {"d5": 0.7, "d6": 0.7}, "q3": {"d7": 1.0}, "q5": {"d1": 1}}`
	// A second system (TREC run): d1 first for q1, q2 and q3 ranked as in beirRun.
	trecRunB = "q1 Q0 d1 1 3 b\nq1 Q0 d3 2 2 b\nq1 Q0 d2 3 1 b\nq2 Q0 d6 1 0.7 b\nq2 Q0 d5 2 0.7 b\nq3 Q0 d7 1 1 b\n"
)

func TestEvalQrelsRun(t *testing.T) {
	dir := t.TempDir()
	qrels := writeTemp(t, dir, "qrels.tsv", beirQrels)
	run := writeTemp(t, dir, "run.json", beirRun)
	out := filepath.Join(dir, "measures.jsonl")
	code, stdout, stderr := runEvalCmd("--qrels", qrels, "--run", run, "--k", "1,3,5", "--output", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"3 queries evaluated (1 without a relevant document, scored 0)\n",
		"1 run queries have no judgements: ignored\n",
		"1 judged queries are not in the run: ignored (--complete scores them 0)\n",
		"\nmap                 3  0.2593 ",
		"\nndcg_cut_3          3  0.3168 ",
		"\nrecall_5            3  0.5556 ",
	} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4*14 { // q1 q2 q3 and "all", 14 measures each
		t.Fatalf("%d lines", len(lines))
	}
	var first, last struct {
		QueryID string  `json:"query_id"`
		Metric  string  `json:"metric"`
		Value   float64 `json:"value"`
	}
	if err := json.Unmarshal([]byte(lines[2]), &first); err != nil || first.QueryID != "q1" || first.Metric != "P_5" || first.Value != 0.4 {
		t.Fatalf("line 3 %s (%v)", lines[2], err)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.QueryID != "all" || last.Metric != "map" || strings.TrimSpace(lines[len(lines)-1]) != `{"query_id":"all","metric":"map","value":0.25925925925925924}` {
		t.Fatalf("last line %s (%v)", lines[len(lines)-1], err)
	}

	// --complete: q4 joins with zeros.
	code, stdout, _ = runEvalCmd("--qrels", qrels, "--run", run, "--complete")
	if code != 0 || !strings.Contains(stdout, "4 queries evaluated") || !strings.Contains(stdout, "\nmap                 4  0.1944 ") {
		t.Fatalf("complete: exit %d\n%s", code, stdout)
	}

	// The gate: a floor met passes, one missed fails the deploy.
	pass := writeTemp(t, dir, "pass.json", `{"map": {"min": 0.25}, "recall_5": {"min": 0.5}}`)
	code, stdout, _ = runEvalCmd("--qrels", qrels, "--run", run, "--gate", pass)
	if code != 0 || !strings.HasSuffix(stdout, "PASS\n") {
		t.Fatalf("gate pass: exit %d\n%s", code, stdout)
	}
	failing := writeTemp(t, dir, "fail.json", `{"map": {"min": 0.3}}`)
	code, stdout, _ = runEvalCmd("--qrels", qrels, "--run", run, "--gate", failing)
	if code != 1 || !strings.Contains(stdout, "FAIL map: mean 0.2593 is below the floor 0.3000\nDO NOT DEPLOY: 1 metric checks failed\n") {
		t.Fatalf("gate fail: exit %d\n%s", code, stdout)
	}

	// A baseline written from this run, then a worse system gated on it with max_drop.
	base := filepath.Join(dir, "base.json")
	if code, stdout, stderr = runEvalCmd("--qrels", qrels, "--run", run, "--write-baseline", base); code != 0 {
		t.Fatalf("write baseline: %d %s %s", code, stdout, stderr)
	}
	worse := writeTemp(t, dir, "worse.run", "q1 Q0 d8 1 1 w\nq2 Q0 d6 1 1 w\nq3 Q0 d7 1 1 w\n")
	drop := writeTemp(t, dir, "drop.json", `{"map": {"max_drop": 0.05}}`)
	code, stdout, _ = runEvalCmd("--qrels", qrels, "--run", worse, "--gate", drop, "--baseline", base)
	if code != 1 || !strings.Contains(stdout, "FAIL map: dropped 0.2593 (0.2593 -> 0.0000, allowed 0.0500)") {
		t.Fatalf("max_drop: exit %d\n%s", code, stdout)
	}
}

func TestEvalQrelsBaselineRun(t *testing.T) {
	dir := t.TempDir()
	qrels := writeTemp(t, dir, "qrels.tsv", beirQrels)
	run := writeTemp(t, dir, "run.json", beirRun)
	b := writeTemp(t, dir, "b.run", trecRunB)
	code, stdout, stderr := runEvalCmd("--qrels", qrels, "--run", b, "--baseline-run", run, "--k", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	// q1's recip_rank goes from 1/3 to 1 (a win), q2 stays 1/2, q3 stays 0: diff mean 2/9.
	want := "\nrecip_rank         3   0.2778   0.5000  +0.2222"
	if !strings.Contains(stdout, want) || !strings.Contains(stdout, "1/0/2") {
		t.Fatalf("stdout lacks %q:\n%s", want, stdout)
	}
}

func TestEvalQrelsBadFiles(t *testing.T) {
	dir := t.TempDir()
	qrels := writeTemp(t, dir, "qrels.tsv", beirQrels)
	bad := writeTemp(t, dir, "bad.run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4\n")
	code, _, stderr := runEvalCmd("--qrels", qrels, "--run", bad)
	if code != 2 || stderr != "ragwatch eval: "+bad+": line 2: neither a TREC run line (`qid Q0 docid rank score tag`, got 5 fields) nor BEIR results JSON\n" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	badQ := writeTemp(t, dir, "bad.qrels", "q1 0 d1 1\nq1 0 d2 yes\n")
	code, _, stderr = runEvalCmd("--qrels", badQ, "--run", bad)
	if code != 2 || !strings.Contains(stderr, badQ+": line 2: grade \"yes\" is not an integer") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"--qrels", qrels},
		{"--qrels", qrels, "--run", bad, "--input", "x.jsonl"},
		{"--qrels", qrels, "--run", bad, "--k", "0"},
	} {
		if code, _, _ := runEvalCmd(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
