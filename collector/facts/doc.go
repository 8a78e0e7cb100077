// Package facts reads what one span says under the conventions ragwatch reads (OpenInference,
// OpenTelemetry GenAI, OpenLLMetry, ragwatch's rag.*; docs/conventions.md): Read fills a Facts
// from a span, keyed by collector/conventions' table, and the readers (AnswerOf, HistoryOf,
// the documents' readers, feedback) turn facts into a record's fields.
package facts
