// Package eval scores a JSONL file of records offline with the configured scorers (the same
// engine the workers run), summarises each metric (n, mean, 95% CI) and gates against a
// baseline: `ragwatch eval`.
package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// MaxLineBytes bounds one JSONL line (a record with its documents).
const MaxLineBytes = 64 << 20

// Options configures Run.
type Options struct {
	Scorers     []score.Scorer
	Concurrency int       // records scored at once; default 4
	Progress    io.Writer // progress lines (stderr); nil prints none
	// ProgressEvery is the interval between progress lines; default 2s.
	ProgressEvery time.Duration
	Now           func() time.Time
	// NoHistory scores every record as if it had no conversation history (its turn still
	// places it in a turn bucket): run with and without to see what the history changes.
	NoHistory bool
}

// Line is one output line: a record's scores and the metrics that failed, by outcome.
type Line struct {
	TraceID string             `json:"trace_id"`
	Turn    int                `json:"turn,omitempty"`
	Scores  map[string]float64 `json:"scores"`
	Errors  map[string]string  `json:"errors,omitempty"`

	judges map[string]string  // metric → the scorer that produced it
	human  map[string]float64 // the record's human label values (Record.Labels.Values)
}

// Summary is one metric over the run.
type Summary struct {
	Metric string  `json:"metric"`
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Lo     float64 `json:"ci95_low"`
	Hi     float64 `json:"ci95_high"`
	Errors int     `json:"errors"`
}

// Report is what Run found.
type Report struct {
	Records  int       // records scored
	BadLines []string  // "line N: problem" for lines that are not valid records
	Metrics  []Summary // sorted by metric name
	// ByTurn summarises each metric by the records' turn bucket (score.TurnBuckets), sorted by
	// metric then bucket; empty when no record has a turn.
	ByTurn []TurnSummary
	// Agreement of each judge with the human labels the input carried (agreement.go); empty
	// when no record was labelled.
	Agreement []AgreementRow
	values    map[string][]float64
	turns     map[[2]string][]float64 // metric, turn bucket
	pairs     map[judgeKey][]agreement.Pair
}

// TurnSummary is one metric over the records of one turn bucket.
type TurnSummary struct {
	TurnBucket string `json:"turn_bucket"`
	Summary
}

// Run reads records from in (one JSON record per line; blank lines skipped; unknown fields
// ignored; a missing trace_id becomes "line-N"), scores each with every scorer, writes one
// Line per record to out (nil writes nothing) in input order, and summarises.
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options) (*Report, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rep := &Report{values: map[string][]float64{}, turns: map[[2]string][]float64{}, pairs: map[judgeKey][]agreement.Pair{}}
	errCount := map[string]int{}
	br := bufio.NewReaderSize(in, 1<<20)
	var enc *json.Encoder
	if out != nil {
		enc = json.NewEncoder(out)
	}
	start, lastProgress := o.Now(), o.Now()
	flush := func(batch []*record.Record) error {
		lines := scoreBatch(ctx, batch, o)
		for _, l := range lines {
			rep.Records++
			b := score.TurnBucket(l.Turn)
			for m, v := range l.Scores {
				rep.values[m] = append(rep.values[m], v)
				if b != "" {
					rep.turns[[2]string{m, b}] = append(rep.turns[[2]string{m, b}], v)
				}
			}
			for m := range l.Errors {
				errCount[m]++
			}
			rep.addPairs(l)
			if enc != nil {
				if err := enc.Encode(l); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
			}
		}
		if o.Progress != nil && o.Now().Sub(lastProgress) >= o.ProgressEvery {
			lastProgress = o.Now()
			el := lastProgress.Sub(start).Seconds()
			fmt.Fprintf(o.Progress, "scored %d records (%.1f/s)\n", rep.Records, float64(rep.Records)/math.Max(el, 1e-9))
		}
		return ctx.Err()
	}
	parseRecord := func(line []byte, lineNo int) (*record.Record, error) {
		r, err := parse(line, lineNo, o.Now())
		if err == nil && o.NoHistory {
			r.History = nil
		}
		return r, err
	}
	if err := eachBatch(br, &rep.BadLines, o.Concurrency*4, parseRecord, flush); err != nil {
		return rep, err
	}
	names := make([]string, 0, len(rep.values)+len(errCount))
	for m := range rep.values {
		names = append(names, m)
	}
	for m := range errCount {
		if _, ok := rep.values[m]; !ok {
			names = append(names, m)
		}
	}
	sort.Strings(names)
	for _, m := range names {
		s := Summarize(rep.values[m])
		s.Metric, s.Errors = m, errCount[m]
		rep.Metrics = append(rep.Metrics, s)
		for _, b := range score.TurnBuckets {
			if v := rep.turns[[2]string{m, b}]; len(v) > 0 {
				ts := TurnSummary{TurnBucket: b, Summary: Summarize(v)}
				ts.Metric = m
				rep.ByTurn = append(rep.ByTurn, ts)
			}
		}
	}
	rep.Agreement = agreementRows(rep.pairs)
	return rep, nil
}

// eachBatch reads the JSONL lines of br, parses each non-blank one with parse, and hands them
// to flush in batches of size, the last one shorter (maybe empty). A line parse refuses is recorded in
// badLines ("line N: ...") and skipped; an error of flush or of reading stops it.
func eachBatch[T any](br *bufio.Reader, badLines *[]string, size int, parse func(line []byte, lineNo int) (T, error), flush func([]T) error) error {
	batch := make([]T, 0, size)
	lineNo := 0
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			lineNo++
		}
		if len(strings.TrimSpace(string(line))) > 0 {
			v, bad := parse(line, lineNo)
			if bad != nil {
				*badLines = append(*badLines, fmt.Sprintf("line %d: %v", lineNo, bad))
			} else if batch = append(batch, v); len(batch) == size {
				if ferr := flush(batch); ferr != nil {
					return ferr
				}
				batch = batch[:0]
			}
		}
		if errors.Is(err, io.EOF) {
			return flush(batch)
		}
		if err != nil {
			return fmt.Errorf("read input at line %d: %w", lineNo+1, err)
		}
	}
}

// readLine returns the next line without its newline; a line over MaxLineBytes is an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return []byte(strings.TrimRight(string(buf), "\r\n")), err
	}
}

func parse(line []byte, n int, now time.Time) (*record.Record, error) {
	var r record.Record
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if r.TraceID == "" {
		r.TraceID = fmt.Sprintf("line-%d", n)
	}
	if err := r.Validate(); err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	r.Normalize(now)
	return &r, nil
}

// scoreBatch scores records concurrently and returns their lines in input order.
func scoreBatch(ctx context.Context, recs []*record.Record, o Options) []Line {
	lines := make([]Line, len(recs))
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			lines[i] = scoreOne(ctx, r, o.Scorers)
		}()
	}
	wg.Wait()
	return lines
}

func scoreOne(ctx context.Context, r *record.Record, scorers []score.Scorer) Line {
	l := Line{TraceID: r.Key(), Turn: r.Turn, Scores: map[string]float64{}, judges: map[string]string{}}
	if r.Labels != nil {
		l.human = r.Labels.Values
	}
	for _, s := range scorers {
		res, err := s.Score(ctx, r)
		for _, x := range res {
			l.Scores[x.Metric] = x.Value
			l.judges[x.Metric] = s.Name()
		}
		if err == nil {
			continue
		}
		if l.Errors == nil {
			l.Errors = map[string]string{}
		}
		var f score.Failure
		if errors.As(err, &f) {
			for _, e := range f {
				l.Errors[e.Metric] = e.Outcome
			}
			continue
		}
		l.Errors[s.Name()] = score.OutcomeError
	}
	return l
}

// tCrit holds the two-sided 95% Student t quantiles for 1..30 degrees of freedom.
var tCrit = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
	2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
	2.048, 2.045, 2.042}

// Summarize returns n, the mean and a 95% confidence interval of the mean (Student t with the
// sample standard deviation, 1.96 past 30 degrees of freedom), clipped to [0, 1]. With fewer
// than two values the interval is the mean itself.
func Summarize(v []float64) Summary {
	s := Summary{N: len(v)}
	if len(v) == 0 {
		return s
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	s.Mean = sum / float64(len(v))
	s.Lo, s.Hi = s.Mean, s.Mean
	if len(v) < 2 {
		return s
	}
	ss := 0.0
	for _, x := range v {
		ss += (x - s.Mean) * (x - s.Mean)
	}
	sd := math.Sqrt(ss / float64(len(v)-1))
	t := 1.96
	if df := len(v) - 1; df <= len(tCrit) {
		t = tCrit[df-1]
	}
	half := t * sd / math.Sqrt(float64(len(v)))
	s.Lo, s.Hi = math.Max(0, s.Mean-half), math.Min(1, s.Mean+half)
	return s
}

// WriteTable prints one row per metric: n, mean, 95% CI and failures.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%-26s %6s %7s %17s %7s\n", "metric", "n", "mean", "95% CI", "errors")
	for _, s := range r.Metrics {
		if s.N == 0 {
			fmt.Fprintf(w, "%-26s %6d %7s %17s %7d\n", s.Metric, 0, "-", "-", s.Errors)
			continue
		}
		fmt.Fprintf(w, "%-26s %6d %7.4f  [%.4f, %.4f] %7d\n", s.Metric, s.N, s.Mean, s.Lo, s.Hi, s.Errors)
	}
	if len(r.ByTurn) == 0 {
		return
	}
	fmt.Fprintf(w, "\nby turn\n%-26s %5s %6s %7s %17s\n", "metric", "turn", "n", "mean", "95% CI")
	for _, s := range r.ByTurn {
		fmt.Fprintf(w, "%-26s %5s %6d %7.4f  [%.4f, %.4f]\n", s.Metric, s.TurnBucket, s.N, s.Mean, s.Lo, s.Hi)
	}
}

// Baseline is a run's metric means, written by --write-baseline and read by --baseline.
type Baseline struct {
	Metrics map[string]Summary `json:"metrics"`
}

// Baseline returns the report as a baseline.
func (r *Report) Baseline() Baseline {
	b := Baseline{Metrics: map[string]Summary{}}
	for _, s := range r.Metrics {
		if s.N > 0 {
			b.Metrics[s.Metric] = s
		}
	}
	return b
}

// WriteBaseline writes b as indented JSON to path.
func WriteBaseline(path string, b Baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadBaseline reads a baseline file.
func ReadBaseline(path string) (Baseline, error) {
	var b Baseline
	data, err := os.ReadFile(path)
	if err != nil {
		return b, fmt.Errorf("read baseline: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return b, fmt.Errorf("baseline %s: %w", path, err)
	}
	if len(b.Metrics) == 0 {
		return b, fmt.Errorf("baseline %s holds no metrics", path)
	}
	return b, nil
}

// Gate compares the report with a baseline: a metric fails when its mean fell by more than
// maxDrop, or when it has no values in this run. It returns one message per failure, in
// metric order ("<metric>: dropped X (...)").
func (r *Report) Gate(b Baseline, maxDrop float64) []string {
	cur := map[string]Summary{}
	for _, s := range r.Metrics {
		cur[s.Metric] = s
	}
	names := make([]string, 0, len(b.Metrics))
	for m := range b.Metrics {
		names = append(names, m)
	}
	sort.Strings(names)
	var fails []string
	for _, m := range names {
		base := b.Metrics[m]
		c, ok := cur[m]
		if !ok || c.N == 0 {
			fails = append(fails, fmt.Sprintf("%s: missing from this run (baseline mean %.4f)", m, base.Mean))
			continue
		}
		// Round to 1e-9 so a drop exactly at the limit passes despite float noise.
		if drop := base.Mean - c.Mean; math.Round(drop*1e9) > math.Round(maxDrop*1e9) {
			fails = append(fails, fmt.Sprintf("%s: dropped %.4f (%.4f -> %.4f, allowed %.4f)", m, drop, base.Mean, c.Mean, maxDrop))
		}
	}
	return fails
}
