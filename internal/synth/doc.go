// Package synth is a synthetic RAG application: a small knowledge base, queries about it,
// retrievals, answers with citation markers and user feedback. It can turn healthy or degraded
// (a broken index: irrelevant documents, low scores, unsupported citations) on demand. The demo
// and the load generator emit its turns as real OTLP traces.
package synth
