package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJudgesFull(t *testing.T) {
	ex := writeFile(t, "tone.jsonl", `# human-scored answers
{"question": "Where is my parcel?", "answer": "Check the tracking page yourself.", "score": 2}

{"question": "Can I return shoes?", "history": [{"role": "user", "content": "Hi"}], "answer": "Yes, gladly, within 30 days.", "score": 5}
`)
	c, err := Parse([]byte(`
scoring:
  backend: openai
  openai: {model: gpt-4o-mini}
judges:
  - name: tone
    criteria: whether the ANSWER is polite and calm
    scale: {min: 1, max: 5}
    inputs: [question, history, answer]
    examples: ` + ex + `
    when: {services: [support-bot]}
    variants: [b]
  - name: grounded_numbers
    criteria: whether every number in the ANSWER appears in the DOCUMENTs
    steps: [List the numbers in the ANSWER., Look each up in the DOCUMENTs.]
    scale: {min: 0, max: 10}
    inputs: [context, answer]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Judge{
		{Name: "tone", Criteria: "whether the ANSWER is polite and calm", Scale: JudgeScale{1, 5},
			Inputs: []string{"question", "history", "answer"}, Examples: ex,
			When: SamplingMatch{Services: []string{"support-bot"}}, Variants: []string{"b"}},
		{Name: "grounded_numbers", Criteria: "whether every number in the ANSWER appears in the DOCUMENTs",
			Steps: []string{"List the numbers in the ANSWER.", "Look each up in the DOCUMENTs."},
			Scale: JudgeScale{0, 10}, Inputs: []string{"context", "answer"}},
	}
	if !reflect.DeepEqual(c.Judges, want) {
		t.Fatalf("judges:\n got %+v\nwant %+v", c.Judges, want)
	}
	exs, err := c.Judges[0].LoadExamples()
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 2 || *exs[1].Score != 5 || exs[1].History[0].Content != "Hi" || exs[0].Answer != "Check the tracking page yourself." {
		t.Fatalf("examples %+v", exs)
	}
	if c.Judges[0].Metric() != "judge_tone" {
		t.Fatalf("metric %q", c.Judges[0].Metric())
	}
	if lo, hi := (JudgeScale{}).Bounds(); lo != 1 || hi != 5 {
		t.Fatalf("default scale %d..%d", lo, hi)
	}
}

func TestJudgesErrors(t *testing.T) {
	badEx := writeFile(t, "bad.jsonl", `{"answer": "fine", "score": 3}
{"answer": "rude", "score": 9}
`)
	unknownKey := writeFile(t, "unknown.jsonl", `{"answer": "fine", "score": 3}

{"answer": "fine", "grade": 3}
`)
	notSeen := writeFile(t, "notseen.jsonl", `{"answer": "fine", "reference": "ok", "score": 3}`)
	noScore := writeFile(t, "noscore.jsonl", `{"answer": "fine"}`)
	notJSON := writeFile(t, "notjson.jsonl", `{"answer": "fine", "score": 3}`+"\n"+`answer: fine`)
	_, err := Parse([]byte(`
scoring:
  backend: openai
  openai: {model: gpt-4o-mini}
judges:
  - name: Tone
    criteria: x
    inputs: [answer]
  - name: tone
    criteria: ""
    inputs: [answer, mood, answer]
    scale: {min: 5, max: 1}
  - name: tone
    criteria: x
    inputs: [answer]
    examples: ` + badEx + `
  - name: faithfulness
    criteria: x
    inputs: [answer]
  - name: a
    criteria: x
    inputs: [answer]
    examples: ` + unknownKey + `
  - name: b
    criteria: x
    inputs: [answer]
    examples: ` + notSeen + `
  - name: c
    criteria: x
    inputs: [answer]
    examples: ` + noScore + `
  - name: d
    criteria: x
    inputs: [answer]
    examples: ` + notJSON + `
  - name: e
    criteria: x
    backend: anthropic
  - name: f
    criteria: x
    inputs: [answer]
    steps: ["  "]
`))
	if err == nil {
		t.Fatal("invalid judges accepted")
	}
	got := strings.Split(err.Error(), "\n")
	want := []string{
		"line 6: `judges[0].name` must be 1 to 48 lowercase letters, digits or underscores, got \"Tone\"",
		"line 10: `judges[1].criteria` is required: say what the judge evaluates",
		"line 11: `judges[1].inputs[1]` must be one of question, history, context, answer, reference, got \"mood\"",
		"line 11: `judges[1].inputs[2]` \"answer\" is listed twice",
		"line 12: `judges[1].scale` must have 0 <= min < max with at most 101 points, got min 5, max 1",
		"line 13: `judges[2].name` \"tone\" is used twice",
		"line 16: `judges[2].examples` " + badEx + " line 2: score 9 is outside the scale 1 to 5",
		"line 17: `judges[3].name` \"faithfulness\" is the name of a built-in metric; choose another",
		"line 23: `judges[4].examples` " + unknownKey + " line 3: unknown key \"grade\"; expected score and inputs (question, history, context, answer, reference)",
		"line 27: `judges[5].examples` " + notSeen + " line 1: \"reference\" is not among the judge's inputs (answer)",
		"line 31: `judges[6].examples` " + noScore + " line 1: `score` is required",
		"line 35: `judges[7].examples` " + notJSON + " line 2: not a JSON object: invalid character 'a' looking for beginning of value",
		"line 36: `judges[8].inputs` is required: list what the judge sees (question, history, context, answer, reference)",
		"line 38: `judges[8].backend` needs scoring.anthropic.model",
		"line 42: `judges[9].steps[0]` is empty",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJudgesNeedAnLLM(t *testing.T) {
	_, err := Parse([]byte(`
judges:
  - name: tone
    criteria: x
    inputs: [answer]
`))
	if err == nil || err.Error() != "line 3: `judges[0].backend` a judge needs an LLM: set backend (openai or anthropic) or scoring.backend" {
		t.Fatalf("error %v", err)
	}
}
