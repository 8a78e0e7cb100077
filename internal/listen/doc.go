// Package listen bounds ragwatch's listeners: every HTTP server gets the same header limit and
// timeouts, every listener (HTTP and gRPC) a connection cap derived from the memory and
// file-descriptor limits, so that a flood of connections on one listener can neither exhaust
// the process nor starve the other listeners.
package listen
