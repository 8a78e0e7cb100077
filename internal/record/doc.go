// Package record defines Record, the one type every stage of ragwatch agrees on: one RAG turn
// (query, retrieved documents, answer, citations, usage, latency, feedback), its JSON form, and
// the Consumer interface that chains the pipeline stages together.
package record
