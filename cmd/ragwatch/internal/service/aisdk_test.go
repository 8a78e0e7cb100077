package service_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// aisdkRun is one run of testdata/aisdk/rag.mjs: what its record must say.
type aisdkRun struct {
	file, traceID, route string
	query, answer        string
	docs                 []record.Document // nil: the run shows no retrieval
	usage                record.Usage
}

func aisdkDoc(id string, score float64) record.Document {
	content := map[string]string{
		"doc-refund":   "Refunds are issued within 14 days of purchase if the item is unused.",
		"doc-shipping": "Standard shipping takes 3 to 5 business days within the EU.",
		"doc-warranty": "Every device carries a two-year warranty covering manufacturing defects.",
		"doc-returns":  "Returns are free: print the prepaid label from your account page.",
	}[id]
	return record.Document{ID: id, Content: content, Score: &score}
}

// aisdkRuns are the runs recorded in testdata/aisdk (README.md there): the model calls the
// retrieval tool, then answers citing the top document.
var aisdkRuns = []aisdkRun{
	{"01-generateText.json", "c306f659a00d09f84c0b2a5e0620afd4", "support-chat", "How long do I have to ask for a refund?",
		"Refunds are issued within 14 days of purchase if the item is unused. [doc-refund]",
		[]record.Document{aisdkDoc("doc-refund", 0.5), aisdkDoc("doc-shipping", 0.5)}, record.Usage{InputTokens: 300, OutputTokens: 43}},
	{"02-generateText.json", "7d3cf03955a2af778e59d34dd1d6d414", "support-chat", "How long does shipping take?",
		"Standard shipping takes 3 to 5 business days within the EU. [doc-shipping]",
		[]record.Document{aisdkDoc("doc-shipping", 0.6), aisdkDoc("doc-refund", 0.5)}, record.Usage{InputTokens: 300, OutputTokens: 43}},
	{"03-generateText.json", "400a972a601ee19c74a55ca9f205f7cd", "support-chat", "What does the warranty cover?",
		"Every device carries a two-year warranty covering manufacturing defects. [doc-warranty]",
		[]record.Document{aisdkDoc("doc-warranty", 0.6), aisdkDoc("doc-refund", 0.5)}, record.Usage{InputTokens: 300, OutputTokens: 43}},
	{"04-generateText.json", "c0b5ec315c75f2939c9b70003ed4edfc", "support-chat", "How do I return an item?",
		"Refunds are issued within 14 days of purchase if the item is unused. [doc-refund]",
		[]record.Document{aisdkDoc("doc-refund", 0.6), aisdkDoc("doc-shipping", 0.5)}, record.Usage{InputTokens: 300, OutputTokens: 43}},
	{"05-generateText.json", "6c03bcf9b88bb14f5d41b5135031596b", "support-chat", "Is the return label free?",
		"Returns are free: print the prepaid label from your account page. [doc-returns]",
		[]record.Document{aisdkDoc("doc-returns", 0.7), aisdkDoc("doc-refund", 0.5)}, record.Usage{InputTokens: 300, OutputTokens: 43}},
	{"06-streamText.json", "95e35c669612a577b6e4ed6acc8e31d8", "support-stream", "How long does shipping take?",
		"Standard shipping takes 3 to 5 business days within the EU. [doc-shipping]",
		[]record.Document{aisdkDoc("doc-shipping", 0.6), aisdkDoc("doc-refund", 0.5)}, record.Usage{InputTokens: 300, OutputTokens: 43}},
	// generateObject after the app's own search: the documents are in the prompt only (the
	// search's embed call is a trace of its own, not RAG); the answer is the object's.
	{"07-generateObject.json", "9059122cef5ddad6f9008f0cb1659d4e", "support-object", "What does the warranty cover?",
		"Every device carries a two-year warranty covering manufacturing defects. [doc-warranty]",
		nil, record.Usage{InputTokens: 160, OutputTokens: 30}},
	// A plain, uninstrumented retrieval function: the documents are only in the prompt.
	{"08-plain-retrieval.json", "9070c6b38978f321694528e0e8556210", "support-plain", "Is the return label free?",
		"Returns are free: print the prepaid label from your account page. [doc-returns]",
		nil, record.Usage{InputTokens: 180, OutputTokens: 25}},
}

// TestAISDKRecordedTraces replays the OTLP/HTTP JSON bodies the Vercel AI SDK (ai 5.0.277)
// exported for a RAG app in the shape of its RAG guide (testdata/aisdk) into the running
// service, as the app sent them: every run gives one record with its question, documents
// and answer, and every record is judged by the builtin scorer.
func TestAISDKRecordedTraces(t *testing.T) {
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	cfg.Variants.Attributes = []string{"ai.telemetry.metadata.promptVersion"}
	e := startEnv(t, cfg)
	url := "http://" + e.app.Addrs().OTLPHTTP + "/v1/traces"
	for _, run := range aisdkRuns {
		body, err := os.ReadFile(filepath.Join("testdata", "aisdk", run.file))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s = %d %s", run.file, resp.StatusCode, reply)
		}
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "a record per run", func() bool { return e.sink.len() == len(aisdkRuns) })

	for _, run := range aisdkRuns {
		t.Run(run.file, func(t *testing.T) {
			r := e.sink.get(run.traceID)
			if r == nil {
				t.Fatalf("no record for trace %s", run.traceID)
			}
			if r.Service != "support-rag" || r.Query != run.query || r.Answer != run.answer || r.Model != "gpt-4o-mini-2024-07-18" ||
				r.Usage != run.usage || r.UserID != "user-1" || r.Variant != "v2" || r.Attributes["route"] != run.route {
				t.Errorf("record:\n got %s", asJSON(t, r))
			}
			if g, w := fmt.Sprint(docsOf(r.Documents)), fmt.Sprint(docsOf(run.docs)); g != w {
				t.Errorf("documents:\n got %s\nwant %s", g, w)
			}
			if run.docs != nil {
				if len(r.Citations) != 1 || len(r.Citations[0].DocumentIDs) != 1 || r.Citations[0].DocumentIDs[0] != run.docs[0].ID {
					t.Errorf("citations %+v, want the top document", r.Citations)
				}
				if r.Latency.Retrieval <= 0 || r.Latency.Generation <= 0 || r.Latency.Total < r.Latency.Retrieval+r.Latency.Generation {
					t.Errorf("latency %+v", r.Latency)
				}
			}
		})
	}

	// Judged: every record by the builtin scorer; the six with documents for faithfulness and
	// citations, all eight for answer relevancy.
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "every record judged", func() error {
		got := scrape(t, e.base)
		score := func(stat, metric string) float64 {
			return got[fmt.Sprintf(`ragwatch_eval_score_%s{metric=%q,service="support-rag",variant="v2"}`, stat, metric)]
		}
		ok := got[`ragwatch_scoring_attempts_total{outcome="ok",scorer="builtin"}`]
		if ok != float64(len(aisdkRuns)) || score("count", "faithfulness") != 6 || score("count", "answer_relevancy") != 8 ||
			score("count", "citation_precision") != 6 {
			return fmt.Errorf("scored %v; counts faithfulness %v, answer_relevancy %v, citation_precision %v",
				ok, score("count", "faithfulness"), score("count", "answer_relevancy"), score("count", "citation_precision"))
		}
		// The answers quote their top document and cite it.
		if f := score("sum", "faithfulness") / 6; f < 0.9 || score("sum", "citation_precision") != 6 {
			return fmt.Errorf("mean faithfulness %v, citation precision sum %v", f, score("sum", "citation_precision"))
		}
		if n := got[`ragwatch_records_total{outcome="not_rag"}`]; n != 1 { // the embed call of 07
			return fmt.Errorf("not_rag = %v, want 1", n)
		}
		return nil
	})
}

// docsOf prints documents as id:score:content.
func docsOf(docs []record.Document) []string {
	var out []string
	for _, d := range docs {
		s := "-"
		if d.Score != nil {
			s = fmt.Sprint(*d.Score)
		}
		out = append(out, d.ID+":"+s+":"+d.Content)
	}
	return out
}
