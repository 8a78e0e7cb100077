package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// Live traffic into a running service, `ragwatch export` from its API, `ragwatch eval` on the
// set with a deploy gate: the label loop's first and last steps end to end.
func TestExportCommandEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: "127.0.0.1:0"}
sampling: {rate: 1}
scoring: {workers: 2}
drift: {detectors: []}
export: {enabled: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = filepath.Join(dir, "data")
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	a, err := service.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	for i := range 12 {
		service := []string{"chat", "search"}[i%2]
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: service, Time: time.Now(),
			Query:     "What is the capital of France? Reply to jane.doe@example.com",
			Answer:    "Paris is the capital of France [1].",
			Documents: []record.Document{{ID: "d1", Content: "Paris is the capital and largest city of France."}},
			Citations: []record.Citation{{Text: "Paris is the capital of France", DocumentIDs: []string{"d1"}}},
			Relevance: map[string]int{"d1": 1}}
		if err := a.Records.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "eval-set.jsonl")
	api := "http://" + a.Addrs().API
	testutil.CheckFor(t, 15*time.Second, 50*time.Millisecond, "12 scored records exported", func() error {
		code, stdout, stderr := runCmd("export", "--url", api, "--output", out, "--size", "100")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		data, _ := os.ReadFile(out)
		if n := strings.Count(string(data), `"faithfulness":`); n != 12 || !strings.Contains(stdout, "12 records in 2 strata") {
			return fmt.Errorf("%d scored lines; stdout %s", n, stdout)
		}
		return nil
	})
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "jane.doe@example.com") || !strings.Contains(string(data), "[REDACTED:email]") {
		t.Fatalf("export not redacted:\n%s", data)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the eval set is written with mode %v (err %v), want -rw------- (it holds user content)", fi.Mode(), err)
	}
	code, stdout, stderr := runCmd("export", "--url", api, "--output", out, "--size", "4")
	if code != 0 || !strings.Contains(stdout, "4 records in 2 strata") || !strings.Contains(stdout, "chat//high ") {
		t.Fatalf("size 4: exit %d\n%s\n%s", code, stdout, stderr)
	}
	gate := filepath.Join(dir, "gate.json")
	if err := os.WriteFile(gate, []byte(`{"mrr": {"min": 0.9}, "faithfulness": {"min": 0.95}, "answer_relevancy": {"min": 0.5}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCmd("eval", "--input", out, "--gate", gate)
	if code != 1 || !strings.HasPrefix(stdout, "4 records scored\n") ||
		!strings.HasSuffix(stdout, "FAIL answer_relevancy: mean 0.2961 is below the floor 0.5000\nDO NOT DEPLOY: 1 metric checks failed\n") {
		t.Fatalf("eval of the exported set: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runCmd("export", "--url", "http://"+a.Addrs().API, "--output", out, "--since", "yesterday"); code != 1 ||
		!strings.Contains(stderr, "`since` must be") {
		t.Fatalf("bad since: exit %d: %s", code, stderr)
	}
}

func runCmd(args ...string) (int, string, string) {
	var out, errOut strings.Builder
	code := dispatch(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}
