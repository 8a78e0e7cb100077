//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// features posts, every 2 s until ctx ends, what the OpenTelemetry traffic does not carry and
// the dashboard's newer panels read: a refusal (refusals and refusal_correct), a shadow pair
// (the pairwise win rate), and two records with a human
// faithfulness label each, one faithful and one not (judge agreement). It returns the number
// of batches posted, once ctx ends.
func features(ctx context.Context, base string) <-chan int {
	done := make(chan int, 1)
	doc := []map[string]any{{"id": "refunds", "content": "Refunds take five business days from the day the return is received.", "score": 0.82}}
	post := func(path string, body any) error {
		b, _ := json.Marshal(body)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST %s: HTTP %d", path, resp.StatusCode)
		}
		return nil
	}
	rec := func(id, variant, answer, pair string) map[string]any {
		r := map[string]any{"trace_id": id, "service": "support-bot",
			"query": "How long do refunds take?", "documents": doc, "answer": answer}
		if variant != "" {
			r["variant"] = variant
		}
		if pair != "" {
			r["pair_id"] = pair
		}
		return r
	}
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		n := 0
		for {
			// Random ids: sampling at a rate reads the trace id's low 56 bits (OpenTelemetry's
			// rule), which small counters would keep out of every sample.
			id := func(kind byte, i int) string { return fmt.Sprintf("%02x%02x%028x", kind, i%256, rand.Uint64()) }
			recs := []map[string]any{
				// No variant, and a pair candidate no comparison names ("shadow"): the canary
				// comparison of the OpenTelemetry traffic is left as it is.
				rec(id(1, n), "", "I couldn't find anything about that in the documents.", ""),
				rec(id(2, n), "stable", "Refunds take five business days [1].", fmt.Sprint("pair-", n)),
				rec(id(3, n), "shadow", "Refunds are instant.", fmt.Sprint("pair-", n)),
				rec(id(4, n), "", "Refunds take five business days from receipt [1].", ""),
				rec(id(5, n), "", "Refunds are instant and always paid in cash [1].", ""),
			}
			// Labelled on arrival (sampled whatever the rate): a person judged 4 faithful, 5 not.
			recs[3]["labels"] = map[string]any{"values": map[string]float64{"faithfulness": 1}, "labeler": "e2e"}
			recs[4]["labels"] = map[string]any{"values": map[string]float64{"faithfulness": 0}, "labeler": "e2e"}
			// Errors are left to the panels' checks: a feature that never arrives leaves its
			// query empty, which fails with the query's name.
			if post("/api/v1/records", recs) == nil {
				n++
			}
			select {
			case <-ctx.Done():
				done <- n
				return
			case <-tick.C:
			}
		}
	}()
	return done
}
