package notify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/internal/fixture"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server answers with the given statuses in turn (the last one repeats) and counts requests.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	n        atomic.Int32
}

func newServer(t *testing.T, statuses ...int) *server {
	s := &server{statuses: statuses}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(s.n.Add(1)) - 1
		s.mu.Lock()
		code := s.statuses[min(i, len(s.statuses)-1)]
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

const (
	secretKey  = "PDKEY-very-secret"
	secretHMAC = "HMAC-very-secret"
	secretPath = "T000/B000/SLACKSECRET"
)

// notifierConfig returns a config of the type pointing at url, with secrets from the env.
func notifierConfig(t *testing.T, typ, url string) config.Notifier {
	c := config.Notifier{Name: "n-" + typ, Type: typ, Timeout: 5 * time.Second, RatePerMinute: 600,
		MaxRetries: 3, RetryBackoff: time.Second, RepeatInterval: model.Duration(time.Minute)}
	switch typ {
	case config.NotifierPagerDuty:
		t.Setenv("TEST_PD_KEY", secretKey)
		c.URL, c.RoutingKeyEnv = config.SecretURL(url), "TEST_PD_KEY"
	case config.NotifierSlack:
		t.Setenv("TEST_SLACK_URL", url+"/services/"+secretPath)
		c.URLEnv = "TEST_SLACK_URL"
	case config.NotifierWebhook:
		t.Setenv("TEST_HMAC", secretHMAC)
		c.URL, c.SecretEnv = config.SecretURL(url), "TEST_HMAC"
	default:
		c.URL = config.SecretURL(url)
	}
	return c
}

type harness struct {
	d      *Dispatcher
	reg    *prometheus.Registry
	logs   *bytes.Buffer
	sleeps []time.Duration
	now    time.Time
	mu     sync.Mutex
}

func newHarness(t *testing.T, cfgs ...config.Notifier) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), logs: &bytes.Buffer{}, now: fixture.Start}
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: h.logs, mu: &h.mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := New(cfgs, Options{Registerer: h.reg, Logger: logger,
		Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			h.sleeps = append(h.sleeps, d)
			h.mu.Unlock()
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	return h
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sendSync delivers through a started dispatcher and waits for the queue to drain.
func (h *harness) run(t *testing.T, list ...alerts.Alert) {
	t.Helper()
	if err := h.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.d.Send(context.Background(), list)
	if err := h.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) count(name, outcome string) float64 {
	return promtestutil.ToFloat64(h.d.sent.WithLabelValues(name, outcome))
}

var types = []string{config.NotifierAlertmanager, config.NotifierPagerDuty, config.NotifierSlack, config.NotifierWebhook}

func TestRetriesOn503(t *testing.T) {
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			srv := newServer(t, 503, 503, 200)
			h := newHarness(t, notifierConfig(t, typ, srv.URL))
			h.run(t, fixture.Alert())
			if got := srv.n.Load(); got != 3 {
				t.Fatalf("requests = %d, want 3", got)
			}
			if h.count("n-"+typ, OutcomeSent) != 1 || promtestutil.ToFloat64(h.d.retries.WithLabelValues("n-"+typ)) != 2 {
				t.Fatalf("sent=%v retries=%v", h.count("n-"+typ, OutcomeSent), promtestutil.ToFloat64(h.d.retries.WithLabelValues("n-"+typ)))
			}
			if len(h.sleeps) != 2 || h.sleeps[0] != time.Second || h.sleeps[1] != 2*time.Second {
				t.Fatalf("backoff = %v, want [1s 2s]", h.sleeps)
			}
		})
	}
}

func TestNoRetryOn400AndSecretsStayOut(t *testing.T) {
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			srv := newServer(t, 400)
			h := newHarness(t, notifierConfig(t, typ, srv.URL))
			h.run(t, fixture.Alert())
			if got := srv.n.Load(); got != 1 {
				t.Fatalf("requests = %d, want 1 (400 is not retried)", got)
			}
			if h.count("n-"+typ, OutcomeFailed) != 1 {
				t.Fatal("failure not counted")
			}
			// A dead endpoint: retried network errors, then a logged failure.
			dead := newServer(t, 200)
			cfg := notifierConfig(t, typ, dead.URL)
			dead.Close()
			h2 := newHarness(t, cfg)
			h2.run(t, fixture.Alert())
			if h2.count("n-"+typ, OutcomeFailed) != 1 || len(h2.sleeps) != 3 {
				t.Fatalf("network errors: failed=%v sleeps=%v", h2.count("n-"+typ, OutcomeFailed), h2.sleeps)
			}
			logs := h.logs.String() + h2.logs.String()
			if !strings.Contains(logs, "notification failed") {
				t.Fatalf("failure not logged: %s", logs)
			}
			for _, s := range []string{secretKey, secretHMAC, secretPath, "SLACKSECRET"} {
				if strings.Contains(logs, s) {
					t.Fatalf("secret %q in logs:\n%s", s, logs)
				}
			}
		})
	}
}

func TestRepeatAndResolve(t *testing.T) {
	srv := newServer(t, 200)
	h := newHarness(t, notifierConfig(t, config.NotifierAlertmanager, srv.URL))
	if err := h.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration, a alerts.Alert, want int32) {
		t.Helper()
		h.mu.Lock()
		h.now = h.now.Add(d)
		h.mu.Unlock()
		h.d.Send(context.Background(), []alerts.Alert{a})
		testutil.CheckFor(t, 5*time.Second, time.Millisecond, "the notifier's queue drained", func() error {
			if n := srv.n.Load(); n != want || len(h.d.workers[0].q) > 0 {
				return fmt.Errorf("requests = %d, want %d", n, want)
			}
			return nil
		})
	}
	step(0, fixture.Alert(), 1)
	step(15*time.Second, fixture.Alert(), 1) // within repeat_interval: not re-sent
	step(15*time.Second, fixture.Alert(), 1)
	step(30*time.Second, fixture.Alert(), 2) // a minute after the first: re-sent
	step(15*time.Second, fixture.Resolved(), 3)
	step(15*time.Second, fixture.Resolved(), 3) // a resolve offered again is not re-sent
	step(15*time.Second, fixture.Alert(), 4)    // fires again: sent at once
	if err := h.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.count("n-alertmanager", OutcomeSent) != 4 {
		t.Fatalf("sent = %v", h.count("n-alertmanager", OutcomeSent))
	}
}

func TestRateLimitAndRouting(t *testing.T) {
	a1, a2 := newServer(t, 200), newServer(t, 200)
	c1 := notifierConfig(t, config.NotifierAlertmanager, a1.URL)
	c1.Name, c1.RatePerMinute = "limited", 6 // burst 1
	c2 := notifierConfig(t, config.NotifierWebhook, a2.URL)
	c2.Name = "other"
	h := newHarness(t, c1, c2)
	x, y := fixture.Alert(), fixture.Alert()
	y.Fingerprint, y.Rule = "different", "other-slo"
	z := fixture.Alert()
	z.Fingerprint, z.Notifiers = "only-other", []string{"other"}
	h.run(t, x, y, z)
	if a1.n.Load() != 1 || h.count("limited", OutcomeRateLimited) != 1 {
		t.Fatalf("limited: requests=%d rate_limited=%v", a1.n.Load(), h.count("limited", OutcomeRateLimited))
	}
	if a2.n.Load() != 3 {
		t.Fatalf("other: requests=%d, want 3", a2.n.Load())
	}
}

func TestLifecycleAndQueueFull(t *testing.T) {
	srv := newServer(t, 200)
	h := newHarness(t, notifierConfig(t, config.NotifierAlertmanager, srv.URL))
	if err := h.d.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown without start: %v", err)
	}
	if err := h.d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Start(context.Background()); err == nil {
		t.Fatal("start after shutdown must fail")
	}
	h.d.Send(context.Background(), []alerts.Alert{fixture.Alert()}) // after shutdown: ignored, no panic

	h2 := newHarness(t, notifierConfig(t, config.NotifierAlertmanager, srv.URL))
	many := make([]alerts.Alert, 1100) // queue holds 1024 before Start
	for i := range many {
		many[i] = fixture.Alert()
	}
	h2.d.Send(context.Background(), many)
	if got := h2.count("n-alertmanager", OutcomeDropped); got != 76 {
		t.Fatalf("dropped = %v, want 76", got)
	}
	h2.run(t)
}

func TestBuildErrorsNameTheVariable(t *testing.T) {
	_, err := New([]config.Notifier{{Name: "pd", Type: "pagerduty", URL: "https://x", RoutingKeyEnv: "RAGWATCH_TEST_UNSET_KEY",
		Timeout: time.Second, RatePerMinute: 1, RetryBackoff: time.Second}}, Options{})
	if err == nil || err.Error() != "notifier pd: routing_key_env: environment variable RAGWATCH_TEST_UNSET_KEY is not set" {
		t.Fatalf("err = %v", err)
	}
}
