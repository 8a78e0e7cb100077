package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/alerts/engine"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

func init() {
	register("baseline", "pin a drift reference snapshot from records (JSONL) or a running instance's state", runBaseline)
}

// runBaseline writes a drift baseline file. Two sources:
//
//	--from records.jsonl  one record (the /api/v1/records JSON form) per line, "-" for stdin
//	--nats-url URL        the alert window state a running ragwatch keeps in JetStream KV
//	                      (alerting.state_bucket): its current drift windows are pinned
//
// The file goes to -o, else drift.baseline_file, else stdout. A running ragwatch reads
// drift.baseline_file at start; restart it (or roll the pods) to use a new baseline.
func runBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var path string
	fs.StringVar(&path, "c", "", "config file (YAML)")
	fs.StringVar(&path, "config", "", "config file (YAML)")
	from := fs.String("from", "", "JSONL file of records ('-' for stdin)")
	natsURL := fs.String("nats-url", "", "NATS URL of a running ragwatch's JetStream (reads alerting.state_bucket); the embedded server needs ragwatch's user: nats://ragwatch:<password>@127.0.0.1:4222")
	out := fs.String("o", "", "output file (default: drift.baseline_file, else stdout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "ragwatch baseline:", err)
		return code
	}
	if (*from == "") == (*natsURL == "") {
		return fail(2, fmt.Errorf("set exactly one of --from or --nats-url"))
	}
	cfg, err := config.Load(path)
	if err != nil {
		return fail(2, err)
	}
	if len(cfg.Drift.Detectors) == 0 {
		return fail(2, fmt.Errorf("no drift detectors configured"))
	}
	now := time.Now()
	var b *drift.Baseline
	if *from != "" {
		b, err = baselineFromJSONL(cfg, *from, now, stderr)
	} else {
		b, err = baselineFromNATS(ctx, cfg, *natsURL, now)
	}
	if err != nil {
		return fail(1, err)
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return fail(1, err)
	}
	data = append(data, '\n')
	target := *out
	if target == "" {
		target = cfg.Drift.BaselineFile
	}
	if target == "" || target == "-" {
		_, _ = stdout.Write(data)
		return 0
	}
	if err := os.WriteFile(target, data, 0o644); err != nil {
		return fail(1, fmt.Errorf("write baseline: %w", err))
	}
	for _, d := range cfg.Drift.Detectors {
		if h, ok := b.Detectors[d.Name].Services[drift.AllServices]; ok {
			fmt.Fprintf(stderr, "%s (%s): %d samples\n", d.Name, d.Signal, h.N)
		} else {
			fmt.Fprintf(stderr, "%s (%s): no samples\n", d.Name, d.Signal)
		}
	}
	fmt.Fprintf(stderr, "wrote %s\n", target)
	return 0
}

func baselineFromJSONL(cfg *config.Config, path string, now time.Time, stderr io.Writer) (*drift.Baseline, error) {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open records: %w", err)
		}
		defer f.Close()
		in = f
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var recs []*record.Record
	line, bad := 0, 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		rs, err := record.DecodeJSON(sc.Bytes(), now)
		if err != nil {
			bad++
			if bad <= 5 {
				fmt.Fprintf(stderr, "line %d skipped: %v\n", line, err)
			}
			continue
		}
		recs = append(recs, rs...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "%d of %d lines skipped\n", bad, line)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("no valid records in %s", path)
	}
	seq := func(yield func(*record.Record) bool) {
		for _, r := range recs {
			if !yield(r) {
				return
			}
		}
	}
	return engine.BaselineFromRecords(cfg.Drift, seq, "records:"+path, now), nil
}

func baselineFromNATS(ctx context.Context, cfg *config.Config, url string, now time.Time) (*drift.Baseline, error) {
	if cfg.Alerting.StateBucket == "" {
		return nil, fmt.Errorf("alerting.state_bucket is empty: the running instance keeps no state to read")
	}
	nc, err := nats.Connect(url, nats.Name("ragwatch-baseline"), nats.Timeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.Alerting.StateBucket)
	if err != nil {
		return nil, fmt.Errorf("open KV bucket %s: %w", cfg.Alerting.StateBucket, err)
	}
	return engine.BaselineFromState(ctx, engine.SectionsOf(cfg), engine.KVStore{KV: kv}, "state:"+cfg.Alerting.StateBucket, now)
}
