package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// PairOptions configures RunPairs.
type PairOptions struct {
	Judge       pairwise.Judge
	Concurrency int       // pairs judged at once; default 4
	Progress    io.Writer // progress lines (stderr); nil prints none
	// ProgressEvery is the interval between progress lines; default 2s.
	ProgressEvery time.Duration
	Now           func() time.Time
}

// PairLine is one output line of `ragwatch eval --pairwise`. Winner is "a", "b" or "tie"; a pair
// whose judgement failed is written with winner "tie", confidence 0 and its outcome under
// Errors["judge"], and is left out of the win rate.
type PairLine struct {
	PairID     string            `json:"pair_id"`
	Winner     string            `json:"winner"`
	Confidence float64           `json:"confidence"`
	Reasoning  string            `json:"reasoning"`
	Errors     map[string]string `json:"errors"`
	outcome    string
}

// PairReport is what RunPairs found.
type PairReport struct {
	Pairs    int      // pairs judged (failures included)
	Failed   int      // pairs whose judgement failed
	BadLines []string // "line N: problem"
	Rate     pairwise.Rate
}

// pairInput is one input line: {"pair_id": "...", "a": <record>, "b": <record>}.
type pairInput struct {
	PairID string          `json:"pair_id"`
	A      json.RawMessage `json:"a"`
	B      json.RawMessage `json:"b"`
}

type pairJob struct {
	id   string
	a, b *record.Record
}

// RunPairs reads pairs from in, judges each with o.Judge (a is the baseline, b the candidate),
// writes one PairLine per pair to out (nil writes nothing) in input order, and returns b's win
// rate over a with its 95 % Wilson interval (ties and inconsistent pairs count half).
func RunPairs(ctx context.Context, in io.Reader, out io.Writer, o PairOptions) (*PairReport, error) {
	if o.Judge == nil {
		return nil, errors.New("no pairwise judge")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rep := &PairReport{}
	var tally pairwise.Tally
	var enc *json.Encoder
	if out != nil {
		enc = json.NewEncoder(out)
	}
	lastProgress := o.Now()
	br := bufio.NewReaderSize(in, 1<<20)
	flush := func(batch []pairJob) error {
		for _, l := range judgeBatch(ctx, batch, o) {
			rep.Pairs++
			if len(l.Errors) > 0 {
				rep.Failed++
			} else {
				tally.Add(l.outcome, 1)
			}
			if enc != nil {
				if err := enc.Encode(l); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
			}
		}
		if o.Progress != nil && o.Now().Sub(lastProgress) >= o.ProgressEvery {
			lastProgress = o.Now()
			fmt.Fprintf(o.Progress, "judged %d pairs\n", rep.Pairs)
		}
		return ctx.Err()
	}
	parse := func(line []byte, lineNo int) (pairJob, error) { return parsePair(line, lineNo, o.Now()) }
	if err := eachBatch(br, &rep.BadLines, o.Concurrency*4, parse, flush); err != nil {
		return rep, err
	}
	rep.Rate = tally.Rate("")
	return rep, nil
}

func parsePair(line []byte, n int, now time.Time) (pairJob, error) {
	var in pairInput
	if err := json.Unmarshal(line, &in); err != nil {
		return pairJob{}, fmt.Errorf("invalid JSON: %v", err)
	}
	j := pairJob{id: in.PairID}
	if j.id == "" {
		j.id = fmt.Sprintf("line-%d", n)
	}
	for _, side := range []struct {
		name string
		raw  json.RawMessage
		dst  **record.Record
	}{{"a", in.A, &j.a}, {"b", in.B, &j.b}} {
		if len(side.raw) == 0 || string(side.raw) == "null" {
			return pairJob{}, fmt.Errorf("%q is missing: each line is {\"pair_id\": ..., \"a\": <record>, \"b\": <record>}", side.name)
		}
		r, err := parse(side.raw, n, now)
		if err != nil {
			return pairJob{}, fmt.Errorf("record %q: %v", side.name, err)
		}
		if r.TraceID == fmt.Sprintf("line-%d", n) {
			r.TraceID += "-" + side.name
		}
		*side.dst = r
	}
	return j, nil
}

// judgeBatch judges pairs concurrently and returns their lines in input order.
func judgeBatch(ctx context.Context, jobs []pairJob, o PairOptions) []PairLine {
	lines := make([]PairLine, len(jobs))
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l := PairLine{PairID: j.id, Errors: map[string]string{}}
			v, err := o.Judge.JudgePair(ctx, j.a, j.b)
			if err != nil {
				l.Winner, l.Errors["judge"] = pairwise.WinnerTie, outcomeOf(err)
			} else {
				l.Winner, l.Confidence, l.Reasoning, l.outcome = v.Winner, v.Confidence, v.Reasoning, v.Outcome
			}
			lines[i] = l
		}()
	}
	wg.Wait()
	return lines
}

// outcomeOf names a judge failure by its score outcome (timeout, rate_limited, parse_error,
// refused, error).
func outcomeOf(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return score.OutcomeTimeout
	}
	return llm.Outcome(err)
}

// WritePairSummary prints b's win rate over a.
func (r *PairReport) WritePairSummary(w io.Writer) {
	x := r.Rate
	fmt.Fprintf(w, "%d pairs judged (%d failed): b wins %d, a wins %d, ties %d, inconsistent %d\n",
		r.Pairs, r.Failed, x.Wins, x.Losses, x.Ties, x.Inconsistent)
	fmt.Fprintf(w, "b's win rate over a: %.4f  95%% CI [%.4f, %.4f] (ties count half)\n", x.Estimate, x.Lower, x.Upper)
}
