package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/eval/generate"
	"github.com/ragwatch/ragwatch/sampler/scorers"
)

func init() {
	register("generate", "write a synthetic eval set (questions and reference answers) from the documents traffic retrieved", runGenerate)
}

// runGenerate writes question / reference-answer records from the documents of a records file
// (`ragwatch export`'s output) with the configured LLM backend. Exit codes: 0 written, 1 fewer
// items than --size (budget spent, or too few documents), 2 bad flags, config or files.
func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfgPath string
	fs.StringVar(&cfgPath, "c", "", "config file (YAML): scoring.openai or scoring.anthropic, redaction, sampling.budget")
	fs.StringVar(&cfgPath, "config", "", "config file (YAML)")
	input := fs.String("input", "", "records whose documents to draw from, one JSON record per line (ragwatch export's output); - for stdin")
	output := fs.String("output", "", "write the eval set here (JSON lines ragwatch eval reads)")
	size := fs.Int("size", 50, "items to write")
	mix := fs.String("mix", "0.5,0.3,0.2", "shares of single-document, two-document and unanswerable items")
	backend := fs.String("backend", "", "openai or anthropic (default scoring.backend)")
	budgetUSD := fs.Float64("budget-usd", -1, "stop after spending this many US dollars (default sampling.budget.usd_per_day; 0: no limit)")
	maxDoc := fs.Int("max-doc-bytes", 8000, "cut each document to this many bytes in prompts and output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ragwatch generate: "+format+"\n", a...)
		return 2
	}
	if *input == "" || *output == "" {
		return fail("--input and --output are required")
	}
	if *size <= 0 || *maxDoc <= 0 {
		return fail("--size and --max-doc-bytes must be positive")
	}
	shares, err := parseMix(*mix)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	if *backend == "" {
		*backend = cfg.Scoring.Backend
	}
	if *backend != config.BackendOpenAI && *backend != config.BackendAnthropic {
		return fail("--backend must be openai or anthropic (scoring.backend is %q)", *backend)
	}
	redactFn, err := service.OfflineRedactor(cfg)
	if err != nil {
		return fail("%v", err)
	}
	var opts []scorers.Option
	if redactFn != nil {
		opts = append(opts, scorers.WithRedact(redactFn))
	}
	judge, err := scorers.BuildLLMJudge(cfg.Scoring, *backend, nil, opts...)
	if err != nil {
		return fail("%v", err)
	}
	budget := cfg.Sampling.Budget
	if *budgetUSD >= 0 {
		budget.USDPerDay, budget.FeedbackReserveUSD = *budgetUSD, 0
	}
	in := io.Reader(os.Stdin)
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return fail("%v", err)
		}
		defer f.Close()
		in = f
	}
	docs, bad, err := generate.Documents(in, *maxDoc)
	if err != nil {
		return fail("%v", err)
	}
	for _, b := range bad {
		fmt.Fprintln(stderr, "invalid record:", b)
	}
	out, err := createPrivate(*output)
	if err != nil {
		return fail("%v", err)
	}
	rep, err := generate.Generate(ctx, docs, out, generate.Options{Judge: judge, Size: *size, Mix: shares,
		Budget: decide.NewBudget(budget, nil, nil, nil), Redact: redactFn})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail("%v", err)
	}
	total := rep.Written[generate.KindSingle] + rep.Written[generate.KindMulti] + rep.Written[generate.KindUnanswerable]
	fmt.Fprintf(stdout, "%d documents, %d items written: %d single-document, %d two-document, %d unanswerable\n", len(docs), total,
		rep.Written[generate.KindSingle], rep.Written[generate.KindMulti], rep.Written[generate.KindUnanswerable])
	fmt.Fprintf(stdout, "%d duplicate questions dropped, %d failed calls, cost $%.4f\n", rep.Duplicates, rep.Failed, rep.CostUSD)
	if rep.Stopped == "budget" {
		fmt.Fprintln(stdout, "stopped: the budget is spent")
	}
	if total < *size {
		return 1
	}
	return 0
}

func parseMix(s string) ([3]float64, error) {
	var m [3]float64
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return m, fmt.Errorf("--mix needs three shares (single, two-document, unanswerable), got %q", s)
	}
	sum := 0.0
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 {
			return m, fmt.Errorf("--mix: %q is not a share", p)
		}
		m[i], sum = v, sum+v
	}
	if sum <= 0 {
		return m, fmt.Errorf("--mix: the shares sum to 0")
	}
	return m, nil
}
