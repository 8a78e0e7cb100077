// Package otlp holds ragwatch's OTLP trace receivers (gRPC and HTTP). Both decode with pdata,
// check ids and limits before anything else sees the spans, count what they accept and reject
// through internal/ingest, and hand valid batches to one TracesConsumer (the assembler).
package otlp
