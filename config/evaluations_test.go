package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEvaluationsConfig(t *testing.T) {
	c, err := Parse([]byte("evaluations:\n  otlp: {endpoint: \"collector:4317\", insecure: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Evaluations{
		OTLP:      EvaluationsOTLP{Endpoint: "collector:4317", Protocol: "grpc", Insecure: true},
		QueueSize: 4096, MaxBatch: 256, FlushInterval: time.Second, Timeout: 10 * time.Second, RetryFor: time.Minute,
	}
	if diff := cmp.Diff(want, c.Evaluations); diff != "" {
		t.Errorf("evaluations (-want +got):\n%s", diff)
	}
	if !c.Evaluations.Enabled() || Default().Evaluations.Enabled() {
		t.Error("one key turns the export on; none is set by default")
	}

	_, err = Parse([]byte(`evaluations:
  queue_size: 0
  max_batch: 20000
  flush_interval: 0s
  otlp: {endpoint: "collector:4317", protocol: thrift}
  langfuse: {url: "langfuse.example", public_key_env: A, public_key_file: /a}
  phoenix: {url: "http://phoenix:6006", api_key_env: K, api_key_file: /k}
`))
	if err == nil {
		t.Fatal("bad evaluations config loaded")
	}
	for _, want := range []string{
		"line 2: `evaluations.queue_size` must be between 1 and 1048576, got 0",
		"line 3: `evaluations.max_batch` must be between 1 and 10000, got 20000",
		"line 4: `evaluations.flush_interval` must be positive",
		"`evaluations.otlp.protocol` must be grpc or http, got \"thrift\"",
		"`evaluations.langfuse.url` must be an http:// or https:// URL",
		"`evaluations.langfuse.public_key_env` set either public_key_env or public_key_file, not both",
		"`evaluations.langfuse.secret_key_env` is required (or secret_key_file)",
		"`evaluations.phoenix.api_key_env` set either api_key_env or api_key_file, not both",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
