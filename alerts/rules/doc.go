// Package rules generates Prometheus recording and alerting rules equivalent to the in-process
// SLOs and drift detectors, computed from the counters every ragwatch replica exports, so the
// fleet-wide view alerts the same way one sidecar does.
package rules
