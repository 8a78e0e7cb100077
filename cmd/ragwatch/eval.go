package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/eval"
	"github.com/ragwatch/ragwatch/sampler/scorers"
)

func init() {
	register("eval", "score a JSONL of records, or a retrieval run against qrels, offline; gate on a baseline (CI)", runEval)
}

// runEval scores records offline with the configured scorers. Exit codes: 0 scored (and the
// baseline or --gate checks passed), 1 a check failed or some input lines were not valid records,
// 2 bad flags, config or files.
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfgPath string
	fs.StringVar(&cfgPath, "c", "", "config file (YAML); the scoring section chooses the scorers")
	fs.StringVar(&cfgPath, "config", "", "config file (YAML)")
	input := fs.String("input", "", "records, one JSON record per line (docs/record.md); - for stdin")
	output := fs.String("output", "", "write one line of scores per record here")
	baseline := fs.String("baseline", "", "compare metric means with this baseline file")
	maxDrop := fs.Float64("max-drop", 0.02, "largest allowed fall of a metric's mean below the baseline")
	gatePath := fs.String("gate", "", "deploy gate: JSON of per-metric floors and tolerances, {\"faithfulness\": {\"min\": 0.8, \"max_drop\": 0.02}}")
	writeBaseline := fs.String("write-baseline", "", "write this run's metric means as a baseline file")
	concurrency := fs.Int("concurrency", 4, "records scored at once")
	noHistory := fs.Bool("no-history", false, "score records as if they had no conversation history (turns still bucket them)")
	pairs := fs.Bool("pairwise", false, "judge pairs instead: each line {\"pair_id\", \"a\": <record>, \"b\": <record>} (docs/pairwise.md)")
	minWinRate := fs.Float64("min-win-rate", -1, "with --pairwise: pass only when the lower bound of b's 95% win-rate interval is at or above this (b shown to win at least this often)")
	notWorse := fs.Float64("not-worse-than", -1, "with --pairwise: fail only when the upper bound of b's 95% win-rate interval is below this (b not shown to win less often)")
	judge := fs.String("judge", "", "with --pairwise: builtin, openai or anthropic (default pairs.judge)")
	var tf trecFlags
	fs.StringVar(&tf.qrels, "qrels", "", "evaluate a retrieval run instead: BEIR qrels (TSV with header query-id corpus-id score) or TREC qrels (docs/offline-eval.md)")
	fs.StringVar(&tf.run, "run", "", "with --qrels: a TREC run (qid Q0 docid rank score tag) or BEIR results JSON {\"qid\": {\"docid\": score}}")
	fs.StringVar(&tf.baselineRun, "baseline-run", "", "with --qrels: compare --run with this run query by query (t test, sign test, interval of the difference)")
	fs.StringVar(&tf.k, "k", "1,5,10", "with --qrels: cut-offs of P, recall, ndcg_cut and success")
	fs.BoolVar(&tf.complete, "complete", false, "with --qrels: trec_eval -c, average over every judged query (a query missing from the run scores 0)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ragwatch eval: "+format+"\n", a...)
		return 2
	}
	if tf.qrels != "" || tf.run != "" || tf.baselineRun != "" {
		if *input != "" || *pairs {
			return fail("--qrels evaluates a run: --input and --pairwise do not apply")
		}
		if *maxDrop < 0 || *maxDrop > 1 {
			return fail("--max-drop must be between 0 and 1, got %v", *maxDrop)
		}
		tf.output, tf.gate, tf.baseline, tf.writeBaseline, tf.maxDrop = *output, *gatePath, *baseline, *writeBaseline, *maxDrop
		return runEvalTREC(tf, stdout, stderr)
	}
	if *input == "" {
		return fail("--input is required (or --qrels with --run)")
	}
	if *pairs {
		return runEvalPairs(ctx, cfgPath, *input, *output, *judge, pairGate{*minWinRate, *notWorse}, *concurrency, stdout, stderr)
	}
	if *minWinRate != -1 || *notWorse != -1 || *judge != "" {
		return fail("--min-win-rate, --not-worse-than and --judge need --pairwise")
	}
	if *maxDrop < 0 || *maxDrop > 1 {
		return fail("--max-drop must be between 0 and 1, got %v", *maxDrop)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	var base eval.Baseline
	if *baseline != "" {
		if base, err = eval.ReadBaseline(*baseline); err != nil {
			return fail("%v", err)
		}
	}
	var gate eval.Gate
	if *gatePath != "" {
		if gate, err = eval.ReadGate(*gatePath); err != nil {
			return fail("%v", err)
		}
		if gate.NeedsBaseline() && *baseline == "" {
			return fail("%s sets max_drop: --baseline is required", *gatePath)
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts, err := service.OfflineJudgeOptions(cfg)
	if err != nil {
		return fail("%v", err)
	}
	ss, err := scorers.Build(cfg.Scoring, nil, logger, opts...)
	if err != nil {
		return fail("%v", err)
	}
	var rep *eval.Report
	err = withEvalFiles(*input, *output, func(in io.Reader, out io.Writer) (err error) {
		rep, err = eval.Run(ctx, in, out, eval.Options{Scorers: ss, Concurrency: *concurrency, Progress: stderr, NoHistory: *noHistory})
		return err
	})
	if err != nil {
		return fail("%v", err)
	}
	for _, b := range rep.BadLines {
		fmt.Fprintln(stderr, "invalid record:", b)
	}
	fmt.Fprintf(stdout, "%d records scored\n", rep.Records)
	rep.WriteTable(stdout)
	rep.WriteAgreement(stdout) // only when the input carried human labels
	if *writeBaseline != "" {
		if err := eval.WriteBaseline(*writeBaseline, rep.Baseline()); err != nil {
			return fail("%v", err)
		}
	}
	code := 0
	if len(rep.BadLines) > 0 {
		fmt.Fprintf(stderr, "ragwatch eval: %d input lines were not valid records\n", len(rep.BadLines))
		code = 1
	}
	if gate != nil {
		var bp *eval.Baseline
		if *baseline != "" {
			bp = &base
		}
		fails := rep.Check(bp, gate, *maxDrop)
		for _, f := range fails {
			fmt.Fprintln(stdout, "FAIL "+f)
		}
		if len(fails) > 0 {
			fmt.Fprintf(stdout, "DO NOT DEPLOY: %d metric checks failed\n", len(fails))
			return 1
		}
		fmt.Fprintln(stdout, "PASS")
	} else if *baseline != "" {
		fails := rep.Gate(base, *maxDrop)
		for _, f := range fails {
			fmt.Fprintln(stdout, "FAIL "+f)
		}
		if len(fails) > 0 {
			return 1
		}
		fmt.Fprintln(stdout, "PASS")
	}
	return code
}

// withEvalFiles runs fn on the input file (stdin for "-") and the output file (nil when output
// is ""), then closes them; a failed close of the output is an error of the run.
func withEvalFiles(input, output string, fn func(in io.Reader, out io.Writer) error) error {
	in := io.Reader(os.Stdin)
	if input != "-" {
		f, err := os.Open(input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if output == "" {
		return fn(in, nil)
	}
	f, err := createPrivate(output)
	if err != nil {
		return err
	}
	err = fn(in, f)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}
