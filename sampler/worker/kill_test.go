package worker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

const (
	killChildEnv = "RAGWATCH_KILL_CHILD_STORE"
	killRecords  = 50
	killScored   = 10 // records the child scores before it hangs
)

// runKillChild is a whole ragwatch scoring process: embedded JetStream in dir, 50 records
// queued, workers that score ten of them (writing each key to dir/scored.txt before the ack)
// and then hang with four records in flight, until the parent kills the process with SIGKILL
// (once the server has removed the ten acked records).
func runKillChild(dir string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 3 }
	s, err := testutil.StartServer(testutil.StoreDir(dir))
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return fail(err)
	}
	js, _ := jetstream.New(nc)
	rt := testRuntime(4)
	rt.ScoreTimeout = time.Hour // the hang must outlive the kill
	rt.Queue.AckWait = 2 * time.Hour
	ctx := context.Background()
	if _, err := queue.Setup(ctx, js, rt.Queue, 1); err != nil {
		return fail(err)
	}
	// The restarted server must redeliver soon: ack_wait as the parent's pool will set it.
	pub := queue.NewPublisher(js, rt.Queue, killRecords, prometheus.NewRegistry(), quiet)
	_ = pub.Start(ctx)
	for i := 0; i < killRecords; i++ {
		_ = pub.Offer(&record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Query: "q", Sampling: &record.Sampling{Probability: 1, Reason: "rate"}})
	}
	_ = pub.Shutdown(ctx)
	f, err := os.OpenFile(filepath.Join(dir, "scored.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	var calls, hung atomic.Int32
	scorer := funcScorer{name: "test", score: func(ctx context.Context, r *record.Record) ([]score.Result, error) {
		if calls.Add(1) <= killScored {
			return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
		}
		if hung.Add(1) == 4 {
			// Acks are not confirmed (handle): signal once the server has removed the ten
			// scored records, so the kill comes after their acks, as the test means.
			for streamMsgs(js, rt.Queue.Stream) != killRecords-killScored {
				time.Sleep(time.Millisecond)
			}
			_ = os.WriteFile(filepath.Join(dir, "hung"), nil, 0o600)
		}
		select {} // stuck mid-score until SIGKILL
	}}
	sink := score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		for _, r := range rs {
			if _, err := f.WriteString(r.TraceID + "\n"); err != nil {
				return err
			}
		}
		return f.Sync()
	})
	p := New(js, rt, []score.Scorer{scorer}, sink, testOptions(prometheus.NewRegistry()))
	if err := p.Start(ctx); err != nil {
		return fail(err)
	}
	select {} // until killed
}

// TestProcessKilled runs a scoring process with its embedded JetStream, kills it with SIGKILL
// while records are queued and four are mid-score, restarts NATS from the same store and scores
// the rest: every record is scored exactly once.
func TestProcessKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitOnce sync.Once
	wait := func() { waitOnce.Do(func() { _ = cmd.Wait() }) }
	t.Cleanup(func() { // never leave the child behind, even when the test fails early
		_ = cmd.Process.Kill()
		wait()
	})
	testutil.Eventually(t, 20*time.Second, 5*time.Millisecond, "the child to score ten and hang on four", func() bool {
		_, err := os.Stat(filepath.Join(dir, "hung"))
		return err == nil && len(readLines(t, filepath.Join(dir, "scored.txt"))) == killScored
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\n%s", cmd.ProcessState, stderr.String())
	}

	s := testutil.RunJetStream(t, testutil.StoreDir(dir))
	_, js := testutil.Connect(t, s)
	rt := testRuntime(4)
	// Records delivered to the dead process come back after ack_wait; shorten it for the restart.
	rt.Queue.AckWait = time.Second
	before := readLines(t, filepath.Join(dir, "scored.txt"))
	after := newTally()
	p := New(js, rt, []score.Scorer{okScorer}, after, testOptions(prometheus.NewRegistry()))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, 5*time.Millisecond, "the remaining records scored", func() bool { return len(before)+after.len() >= killRecords })
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the stream to empty", func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
	shutdown(t, p)

	killed := newTally()
	for _, id := range before {
		_ = killed.ConsumeScores(context.Background(), []score.Result{{TraceID: id}})
	}
	keys := make([]string, killRecords)
	for i := range keys {
		keys[i] = fmt.Sprintf("%032x", i+1)
	}
	assertOnce(t, keys, killed, after)
	t.Logf("scored %d before SIGKILL, %d after restart", len(before), after.len())
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
