// Package httpapi is ragwatch's own HTTP server: /metrics, /healthz and /readyz on one
// listener, the /api/v1 endpoints and the profiler on another (loopback by default), guarded by
// a bearer token or a strict loopback rule. Other packages add their endpoints with Mount, so
// this package does not need to know them.
package httpapi
