package service_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/testutil"
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
