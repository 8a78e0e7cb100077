package service_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestMalformedFloodIsCountedInFullAndLoggedTenTimes: the app's publish-only user sends 20,000
// malformed records. Each is counted as rejected, and the log has ten lines of that kind, not
// 20,000 (issue 46: 100,000 messages made 21.8 MB of WARN lines in 3 s).
func TestMalformedFloodIsCountedInFullAndLoggedTenTimes(t *testing.T) {
	out := &testutil.Buffer{}
	e := startEnvLogger(t, testConfig(t), slog.New(slog.NewTextHandler(out, nil)))
	nc, err := nats.Connect(e.app.NATS.ClientURL(), e.app.NATS.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	const n = 20_000
	for i := range n {
		if err := nc.Publish("ragwatch.records.support-bot", []byte(`{"trace_id":`)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rejected := map[string]string{"receiver": "nats", "reason": "malformed"}
	testutil.Eventually(t, 60*time.Second, 20*time.Millisecond, "every message counted as rejected", func() bool {
		return testutil.Sum(t, e.app.Registry, "ragwatch_ingest_rejected_total", rejected) == n
	})
	if got := strings.Count(out.String(), `msg="NATS message rejected"`); got != 10 {
		t.Errorf("%d log lines for %d malformed messages, want the first 10", got, n)
	}
	if got := testutil.Sum(t, e.app.Registry, "ragwatch_log_messages_suppressed_total", map[string]string{"level": "WARN"}); got != n-10 {
		t.Errorf("ragwatch_log_messages_suppressed_total{level=WARN} = %v, want %d", got, n-10)
	}
	if size := strings.Count(out.String(), "\n"); size > 50 {
		t.Errorf("the log has %d lines after the flood, want its start-up lines and ten", size)
	}
}
