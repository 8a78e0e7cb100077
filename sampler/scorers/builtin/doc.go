// Package builtin is ragwatch's default scorer: deterministic, offline heuristics for
// faithfulness, answer relevancy, context precision and recall, citation precision and recall,
// and answer similarity. It splits text into claims, finds the best-supporting passage window
// for each claim with context-weighted content terms, and penalises unmatched numbers, unmatched
// named entities and negation or antonym conflicts. See docs/scorer-quality.md.
package builtin
