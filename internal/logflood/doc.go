// Package logflood keeps a flood of one kind of log message from flooding the log: a
// slog.Handler that lets the first few records of each kind through in every interval, counts
// the rest, and writes one summary line with that count when the interval ends.
package logflood
