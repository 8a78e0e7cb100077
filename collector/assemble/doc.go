// Package assemble groups spans by trace and turns each RAG turn into a record.Record, reading
// the OpenInference, OpenTelemetry GenAI, OpenLLMetry and ragwatch rag.* conventions
// (docs/conventions.md). Assemble is the pure function; Assembler holds traces in memory, bounded,
// until their spans have arrived.
package assemble
