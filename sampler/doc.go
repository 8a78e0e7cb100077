// Package sampler is the pipeline stage that sends a consistent, rule-weighted, rate- and
// budget-limited sample of records to scoring: decisions in sampler/decide, the durable
// JetStream queue in sampler/queue, the workers that score in sampler/worker, the Scorer
// interface in internal/score. See docs/sampling.md.
package sampler
