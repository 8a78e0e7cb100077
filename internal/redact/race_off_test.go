//go:build !race

package redact

const raceDetector = false
