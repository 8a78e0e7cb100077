package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/ragwatch/ragwatch/internal/score"
)

// Judge is one user-defined G-Eval judge (docs/judges.md): an LLM judge that scores the metric
// `judge_<name>` on an integer scale, following the criteria and evaluation steps given here.
type Judge struct {
	// Name is the metric's suffix: lowercase letters, digits and underscores.
	Name string `yaml:"name"`
	// Criteria say what is judged, addressed to the judge model.
	Criteria string `yaml:"criteria"`
	// Steps are the evaluation steps; empty lets the judge model write them once per version
	// of the judge (cached in memory).
	Steps []string `yaml:"steps"`
	// Scale is the integer scale the model answers on; {0, 0} means 1 to 5. A score s becomes
	// (s - min) / (max - min).
	Scale JudgeScale `yaml:"scale"`
	// Inputs are the parts of the record the judge sees: question, history, context, answer,
	// reference.
	Inputs []string `yaml:"inputs"`
	// Examples is a JSONL file of human-scored examples shown to the model (few-shot).
	Examples string `yaml:"examples"`
	// Backend is openai or anthropic; "" uses scoring.backend.
	Backend string `yaml:"backend"`
	// When restricts the records judged, with the conditions of a sampling rule's match.
	When SamplingMatch `yaml:"when"`
	// Variants restricts the records judged to these variants (record.variant).
	Variants []string `yaml:"variants"`
}

// JudgeScale is a judge's integer scale.
type JudgeScale struct {
	Min int `yaml:"min"`
	Max int `yaml:"max"`
}

// Bounds returns the scale, 1 to 5 when unset.
func (s JudgeScale) Bounds() (lo, hi int) {
	if s.Min == 0 && s.Max == 0 {
		return 1, 5
	}
	return s.Min, s.Max
}

// Judge inputs: the parts of a record a judge can be shown.
var JudgeInputs = []string{"question", "history", "context", "answer", "reference"}

// Limits of a judge definition: what fits in a prompt and in a metric name.
const (
	MaxJudgeNameLength   = 48
	MaxJudgeExamples     = 50
	MaxJudgeExampleBytes = 1 << 20
	MaxJudgeScalePoints  = 101
)

var judgeName = regexp.MustCompile(`^[a-z0-9_]+$`)

// Metric is the judge's metric name.
func (j Judge) Metric() string { return score.JudgePrefix + j.Name }

// Validate implements Validator. The examples file is read and checked here, so a bad line
// fails the load with its line number.
func (j Judge) Validate() error {
	var errs []error
	switch {
	case j.Name == "":
		errs = append(errs, Invalid("name", "is required"))
	case len(j.Name) > MaxJudgeNameLength || !judgeName.MatchString(j.Name):
		errs = append(errs, Invalid("name", "must be 1 to %d lowercase letters, digits or underscores, got %q", MaxJudgeNameLength, j.Name))
	case score.KnownMetric(j.Name) || builtinRubricName(j.Name):
		errs = append(errs, Invalid("name", "%q is the name of a built-in metric; choose another", j.Name))
	}
	if strings.TrimSpace(j.Criteria) == "" {
		errs = append(errs, Invalid("criteria", "is required: say what the judge evaluates"))
	}
	for i, s := range j.Steps {
		if strings.TrimSpace(s) == "" {
			errs = append(errs, Invalid(fmt.Sprintf("steps[%d]", i), "is empty"))
		}
	}
	lo, hi := j.Scale.Bounds()
	if lo < 0 || hi <= lo || hi-lo+1 > MaxJudgeScalePoints {
		errs = append(errs, Invalid("scale", "must have 0 <= min < max with at most %d points, got min %d, max %d", MaxJudgeScalePoints, lo, hi))
	}
	if len(j.Inputs) == 0 {
		errs = append(errs, Invalid("inputs", "is required: list what the judge sees (%s)", strings.Join(JudgeInputs, ", ")))
	}
	for i, in := range j.Inputs {
		switch {
		case !slices.Contains(JudgeInputs, in):
			errs = append(errs, Invalid(fmt.Sprintf("inputs[%d]", i), "must be one of %s, got %q", strings.Join(JudgeInputs, ", "), in))
		case slices.Index(j.Inputs, in) != i:
			errs = append(errs, Invalid(fmt.Sprintf("inputs[%d]", i), "%q is listed twice", in))
		}
	}
	switch j.Backend {
	case "", BackendOpenAI, BackendAnthropic:
	default:
		errs = append(errs, Invalid("backend", "must be openai or anthropic (or empty for scoring.backend), got %q", j.Backend))
	}
	if j.Examples != "" && len(errs) == 0 {
		if _, err := j.LoadExamples(); err != nil {
			errs = append(errs, Invalid("examples", "%v", err))
		}
	}
	return joinErrs(errs)
}

func builtinRubricName(n string) bool {
	return slices.Contains([]string{"relevance", "completeness", "accuracy", "citation_quality"}, n)
}

// JudgeExample is one line of a judge's examples file: a record's inputs and its human score.
type JudgeExample struct {
	Question  string           `json:"question"`
	History   []ExampleMessage `json:"history"`
	Context   []string         `json:"context"`
	Answer    string           `json:"answer"`
	Reference string           `json:"reference"`
	Score     *int             `json:"score"`
}

// ExampleMessage is one turn of an example's history.
type ExampleMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// LoadExamples reads and checks the examples file: one JSON object per line (blank lines and
// lines starting with # are skipped) holding only inputs the judge sees and an integer score
// on its scale. Errors name the file and line.
func (j Judge) LoadExamples() ([]JudgeExample, error) {
	if j.Examples == "" {
		return nil, nil
	}
	data, err := os.ReadFile(j.Examples)
	if err != nil {
		return nil, fmt.Errorf("read examples: %w", err)
	}
	if len(data) > MaxJudgeExampleBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", j.Examples, MaxJudgeExampleBytes)
	}
	lo, hi := j.Scale.Bounds()
	var out []JudgeExample
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), MaxJudgeExampleBytes)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s line %d: %s", j.Examples, n, fmt.Sprintf(format, args...))
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(line, &keys); err != nil {
			return nil, bad("not a JSON object: %v", err)
		}
		for k := range keys {
			if k != "score" && !slices.Contains(JudgeInputs, k) {
				return nil, bad("unknown key %q; expected score and inputs (%s)", k, strings.Join(JudgeInputs, ", "))
			}
			if k != "score" && !slices.Contains(j.Inputs, k) {
				return nil, bad("%q is not among the judge's inputs (%s)", k, strings.Join(j.Inputs, ", "))
			}
		}
		var e JudgeExample
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, bad("%v", err)
		}
		switch {
		case e.Score == nil:
			return nil, bad("`score` is required")
		case *e.Score < lo || *e.Score > hi:
			return nil, bad("score %d is outside the scale %d to %d", *e.Score, lo, hi)
		}
		for i, m := range e.History {
			if m.Role != "user" && m.Role != "assistant" {
				return nil, bad("history[%d].role must be user or assistant, got %q", i, m.Role)
			}
		}
		out = append(out, e)
		if len(out) > MaxJudgeExamples {
			return nil, bad("more than %d examples", MaxJudgeExamples)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", j.Examples, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no examples", j.Examples)
	}
	return out, nil
}

// CheckJudges checks what a judge shares with other sections: names are unique and each judge
// has an LLM backend with a model.
func CheckJudges(c *Config) error {
	var errs []error
	seen := map[string]bool{}
	for i, j := range c.Judges {
		if j.Name != "" && seen[j.Name] {
			errs = append(errs, Invalid(fmt.Sprintf("judges[%d].name", i), "%q is used twice", j.Name))
		}
		seen[j.Name] = true
		b := j.JudgeBackend(c.Scoring)
		switch {
		case b == BackendOpenAI && c.Scoring.OpenAI.Model == "", b == BackendAnthropic && c.Scoring.Anthropic.Model == "":
			errs = append(errs, Invalid(fmt.Sprintf("judges[%d].backend", i), "needs scoring.%s.model", b))
		case b != BackendOpenAI && b != BackendAnthropic:
			errs = append(errs, Invalid(fmt.Sprintf("judges[%d].backend", i), "a judge needs an LLM: set backend (openai or anthropic) or scoring.backend"))
		}
	}
	return joinErrs(errs)
}

// JudgeBackend returns the backend that scores the judge.
func (j Judge) JudgeBackend(s Scoring) string {
	if j.Backend != "" {
		return j.Backend
	}
	return s.Backend
}
