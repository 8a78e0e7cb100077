// Package e2e holds the end-to-end suite: the ragwatch binary with real Prometheus and
// Alertmanager servers and traffic through the OpenTelemetry SDK. Run it with
// `go test -tags e2e ./e2e/` (make e2e); it needs prometheus, promtool and
// prometheus-alertmanager on PATH (Debian packages prometheus and prometheus-alertmanager).
package e2e
