package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestRunReloadsOnSIGHUP runs `ragwatch run` in a child process (the test binary again, so
// the signal goes to that process only), changes its config file and sends SIGHUP: a good file
// is applied, a bad one is rejected with its problems logged and the process keeps running.
func TestRunReloadsOnSIGHUP(t *testing.T) {
	if args := os.Getenv("RAGWATCH_TEST_RUN_ARGS"); args != "" { // the child
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		os.Exit(runCommand(ctx, strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "ragwatch.yaml")
	write := func(level, alertAbove string) {
		t.Helper()
		cfg := fmt.Sprintf(`receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
log: {level: %s}
scoring: {workers: 0}
nats: {store_dir: %q, embedded: {endpoint: "127.0.0.1:-1"}}
slos:
  - {name: empty, metric: empty_retrieval_rate, alert_above: %s, window: 5m}
`, level, filepath.Join(dir, "data"), alertAbove)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("info", "0.5")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunReloadsOnSIGHUP$")
	cmd.Env = append(os.Environ(), "RAGWATCH_TEST_RUN_ARGS="+strings.Join([]string{"-c", cfgPath}, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	lines := make(chan struct{}, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(logs, sc.Text())
			select {
			case lines <- struct{}{}:
			default:
			}
		}
	}()
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			<-copied
			_ = cmd.Wait()
		}
	}()
	waitLog := func(re *regexp.Regexp) []string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			if m := re.FindStringSubmatch(logs.String()); m != nil {
				return m
			}
			select {
			case <-lines:
			case <-copied:
				t.Fatalf("child exited before logging %s:\n%s", re, logs)
			case <-deadline:
				t.Fatalf("no %s in 20s:\n%s", re, logs)
			}
		}
	}
	addr := waitLog(regexp.MustCompile(`msg="ragwatch running".* http=(127\.0\.0\.1:\d+)`))[1]
	metric := func(name string) string {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		return m[1]
	}

	// A good change: applied, and the new debug level shows at once.
	write("debug", "0.2")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(regexp.MustCompile(`level=INFO msg="config reloaded" component=reload`))
	if got := metric("ragwatch_config_last_reload_successful"); got != "1" {
		t.Fatalf("successful = %s after a good reload", got)
	}

	// A bad one: rejected with the key and line, the gauge drops to 0, the process runs on.
	write("debug", "nope")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(regexp.MustCompile("level=ERROR msg=\"config reload rejected; the running config stays in force\" component=reload problems=.*line 7.*slos"))
	if got := metric("ragwatch_config_last_reload_successful"); got != "0" {
		t.Fatalf("successful = %s after a bad reload", got)
	}
	if got := metric(`ragwatch_config_reloads_total\{outcome="failure"\}`); got != "1" {
		t.Fatalf("failures = %s", got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-copied
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("child: %v\n%s", err, logs)
	}
}
