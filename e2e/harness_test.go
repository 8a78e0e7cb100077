//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// process is a server started for the test, stopped and logged at cleanup.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *testutil.Buffer
	done chan struct{}
}

func start(t *testing.T, name string, args ...string) *process {
	t.Helper()
	return startEnv(t, nil, name, args...)
}

// startEnv is start with the process environment env (nil: the test's own).
func startEnv(t *testing.T, env []string, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, log: &testutil.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- %s log ---\n%s", filepath.Base(name), tail(p.log.String(), 6000))
		}
	})
	return p
}

func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func httpGet(u string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func waitHTTP(t *testing.T, u string) {
	t.Helper()
	testutil.CheckFor(t, 30*time.Second, 250*time.Millisecond, "GET "+u, func() error {
		_, code, err := httpGet(u)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
}

// promSample is one element of an instant-query vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// promQuery runs an instant query and returns the vector (scalars become one sample).
func promQuery(promURL, expr string) ([]promSample, error) {
	b, code, err := httpGet(promURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %s", code, b)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	switch r.Data.ResultType {
	case "vector":
		var v []promSample
		err := json.Unmarshal(r.Data.Result, &v)
		return v, err
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(r.Data.Result, &s); err != nil {
			return nil, err
		}
		return []promSample{{Value: s}}, nil
	}
	return nil, fmt.Errorf("query %q: result type %s", expr, r.Data.ResultType)
}

func buildRagwatch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ragwatch")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/ragwatch")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build ragwatch: %v\n%s", err, out)
	}
	return bin
}

func need(t *testing.T, bins ...string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for _, b := range bins {
		p, err := exec.LookPath(b)
		if err != nil {
			t.Fatalf("%s not on PATH: install the Debian packages prometheus and prometheus-alertmanager (.ci/run does)", b)
		}
		paths[b] = p
	}
	return paths
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var _ = strings.TrimSpace
