//go:build attack

package natsconn

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestAttackStoreOutOfFileDescriptors: the process runs out of file descriptors (as under the
// idle-connection flood of issue 46) while a stream needs a new block file. The stream's write
// error sticks in the server like a full disk's; once descriptors are free again the stream is
// reloaded and writes, with what it stored before.
func TestAttackStoreOutOfFileDescriptors(t *testing.T) {
	defer func(d time.Duration) { storeProbeEvery = d }(storeProbeEvery)
	storeProbeEvery = 100 * time.Millisecond
	reg := prometheus.NewRegistry()
	c, err := Connect(context.Background(), embeddedCfg(t), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Store().Watch("scoring", "S")
	ctx := context.Background()
	// 100 KiB: blocks of the minimum size (32 KiB), so a few dozen messages need new files.
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Storage: jetstream.FileStorage, MaxBytes: 100 << 10}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.JS.Publish(ctx, "s", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}

	// Take every descriptor left, under a soft limit lowered for the test.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = min(old.Cur, 4096)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }()
	var held []*os.File
	release := func() {
		for _, f := range held {
			_ = f.Close()
		}
		held = nil
	}
	defer release()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("taking descriptors: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	t.Logf("holding %d descriptors (soft limit %d)", len(held), low.Cur)

	var last *jetstream.PubAck // the last message stored
	for i := 0; c.Store().Failing("S") == nil; i++ {
		if i == 200 {
			t.Fatal("no write failed without file descriptors")
		}
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if ack, err := c.JS.Publish(pctx, "s", make([]byte, 2<<10)); err == nil {
			last = ack
		}
		cancel()
	}
	if last == nil {
		t.Fatal("no message stored before the failure")
	}
	if err := c.Store().Err(); err == nil || !IsStorageFull(c.Store().Failing("S")) {
		t.Fatalf("Err() = %v", err)
	}
	t.Logf("failing: %v", c.Store().Err())
	if got := promtestutil.ToFloat64(c.store.failing.WithLabelValues("scoring")); got != 1 {
		t.Errorf("ragwatch_store_write_failing{store=scoring} = %v, want 1", got)
	}
	time.Sleep(3 * storeProbeEvery) // the probe cannot create its file either
	if c.Store().Failing("S") == nil {
		t.Fatal("recovered while no descriptor is free")
	}

	release()
	freed := time.Now()
	testutil.Eventually(t, 30*time.Second, 10*time.Millisecond, "the stream writes again", func() bool { return c.Store().Err() == nil })
	t.Logf("writes again %v after descriptors were freed (probe every %v)", time.Since(freed).Round(time.Millisecond), storeProbeEvery)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ack, err := c.JS.Publish(pctx, "s", []byte("after"))
	if err != nil {
		t.Fatalf("publish after recovery: %v", err)
	}
	// The message whose write failed may be in its block all the same (the error came from the
	// next file the store needed): then it is recovered too, unacknowledged.
	if ack.Sequence <= last.Sequence || ack.Sequence > last.Sequence+2 {
		t.Errorf("sequence after recovery = %d, want %d or %d: the last acknowledged before was %d", ack.Sequence, last.Sequence+1, last.Sequence+2, last.Sequence)
	}
	st, err := c.JS.Stream(pctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetMsg(pctx, last.Sequence); err != nil || len(m.Data) != 2<<10 {
		t.Fatalf("the last message stored before the failure, after recovery: %v %v", m, err)
	}
}
