package demo

import (
	"fmt"

	"github.com/ragwatch/ragwatch/config"
)

// configTemplate is the demo's ragwatch.yaml: the embedded defaults with windows short enough to
// watch an incident come and go in a minute. docs/demo.md explains each choice.
const configTemplate = `
receivers:
  otlp:
    grpc: { endpoint: %q }
    http: { endpoint: %q }
http:
  endpoint: %q
  api_endpoint: ""  # the demo's API on its loopback metrics address
nats:
  store_dir: %q
  embedded: { endpoint: %q }
assembly:
  wait: 300ms
  timeout: 10s
sampling:
  rate: 0.1
  rules:
    - name: negative_feedback
      match: { negative_feedback: true }
      probability: 1.0
scoring:
  workers: 2
  backend: builtin
slos:
  - name: citation-precision
    metric: citation_precision
    objective: 0.9
    alert_below: 0.7
    window: 20s
    min_samples: 10
    for: 5s
    keep_firing_for: 5s
    severity: page
    runbook_url: https://runbooks.example.internal/rag/citation-precision
  # The default faithfulness SLO detects a change instead of waiting for a window: the alert
  # says when the drop began (change_time), as on-call needs to match it with a deploy.
  - name: faithfulness
    kind: change
    metric: faithfulness
    min_shift: 0.1
    false_alarms: 1/30d
    min_samples: 20
    keep_firing_for: 5s
    severity: page
drift:
  window: 20s
  reference_window: 60s
  detectors:
    - name: retrieval-score-psi
      signal: retrieval_score_top
      method: psi
      threshold: 0.2
      min_samples: 50
      min_reference_samples: 100
      for: 5s
      keep_firing_for: 5s
      severity: ticket
comparisons:
  # A quarter of the traffic runs prompt-v2, which invents figures the documents do not hold.
  - name: prompt-v2-canary
    metrics: [faithfulness, citation_precision]
    baseline: prompt-v1
    candidate: prompt-v2
    margin: 0.05
    alpha: 0.05
    min_samples: 10
    severity: ticket
alerting:
  evaluation_interval: 1s
  # Halves of 30s: the drop shows against the half minute before it.
  diagnosis: { window: 1m, min_samples: 10 }
  trace_url_template: "http://localhost:3000/explore?left=%%7B%%22queries%%22:%%5B%%7B%%22query%%22:%%22{trace_id}%%22%%7D%%5D%%7D"
`

// Config builds the demo configuration for the given listen addresses and store directory.
func Config(o Options) (*config.Config, []byte, error) {
	text := fmt.Sprintf(configTemplate, o.GRPCEndpoint, o.HTTPOTLPEndpoint, o.HTTPEndpoint, o.DataDir, o.NATSEndpoint)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		return nil, nil, fmt.Errorf("demo config: %w", err)
	}
	return cfg, []byte(text), nil
}
