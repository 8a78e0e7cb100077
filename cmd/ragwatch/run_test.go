package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/memlimit"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestRunCommand runs `ragwatch run -c file` on free ports, waits until it logs where it
// listens, then cancels as SIGTERM does and expects a clean exit.
func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "ragwatch.yaml")
	cfg := fmt.Sprintf(`receivers:
  otlp:
    grpc: { endpoint: "127.0.0.1:0" }
    http: { endpoint: "127.0.0.1:0" }
http:
  endpoint: "127.0.0.1:0"
  api_endpoint: "127.0.0.1:0"
nats:
  store_dir: %q
  embedded: { endpoint: "127.0.0.1:-1" }
`, filepath.Join(dir, "data"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testutil.Buffer
	done := make(chan int, 1)
	go func() { done <- runCommand(ctx, []string{"-c", cfgPath, "--log-format", "json"}, &stdout, &stderr) }()

	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, "ragwatch running", func() error {
		if strings.Contains(stderr.String(), `"msg":"ragwatch running"`) {
			return nil
		}
		select {
		case code := <-done:
			t.Fatalf("run exited early with %d:\n%s", code, stderr.String())
		default:
		}
		return fmt.Errorf("log so far:\n%s", stderr.String())
	})
	for _, want := range []string{`"otlp_grpc":"127.0.0.1:`, `"otlp_http":"127.0.0.1:`, `"http":"127.0.0.1:`, `"api":"127.0.0.1:`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log does not say %s:\n%s", want, stderr.String())
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit 15s after cancel")
	}
	if !strings.Contains(stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no stopped line:\n%s", stderr.String())
	}
	// Once started, run gave the kernel back the executable's startup pages, where the kernel
	// can (Linux with MADV_PAGEOUT).
	if _, err := memlimit.ReleaseExecutablePages(); err == nil &&
		!strings.Contains(stderr.String(), `"msg":"released the executable's startup pages","resident_file_bytes_before":`) {
		t.Errorf("no line on the startup pages released:\n%s", stderr.String())
	}
}

func TestRunCommandBadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("assembly:\n  wait: -1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr testutil.Buffer
	code := runCommand(context.Background(), []string{"-c", p}, &stdout, &stderr)
	want := "ragwatch run: invalid config:\n  " + p + ": line 2: `assembly.wait` must not be negative\n"
	if code != 1 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q, want %q", code, stderr.String(), want)
	}
	if code := runCommand(context.Background(), []string{"--log-level", "loud"}, &stdout, &stderr); code != 2 {
		t.Errorf("bad log level: exit %d", code)
	}
}
