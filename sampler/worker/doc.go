// Package worker runs the scoring workers: goroutines that pull sampled records from the
// durable JetStream consumer, run the scorers, publish the results, record the eval-score and
// cost metrics, and ack, retry with backoff, or dead-letter. `ragwatch run` and
// `ragwatch worker` use the same Pool.
package worker
