package loadgen

import "github.com/ragwatch/ragwatch/internal/synth"

func synthOpts(spans int) synth.Options { return synth.Options{Seed: 1, Spans: spans} }
