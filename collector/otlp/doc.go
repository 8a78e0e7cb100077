// Package otlp holds ragwatch's OTLP trace receivers (gRPC and HTTP). A protobuf export goes as
// bytes to a ProtoConsumer (the assembler decodes it with span.DecodeProto, checking the
// limits as it reads); OTLP/JSON, and protobuf for any other consumer, is decoded with pdata
// and checked with span.Limits.Check. Both check ids and limits before anything else sees the
// spans, count what they accept and reject through internal/ingest, and hand valid batches to
// one consumer (the assembler).
package otlp
