// Package synthrec turns internal/synth's traffic (what `ragwatch loadgen` sends) into records
// the way ingest does, for tests and benchmarks of what comes after ingest.
package synthrec
