// Package text is ragwatch's one model of an answer's text: where sentences end, which words
// are abbreviations, and how a sentence is cut into separately verifiable claims. Citation
// parsing, the builtin scorer, the LLM judges' statements and the NLI scorer all split with it,
// so every metric sees the same sentences. It imports nothing from the pipeline.
package text
