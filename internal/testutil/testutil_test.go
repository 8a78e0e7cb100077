package testutil

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A KV value written to one server is read from a second one started on the same store dir
// and port: what the restart tests rely on.
func TestRunJetStreamRestartsOnTheSameStore(t *testing.T) {
	dir := t.TempDir()
	s1 := RunJetStream(t, StoreDir(dir))
	port := s1.Addr().(*net.TCPAddr).Port
	_, js := Connect(t, s1)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	url := s1.ClientURL()
	s1.Shutdown()
	s1.WaitForShutdown()

	s2 := RunJetStream(t, StoreDir(dir), Port(port))
	if s2.ClientURL() != url {
		t.Fatalf("restarted at %s, want %s", s2.ClientURL(), url)
	}
	_, js2 := Connect(t, s2)
	kv2, err := js2.KeyValue(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv2.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("after restart: %v %v", e, err)
	}
}

func TestRunServerIsCoreNATSWithToken(t *testing.T) {
	s := RunServer(t, Token("s3cret"))
	if s.JetStreamEnabled() {
		t.Fatal("RunServer enabled JetStream")
	}
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without the token")
	}
	nc, _ := Connect(t, s, nats.Token("s3cret"))
	if !nc.IsConnected() {
		t.Fatal("not connected with the token")
	}
}

func TestEventually(t *testing.T) {
	n := 0
	if o := Record(t, func(tb testing.TB) {
		Eventually(tb, time.Second, time.Millisecond, "three calls", func() bool { n++; return n == 3 })
	}); o.Failed || n != 3 {
		t.Fatalf("holds on the third call: calls %d, outcome %+v", n, o)
	}
	o := Record(t, func(tb testing.TB) {
		Eventually(tb, 20*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	})
	if !o.Failed || o.Msg != "timed out after 20ms waiting for never" {
		t.Fatalf("outcome %+v", o)
	}
}

func TestCheckFor(t *testing.T) {
	n := 0
	if o := Record(t, func(tb testing.TB) {
		CheckFor(tb, time.Second, time.Millisecond, "two calls", func() error {
			if n++; n < 2 {
				return errors.New("not yet")
			}
			return nil
		})
	}); o.Failed || n != 2 {
		t.Fatalf("nil on the second call: calls %d, outcome %+v", n, o)
	}
	o := Record(t, func(tb testing.TB) {
		CheckFor(tb, 20*time.Millisecond, time.Millisecond, "the answer", func() error { return errors.New("HTTP 503") })
	})
	if !o.Failed || o.Msg != "the answer: not within 20ms: HTTP 503" {
		t.Fatalf("outcome %+v", o)
	}
}

func TestSumAndSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"a", "b"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("x", "1").Add(2)
	c.WithLabelValues("x", "2").Add(3)
	c.WithLabelValues("y", "1").Add(5)
	g.Set(7)
	h.Observe(0.5)
	h.Observe(1.5)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", map[string]string{"a": "x"}, 5},
		{"c_total", map[string]string{"a": "x", "b": "2"}, 3},
		{"c_total", map[string]string{"a": "z"}, 0},
		{"c_total", map[string]string{"other": "x"}, 0},
		{"g", nil, 7},
		{"h", nil, 2},
		{"missing", nil, 0},
	} {
		if got := Sum(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Sum(%s%v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if m := Series(t, reg, "h", nil).GetHistogram(); m.GetSampleCount() != 2 || m.GetSampleSum() != 2 {
		t.Fatalf("histogram count %d sum %v", m.GetSampleCount(), m.GetSampleSum())
	}
	if v := Series(t, reg, "c_total", map[string]string{"a": "y", "b": "1"}).GetCounter().GetValue(); v != 5 {
		t.Fatalf("c_total{a=y,b=1} = %v", v)
	}
	if o := Record(t, func(tb testing.TB) { Series(tb, reg, "c_total", map[string]string{"a": "y"}) }); !o.Failed || !strings.HasPrefix(o.Msg, "no series c_total") {
		t.Fatalf("a subset of the labels is not the series: %+v", o)
	}
}

func TestRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func(tb testing.TB)
		want Outcome
	}{
		{"passes", func(tb testing.TB) { tb.Log("fine") }, Outcome{}},
		{"fatal ends fn", func(tb testing.TB) { tb.Fatalf("bad %d", 1); tb.Errorf("not reached") }, Outcome{Failed: true, Msg: "bad 1"}},
		{"error goes on", func(tb testing.TB) { tb.Error("first"); tb.Errorf("second") }, Outcome{Failed: true, Msg: "second"}},
		{"skip ends fn", func(tb testing.TB) { tb.Skipf("no %s", "data"); tb.Fatal("not reached") }, Outcome{Skipped: true, Msg: "no data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Record(t, tc.fn); got != tc.want {
				t.Fatalf("outcome %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBufferTakesConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("%d bytes, want 800", got)
	}
}

func TestFreeAddrCanBeListenedOn(t *testing.T) {
	addr := FreeAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("addr %q", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	c.Add(90 * time.Second)
	if got := c.Now(); !got.Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("after Add: %v", got)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("after Set: %v", got)
	}
}
