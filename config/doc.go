// Package config holds ragwatch's typed configuration: defaults, strict YAML loading that
// remembers where each key stands, and a Validate walk that reports every problem at once with
// its key path and line.
package config
