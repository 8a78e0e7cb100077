// Package testutil holds the helpers ragwatch's tests share: an embedded nats-server, polling
// with a deadline instead of sleeping, and readers for metrics in a Prometheus registry. It
// imports no ragwatch package, so every package's tests can use it.
package testutil
