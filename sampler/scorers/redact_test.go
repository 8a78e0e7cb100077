package scorers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestWithRedactReachesNLI checks that the process's redactor (WithRedact) filters what the
// NLI scorer sends, not only judge prompts: a custom pattern applies to premises and
// hypotheses alike.
func TestWithRedactReachesNLI(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Inputs [][]string }
		json.NewDecoder(r.Body).Decode(&body)
		var out []string
		for _, in := range body.Inputs {
			mu.Lock()
			sent = append(sent, in...)
			mu.Unlock()
			out = append(out, `[{"label":"entailment","score":0.95}]`)
		}
		io.WriteString(w, "["+strings.Join(out, ",")+"]")
	}))
	defer srv.Close()
	hide := func(s string) string { return strings.ReplaceAll(s, "Paris", "[REDACTED:city]") }
	ss, err := Build(parse(t, "scoring:\n  nli: {backend: http, url: "+srv.URL+"}\n  retrieval_k: []\n"), nil, nil, WithRedact(hide))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss[1].Score(context.Background(), rec()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) == 0 {
		t.Fatal("nothing sent")
	}
	marked := 0
	for _, s := range sent {
		if strings.Contains(s, "Paris") {
			t.Errorf("NLI input %q not filtered by the process redactor", s)
		}
		marked += strings.Count(s, "[REDACTED:city]")
	}
	if marked == 0 {
		t.Errorf("no marker in %q", sent)
	}
}
