// Package conventions declares, once, the span attribute keys and events of the conventions
// ragwatch reads (OpenInference, OpenTelemetry GenAI, OpenLLMetry, ragwatch's rag.*;
// docs/conventions.md), and derives from them what the span decoders keep and share
// (collector/span) and what the readers read and sniff (collector/assemble).
package conventions
