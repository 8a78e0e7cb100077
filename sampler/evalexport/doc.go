// Package evalexport sends score results, and the human labels that correct them, to the trace
// backends a team already reads: OpenTelemetry GenAI `gen_ai.evaluation.result` events over OTLP
// (gRPC or HTTP, the OpenTelemetry Go SDK's log exporter), Langfuse scores and Phoenix span
// annotations. It is a score.Consumer and a record.LabelConsumer that never blocks its caller:
// each destination has a bounded queue (full: dropped and counted), a goroutine that sends
// batches, retries them, and redacts every explanation before it leaves. See
// docs/evaluations-otlp.md, docs/evaluations-langfuse.md and docs/evaluations-phoenix.md.
package evalexport
