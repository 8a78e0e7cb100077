package queue

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// A process's own results reach its subscription's consumer once, through the loopback, and
// only when published; results of another process (a worker pod) still arrive through the
// subscription; other subscribers read the same JSON as before, marked with the origin; a
// result the subscription would refuse is refused and counted the same way.
func TestLoopbackDeliversOwnResultsOnce(t *testing.T) {
	s := testutil.RunJetStream(t)
	nc, _ := testutil.Connect(t, s)
	pod, _ := testutil.Connect(t, s)
	sink, lb, reg := subscribeLoopback(t, nc, 4)
	quiet := slog.New(slog.DiscardHandler)
	// Another subscriber of the scores subjects, as a dashboard would be.
	raw, err := nc.SubscribeSync(DefaultScoresPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // both subscriptions are in place before the pod publishes
		t.Fatal(err)
	}

	own := NewScorePublisher(nc, "").WithLoopback(lb)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	mine := []score.Result{
		{TraceID: "own-1", Service: "search", Metric: "faithfulness", Value: 0.25, Weight: 4, Scorer: "builtin", Time: at},
		{TraceID: "own-1", Service: "search", Metric: "answer_relevancy", Value: 0.5, Weight: 4, Scorer: "builtin", Time: at},
	}
	if err := own.ConsumeScores(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// Delivered on return, before any message could come back.
	if got := sink.received(); len(got) != 1 || len(got[0]) != 2 || got[0][0] != mine[0] || got[0][1] != mine[1] {
		t.Fatalf("after publishing: %+v, want the two results in one call", got)
	}
	// A weight over 1 / the smallest sampling probability is refused as from a pod.
	if err := own.ConsumeScores(ctx, []score.Result{{TraceID: "own-2", Service: "search", Metric: "faithfulness", Value: 0.5, Weight: 9, Time: at}}); err != nil {
		t.Fatal(err)
	}
	theirs := []score.Result{{TraceID: "pod-1", Service: "search", Metric: "faithfulness", Value: 0.75, Weight: 2, Scorer: "builtin", Time: at}}
	if err := NewScorePublisher(pod, "").ConsumeScores(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	// Another process's loopback marks its messages with its own origin: not skipped here.
	other := NewLoopback(&scoreSink{}, ScoreChecks{MaxWeight: func() float64 { return 4 }}, prometheus.NewRegistry(), quiet)
	if err := NewScorePublisher(pod, "").WithLoopback(other).ConsumeScores(ctx, []score.Result{{TraceID: "pod-2", Service: "search", Metric: "faithfulness", Value: 1, Weight: 1, Time: at}}); err != nil {
		t.Fatal(err)
	}
	// Last, an unmarked message on this process's connection: the subscription reads a
	// connection's messages in order, so once it delivered this one, any copy of the marked
	// ones published before it would have come already.
	last := []score.Result{{TraceID: "last", Service: "search", Metric: "faithfulness", Value: 0.5, Weight: 1, Time: at}}
	if err := NewScorePublisher(nc, "").ConsumeScores(ctx, last); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*nats.Conn{nc, pod} {
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the pods' results and the last", func() bool { return len(sink.results()) >= 5 })
	got := sink.results()
	slices.SortStableFunc(got[2:], func(a, b score.Result) int { return strings.Compare(a.TraceID, b.TraceID) })
	var ids []string
	for _, r := range got {
		ids = append(ids, r.TraceID)
	}
	if want := []string{"own-1", "own-1", "last", "pod-1", "pod-2"}; !slices.Equal(ids, want) {
		t.Fatalf("consumer got %q, want %q: own-1 twice (loopback), the others once (subscription), own-2 refused", ids, want)
	}
	// What another subscriber reads: the same JSON, marked with the publisher's origin.
	origins := map[string]string{} // the first trace id of each message → its origin
	for range 5 {
		m, err := raw.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rs, rejected := decodeResults(m.Data, 100)
		if len(rs) == 0 || len(rejected) > 0 {
			t.Fatalf("message %s: %v", m.Data, rejected)
		}
		origins[rs[0].TraceID] = m.Header.Get(OriginHeader)
		if rs[0].TraceID == "own-1" {
			want, _ := encode(mine)
			if string(m.Data) != want.String() {
				t.Fatalf("message %s, want the results' JSON %s", m.Data, want)
			}
		}
	}
	if origins["own-1"] != lb.origin || origins["own-2"] != lb.origin || origins["pod-1"] != "" || origins["last"] != "" ||
		origins["pod-2"] != other.origin || lb.origin == other.origin || len(lb.origin) < 16 {
		t.Fatalf("origins %q (own %q, other %q)", origins, lb.origin, other.origin)
	}
	if n := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": ingest.ReasonWeightRange}); n != 1 {
		t.Fatalf("weight_range rejections %v, want 1", n)
	}
	if n := testutil.Sum(t, reg, "ragwatch_scores_invalid_total", nil); n != 1 {
		t.Fatalf("ragwatch_scores_invalid_total %v, want 1", n)
	}
}

// Against a server without headers (before NATS 2.2) messages go unmarked: a connection with
// no_echo (ragwatch's own, internal/natsconn) never gets them back, so the publisher delivers
// them itself; a connection without it reads them back through the subscription. Either way a
// result reaches the consumer once.
func TestLoopbackWithoutHeaders(t *testing.T) {
	s := testutil.RunServer(t, func(o *server.Options) { o.NoHeaderSupport = true })
	at := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	for _, noEcho := range []bool{true, false} {
		var opts []nats.Option
		if noEcho {
			opts = append(opts, nats.NoEcho())
		}
		nc, _ := testutil.Connect(t, s, opts...)
		pod, _ := testutil.Connect(t, s)
		if nc.HeadersSupported() {
			t.Fatal("the server supports headers")
		}
		sink, lb, _ := subscribeLoopback(t, nc, 1)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		own := []score.Result{{TraceID: "own", Service: "search", Metric: "faithfulness", Value: 0.5, Weight: 1, Time: at}}
		if err := NewScorePublisher(nc, "").WithLoopback(lb).ConsumeScores(context.Background(), own); err != nil {
			t.Fatal(err)
		}
		// With no_echo the result is delivered in process, before the publish returns: once.
		// Without it, it is read back through the subscription, which may already have happened
		// (the echo can beat the return): at most once so far. The order checked below makes
		// it once in all either way.
		if got := len(sink.received()); (noEcho && got != 1) || got > 1 {
			t.Fatalf("no_echo %v: %d deliveries on return", noEcho, got)
		}
		// Flushed, an echo would already be pending ahead of the pod's message.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		last := []score.Result{{TraceID: "pod", Service: "search", Metric: "faithfulness", Value: 0.5, Weight: 1, Time: at}}
		if err := NewScorePublisher(pod, "").ConsumeScores(context.Background(), last); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the pod's result", func() bool {
			rs := sink.results()
			return len(rs) > 0 && rs[len(rs)-1].TraceID == "pod"
		})
		var ids []string
		for _, r := range sink.results() {
			ids = append(ids, r.TraceID)
		}
		if want := []string{"own", "pod"}; !slices.Equal(ids, want) {
			t.Fatalf("no_echo %v: consumer got %q, want %q", noEcho, ids, want)
		}
	}
}

// subscribeLoopback subscribes a new sink to the scores subjects on nc with a loopback to it,
// accepting weights up to maxWeight; the subscription ends with the test.
func subscribeLoopback(t *testing.T, nc *nats.Conn, maxWeight float64) (*scoreSink, *Loopback, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	checks := ScoreChecks{MaxWeight: func() float64 { return maxWeight }, Ingest: ingest.NewMetrics(reg)}
	sink := &scoreSink{}
	quiet := slog.New(slog.DiscardHandler)
	lb := NewLoopback(sink, checks, reg, quiet)
	checks.Loopback = lb
	sub, err := SubscribeScores(nc, "", sink, checks, reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sink, lb, reg
}
