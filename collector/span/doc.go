// Package span is the part of an OTLP span that assembly reads (Span, Value) and its two
// readers: FromTraces from pdata, DecodeProto straight from the protobuf bytes. Both keep only
// the attributes and events of collector/conventions, and both answer a request as Limits,
// the one set of OTLP limits the receivers (collector/otlp, collector/natsin) and the decoder
// share, would.
package span
