package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// tok is one token of a reply with its top alternatives (probabilities, not logs).
type tok struct {
	text string
	alts map[string]float64
}

// completionLogprobs is a chat.completion whose choice carries logprobs.content in the wire
// form choices[0].logprobs.content[i].{token, logprob, bytes, top_logprobs[j].{token, logprob, bytes}}.
func completionLogprobs(toks []tok, in, out int) reply {
	var text strings.Builder
	var content []map[string]any
	for _, t := range toks {
		text.WriteString(t.text)
		top := []map[string]any{}
		p := 1.0
		if len(t.alts) > 0 {
			p = t.alts[t.text]
		}
		top = append(top, map[string]any{"token": t.text, "logprob": math.Log(p), "bytes": []byte(t.text)})
		for a, q := range t.alts {
			if a != t.text {
				top = append(top, map[string]any{"token": a, "logprob": math.Log(q), "bytes": []byte(a)})
			}
		}
		content = append(content, map[string]any{"token": t.text, "logprob": math.Log(p), "bytes": []byte(t.text), "top_logprobs": top})
	}
	c, _ := json.Marshal(text.String())
	lp, _ := json.Marshal(map[string]any{"content": content, "refusal": nil})
	return reply{status: 200, body: fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"judge-1",
"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":%s,"finish_reason":"stop"}],
"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, c, lp, in, out, in+out)}
}

// scoreTokens is the reply {"reasoning":"Polite.","score":4} token by token, the score's
// position holding 4 (p 0.6), 5 (0.3) and 3 (0.1).
func scoreTokens() []tok {
	return []tok{{text: `{"`}, {text: "reason"}, {text: "ing"}, {text: `":"`}, {text: "Pol"}, {text: "ite"}, {text: `.",`},
		{text: `"score`}, {text: `":`}, {text: "4", alts: map[string]float64{"4": 0.6, "5": 0.3, "3": 0.1}}, {text: "}"}}
}

func toneJudge() llm.JudgeDef {
	return llm.JudgeDef{Metric: "judge_tone", Criteria: "tone: whether the ANSWER is polite and calm",
		Min: 1, Max: 5, Inputs: []string{llm.InputQuestion, llm.InputAnswer},
		Examples: []llm.Example{{Question: "Where is my parcel?", Answer: "Read the tracking page, write to jane.doe@example.com.", Score: 2}}}
}

func judgeScorer(t *testing.T, srv *server, defs ...llm.JudgeDef) *llm.Scorer {
	t.Helper()
	j := llm.NewJudge(New(Config{BaseURL: srv.URL + "/v1/", Model: "judge-1", APIKey: "sk-test-123"}), llm.JudgeOptions{})
	// Metrics names one built-in metric the record cannot support (no citations), so only
	// the judges ask.
	sc, err := llm.NewScorer(j, llm.ScorerOptions{Metrics: []string{score.CitationRecall}, Judges: defs,
		Now: func() time.Time { return time.Unix(1700000000, 0).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func toneRecord() *record.Record {
	return &record.Record{TraceID: "trace-1", Service: "support-bot", Query: "Can I return shoes? Call me on +44 20 7946 0958.",
		Answer: "Yes, within 30 days."}
}

// A configured judge end to end with logprobs: the steps are generated once and cached, the
// examples and the record go into the prompt redacted, and the score is the expectation over
// the scale tokens.
func TestCustomJudgeWithLogprobs(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{
		completion(`{"steps":["Read the ANSWER.","Note rude or curt wording.","Pick the score."]}`, 50, 20),
		completionLogprobs(scoreTokens(), 300, 11),
		completionLogprobs(scoreTokens(), 310, 11),
	}
	sc := judgeScorer(t, srv, toneJudge())
	res, err := sc.Score(context.Background(), toneRecord())
	if err != nil {
		t.Fatal(err)
	}
	// E[s] = 4·0.6 + 5·0.3 + 3·0.1 = 4.2 → (4.2-1)/4 = 0.8.
	if len(res) != 1 || res[0].Metric != "judge_tone" || math.Abs(res[0].Value-0.8) > 1e-9 || res[0].Method != score.MethodLogprobs ||
		res[0].JudgeVersion != toneJudge().Version() || len(res[0].JudgeVersion) != 12 || res[0].InputTokens != 350 || res[0].OutputTokens != 31 ||
		res[0].Explanation != "judge score 4 of 5 (expected 4.20)" {
		t.Fatalf("results %+v", res)
	}
	// A second record reuses the cached steps: one request, not two.
	if _, err := sc.Score(context.Background(), toneRecord()); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (steps once, then one per record)", len(reqs))
	}
	if _, ok := reqs[0]["logprobs"]; ok {
		t.Errorf("the steps request asked for logprobs: %v", reqs[0])
	}
	if reqs[1]["logprobs"] != true || reqs[1]["top_logprobs"] != float64(5) {
		t.Errorf("rating request logprobs=%v top_logprobs=%v", reqs[1]["logprobs"], reqs[1]["top_logprobs"])
	}
	gen := messages(t, reqs[0])[1][1]
	if !strings.Contains(gen, "tone: whether the ANSWER is polite and calm") || !strings.Contains(gen, "from 1 (worst) to 5 (best)") {
		t.Errorf("steps prompt %q", gen)
	}
	user := messages(t, reqs[1])[1][1]
	for _, want := range []string{
		"<<<EXAMPLE index=1 score=2>>>\nQUESTION:\nWhere is my parcel?\nANSWER:\nRead the tracking page, write to [REDACTED:email].\n<<<END EXAMPLE>>>",
		"<<<QUESTION>>>\nCan I return shoes? Call me on [REDACTED:phone].\n<<<END QUESTION>>>",
		"Evaluate tone: whether the ANSWER is polite and calm.\nEvaluation steps:\n1. Read the ANSWER.\n2. Note rude or curt wording.\n3. Pick the score.\nScale (integer 1 to 5):\n1 is the worst, 5 the best.",
	} {
		if !strings.Contains(user, want) {
			t.Errorf("prompt lacks %q:\n%s", want, user)
		}
	}
	if strings.Contains(user, "jane.doe@example.com") || strings.Contains(user, "7946") {
		t.Errorf("prompt not redacted:\n%s", user)
	}
	if messages(t, reqs[2])[1][1] != user {
		t.Error("the second record's prompt differs: steps were not reused")
	}
}

// Without logprobs in the reply, the score is the integer written, and says so.
func TestCustomJudgeParsedWithoutLogprobs(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{completion(`{"reasoning":"Curt.","score":2}`, 100, 9)}
	d := toneJudge()
	d.Steps = []string{"Read the ANSWER.", "Pick the score."}
	d.Min, d.Max, d.Examples = 0, 10, nil
	sc := judgeScorer(t, srv, d)
	res, err := sc.Score(context.Background(), toneRecord())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Value != 0.2 || res[0].Method != score.MethodParsed || res[0].Explanation != "judge score 2 of 10" {
		t.Fatalf("results %+v", res)
	}
	if len(srv.requests()) != 1 {
		t.Fatalf("%d requests: given steps need no generation", len(srv.requests()))
	}
}

// A server that rejects logprobs is asked again without them, and not asked for them again.
func TestLogprobsRejectedFallsBack(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{
		{status: 400, body: `{"error":{"message":"logprobs is not supported with this model","type":"invalid_request_error","param":"logprobs","code":null}}`},
		completion(`{"reasoning":"ok","score":5}`, 10, 5),
		completion(`{"reasoning":"ok","score":3}`, 10, 5),
	}
	d := toneJudge()
	d.Steps, d.Examples = []string{"Pick the score."}, nil
	sc := judgeScorer(t, srv, d)
	for _, want := range []float64{1, 0.5} {
		res, err := sc.Score(context.Background(), toneRecord())
		if err != nil || len(res) != 1 || res[0].Value != want || res[0].Method != score.MethodParsed {
			t.Fatalf("results %+v, %v; want %v", res, err, want)
		}
	}
	reqs := srv.requests()
	if len(reqs) != 3 || reqs[0]["logprobs"] != true {
		t.Fatalf("requests %d, first logprobs %v", len(reqs), reqs[0]["logprobs"])
	}
	for _, r := range reqs[1:] {
		if _, ok := r["logprobs"]; ok {
			t.Fatalf("asked for logprobs after the server rejected them: %v", r)
		}
	}
}

// SetJudges changes the judge's version; the generated steps are cached per version, so the
// changed judge asks for new ones.
func TestSetJudgesChangesVersion(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{
		completion(`{"steps":["Read it."]}`, 1, 1), completion(`{"reasoning":"ok","score":4}`, 1, 1),
		completion(`{"steps":["Read it twice."]}`, 1, 1), completion(`{"reasoning":"ok","score":4}`, 1, 1),
	}
	d := toneJudge()
	sc := judgeScorer(t, srv, d)
	res1, err := sc.Score(context.Background(), toneRecord())
	if err != nil {
		t.Fatal(err)
	}
	d.Criteria = "tone: whether the ANSWER is warm"
	if err := sc.SetJudges([]llm.JudgeDef{d}); err != nil {
		t.Fatal(err)
	}
	res2, err := sc.Score(context.Background(), toneRecord())
	if err != nil {
		t.Fatal(err)
	}
	if res1[0].JudgeVersion == res2[0].JudgeVersion || res2[0].JudgeVersion != sc.JudgeVersions()["judge_tone"] {
		t.Fatalf("versions %q then %q", res1[0].JudgeVersion, res2[0].JudgeVersion)
	}
	if n := len(srv.requests()); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
	if err := sc.SetJudges([]llm.JudgeDef{d, d}); err == nil {
		t.Fatal("a judge defined twice was accepted")
	}
}

// A judge with a scope scores only the records it applies to; one that needs the context
// skips records without documents.
func TestJudgeScopeAndMissingInputs(t *testing.T) {
	srv := newServer(t)
	d := toneJudge()
	d.Steps = []string{"Pick the score."}
	d.Applies = func(r *record.Record) bool { return r.Service == "billing" }
	ctxJudge := toneJudge()
	ctxJudge.Metric, ctxJudge.Steps, ctxJudge.Inputs = "judge_grounded", []string{"Pick."}, []string{llm.InputContext, llm.InputAnswer}
	sc := judgeScorer(t, srv, d, ctxJudge)
	res, err := sc.Score(context.Background(), toneRecord())
	if err != nil || len(res) != 0 || len(srv.requests()) != 0 {
		t.Fatalf("results %+v, err %v, %d requests", res, err, len(srv.requests()))
	}
}

func TestExpectedScore(t *testing.T) {
	tp := func(tok string, p float64) llm.TopLogprob { return llm.TopLogprob{Token: tok, Logprob: math.Log(p)} }
	tests := []struct {
		name string
		toks []llm.TokenLogprob
		want float64
		ok   bool
	}{
		{"none", nil, 0, false},
		{"value token with a space", []llm.TokenLogprob{{Token: `{"score":`}, {Token: " 2", Top: []llm.TopLogprob{tp(" 2", 0.5), tp(" 1", 0.5), tp("x", 0.9)}}, {Token: "}"}}, 1.5, true},
		{"renormalised over the scale", []llm.TokenLogprob{{Token: `{"score":`}, {Token: "5", Top: []llm.TopLogprob{tp("5", 0.2), tp("9", 0.6), tp("4", 0.2)}}}, 4.5, true},
		{"multi-digit split", []llm.TokenLogprob{{Token: `{"score":`}, {Token: "1", Top: []llm.TopLogprob{tp("1", 1)}}, {Token: "0"}}, 0, false},
		{"score key missing", []llm.TokenLogprob{{Token: `{"value":`}, {Token: "3"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := llm.ExpectedScore(tt.toks, 1, 5)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("ExpectedScore = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// Records scored at the same time wait for one generation of the steps instead of each
// asking.
func TestStepsGeneratedOnceUnderConcurrency(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{completion(`{"steps":["Read it.","Pick."]}`, 5, 5)}
	for range 8 {
		srv.chat = append(srv.chat, completion(`{"reasoning":"ok","score":3}`, 5, 5))
	}
	d := toneJudge()
	d.Examples = nil
	sc := judgeScorer(t, srv, d)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sc.Score(context.Background(), toneRecord())
			if err == nil && (len(res) != 1 || res[0].Value != 0.5) {
				err = fmt.Errorf("results %+v", res)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	steps := 0
	for _, r := range srv.requests() {
		if strings.Contains(messages(t, r)[1][1], "Write the evaluation steps") {
			steps++
		}
	}
	if n := len(srv.requests()); n != 9 || steps != 1 {
		t.Fatalf("%d requests, %d for steps; want 9 and 1", n, steps)
	}
}
