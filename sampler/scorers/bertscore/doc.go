// Package bertscore scores an answer against its reference with BERTScore (Zhang et al.,
// 2019): every token of one text is matched greedily to the most similar token of the other
// by the cosine of their contextual embeddings, giving precision (answer tokens), recall
// (reference tokens) and F1, optionally weighted by inverse document frequency and rescaled
// by a baseline. Token embeddings come from a text-embeddings-inference server; with only an
// OpenAI-compatible embeddings API the same matching runs over sentence embeddings.
package bertscore
