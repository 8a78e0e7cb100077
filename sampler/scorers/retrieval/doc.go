// Package retrieval computes trec_eval's ranking metrics (precision@k, recall@k, MRR, NDCG@k,
// hit@k) for records that carry relevance labels, documents taken in the order returned.
package retrieval
