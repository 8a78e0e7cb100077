package nli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// piiRecord is a support answer whose claims and documents carry an e-mail address, phone
// numbers, card numbers (one with its CVV) and IBANs.
func piiRecord() *record.Record {
	r := &record.Record{TraceID: "t1", Service: "svc",
		Query: "Why was card 4111 1111 1111 1111 123 charged twice? Mail me at jane.doe@example.com.",
		Answer: "We refunded card 4111111111111111 123 to DE89 3704 0044 0532 0130 00 EUR [1]. " +
			"We will call you on (415) 555-0132 or mail jane.doe@example.com to confirm [2].",
		Documents: []record.Document{
			{ID: "a", Content: "Refund of 5555-5555-5555-4444 sent to DE89 3704 0044 0532 0130 00 EUR on request."},
			{ID: "b", Content: "Customer jane.doe@example.com, phone +49 30 1234567, IBAN GB82 WEST 1234 5698 7654 32."},
		}}
	r.Normalize(time.Now())
	return r
}

var piiOnWire = []string{"jane.doe@example.com", "1234567", "4111", "1111 1111", "11111111", "5555",
	"3704", "0532", "WEST", "5698", "555-0132"}

// TestPremisesAndHypothesesAreRedacted sends a record full of personal data to a
// text-embeddings-inference server for every NLI metric and checks that no request body
// carries it, with the built-in redaction and with the process's redactor.
func TestPremisesAndHypothesesAreRedacted(t *testing.T) {
	process, err := redact.New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, red := range []struct {
		name string
		fn   func(string) string
	}{{"built-in", nil}, {"process redactor", process.String}} {
		t.Run(red.name, func(t *testing.T) {
			srv := newTEI(t)
			s, err := New(Config{URL: srv.URL, Redact: red.fn})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Score(context.Background(), piiRecord())
			if err != nil || len(res) != 3 {
				t.Fatalf("Score = %+v, %v", res, err)
			}
			srv.mu.Lock()
			bodies := srv.bodies
			srv.mu.Unlock()
			if len(bodies) != 2 {
				t.Fatalf("%d requests, want faithfulness + citations", len(bodies))
			}
			wire, _ := json.Marshal(bodies)
			for _, p := range piiOnWire {
				if strings.Contains(string(wire), p) {
					t.Errorf("request contains %q:\n%s", p, wire)
				}
			}
			for _, want := range []string{"We refunded card [REDACTED:card] to [REDACTED:iban] EUR", "Customer [REDACTED:email], phone [REDACTED:phone]"} {
				if !strings.Contains(string(wire), want) {
					t.Errorf("requests lack %q:\n%s", want, wire)
				}
			}
		})
	}
	// Redaction off: the text goes out unchanged (an NLI server inside the trust boundary).
	srv := newTEI(t)
	s, err := New(Config{URL: srv.URL, Redact: llm.NoRedaction, Metrics: []string{score.Faithfulness}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Score(context.Background(), piiRecord()); err != nil {
		t.Fatal(err)
	}
	wire, _ := json.Marshal(srv.bodies)
	if !strings.Contains(string(wire), "jane.doe@example.com") {
		t.Errorf("NoRedaction changed the text:\n%s", wire)
	}
}

// TestURLSecretsStayOutOfErrors configures the server URL with a token in its query string
// and in its user info, and checks that neither appears in the error of a failed call (which
// the worker logs and writes into dead-letter headers), while the request still carries it.
func TestURLSecretsStayOutOfErrors(t *testing.T) {
	srv := newTEI(t)
	var gotQuery, gotUser string
	srv.override = []func(http.ResponseWriter, *http.Request) bool{func(w http.ResponseWriter, r *http.Request) bool {
		gotQuery = r.URL.RawQuery
		gotUser, _, _ = r.BasicAuth()
		http.Error(w, "bad input for jane.doe@example.com", http.StatusUnprocessableEntity)
		return true
	}}
	base := strings.Replace(srv.URL, "http://", "http://svc:pw-s3cret@", 1)
	s, err := New(Config{URL: base + "/?api_key=tok-s3cret", Metrics: []string{score.Faithfulness}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Score(context.Background(), piiRecord())
	if err == nil || !strings.Contains(err.Error(), "HTTP 422") {
		t.Fatalf("err = %v, want the 422", err)
	}
	if gotQuery != "api_key=tok-s3cret" || gotUser != "svc" {
		t.Fatalf("server saw query %q user %q: the credentials must still be sent", gotQuery, gotUser)
	}
	for _, secret := range []string{"tok-s3cret", "pw-s3cret", "jane.doe@example.com"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
	}

	// A network error wraps the URL (*url.Error): it is shown without its secrets.
	dead := strings.Replace(srv.URL, "http://", "http://svc:pw-s3cret@", 1)
	srv.Close()
	s, err = New(Config{URL: dead + "?api_key=tok-s3cret", Metrics: []string{score.Faithfulness}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Score(context.Background(), piiRecord())
	var f score.Failure
	if !errors.As(err, &f) || !llm.Retryable(f[0].Err) {
		t.Fatalf("err = %v, want a retryable network failure", err)
	}
	t.Logf("network error: %v", err)
	for _, secret := range []string{"tok-s3cret", "pw-s3cret", "api_key"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains %q", err, secret)
		}
	}
}
