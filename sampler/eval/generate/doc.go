// Package generate builds a synthetic evaluation set from the documents traffic retrieved
// (`ragwatch generate`): with the configured LLM backend it writes questions and reference
// answers that need one document, two documents, or that the documents cannot answer (to test
// refusals), deduplicated, redacted and within a budget, as records `ragwatch eval` reads.
package generate
