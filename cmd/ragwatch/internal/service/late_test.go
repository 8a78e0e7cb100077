package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/export"
)

// postAccepted posts body to the app's path and fails the test unless it is accepted.
func postAccepted(t *testing.T, e *env, path, body string) {
	t.Helper()
	resp, err := http.Post(e.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s = %d %s", path, resp.StatusCode, answer)
	}
}

// series sums the scraped series of name whose labels include every one of want
// (`variant="candidate"`).
func series(m map[string]float64, name string, want ...string) float64 {
	sum := 0.0
	for k, v := range m {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// TestLateFeedbackCountsForItsVariant: feedback posted after its record (the usual case) is
// counted under the record's variant, as feedback that came with the record is.
func TestLateFeedbackCountsForItsVariant(t *testing.T) {
	e := startEnv(t, testConfig(t))
	const trace = "0000000000000000000000000000c701"
	postAccepted(t, e, "/api/v1/records", `{"trace_id":"`+trace+`","service":"chat","variant":"candidate","query":"q","answer":"a"}`)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the record", func() bool { return e.sink.get(trace) != nil })
	postAccepted(t, e, "/api/v1/feedback", `{"trace_id":"`+trace+`","score":-1}`)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "late feedback counted under its variant", func() bool {
		return series(scrape(t, e.base), "ragwatch_feedback_total", `sentiment="negative"`, `variant="candidate"`) == 1
	})
	if n := series(scrape(t, e.base), "ragwatch_feedback_total", `variant=""`); n != 0 {
		t.Fatalf("feedback counted without a variant: %v", n)
	}
}

// lateConfig runs in-process workers on every record (rate 1) with the builtin judge and the
// retrieval metrics at k = 1 and 3, and the export store on.
func lateConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	cfg.Scoring.Workers = 2
	cfg.Scoring.Metrics = []string{"faithfulness", "mrr", "precision@k", "ndcg@k"}
	cfg.Scoring.RetrievalK = []int{1, 3}
	cfg.Alerting.Agreement.MinSamples = 1
	cfg.Export.Enabled = true
	return cfg
}

// exported reads GET /api/v1/export.
func exported(t *testing.T, e *env) map[string]export.Line {
	t.Helper()
	resp, err := http.Get(e.base + "/api/v1/export?size=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]export.Line{}
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var l export.Line
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		out[l.TraceID] = l
	}
	return out
}

// TestLateLabelsGiveWhatEarlyLabelsGive follows docs/judges.md's loop: records arrive, are
// exported, labelled, and the labels posted back — after their records. A late relevance label
// gives the retrieval metrics an early one gives (same values), a late values label on a record
// never labelled before pairs with the judge's score (judge agreement), and the exported record
// carries both labels.
func TestLateLabelsGiveWhatEarlyLabelsGive(t *testing.T) {
	e := startEnv(t, lateConfig(t))
	const early, late = "0000000000000000000000000000e001", "0000000000000000000000000000e002"
	rec := func(trace string) string {
		return `{"trace_id":"` + trace + `","service":"chat","variant":"candidate","query":"What is the refund window?","answer":"30 days [1].",` +
			`"documents":[{"id":"d1","content":"Shipping takes 5 days."},{"id":"d2","content":"Refunds within 30 days."},{"id":"d3","content":"Returns are free."}]}`
	}
	relevance := `"relevance":{"d2":2,"d3":1}`
	postAccepted(t, e, "/api/v1/labels", `{"trace_id":"`+early+`",`+relevance+`}`)
	postAccepted(t, e, "/api/v1/records", rec(early))
	postAccepted(t, e, "/api/v1/records", rec(late))
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "both records", func() bool {
		return e.sink.get(early) != nil && e.sink.get(late) != nil
	})
	// The judge scored the late record before any label: wait for its faithfulness.
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the late record scored", func() bool {
		_, ok := exported(t, e)[late].Scores["faithfulness"]
		return ok
	})
	postAccepted(t, e, "/api/v1/labels", `{"trace_id":"`+late+`",`+relevance+`,"values":{"faithfulness":1},"labeler":"ann"}`)

	var lines map[string]export.Line
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, "retrieval metrics of the late label", func() error {
		lines = exported(t, e)
		for _, m := range []string{"mrr", "precision@1", "precision@3", "ndcg@3"} {
			ev, eok := lines[early].Scores[m]
			lv, lok := lines[late].Scores[m]
			if !eok || !lok || ev != lv {
				return fmt.Errorf("%s: early %v (%v), late %v (%v)", m, ev, eok, lv, lok)
			}
		}
		return nil
	})
	if got := lines[late].Scores["mrr"]; got != 0.5 {
		t.Fatalf("late mrr = %v, want 0.5 (first relevant document second)", got)
	}
	l := lines[late].Labels
	if l == nil || l.Relevance["d2"] != 2 || l.Values["faithfulness"] != 1 || l.Labeler != "ann" {
		t.Fatalf("exported late record's labels = %+v", l)
	}
	if l := lines[early].Labels; l == nil || l.Relevance["d3"] != 1 {
		t.Fatalf("exported early record's labels = %+v", l)
	}
	m := scrape(t, e.base)
	if n := m[`ragwatch_late_relevance_labels_total{outcome="scored"}`]; n != 1 {
		t.Errorf("late relevance labels scored = %v, want 1", n)
	}
	// The retrieval results of the late label reach the score histogram under the record's
	// variant, as the early label's do.
	if n := series(m, "ragwatch_eval_score_count", `metric="mrr"`, `variant="candidate"`); n != 2 {
		t.Errorf("mrr observations for variant candidate = %v, want 2", n)
	}
	// The values label on a record never labelled before pairs with the judge's score.
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, "the late label paired", func() error {
		if n := testutil.Sum(t, e.app.Registry, "ragwatch_judge_agreement_pairs", map[string]string{"metric": "faithfulness"}); n != 1 {
			return fmt.Errorf("%v faithfulness pairs", n)
		}
		return nil
	})
}

// TestExportSurvivesRestart: the export store's records, with their scores and the labels
// posted after them, are in the export bucket, so the next process on the same store serves
// them at GET /api/v1/export, and a relevance label posted then (the join remembers the record
// with feedback.persist_seen) is scored against the record read back.
func TestExportSurvivesRestart(t *testing.T) {
	cfg := lateConfig(t)
	cfg.Feedback.PersistSeen = true
	first := startEnv(t, cfg)
	const trace = "0000000000000000000000000000e101"
	postAccepted(t, first, "/api/v1/records", `{"trace_id":"`+trace+`","service":"chat","variant":"candidate","query":"What is the refund window?",`+
		`"answer":"30 days [1].","documents":[{"id":"d1","content":"Refunds within 30 days; mail jane.doe@example.com."},{"id":"d2","content":"Returns are free."}]}`)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the record scored", func() bool {
		_, ok := exported(t, first)[trace].Scores["faithfulness"]
		return ok
	})
	postAccepted(t, first, "/api/v1/labels", `{"trace_id":"`+trace+`","relevance":{"d1":1},"values":{"faithfulness":1},"labeler":"ann"}`)
	var before export.Line
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the label and mrr", func() bool {
		before = exported(t, first)[trace]
		_, ok := before.Scores["mrr"]
		return ok && before.Labels != nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	next := startEnv(t, cfg) // the same store directory
	after, ok := exported(t, next)[trace]
	if !ok {
		t.Fatal("the exported record did not survive the restart")
	}
	if !reflect.DeepEqual(after.Scores, before.Scores) || !reflect.DeepEqual(after.Labels, before.Labels) ||
		after.Answer != before.Answer || len(after.Documents) != 2 || after.Documents[0].Content != before.Documents[0].Content {
		t.Fatalf("after restart:\n%+v\nwant\n%+v", after, before)
	}
	if strings.Contains(after.Documents[0].Content, "jane.doe") {
		t.Fatalf("unredacted content: %q", after.Documents[0].Content)
	}
	if before.Scores["mrr"] != 1 {
		t.Fatalf("mrr before the restart = %v, want 1", before.Scores["mrr"])
	}
	postAccepted(t, next, "/api/v1/labels", `{"trace_id":"`+trace+`","relevance":{"d1":0,"d2":1}}`)
	testutil.CheckFor(t, 10*time.Second, 10*time.Millisecond, "mrr of the label posted after the restart", func() error {
		l := exported(t, next)[trace]
		if l.Scores["mrr"] != 0.5 || l.Labels.Relevance["d2"] != 1 || l.Labels.Values["faithfulness"] != 1 {
			return fmt.Errorf("scores %v, labels %+v", l.Scores, l.Labels)
		}
		return nil
	})
}
