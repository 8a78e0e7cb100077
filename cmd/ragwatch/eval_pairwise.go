package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/sampler/eval"
	"github.com/ragwatch/ragwatch/sampler/scorers"
)

// runEvalPairs is `ragwatch eval --pairwise`: it judges each pair of the input with the
// pairwise judge and prints b's win rate over a. Exit codes: 0 judged (and the gate passed),
// 1 the upper bound of the 95% interval is below --min-win-rate, or some lines were not valid
// pairs, 2 bad flags, config or files.
func runEvalPairs(ctx context.Context, cfgPath, input, output, judge string, minWinRate float64, concurrency int, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ragwatch eval: "+format+"\n", a...)
		return 2
	}
	gate := minWinRate != -1
	if gate && (minWinRate < 0 || minWinRate > 1) {
		return fail("--min-win-rate must be between 0 and 1, got %v", minWinRate)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	if judge == "" {
		judge = cfg.Pairs.Judge
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts, err := service.OfflineJudgeOptions(cfg)
	if err != nil {
		return fail("%v", err)
	}
	j, err := scorers.BuildPairJudge(cfg.Scoring, judge, logger, opts...)
	if err != nil {
		return fail("%v", err)
	}
	var rep *eval.PairReport
	err = withEvalFiles(input, output, func(in io.Reader, out io.Writer) (err error) {
		rep, err = eval.RunPairs(ctx, in, out, eval.PairOptions{Judge: j, Concurrency: concurrency, Progress: stderr})
		return err
	})
	if err != nil {
		return fail("%v", err)
	}
	for _, b := range rep.BadLines {
		fmt.Fprintln(stderr, "invalid pair:", b)
	}
	rep.WritePairSummary(stdout)
	code := 0
	if len(rep.BadLines) > 0 {
		fmt.Fprintf(stderr, "ragwatch eval: %d input lines were not valid pairs\n", len(rep.BadLines))
		code = 1
	}
	if gate {
		if rep.Rate.Pairs == 0 || rep.Rate.Upper < minWinRate {
			fmt.Fprintf(stdout, "FAIL b's win rate: upper bound %.4f is below --min-win-rate %.4f\n", rep.Rate.Upper, minWinRate)
			return 1
		}
		fmt.Fprintln(stdout, "PASS")
	}
	return code
}
