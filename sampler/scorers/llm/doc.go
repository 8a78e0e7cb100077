// Package llm is the judge logic shared by the LLM backends (llm/openai, llm/anthropic): the
// prompts with delimited record content, JSON-schema-validated verdicts with one repair retry,
// retries on 429/5xx/network honouring Retry-After, timeouts, a concurrency cap per backend, and
// token usage and cost per metric. A Backend only sends one chat request.
package llm
