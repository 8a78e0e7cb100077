// Package truncate cuts untrusted text to a byte limit without splitting a UTF-8 sequence; the
// collector, feedback intake and LLM judge all bound what they keep or quote with it.
package truncate
