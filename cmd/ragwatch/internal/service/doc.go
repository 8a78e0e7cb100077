// Package service wires `ragwatch run`: it builds the pipeline from the config back to front
// (exporters first, receivers last), starts it in that order so nothing flows into a stage
// that is not running, and shuts it down in reverse: receivers stop accepting, the assembler
// drains what it holds, then exporters flush.
package service
