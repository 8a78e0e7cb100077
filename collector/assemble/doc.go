// Package assemble groups spans (collector/span) by trace and turns each RAG turn into a
// record.Record from what each span says (collector/facts). Assemble is the pure function;
// Assembler holds traces in memory, bounded, until their spans have arrived.
package assemble
