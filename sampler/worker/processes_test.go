package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

const (
	workerChildEnv = "RAGWATCH_WORKER_CHILD_URL"
	workerChildOut = "RAGWATCH_WORKER_CHILD_OUT"
)

// runWorkerChild is one `ragwatch worker` process: a Pool against the NATS at url that writes
// the key of every record it scores to out, until SIGTERM.
func runWorkerChild(url, out string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	defer f.Close()
	var mu sync.Mutex
	sink := score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			if _, err := f.WriteString(r.TraceID + "\n"); err != nil {
				return err
			}
		}
		return f.Sync()
	})
	slow := funcScorer{name: "test", score: func(context.Context, *record.Record) ([]score.Result, error) {
		time.Sleep(2 * time.Millisecond) // a judge call's worth of work
		return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
	}}
	p := New(js, testRuntime(2), []score.Scorer{slow}, sink, testOptions(prometheus.NewRegistry()))
	if err := p.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		return 1
	}
	return 0
}

// TestTwoWorkerProcesses runs two worker processes on one queue: no record is scored twice
// and both do work.
func TestTwoWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(2)
	const n = 200
	keys := enqueue(t, js, rt.Queue, n, 1)

	dir := t.TempDir()
	var outs []string
	for i := 0; i < 2; i++ {
		out := filepath.Join(dir, fmt.Sprintf("worker-%d.txt", i))
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), workerChildEnv+"="+s.ClientURL(), workerChildOut+"="+out)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		wait := func() { once.Do(func() { _ = cmd.Wait() }) }
		t.Cleanup(func() { _ = cmd.Process.Kill(); wait() })
		outs = append(outs, out)
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			wait()
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("worker process exited %d: %s", code, stderr.String())
			}
		}()
	}
	testutil.Eventually(t, 30*time.Second, 5*time.Millisecond, "every record scored by the two processes", func() bool {
		return len(readLines(t, outs[0]))+len(readLines(t, outs[1])) >= n
	})
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the stream to empty", func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
	tallies := []*tally{newTally(), newTally()}
	for i, out := range outs {
		for _, id := range readLines(t, out) {
			_ = tallies[i].ConsumeScores(context.Background(), []score.Result{{TraceID: id}})
		}
	}
	assertOnce(t, keys, tallies...)
	if tallies[0].len() == 0 || tallies[1].len() == 0 {
		t.Fatalf("work split %d/%d: both processes must score", tallies[0].len(), tallies[1].len())
	}
	t.Logf("split %d/%d across two processes", tallies[0].len(), tallies[1].len())
}
