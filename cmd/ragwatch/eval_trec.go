package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ragwatch/ragwatch/sampler/eval"
	"github.com/ragwatch/ragwatch/sampler/eval/trec"
)

// trecFlags are the flags of `ragwatch eval --qrels`.
type trecFlags struct {
	qrels, run, baselineRun, k            string
	complete                              bool
	output, gate, baseline, writeBaseline string
	maxDrop                               float64
}

// runEvalTREC evaluates a retrieval run against qrels with trec_eval's measures. Exit codes as
// runEval: 0 evaluated (and the gate passed), 1 a gate check failed, 2 bad flags or files.
func runEvalTREC(f trecFlags, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ragwatch eval: "+format+"\n", a...)
		return 2
	}
	if f.qrels == "" || f.run == "" {
		return fail("--qrels and --run go together")
	}
	ks, err := trec.ParseK(f.k)
	if err != nil {
		return fail("%v", err)
	}
	var gate eval.Gate
	if f.gate != "" {
		if gate, err = eval.ReadGate(f.gate); err != nil {
			return fail("%v", err)
		}
		if gate.NeedsBaseline() && f.baseline == "" {
			return fail("%s sets max_drop: --baseline is required", f.gate)
		}
	}
	var base *eval.Baseline
	if f.baseline != "" {
		b, err := eval.ReadBaseline(f.baseline)
		if err != nil {
			return fail("%v", err)
		}
		base = &b
	}
	qrels, err := readFile(f.qrels, trec.ReadQrels)
	if err != nil {
		return fail("%v", err)
	}
	opts := trec.Options{K: ks, Complete: f.complete}
	res, err := evalRunFile(f.run, qrels, opts)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stdout, "%d queries evaluated", len(res.Queries))
	if res.NoRelevant > 0 {
		fmt.Fprintf(stdout, " (%d without a relevant document, scored 0)", res.NoRelevant)
	}
	fmt.Fprintln(stdout)
	if res.RunOnly > 0 {
		fmt.Fprintf(stdout, "%d run queries have no judgements: ignored\n", res.RunOnly)
	}
	if res.QrelsOnly > 0 && !f.complete {
		fmt.Fprintf(stdout, "%d judged queries are not in the run: ignored (--complete scores them 0)\n", res.QrelsOnly)
	}
	res.WriteTable(stdout)
	if f.baselineRun != "" {
		bres, err := evalRunFile(f.baselineRun, qrels, opts)
		if err != nil {
			return fail("%v", err)
		}
		cs, err := trec.Compare(bres, res)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(stdout, "\nagainst %s (run − baseline, paired by query)\n", f.baselineRun)
		trec.WriteComparison(stdout, cs)
	}
	if f.output != "" {
		if err := writeLines(f.output, res.Lines()); err != nil {
			return fail("%v", err)
		}
	}
	rep := res.Report()
	if f.writeBaseline != "" {
		if err := eval.WriteBaseline(f.writeBaseline, rep.Baseline()); err != nil {
			return fail("%v", err)
		}
	}
	if gate == nil && base == nil {
		return 0
	}
	if gate == nil {
		gate = eval.Gate{}
	}
	fails := rep.Check(base, gate, f.maxDrop)
	for _, m := range fails {
		fmt.Fprintln(stdout, "FAIL "+m)
	}
	if len(fails) > 0 {
		fmt.Fprintf(stdout, "DO NOT DEPLOY: %d metric checks failed\n", len(fails))
		return 1
	}
	fmt.Fprintln(stdout, "PASS")
	return 0
}

func evalRunFile(path string, qrels trec.Qrels, o trec.Options) (*trec.Result, error) {
	run, err := readFile(path, trec.ReadRun)
	if err != nil {
		return nil, err
	}
	res, err := trec.Evaluate(qrels, run, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

func readFile[T any](path string, read func(io.Reader, string) (T, trec.Format, error)) (T, error) {
	var zero T
	fh, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer fh.Close()
	v, _, err := read(fh, path)
	return v, err
}

// writeLines writes one JSON object per line to a file only the user can read.
func writeLines(path string, lines []trec.Line) (err error) {
	fh, err := createPrivate(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fh.Close()) }()
	bw := bufio.NewWriter(fh)
	enc := json.NewEncoder(bw)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
