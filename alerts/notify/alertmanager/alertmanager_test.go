package alertmanager

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
	"github.com/ragwatch/ragwatch/config"
)

func TestWireFormat(t *testing.T) {
	var bodies []string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v2/alerts" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.WriteHeader(status)
	}))
	defer srv.Close()
	now := fixture.Start.Add(5 * time.Minute)
	n := New(Config{Name: "am", URL: config.Secret(srv.URL + "/"), RepeatInterval: time.Minute}, srv.Client(), func() time.Time { return now })
	ctx := context.Background()
	if retry, err := n.Notify(ctx, fixture.Alert()); err != nil || retry {
		t.Fatal(retry, err)
	}
	if retry, err := n.Notify(ctx, fixture.Resolved()); err != nil || retry {
		t.Fatal(retry, err)
	}
	want := []string{
		`[{"labels":{"alertname":"RagwatchSLOViolated","service":"search","severity":"page","slo":"citation-precision","team":"search"},` +
			`"annotations":{"dashboard_url":"https://grafana.example/d/ragwatch","description":"The weighted mean of citation_precision for service search over the last 15m is 0.52.",` +
			`"diagnosis":"retrieval_shift: retrieval scores and citation precision fall together: the index or embeddings changed (citation_precision_before=0.9, citation_precision_now=0.52)","diagnosis_pattern":"retrieval_shift",` +
			`"evidence":"4bf92f3577b34da6a3ce929d0e0e4736 value=0.1 https://tempo.example/t/4bf92f3577b34da6a3ce929d0e0e4736\n0af7651916cd43dd8448eb211c80319c value=0.2",` +
			`"interval":"[0.48, 0.56] (95%)","n":"212","runbook_url":"https://runbooks.example/cp",` +
			`"summary":"SLO citation-precision: citation_precision is 0.52 for search (alert below 0.7)","threshold":"\u003c 0.7","value":"0.52","window":"15m"},` +
			`"startsAt":"2026-03-01T12:00:00Z","endsAt":"2026-03-01T12:09:00Z","generatorURL":"https://grafana.example/d/ragwatch"}]`,
		`"startsAt":"2026-03-01T12:00:00Z","endsAt":"2026-03-01T12:20:00Z"`,
	}
	if len(bodies) != 2 || bodies[0] != want[0] {
		t.Fatalf("firing body:\n%s\nwant\n%s", bodies[0], want[0])
	}
	var resolved []PostableAlert
	if err := json.Unmarshal([]byte(bodies[1]), &resolved); err != nil {
		t.Fatal(err)
	}
	if len(resolved) != 1 || !resolved[0].EndsAt.Equal(fixture.Start.Add(20*time.Minute)) || resolved[0].Labels["slo"] != "citation-precision" {
		t.Fatalf("resolved body: %s", bodies[1])
	}
	for code, wantRetry := range map[int]bool{503: true, 500: true, 429: true, 400: false, 404: false} {
		status = code
		retry, err := n.Notify(ctx, fixture.Alert())
		if err == nil || retry != wantRetry {
			t.Errorf("HTTP %d: retry=%v err=%v, want retry=%v", code, retry, err, wantRetry)
		}
	}
}

// TestChangeAnnotations: a change alert tells Alertmanager when the change began and the
// levels either side.
func TestChangeAnnotations(t *testing.T) {
	p := New(Config{Name: "am", URL: "http://am.example"}, nil, time.Now).Payload(fixture.Change())
	want := map[string]string{"change_time": "2026-03-01T11:59:20Z", "level_before": "0.95 [0.94, 0.96] (95%, n=12000)",
		"level_after": "0.55 [0.5, 0.6] (95%, n=400)"}
	for k, v := range want {
		if p[0].Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, p[0].Annotations[k], v)
		}
	}
	if _, ok := New(Config{Name: "am", URL: "http://am.example"}, nil, time.Now).Payload(fixture.Alert())[0].Annotations["change_time"]; ok {
		t.Error("a threshold alert has no change_time")
	}
}
