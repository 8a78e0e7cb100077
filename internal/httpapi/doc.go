// Package httpapi is ragwatch's own HTTP server: /metrics, /healthz, /readyz and the /api/v1
// endpoints. Other packages add their endpoints with Mount, so this package does not need to
// know them.
package httpapi
