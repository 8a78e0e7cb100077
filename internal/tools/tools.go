//go:build tools

// Package tools pins modules the project is about to use so go.sum holds them while the
// packages that import them are written in parallel. Removed once they are all imported.
package tools

import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/cactus/go-statsd-client/v5/statsd"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	_ "go.opentelemetry.io/collector/pdata/ptrace"
	_ "go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/time/rate"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/status"
	_ "k8s.io/api/apps/v1"
	_ "k8s.io/api/core/v1"
	_ "sigs.k8s.io/yaml"
)
