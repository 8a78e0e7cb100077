package demo

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/internal/synth"
)

// traffic sends turns at the configured rate and switches the index between healthy and broken.
func (d *demo) traffic(ctx context.Context, tracer trace.Tracer) {
	interval := time.Duration(float64(time.Second) / d.opts.Rate)
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		d.setPhase()
		turn := d.gen.Next(time.Now())
		canary(&turn)
		// The turn has just ended: its spans carry the past start and durations.
		turn.Start = time.Now().Add(-turn.Total)
		synth.Emit(ctx, tracer, &turn)
		d.sent.Add(1)
		if turn.Feedback != 0 {
			d.sendFeedback(ctx, turn.TraceID, turn.Feedback)
		}
		next = next.Add(interval)
		if wait := time.Until(next); wait > 0 {
			timer.Reset(wait)
		} else {
			timer.Reset(0)
		}
	}
}

func (d *demo) setPhase() {
	el := time.Since(d.start)
	bad := el >= d.opts.DegradeAfter && (d.opts.DegradeFor == 0 || el < d.opts.DegradeAfter+d.opts.DegradeFor)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case bad && d.phase != "degraded":
		d.phase = "degraded"
		d.degradedFrom = d.since()
		d.gen.SetDegraded(true)
		d.logf("index broken: retrieval returns unrelated documents, answers cite what does not support them")
	case !bad && d.phase == "degraded":
		d.phase = "recovered"
		d.degradedTo = d.since()
		d.gen.SetDegraded(false)
		d.logf("index repaired: traffic is healthy again")
	case d.phase == "":
		d.phase = "healthy"
	}
}

// sendFeedback posts the user's thumbs a moment later, as a real user would, through the API.
func (d *demo) sendFeedback(ctx context.Context, tid [16]byte, thumbs int) {
	body, _ := json.Marshal(map[string]string{
		"trace_id": hex.EncodeToString(tid[:]),
		"thumbs":   map[bool]string{true: "up", false: "down"}[thumbs > 0],
	})
	d.fb.Add(1)
	time.AfterFunc(time.Second, func() {
		defer d.fb.Done()
		if ctx.Err() != nil {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.feedbackURL, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			d.sendErrs.Add(1)
			return
		}
		_ = resp.Body.Close()
		if resp.StatusCode >= 300 {
			d.sendErrs.Add(1)
			return
		}
		d.feedback.Add(1)
	})
}

// Variants of the demo app: a quarter of the requests (by trace id) run the canary prompt.
const (
	BaselineVariant = "prompt-v1"
	CanaryVariant   = "prompt-v2"
)

// canary assigns the turn its variant, reported as a feature-flag evaluation; the canary's
// prompt asks for specifics and the model invents a figure the documents do not hold.
func canary(t *synth.Turn) {
	t.Variant = BaselineVariant
	if t.TraceID[0]%4 == 0 {
		t.Variant = CanaryVariant
		t.Answer = synth.InventNumbers(t.Answer, int(t.TraceID[1]))
	}
}
