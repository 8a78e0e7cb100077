package engine

import (
	"context"
	"testing"
	"time"
)

// FuzzLoadState feeds arbitrary bytes as persisted state: Load and the next evaluation must
// never panic, whatever is in the KV bucket.
func FuzzLoadState(f *testing.F) {
	f.Add([]byte(`{"version":1,"service":"s","instance":{"drift":{"width":50000000000,"slots":[{"i":1,"v":{"h":{"c":[1,2],"n":3},"e":[{"t":"x"}]}}]},"machines":{"ticket":null}}}`))
	f.Add([]byte(`{"version":1,"service":"s","instance":{"fine":{"width":60000000000,"slots":[]},"machines":{"page":{"phase":"firing"}},"last":{"page":null}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cfg := range []string{thresholdCfg, driftCfg, burnCfg} {
			store := &MemStore{}
			_ = store.Save(context.Background(), "slo.cp.cw", data)
			_ = store.Save(context.Background(), "drift.docs.cw", data)
			_ = store.Save(context.Background(), "slo.faithful.cw", data)
			h := newHarness(t, cfg, store)
			_ = h.e.Load(context.Background())
			h.e.Evaluate(context.Background())
			h.clk.Add(time.Hour)
			h.e.Evaluate(context.Background())
			_ = h.e.Alerts()
		}
	})
}
