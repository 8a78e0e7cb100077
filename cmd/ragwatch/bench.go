package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/alerts/changepoint/bench"
)

func init() {
	register("bench", "simulate detection: `bench detect` compares the windowed rule and the change detector", runBench)
}

func runBench(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "detect" {
		fmt.Fprintln(stderr, "usage: ragwatch bench detect [flags]")
		return 2
	}
	o := bench.Default()
	fs := flag.NewFlagSet("bench detect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Warmups, "warmups", o.Warmups, "independent warm-ups (2h of stationary traffic) per scenario")
	fs.IntVar(&o.Trials, "trials", o.Trials, "changes simulated after each warm-up")
	fs.IntVar(&o.MaxSamples, "samples", o.MaxSamples, "at most this many samples per stationary false-alarm run (fewer simulated days at high rates)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "scenarios simulated at once")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "random seed")
	rates := fs.String("rates", "0.1,1,10,40", "scored samples per second, comma-separated")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	o.Rates = o.Rates[:0]
	for _, f := range strings.Split(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(r > 0) || r > 1000 {
			fmt.Fprintf(stderr, "ragwatch bench detect: -rates: want positive numbers up to 1000, got %q\n", f)
			return 2
		}
		o.Rates = append(o.Rates, r)
	}
	if o.Warmups < 1 || o.Trials < 1 || o.MaxSamples < 1 {
		fmt.Fprintln(stderr, "ragwatch bench detect: -warmups, -trials and -samples must be positive")
		return 2
	}
	start := time.Now()
	res := bench.Run(o)
	res.Markdown(stdout, o)
	fmt.Fprintf(stdout, "\nDetector: min_shift %g, false_alarms 1/%s, reference %s, min_samples %d. Windowed: alert below 0.70 on the 95%% bound, window 15m, for 2m, every 15s. Seed %d; %s of wall time.\n",
		o.Detector.MinShift, "30d", o.Detector.HalfLife, o.Detector.MinSamples, o.Seed, time.Since(start).Round(100*time.Millisecond))
	return 0
}
