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

// pairGate is the pairwise deploy gate; -1 leaves a bound unchecked.
type pairGate struct {
	// minWinRate passes only what the interval shows: its lower bound at or above it.
	minWinRate float64
	// notWorseThan fails only what the interval shows worse: its upper bound below it.
	notWorseThan float64
}

// runEvalPairs is `ragwatch eval --pairwise`: it judges each pair of the input with the
// pairwise judge and prints b's win rate over a. Exit codes: 0 judged (and the gate passed),
// 1 the lower bound of the 95% interval is below --min-win-rate, its upper bound below
// --not-worse-than, or some lines were not valid pairs, 2 bad flags, config or files.
func runEvalPairs(ctx context.Context, cfgPath, input, output, judge string, g pairGate, concurrency int, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ragwatch eval: "+format+"\n", a...)
		return 2
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--min-win-rate", g.minWinRate}, {"--not-worse-than", g.notWorseThan}} {
		if f.v != -1 && (f.v < 0 || f.v > 1) {
			return fail("%s must be between 0 and 1, got %v", f.name, f.v)
		}
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
	if g.minWinRate == -1 && g.notWorseThan == -1 {
		return code
	}
	failed := false
	if rep.Rate.Pairs == 0 {
		fmt.Fprintln(stdout, "FAIL no pair was judged: the win rate is unknown")
		failed = true
	} else {
		if g.minWinRate != -1 && rep.Rate.Lower < g.minWinRate {
			fmt.Fprintf(stdout, "FAIL b's win rate: lower bound %.4f is below --min-win-rate %.4f (not shown to win that often)\n", rep.Rate.Lower, g.minWinRate)
			failed = true
		}
		if g.notWorseThan != -1 && rep.Rate.Upper < g.notWorseThan {
			fmt.Fprintf(stdout, "FAIL b's win rate: upper bound %.4f is below --not-worse-than %.4f (shown to win less often)\n", rep.Rate.Upper, g.notWorseThan)
			failed = true
		}
	}
	if failed {
		return 1
	}
	fmt.Fprintln(stdout, "PASS")
	return code
}
