package service_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

const judgesServiceConfig = `
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1}
scoring:
  backend: builtin
  metrics: [faithfulness]
  openai: {base_url: "%s/v1/", model: judge-1}
drift: {detectors: []}
judges:
  - name: tone
    criteria: %s
    inputs: [question, answer]
    backend: openai
`

// A configured judge runs through the whole pipeline: its steps are generated once, its
// results carry its version, and a reload that changes its criteria changes the version of the
// results that follow.
func TestJudgeEndToEndAndReload(t *testing.T) {
	judge := service.NewFakeJudge(t, func(body string) string {
		if strings.Contains(body, "Write the evaluation steps") {
			return `{"steps":["Read the ANSWER.","Pick the score."]}`
		}
		return `{"reasoning":"fine","score":4}`
	})
	e := startReloadEnv(t, fmt.Sprintf(judgesServiceConfig, judge.URL, "whether the ANSWER is polite"))
	v1 := e.app.Judges.Versions()["judge_tone"]
	if v1 == "" {
		t.Fatalf("judge versions %v", e.app.Judges.Versions())
	}

	post := func(n int) {
		t.Helper()
		body := fmt.Sprintf(`{"trace_id":"abab00000000000000000000000000%02d","service":"shop","query":"Can I return shoes?","answer":"Yes, within 30 days."}`, n)
		resp, err := http.Post(e.base+"/api/v1/records", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST = %d", resp.StatusCode)
		}
	}
	versions := func() map[string]string { // trace id → judge_tone's version
		resp, err := http.Get(e.base + "/api/v1/scores")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Scores []struct {
				TraceID      string  `json:"trace_id"`
				Metric       string  `json:"metric"`
				Value        float64 `json:"value"`
				Method       string  `json:"method"`
				JudgeVersion string  `json:"judge_version"`
			} `json:"scores"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range body.Scores {
			if s.Metric == "judge_tone" {
				if s.Value != 0.75 || s.Method != "parsed" {
					t.Errorf("judge_tone %+v", s)
				}
				out[s.TraceID] = s.JudgeVersion
			}
		}
		return out
	}

	post(1)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "judge_tone of the first record", func() bool { return versions()["abab0000000000000000000000000001"] != "" })
	if got := versions()["abab0000000000000000000000000001"]; got != v1 {
		t.Fatalf("first result version %q, want %q", got, v1)
	}

	e.write(t, fmt.Sprintf(judgesServiceConfig, judge.URL, "whether the ANSWER is warm"))
	if code, body := e.reload(t); code != http.StatusOK || len(body["restart_required"]) != 0 {
		t.Fatalf("reload = %d %v", code, body)
	}
	v2 := e.app.Judges.Versions()["judge_tone"]
	if v2 == v1 || v2 == "" {
		t.Fatalf("version after the reload %q, before %q", v2, v1)
	}
	post(2)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "judge_tone of the second record", func() bool { return versions()["abab0000000000000000000000000002"] != "" })
	if got := versions()["abab0000000000000000000000000002"]; got != v2 {
		t.Fatalf("second result version %q, want %q", got, v2)
	}
	prompts := judge.Sent()
	// Steps once per version, one rating per record.
	var steps, ratings int
	for _, p := range prompts {
		if strings.Contains(p, "Write the evaluation steps") {
			steps++
		} else {
			ratings++
		}
	}
	if steps != 2 || ratings != 2 || !strings.Contains(prompts[len(prompts)-1], "Evaluate whether the ANSWER is warm.") {
		t.Fatalf("%d steps requests, %d ratings; last prompt %s", steps, ratings, prompts[len(prompts)-1])
	}
}
