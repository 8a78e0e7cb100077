// Package notify delivers alerts: one worker per configured notifier runs each alert through
// the repeat stage (send on change, re-send every repeat_interval while firing), the rate-limit
// stage and the retry stage (429/5xx/network errors only, with backoff). The notifiers
// themselves live in sub-packages, one per integration.
package notify
