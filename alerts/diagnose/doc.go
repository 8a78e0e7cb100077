// Package diagnose recognises, from the weighted statistics of metric pairs, the patterns that
// say why a service's quality dropped (the model hallucinates, the ranking is noisy, the index
// changed). It is pure: no clock, no config, no I/O; the alert engine feeds it and attaches its
// finding to every alert.
package diagnose
