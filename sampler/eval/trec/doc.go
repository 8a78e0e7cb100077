// Package trec evaluates a retrieval run against relevance judgements the way trec_eval does:
// BEIR or TREC qrels, a TREC run or BEIR results JSON, trec_eval's measures and averaging, and a
// paired comparison of two runs (`ragwatch eval --qrels … --run …`).
package trec
