package slack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
	"github.com/ragwatch/ragwatch/config"
)

func TestWireFormat(t *testing.T) {
	var bodies []string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/services/T000/B000/XXXXSECRET" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.WriteHeader(status)
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	n := New(Config{Name: "chat", URL: config.Secret(srv.URL + "/services/T000/B000/XXXXSECRET")}, srv.Client())
	ctx := context.Background()
	if _, err := n.Notify(ctx, fixture.Alert()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(ctx, fixture.Resolved()); err != nil {
		t.Fatal(err)
	}
	want := `{"text":"[FIRING] RagwatchSLOViolated citation-precision (search, page): SLO citation-precision: citation_precision is 0.52 for search (alert below 0.7)",` +
		`"blocks":[{"type":"header","text":{"type":"plain_text","text":"[FIRING] RagwatchSLOViolated citation-precision (search, page)"}},` +
		`{"type":"section","text":{"type":"mrkdwn","text":"The weighted mean of citation_precision for service search over the last 15m is 0.52."}},` +
		`{"type":"section","fields":[{"type":"mrkdwn","text":"*Value*\n0.52"},{"type":"mrkdwn","text":"*Threshold*\n\u0026lt; 0.7"},` +
		`{"type":"mrkdwn","text":"*Window*\n15m"},{"type":"mrkdwn","text":"*Samples*\n212"},{"type":"mrkdwn","text":"*95% interval*\n[0.48, 0.56] (95%)"}]},` +
		`{"type":"section","text":{"type":"mrkdwn","text":"*Diagnosis*\nretrieval_shift: retrieval scores and citation precision fall together: the index or embeddings changed (citation_precision_before=0.9, citation_precision_now=0.52)"}},` +
		`{"type":"section","text":{"type":"mrkdwn","text":"*Worst requests*\n• \u003chttps://tempo.example/t/4bf92f3577b34da6a3ce929d0e0e4736|4bf92f3577b34da6a3ce929d0e0e4736\u003e value 0.1\n• 0af7651916cd43dd8448eb211c80319c value 0.2"}},` +
		`{"type":"context","elements":[{"type":"mrkdwn","text":"\u003chttps://runbooks.example/cp|Runbook\u003e · \u003chttps://grafana.example/d/ragwatch|Dashboard\u003e"}]}]}`
	if bodies[0] != want {
		t.Fatalf("firing:\n%s\nwant\n%s", bodies[0], want)
	}
	if !strings.HasPrefix(bodies[1], `{"text":"[RESOLVED] RagwatchSLOViolated citation-precision (search, page): `) {
		t.Fatalf("resolved: %s", bodies[1])
	}
	for code, wantRetry := range map[int]bool{503: true, 429: true, 400: false} {
		status = code
		retry, err := n.Notify(ctx, fixture.Alert())
		if err == nil || retry != wantRetry || strings.Contains(err.Error(), "XXXXSECRET") {
			t.Errorf("HTTP %d: retry=%v err=%v", code, retry, err)
		}
	}
	srv.Close()
	retry, err := n.Notify(ctx, fixture.Alert())
	if err == nil || !retry || strings.Contains(err.Error(), "XXXXSECRET") || strings.Contains(err.Error(), "/services/") {
		t.Fatalf("network error: retry=%v err=%v (must retry and never show the URL)", retry, err)
	}
}

// TestChangeFields: a change alert's message leads with the change time and shows both levels.
func TestChangeFields(t *testing.T) {
	m := New(Config{Name: "chat"}, nil).Message(fixture.Change())
	var fields []string
	for _, b := range m.Blocks {
		for _, f := range b.Fields {
			fields = append(fields, f.Text)
		}
	}
	if len(fields) < 3 || fields[0] != "*Changed at*\n2026-03-01T11:59:20Z" ||
		fields[len(fields)-2] != "*Before*\n0.95 [0.94, 0.96] (95%, n=12000)" || fields[len(fields)-1] != "*After*\n0.55 [0.5, 0.6] (95%, n=400)" {
		t.Fatalf("fields: %q", fields)
	}
}
