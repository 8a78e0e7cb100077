package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// pii is realistic support-chat text with an e-mail address, a Luhn-valid card number, an
// IBAN (mod-97 valid), an IP address and a phone number.
const pii = "Hi, I'm jane.doe@example.com, my card 4111 1111 1111 1111 was charged twice; " +
	"refund to DE89 3704 0044 0532 0130 00 please. I logged in from 203.0.113.7, call me on +49 30 1234567."

// TestJudgePromptsAreRedactedByDefault sends a record full of personal data through a real
// OpenAI-protocol judge (an httptest server) and checks none of it reaches the server, while
// the redaction markers and the rest of the text do.
func TestJudgePromptsAreRedactedByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		redact func(string) string
		leaks  bool
	}{
		{"default", nil, false},
		{"explicitly off", llm.NoRedaction, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			s.chat = []reply{completion(`{"reasoning":"fine","score":4}`, 10, 5)}
			b := New(Config{BaseURL: s.URL + "/v1/", Model: "judge-1"})
			sc, err := llm.NewScorer(llm.NewJudge(b, llm.JudgeOptions{Redact: tc.redact}), llm.ScorerOptions{Metrics: []string{score.RubricRelevance}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := sc.Score(context.Background(), &record.Record{
				TraceID: "0123456789abcdef0123456789abcdef", Service: "support", Query: pii, Answer: "Refund issued to " + pii,
			})
			if err != nil || len(res) != 1 || res[0].Value != 0.75 {
				t.Fatalf("Score = %+v, %v", res, err)
			}
			reqs := s.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			wire, _ := json.Marshal(reqs[0])
			sent := string(wire)
			secrets := []string{"jane.doe@example.com", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00", "203.0.113.7", "1234567"}
			for _, p := range secrets {
				if strings.Contains(sent, p) != tc.leaks {
					t.Errorf("request contains %q = %v, want %v", p, !tc.leaks, tc.leaks)
				}
			}
			if !tc.leaks {
				for _, m := range []string{"[REDACTED:email]", "[REDACTED:card]", "[REDACTED:iban]", "[REDACTED:ip]", "[REDACTED:phone]", "charged twice"} {
					if strings.Count(sent, m) != 2 { // once in the question, once in the answer
						t.Errorf("request holds %q %d times, want 2:\n%s", m, strings.Count(sent, m), sent)
					}
				}
			}
		})
	}
}

// piiRecord is a support conversation carrying an e-mail address, phone numbers, card
// numbers (one with its CVV) and IBANs in the query, answer, reference and documents.
func piiRecord() *record.Record {
	return &record.Record{
		TraceID: "0123456789abcdef0123456789abcdef", Service: "support",
		Query: "I'm jane.doe@example.com, phone +49 30 1234567. Why was my card 4111 1111 1111 1111 123 charged twice?",
		Answer: "Sorry Jane! We refunded card 4111111111111111 123 to DE89 3704 0044 0532 0130 00 EUR; " +
			"we will call (415) 555-0132 to confirm.",
		Reference: "The duplicate charge on 5555-5555-5555-4444 was refunded to GB82 WEST 1234 5698 7654 32; " +
			"confirmation goes to jane.doe@example.com.",
		Documents: []record.Document{{ID: "kb-1", Content: "Refunds go back to the card or to the IBAN on file, e.g. DE89 3704 0044 0532 0130 00."}},
	}
}

// piiOnWire lists what must not reach the wire from piiRecord, including the digits a
// partial redaction would leave.
var piiOnWire = []string{"jane.doe@example.com", "1234567", "4111", "1111 1111", "11111111", "5555",
	"3704", "0532", "WEST", "5698", "555-0132"}

func checkNoPII(t *testing.T, what string, body any) {
	t.Helper()
	wire, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range piiOnWire {
		if strings.Contains(string(wire), p) {
			t.Errorf("%s request contains %q:\n%s", what, p, wire)
		}
	}
}

// TestEmbeddingsInputsAreRedacted runs answer_relevancy and answer_similarity with an
// embeddings model against the OpenAI wire format and checks that neither the chat nor the
// embeddings request carries the record's personal data, with the built-in redaction and
// with the process's redactor.
func TestEmbeddingsInputsAreRedacted(t *testing.T) {
	process, err := redact.New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, red := range []struct {
		name string
		fn   func(string) string
	}{{"built-in", nil}, {"process redactor", process.String}} {
		t.Run(red.name, func(t *testing.T) {
			srv := newServer(t)
			srv.chat = []reply{completion(`{"questions":["Why was the card charged twice?","Was it refunded?"],"noncommittal":false}`, 100, 20)}
			srv.emb = []reply{
				embeddingsReply([][]float64{{1, 0}, {1, 0}, {0.6, 0.8}}, 30), // relevancy: query + 2 questions
				embeddingsReply([][]float64{{3, 4}, {4, 3}}, 20),             // similarity: answer, reference
			}
			sc, _ := newScorer(t, srv, []string{score.AnswerRelevancy, score.AnswerSimilarity}, llm.JudgeOptions{Redact: red.fn}, true)
			res, err := sc.Score(context.Background(), piiRecord())
			if err != nil || len(res) != 2 {
				t.Fatalf("Score = %+v, %v", res, err)
			}
			reqs := srv.requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want chat + 2 embeddings", len(reqs))
			}
			for i, req := range reqs {
				checkNoPII(t, fmt.Sprintf("request %d", i), req)
			}
			// What is sent is still the text, with markers in place of the data.
			rel, sim := fmt.Sprint(reqs[1]["input"]), fmt.Sprint(reqs[2]["input"])
			for _, want := range []string{"[REDACTED:email]", "[REDACTED:phone]", "[REDACTED:card] charged twice?"} {
				if !strings.Contains(rel, want) {
					t.Errorf("relevancy embeddings input %q lacks %q", rel, want)
				}
			}
			for _, want := range []string{"refunded card [REDACTED:card] to [REDACTED:iban] EUR", "[REDACTED:iban]; confirmation"} {
				if !strings.Contains(sim, want) {
					t.Errorf("similarity embeddings input %q lacks %q", sim, want)
				}
			}
		})
	}
}

// TestBaseURLSecretsStayOutOfErrors points the backend, with a key in the base URL's query
// and a password in its user info, at a closed port: the network errors of the chat and the
// embeddings call (logged, and written into dead-letter headers) show neither.
func TestBaseURLSecretsStayOutOfErrors(t *testing.T) {
	srv := newServer(t)
	base := strings.Replace(srv.URL, "http://", "http://svc:pw-s3cret@", 1) + "/v1/?api-key=key-s3cret"
	srv.Close()
	b := New(Config{BaseURL: base, Model: "judge-1", EmbeddingsModel: "embed-1"})
	_, chatErr := b.Complete(context.Background(), llm.Request{System: "s", Messages: []llm.Message{{Role: "user", Content: "u"}}})
	_, _, embErr := b.Embedder().Embed(context.Background(), []string{"x"})
	for name, err := range map[string]error{"chat": chatErr, "embeddings": embErr} {
		if err == nil || !llm.Retryable(err) {
			t.Fatalf("%s: err = %v, want a retryable network error", name, err)
		}
		for _, secret := range []string{"pw-s3cret", "key-s3cret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s error %q contains %q", name, err, secret)
			}
		}
	}
}

// TestNumberAtTheCutIsRedacted puts a card number across the point where a long answer is
// cut to the prompt size: cutting first and redacting the prompt afterwards sent the first
// twelve digits, too few for the card detector; the prompt and the embeddings input must
// carry none of them.
func TestNumberAtTheCutIsRedacted(t *testing.T) {
	filler := strings.Repeat("Refund status checked. ", 4)   // 92 bytes
	answer := filler + "Card 4111111111111111 was refunded." // the cut falls after "Card 411111111111"
	srv := newServer(t)
	srv.chat = []reply{completion(`{"reasoning":"fine","score":4}`, 1, 1)}
	srv.emb = []reply{embeddingsReply([][]float64{{3, 4}, {4, 3}}, 5)}
	b := New(Config{BaseURL: srv.URL + "/v1/", Model: "judge-1", EmbeddingsModel: "embed-1"})
	sc, err := llm.NewScorer(llm.NewJudge(b, llm.JudgeOptions{}), llm.ScorerOptions{
		Metrics: []string{score.RubricRelevance, score.AnswerSimilarity}, Embedder: b.Embedder(), MaxTextBytes: len(filler) + len("Card 411111111111")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.Score(context.Background(), &record.Record{TraceID: "0123456789abcdef0123456789abcdef",
		Query: "Was my card refunded?", Answer: answer, Reference: answer})
	if err != nil || len(res) != 2 {
		t.Fatalf("Score = %+v, %v", res, err)
	}
	for i, req := range srv.requests() {
		wire, _ := json.Marshal(req)
		if strings.Contains(string(wire), "4111") {
			t.Errorf("request %d carries part of the card:\n%s", i, wire)
		}
	}
}
