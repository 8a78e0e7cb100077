package pagerduty

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
	status := http.StatusAccepted
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v2/enqueue" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"success","message":"Event processed","dedup_key":"x"}`))
	}))
	defer srv.Close()
	n := New(Config{Name: "pd", URL: srv.URL + "/v2/enqueue", RoutingKey: "R0UTINGKEY"}, srv.Client())
	ctx := context.Background()
	if _, err := n.Notify(ctx, fixture.Alert()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(ctx, fixture.Resolved()); err != nil {
		t.Fatal(err)
	}
	fp := fixture.Alert().Fingerprint
	wantTrigger := `{"routing_key":"R0UTINGKEY","event_action":"trigger","dedup_key":"` + fp + `",` +
		`"payload":{"summary":"SLO citation-precision: citation_precision is 0.52 for search (alert below 0.7)",` +
		`"source":"ragwatch/search","severity":"critical","timestamp":"2026-03-01T12:00:00Z","component":"search",` +
		`"group":"citation-precision","class":"threshold","custom_details":{` +
		`"dashboard_url":"https://grafana.example/d/ragwatch","description":"The weighted mean of citation_precision for service search over the last 15m is 0.52.",` +
		`"diagnosis":{"pattern":"retrieval_shift","explanation":"retrieval scores and citation precision fall together: the index or embeddings changed",` +
		`"numbers":[{"name":"citation_precision_before","value":0.9},{"name":"citation_precision_now","value":0.52}]},"diagnosis_pattern":"retrieval_shift",` +
		`"evidence":"4bf92f3577b34da6a3ce929d0e0e4736 value=0.1 https://tempo.example/t/4bf92f3577b34da6a3ce929d0e0e4736\n0af7651916cd43dd8448eb211c80319c value=0.2",` +
		`"interval":"[0.48, 0.56] (95%)","labels":{"alertname":"RagwatchSLOViolated","service":"search","severity":"page","slo":"citation-precision","team":"search"},` +
		`"n":"212","runbook_url":"https://runbooks.example/cp","threshold":"\u003c 0.7","value":"0.52","window":"15m"}},` +
		`"client":"ragwatch","client_url":"https://grafana.example/d/ragwatch",` +
		`"links":[{"href":"https://runbooks.example/cp","text":"Runbook"},{"href":"https://tempo.example/t/4bf92f3577b34da6a3ce929d0e0e4736","text":"Trace 4bf92f3577b34da6a3ce929d0e0e4736 (0.1)"}]}`
	if bodies[0] != wantTrigger {
		t.Fatalf("trigger:\n%s\nwant\n%s", bodies[0], wantTrigger)
	}
	wantResolve := `{"routing_key":"R0UTINGKEY","event_action":"resolve","dedup_key":"` + fp + `"}`
	if bodies[1] != wantResolve {
		t.Fatalf("resolve:\n%s\nwant\n%s", bodies[1], wantResolve)
	}
	for code, wantRetry := range map[int]bool{503: true, 429: true, 400: false} {
		status = code
		retry, err := n.Notify(ctx, fixture.Alert())
		if err == nil || retry != wantRetry || strings.Contains(err.Error(), "R0UTINGKEY") {
			t.Errorf("HTTP %d: retry=%v err=%v", code, retry, err)
		}
	}
}

func TestConfigReadsRoutingKeyFromEnv(t *testing.T) {
	t.Setenv("PD_TEST_KEY", "k3y")
	c, err := NewConfig(config.Notifier{Name: "pd", Type: "pagerduty", URL: "https://events.pagerduty.com/v2/enqueue", RoutingKeyEnv: "PD_TEST_KEY"})
	if err != nil || c.RoutingKey.Reveal() != "k3y" {
		t.Fatalf("%+v %v", c, err)
	}
	_, err = NewConfig(config.Notifier{Name: "pd", RoutingKeyEnv: "PD_TEST_UNSET"})
	if err == nil || err.Error() != "notifier pd: routing_key_env: environment variable PD_TEST_UNSET is not set" {
		t.Fatalf("err = %v", err)
	}
}

// TestChangeDetails: a change alert's incident shows when the change began and both levels.
func TestChangeDetails(t *testing.T) {
	d := New(Config{Name: "pd", RoutingKey: "k"}, nil).Event(fixture.Change()).Payload.CustomDetails
	if d["change_time"] != "2026-03-01T11:59:20Z" || d["level_before"] != "0.95 [0.94, 0.96] (95%, n=12000)" ||
		d["level_after"] != "0.55 [0.5, 0.6] (95%, n=400)" {
		t.Fatalf("custom details: %v", d)
	}
}
