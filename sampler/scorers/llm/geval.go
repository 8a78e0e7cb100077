package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// G-Eval judges: a metric scored by the judge model following written criteria and evaluation
// steps on an integer scale. The four built-in rubrics (rubrics.go) and the judges of the
// `judges` config section are all JudgeDefs; nothing else scores a rating.

// The parts of a record a judge can see (JudgeDef.Inputs).
const (
	InputQuestion  = "question"
	InputHistory   = "history"
	InputContext   = "context"
	InputAnswer    = "answer"
	InputReference = "reference"
)

// Inputs lists every input name, in the order their blocks appear in a prompt.
var Inputs = []string{InputHistory, InputQuestion, InputContext, InputAnswer, InputReference}

// TopLogprobs is how many alternatives a judge asks for at each reply token: enough to hold
// every point of a 1..5 scale.
const TopLogprobs = 5

// JudgeDef defines one G-Eval judge.
type JudgeDef struct {
	// Metric is the result's metric name: "judge_<name>" for a configured judge.
	Metric string `json:"metric"`
	// Criteria says what is judged, in the judge model's words ("tone: whether the ANSWER ...").
	Criteria string `json:"criteria"`
	// Steps are the evaluation steps; nil has the backend write them once per definition
	// version (cached in memory; the call counts as a judge call of the record that needed it).
	Steps []string `json:"steps,omitempty"`
	// Min and Max bound the integer scale; a score s becomes (s-Min)/(Max-Min) in 0..1.
	Min int `json:"min"`
	Max int `json:"max"`
	// ScaleText optionally describes the points of the scale, one per line.
	ScaleText string `json:"scale_text,omitempty"`
	// Inputs are the parts of the record the judge sees (Input* constants). The question,
	// answer and context are required when listed: a record without them is not scored.
	// History and reference are shown when the record has them.
	Inputs []string `json:"inputs"`
	// Examples are human-scored records shown to the model before the record to judge.
	Examples []Example `json:"examples,omitempty"`
	// Scope describes Applies for the version (e.g. the YAML of the config's `when`).
	Scope string `json:"scope,omitempty"`
	// Applies says which records the judge scores; nil scores every record.
	Applies func(*record.Record) bool `json:"-"`
}

// Example is one human-scored record shown to the judge (few-shot).
type Example struct {
	Question  string           `json:"question,omitempty"`
	History   []record.Message `json:"history,omitempty"`
	Context   []string         `json:"context,omitempty"`
	Answer    string           `json:"answer,omitempty"`
	Reference string           `json:"reference,omitempty"`
	Score     int              `json:"score"`
}

// Version is a short hash of everything that shapes the judge's verdicts: a result carries it
// (score.Result.JudgeVersion) so that verdicts of a changed judge are not mixed with the old.
func (d JudgeDef) Version() string {
	b, _ := json.Marshal(d) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Validate checks a definition.
func (d JudgeDef) Validate() error {
	switch {
	case d.Metric == "":
		return fmt.Errorf("judge has no metric name")
	case strings.TrimSpace(d.Criteria) == "":
		return fmt.Errorf("judge %s has no criteria", d.Metric)
	case d.Min >= d.Max:
		return fmt.Errorf("judge %s: scale min %d must be below max %d", d.Metric, d.Min, d.Max)
	case len(d.Inputs) == 0:
		return fmt.Errorf("judge %s sees no inputs", d.Metric)
	}
	for _, in := range d.Inputs {
		if !slices.Contains(Inputs, in) {
			return fmt.Errorf("judge %s: unknown input %q", d.Metric, in)
		}
	}
	for i, e := range d.Examples {
		if e.Score < d.Min || e.Score > d.Max {
			return fmt.Errorf("judge %s: example %d scores %d outside %d..%d", d.Metric, i+1, e.Score, d.Min, d.Max)
		}
	}
	return nil
}

func (d JudgeDef) sees(in string) bool { return slices.Contains(d.Inputs, in) }

// judgeSet is the scorer's configured judges, replaced whole by SetJudges.
type judgeSet struct {
	defs     []JudgeDef
	versions []string
}

// stepsCache holds the generated evaluation steps of each judge version.
type stepsCache struct {
	mu      sync.Mutex
	entries map[string]*stepsEntry
}

// stepsEntry is one judge version's steps; mu is held while they are generated so that
// concurrent records wait for one generation instead of each asking.
type stepsEntry struct {
	mu    sync.Mutex
	steps []string
}

func (c *stepsCache) entry(key string) *stepsEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*stepsEntry{}
	}
	e, ok := c.entries[key]
	if !ok {
		e = &stepsEntry{}
		c.entries[key] = e
	}
	return e
}

// steps returns the judge's evaluation steps: its own, or those the backend wrote for this
// version (asked once; a failed generation is asked again by the next record).
func (s *Scorer) steps(ctx context.Context, d JudgeDef, version string, u *call) ([]string, error) {
	if len(d.Steps) > 0 {
		return d.Steps, nil
	}
	e := s.stepsCache.entry(d.Metric + "@" + version)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.steps != nil {
		return e.steps, nil
	}
	var resp struct {
		Steps []string `json:"steps"`
	}
	err := s.ask(ctx, u, Question{Metric: d.Metric,
		System: "You design evaluation procedures for answers of a retrieval-augmented assistant. " +
			"Reply with a single JSON object that matches the required schema and nothing else.",
		User: "Write the evaluation steps a careful evaluator follows to score a record on this criterion, " +
			fmt.Sprintf("on an integer scale from %d (worst) to %d (best). ", d.Min, d.Max) +
			"The evaluator sees: " + strings.Join(d.Inputs, ", ") + ".\n" +
			block("CRITERIA", "", d.Criteria) +
			`Reply as {"steps": ["step 1", "step 2", ...]} with three to six short steps.`,
		Schema: object(map[string]any{"steps": arrayOf(str(), 1, 10)}),
		Check: func() error {
			for _, st := range resp.Steps {
				if strings.TrimSpace(st) == "" {
					return fmt.Errorf("a step is empty")
				}
			}
			return nil
		}}, &resp)
	if err != nil {
		return nil, err
	}
	e.steps = resp.Steps
	return e.steps, nil
}

// geval scores r with judge d.
func (s *Scorer) geval(ctx context.Context, d JudgeDef, version string, r *record.Record, u *call) (verdict, error) {
	if d.Applies != nil && !d.Applies(r) {
		return verdict{skip: true}, nil
	}
	if (d.sees(InputAnswer) && strings.TrimSpace(r.Answer) == "") ||
		(d.sees(InputQuestion) && strings.TrimSpace(r.Query) == "") ||
		(d.sees(InputContext) && len(r.Documents) == 0) {
		return verdict{skip: true}, nil
	}
	steps, err := s.steps(ctx, d, version, u)
	if err != nil {
		return verdict{}, err
	}
	var b strings.Builder
	if len(d.Examples) > 0 {
		b.WriteString("Scored examples, for calibration (human judgements on the same scale):\n")
		for i, e := range d.Examples {
			ex := &record.Record{Query: e.Question, History: e.History, Answer: e.Answer, Reference: e.Reference}
			for k, c := range e.Context {
				ex.Documents = append(ex.Documents, record.Document{ID: strconv.Itoa(k + 1), Content: c})
			}
			b.WriteString(block("EXAMPLE", fmt.Sprintf("index=%d score=%d", i+1, e.Score), strings.TrimSuffix(s.inputText(d, ex, false), "\n")))
		}
		b.WriteString("The record to evaluate:\n")
	}
	b.WriteString(s.inputText(d, r, true))
	b.WriteString("Evaluate " + d.Criteria + ".\nEvaluation steps:\n")
	for i, st := range steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, st)
	}
	fmt.Fprintf(&b, "Scale (integer %d to %d):\n", d.Min, d.Max)
	if d.ScaleText != "" {
		b.WriteString(d.ScaleText + "\n")
	} else {
		fmt.Fprintf(&b, "%d is the worst, %d the best.\n", d.Min, d.Max)
	}
	fmt.Fprintf(&b, `Reply as {"reasoning": "two or three sentences", "score": %d-%d}.`, d.Min, d.Max)
	return s.rate(ctx, u, d, b.String())
}

// inputText renders the inputs d sees as data blocks. Blocks nest in an example, so there
// they are plain labelled lines (neutralised by the example's block).
func (s *Scorer) inputText(d JudgeDef, r *record.Record, blocks bool) string {
	var b strings.Builder
	put := func(name, attrs, content string) {
		if blocks {
			b.WriteString(block(name, attrs, s.cut(content)))
			return
		}
		if attrs != "" {
			name += " " + attrs
		}
		fmt.Fprintf(&b, "%s:\n%s\n", name, s.cut(content))
	}
	for _, in := range Inputs {
		if !d.sees(in) {
			continue
		}
		switch in {
		case InputQuestion:
			if strings.TrimSpace(r.Query) != "" {
				put("QUESTION", "", r.Query)
			}
		case InputHistory:
			if blocks {
				b.WriteString(s.historyBlock(r)) // the newest messages that fit, redacted with the rest
			} else if len(r.History) > 0 {
				var h strings.Builder
				for _, m := range r.History {
					fmt.Fprintf(&h, "%s: %s\n", m.Role, m.Content)
				}
				put("HISTORY", "", strings.TrimSuffix(h.String(), "\n"))
			}
		case InputContext:
			for i, doc := range s.docs(r) {
				put("DOCUMENT", docAttrs(i, doc.ID), doc.Content)
			}
		case InputAnswer:
			put("ANSWER", "", r.Answer)
		case InputReference:
			if strings.TrimSpace(r.Reference) != "" {
				put("REFERENCE", "", r.Reference)
			}
		}
	}
	return b.String()
}

type rating struct {
	Reasoning string `json:"reasoning"`
	Score     int    `json:"score"`
}

// rate asks for a score on d's scale with reasoning first (G-Eval's evaluation steps) and
// normalises it: the expectation of the score under the model's probabilities of the scale's
// tokens when the backend returns them, else the integer written.
func (s *Scorer) rate(ctx context.Context, u *call, d JudgeDef, user string) (verdict, error) {
	if err := u.notAsked(); err != nil {
		return verdict{}, err
	}
	var resp rating
	used, lps, err := s.j.AskLogprobs(ctx, Question{Metric: d.Metric,
		System:      "You are a strict evaluator of answers from a retrieval-augmented assistant. " + dataRules,
		User:        user,
		Schema:      object(map[string]any{"reasoning": str(), "score": integer(d.Min, d.Max)}),
		TopLogprobs: TopLogprobs}, &resp)
	u.add(used)
	if err != nil {
		s.markDown(u, err)
		return verdict{}, err
	}
	span := float64(d.Max - d.Min)
	if e, ok := ExpectedScore(lps, d.Min, d.Max); ok {
		return verdict{value: (e - float64(d.Min)) / span, method: score.MethodLogprobs,
			explanation: fmt.Sprintf("judge score %d of %d (expected %.2f)", resp.Score, d.Max, e)}, nil
	}
	return verdict{value: float64(resp.Score-d.Min) / span, method: score.MethodParsed,
		explanation: fmt.Sprintf("judge score %d of %d", resp.Score, d.Max)}, nil
}

// scoreKey finds the value of the reply's "score" key.
var scoreKey = regexp.MustCompile(`"score"\s*:\s*`)

// ExpectedScore is G-Eval's probability-weighted score: at the reply token that holds the
// value of "score", the sum of s·p(s) over the scale's points among the top alternatives,
// divided by their total probability. ok is false when there are no log-probabilities, the
// value is not one token (a multi-digit score split in two), or no alternative is a point of
// the scale.
func ExpectedScore(lps []TokenLogprob, lo, hi int) (float64, bool) {
	if len(lps) == 0 {
		return 0, false
	}
	var text strings.Builder
	starts := make([]int, len(lps))
	for i, t := range lps {
		starts[i] = text.Len()
		text.WriteString(t.Token)
	}
	locs := scoreKey.FindAllStringIndex(text.String(), -1)
	if len(locs) == 0 {
		return 0, false
	}
	at := locs[len(locs)-1][1]
	// The value's token: the one covering offset at (a token may also carry the ": ").
	i := 0
	for i+1 < len(lps) && starts[i+1] <= at {
		i++
	}
	if strings.TrimSpace(lps[i].Token) == "" && i+1 < len(lps) {
		i++
	}
	tok := strings.TrimSpace(lps[i].Token[max(0, at-starts[i]):])
	if _, err := strconv.Atoi(tok); err != nil {
		return 0, false
	}
	if i+1 < len(lps) {
		if next := strings.TrimSpace(lps[i+1].Token); next != "" && next[0] >= '0' && next[0] <= '9' {
			return 0, false // the number goes on in the next token
		}
	}
	var sum, total float64
	for _, a := range lps[i].Top {
		v, err := strconv.Atoi(strings.TrimSpace(a.Token))
		if err != nil || v < lo || v > hi {
			continue
		}
		p := math.Exp(min(a.Logprob, 0)) // a log-probability above 0 is not one
		if math.IsNaN(p) {
			continue
		}
		sum += float64(v) * p
		total += p
	}
	if total <= 0 {
		return 0, false
	}
	return sum / total, true
}
