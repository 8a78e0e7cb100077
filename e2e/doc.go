// Package e2e holds the end-to-end suite: the ragwatch binary with real Prometheus and
// Alertmanager servers and traffic through the OpenTelemetry SDK, and ragwatch replicas behind a
// real OpenTelemetry Collector (built from scripts/otelcol, configs from deploy/otelcol), and
// ragwatch's evaluation events received by that Collector and written by its file exporter. Run it with
// `go test -tags e2e ./e2e/` (make e2e); it needs prometheus, promtool and
// prometheus-alertmanager on PATH (Debian packages prometheus and prometheus-alertmanager).
package e2e
