package signals

// Histogram bucket upper bounds, shared by Prometheus and OTLP so both backends show the same
// distribution. docs/metrics-signals.md explains each choice.
var (
	// DocumentBuckets: a RAG context holds a handful of documents; 0 is its own bucket so empty
	// retrievals stand out.
	DocumentBuckets = []float64{0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100}
	// ScoreBuckets: similarity and reranker scores normalised to [0, 1] (cosine, relevance
	// probability), finer near the top where retrieval quality is judged. Raw scores above 1
	// (BM25, logits) fall into +Inf.
	ScoreBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1}
	// TokenBuckets: answer lengths from a one-liner to a long report, roughly doubling.
	TokenBuckets = []float64{10, 25, 50, 100, 200, 300, 500, 800, 1200, 2000, 4000, 8000}
	// CitationBuckets: 0 (an answer citing nothing) is its own bucket.
	CitationBuckets = []float64{0, 1, 2, 3, 4, 5, 7, 10, 15, 20}
	// DurationBuckets (seconds) cover a vector search (ms) and a long generation (a minute).
	DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60}
)
