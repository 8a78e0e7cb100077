//go:build race

package redact

// raceDetector is on: its instrumentation multiplies the cost of every memory access, more for
// the large inputs' allocations, so timing ratios mean nothing.
const raceDetector = true
