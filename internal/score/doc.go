// Package score defines what scoring produces (Result), the Scorer interface every scorer
// implements (built-in, LLM judges, NLI, retrieval metrics) and the Consumer of results.
package score
