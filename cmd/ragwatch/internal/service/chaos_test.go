package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// flakyServer is an HTTP server on a fixed loopback address that can be taken down (the port
// then refuses connections) and brought back on the same address.
type flakyServer struct {
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
	done chan struct{}
}

func newFlakyServer(t *testing.T, h http.Handler) *flakyServer {
	t.Helper()
	f := &flakyServer{h: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(f.down)
	return f
}

func (f *flakyServer) serve(ln net.Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srv, f.done = &http.Server{Handler: f.h, ReadHeaderTimeout: 5 * time.Second}, make(chan struct{})
	srv, done := f.srv, f.done
	go func() { defer close(done); _ = srv.Serve(ln) }()
}

func (f *flakyServer) down() {
	f.mu.Lock()
	srv, done := f.srv, f.done
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-done
	}
}

func (f *flakyServer) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	f.serve(ln)
}

// judge modes.
const (
	judgeOK int32 = iota
	judgeFail
	judgeHang
)

// lazyError builds its message when it is read, so a poll that keeps failing does not gather
// the metrics for a message nobody reads.
type lazyError func() string

func (e lazyError) Error() string { return e() }

// TestChaos runs steady traffic through the pipeline while an external NATS server is killed
// and restarted, the LLM judge answers 500s and then hangs past its timeout, and the
// Alertmanager refuses connections. Nothing may crash, ingestion never stops, drops and
// retries are counted, and every part recovers by itself.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	natsDir := t.TempDir()
	ns := testutil.RunJetStream(t, testutil.StoreDir(natsDir))
	natsPort := ns.Addr().(*net.TCPAddr).Port

	var mode atomic.Int32
	judge := newFlakyServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch mode.Load() {
		case judgeFail:
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusInternalServerError)
		case judgeHang:
			<-r.Context().Done() // past the judge timeout; the client gives up
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1700000000,"model":"judge-1",`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"{\"reasoning\":\"fine\",\"score\":5}","refusal":null},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
		}
	}))
	var amHits atomic.Int64
	am := newFlakyServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		amHits.Add(1)
	}))

	t.Setenv("RAGWATCH_CHAOS_JUDGE_KEY", "sk-chaos")
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
nats:
  url: nats://127.0.0.1:%d
  reconnect_wait: 50ms
  reconnect_max_wait: 200ms
  connect_timeout: 2s
sampling: {rate: 1, buffer: 10000}
scoring:
  workers: 4
  score_timeout: 2s
  backend: openai
  metrics: [rubric_relevance]
  retrieval_k: []
  openai: {base_url: "http://%s/v1/", model: judge-1, api_key_env: RAGWATCH_CHAOS_JUDGE_KEY, timeout: 300ms, max_retries: 1, max_concurrency: 8}
  queue: {ack_wait: 5s, max_deliver: 1000, backoff: [100ms]}
slos:
  - {name: empty, metric: empty_retrieval_rate, alert_above: 0.5, min_samples: 5, window: 5m}
drift: {detectors: []}
alerting: {evaluation_interval: 1s, save_interval: 1s}
notifiers:
  - {name: am, type: alertmanager, url: "http://%s", repeat_interval: 1ms, rate_per_minute: 60000, max_retries: 1, retry_backoff: 10ms, timeout: 1s}
`, natsPort, judge.addr, am.addr)))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// The App builds the OpenAI judge from the scoring section, as `ragwatch run` does.
	reg := prometheus.NewRegistry()
	a, err := service.New(cfg, logger, service.WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	shutdown := sync.OnceValue(func() error {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return a.Shutdown(sctx)
	})
	defer func() { _ = shutdown() }()

	// Steady traffic through the join (where the assembler and the API hand records
	// in): every record has no documents, so the SLO fires and stays firing.
	stop := make(chan struct{})
	var sent atomic.Int64
	var wg sync.WaitGroup
	var trafficErr atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Query: "what is the capital of France?",
				Answer: "Paris.", Time: time.Now()}
			if err := a.Join.ConsumeRecord(ctx, r); err != nil {
				trafficErr.CompareAndSwap(nil, err)
			}
			sent.Add(1)
		}
	}()
	stopTraffic := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopTraffic()

	requests := func() float64 { return testutil.Sum(t, reg, "ragwatch_requests_total", nil) }
	scores := func() float64 {
		return testutil.Sum(t, reg, "ragwatch_eval_score", map[string]string{"metric": "rubric_relevance"})
	}
	attempts := func(outcome string) float64 {
		return testutil.Sum(t, reg, "ragwatch_scoring_attempts_total", map[string]string{"outcome": outcome})
	}
	notified := func(outcome string) float64 {
		return testutil.Sum(t, reg, "ragwatch_notifications_total", map[string]string{"notifier": "am", "outcome": outcome})
	}
	natsConnected := func() float64 { return testutil.Sum(t, reg, "ragwatch_nats_connected", nil) }
	natsDrops := func() float64 {
		return testutil.Sum(t, reg, "ragwatch_scoring_dropped_total", map[string]string{"reason": "nats_unavailable"})
	}
	// eventually fails with the state of every part, read only when it fails.
	eventually := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		testutil.CheckFor(t, d, 10*time.Millisecond, what, func() error {
			if cond() {
				return nil
			}
			return lazyError(func() string {
				return fmt.Sprintf("requests %v, scores %v, nats_connected %v, dropped nats_unavailable %v, attempts ok/error/timeout %v/%v/%v, notifications sent/failed %v/%v",
					requests(), scores(), natsConnected(), natsDrops(),
					attempts("ok"), attempts("error"), attempts("timeout"), notified("sent"), notified("failed"))
			})
		})
	}
	// ingesting waits until signals counted n more records than now.
	ingesting := func(what string, n float64) {
		t.Helper()
		from := requests()
		eventually(what+": ingestion goes on", 5*time.Second, func() bool { return requests() >= from+n })
	}

	// Steady state: records counted, scored by the judge, the alert delivered.
	eventually("steady state", 10*time.Second, func() bool {
		return requests() >= 50 && scores() >= 10 && notified("sent") >= 1
	})

	// (a) NATS killed: the connection drops, sampled records are dropped and counted, records
	// are still counted; then it comes back on the same port and the queue resumes.
	dropped0 := natsDrops()
	ns.Shutdown()
	ns.WaitForShutdown()
	eventually("NATS down noticed", 5*time.Second, func() bool { return natsConnected() == 0 })
	ingesting("NATS down", 100)
	eventually("drops counted while NATS is down", 5*time.Second, func() bool {
		return natsDrops() >= dropped0+50
	})
	testutil.RunJetStream(t, testutil.StoreDir(natsDir), testutil.Port(natsPort)) // shut down by t.Cleanup
	eventually("NATS reconnected", 10*time.Second, func() bool { return natsConnected() == 1 })
	s0 := scores()
	eventually("scores flow after NATS is back", 15*time.Second, func() bool { return scores() >= s0+20 })

	// (b) The judge answers 500s, then hangs past its timeout, then recovers.
	mode.Store(judgeFail)
	errs0, jretries0 := attempts("error"), testutil.Sum(t, reg, "ragwatch_judge_retries_total", nil)
	eventually("judge 500s counted", 10*time.Second, func() bool { return attempts("error") >= errs0+5 })
	// A call that failed its first try before the snapshot counts its error after it: the
	// retries catch up with the errors, they are not in step at every instant.
	eventually("judge retries counted (max_retries 1 per failed call)", 10*time.Second, func() bool {
		return testutil.Sum(t, reg, "ragwatch_judge_retries_total", nil) >= jretries0+5
	})
	ingesting("judge failing", 100)
	mode.Store(judgeHang)
	to0 := attempts("timeout")
	eventually("judge timeouts counted", 10*time.Second, func() bool { return attempts("timeout") >= to0+5 })
	ingesting("judge hanging", 100)
	mode.Store(judgeOK)
	s1 := scores()
	eventually("scores flow after the judge recovers", 15*time.Second, func() bool { return scores() >= s1+20 })

	// (c) The Alertmanager refuses connections: deliveries fail (after a retry each) and are
	// counted; once it is back the firing alert is delivered again.
	am.down()
	failed0, retries0 := notified("failed"), testutil.Sum(t, reg, "ragwatch_notification_retries_total", map[string]string{"notifier": "am"})
	eventually("notification failures counted", 10*time.Second, func() bool { return notified("failed") >= failed0+2 })
	eventually("notification retries counted", 10*time.Second, func() bool {
		return testutil.Sum(t, reg, "ragwatch_notification_retries_total", map[string]string{"notifier": "am"}) >= retries0+2
	})
	ingesting("Alertmanager down", 100)
	hits0, sent0 := amHits.Load(), notified("sent")
	am.up(t)
	eventually("notifications delivered after the Alertmanager is back", 10*time.Second, func() bool {
		return notified("sent") > sent0 && amHits.Load() > hits0
	})

	// Everything recovered at once: connected, scoring, alert firing.
	if got := natsConnected(); got != 1 {
		t.Fatalf("ragwatch_nats_connected %v at the end", got)
	}
	s2 := scores()
	eventually("scores still flow at the end", 10*time.Second, func() bool { return scores() > s2 })
	if got := a.Alerts.Alerts(); len(got) != 1 || !got[0].Firing() {
		t.Fatalf("alerts at the end: %+v", got)
	}
	if err, _ := trafficErr.Load().(error); err != nil && !errors.Is(err, context.Canceled) {
		// The record path reports stage errors but never blocks or panics; note them.
		t.Logf("record path reported: %v", err)
	}
	stopTraffic()
	if err := shutdown(); err != nil {
		t.Fatalf("shutdown after the chaos: %v", err)
	}
	t.Logf("records sent %d, counted %v; scores %v; drops nats_unavailable %v; attempts error %v timeout %v; notifications sent %v failed %v",
		sent.Load(), requests(), scores(), natsDrops(),
		attempts("error"), attempts("timeout"), notified("sent"), notified("failed"))
}
