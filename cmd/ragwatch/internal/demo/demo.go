// Package demo runs ragwatch on its embedded defaults next to a synthetic RAG application that
// sends real OTLP traces through the OpenTelemetry SDK, breaks its index for a while and
// recovers, so a drift alert and a citation-precision alert fire and resolve in front of you.
package demo

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/synth"
)

// Options configure a demo run.
type Options struct {
	Rate         float64       // requests per second
	Duration     time.Duration // 0 runs until ctx ends
	Seed         uint64
	DegradeAfter time.Duration // when the index breaks
	DegradeFor   time.Duration // how long it stays broken (0: for good)
	Plain        bool          // log lines instead of a redrawn screen
	Refresh      time.Duration // how often the view updates

	GRPCEndpoint     string
	HTTPOTLPEndpoint string
	HTTPEndpoint     string
	NATSEndpoint     string
	DataDir          string // "" uses a temporary directory removed at the end
}

// AlertEvent is one alert's life in the demo.
type AlertEvent struct {
	Rule     string
	Kind     string
	Severity string
	FiredAt  time.Duration // since the demo started
	Resolved time.Duration // 0 if still firing
	Value    float64
	Worst    []string // trace ids
}

// Summary is what the demo reports at the end.
type Summary struct {
	Requests     int64
	SendErrors   int64
	Feedback     int64
	Scores       map[string]scoreStat
	Alerts       []AlertEvent
	DegradedFrom time.Duration
	DegradedTo   time.Duration
}

type scoreStat struct {
	N    uint64
	Mean float64
}

// Run starts ragwatch and the synthetic app, shows the live view on out and returns the
// summary when Duration passes or ctx ends.
func Run(ctx context.Context, o Options, out io.Writer) (Summary, error) {
	if o.Rate <= 0 {
		return Summary{}, errors.New("rate must be positive")
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.DataDir == "" {
		dir, err := os.MkdirTemp("", "ragwatch-demo-")
		if err != nil {
			return Summary{}, err
		}
		defer os.RemoveAll(dir)
		o.DataDir = dir
	}
	cfg, _, err := Config(o)
	if err != nil {
		return Summary{}, err
	}
	// ragwatch's own logs would tear the live view; keep warnings in plain mode only.
	logger := slog.New(slog.DiscardHandler)
	if o.Plain {
		logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	a, err := service.New(cfg, logger)
	if err != nil {
		return Summary{}, fmt.Errorf("build ragwatch: %w", err)
	}
	if err := a.Start(ctx); err != nil {
		return Summary{}, fmt.Errorf("start ragwatch: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()

	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(o.GRPCEndpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		return Summary{}, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, _ := resource.Merge(resource.Empty(), resource.NewSchemaless(semconv.ServiceName("support-bot")))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond)),
		sdktrace.WithIDGenerator(synth.IDGenerator{}),
		sdktrace.WithResource(res),
	)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	tracer := tp.Tracer("ragwatch-demo-app")

	runCtx := ctx
	if o.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	d := &demo{opts: o, app: a, gen: synth.New(synth.Options{Seed: o.Seed}), start: time.Now(),
		alerts: map[string]*AlertEvent{}, out: out, feedbackURL: "http://" + o.HTTPEndpoint + "/api/v1/feedback"}
	if !o.Plain {
		fmt.Fprint(out, "\033[?25l") // hide the cursor while redrawing
		defer fmt.Fprint(out, "\033[?25h")
	}
	d.printIntro()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.traffic(runCtx, tracer)
	}()
	tick := time.NewTicker(o.Refresh)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-tick.C:
			d.observe()
			d.render()
		}
	}
	wg.Wait()
	d.fb.Wait()
	d.observe()
	s := d.summary()
	printSummary(out, s)
	return s, nil
}

type demo struct {
	opts        Options
	app         *service.App
	gen         *synth.Generator
	start       time.Time
	out         io.Writer
	feedbackURL string

	sent, sendErrs, feedback atomic.Int64
	fb                       sync.WaitGroup

	mu           sync.Mutex // guards the fields below
	phase        string
	degradedFrom time.Duration
	degradedTo   time.Duration
	alerts       map[string]*AlertEvent // by fingerprint
	order        []string
	lastLines    []string
}

func (d *demo) since() time.Duration { return time.Since(d.start).Round(100 * time.Millisecond) }

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

// observe records when each alert fired and resolved.
func (d *demo) observe() {
	list := d.app.Alerts.Alerts()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, al := range list {
		ev, ok := d.alerts[al.Fingerprint]
		if !ok || (ev.Resolved != 0 && al.Status == alerts.StatusFiring && al.StartsAt.Sub(d.start) > ev.Resolved) {
			if al.Status != alerts.StatusFiring {
				continue
			}
			ev = &AlertEvent{Rule: al.Rule, Kind: al.Kind, Severity: al.Severity, FiredAt: d.since()}
			key := al.Fingerprint
			if ok {
				key = fmt.Sprintf("%s#%d", al.Fingerprint, len(d.order))
			}
			d.alerts[al.Fingerprint] = ev
			d.alerts[key] = ev
			d.order = append(d.order, key)
			d.logf("ALERT FIRING %s (%s): value %.3f %s threshold %.3f", al.Rule, al.Severity, al.Value, al.Comparator, al.Threshold)
		}
		ev.Value = al.Value
		if len(al.Evidence) > 0 {
			ev.Worst = ev.Worst[:0]
			for _, e := range al.Evidence {
				ev.Worst = append(ev.Worst, e.TraceID)
			}
		}
		if al.Status == alerts.StatusResolved && ev.Resolved == 0 {
			ev.Resolved = d.since()
			d.logf("ALERT RESOLVED %s after %s", al.Rule, (ev.Resolved - ev.FiredAt).Round(time.Second))
		}
	}
}

// logf prints a line in plain mode and keeps it for the live view. d.mu must be held.
func (d *demo) logf(format string, args ...any) {
	line := fmt.Sprintf("[%6.1fs] ", time.Since(d.start).Seconds()) + fmt.Sprintf(format, args...)
	d.lastLines = append(d.lastLines, line)
	if len(d.lastLines) > 6 {
		d.lastLines = d.lastLines[len(d.lastLines)-6:]
	}
	if d.opts.Plain {
		fmt.Fprintln(d.out, line)
	}
}

func (d *demo) printIntro() {
	o := d.opts
	fmt.Fprintf(d.out, "ragwatch demo: a synthetic RAG app sends %.0f req/s of OpenInference traces over OTLP gRPC to %s\n", o.Rate, o.GRPCEndpoint)
	fmt.Fprintf(d.out, "  metrics:  http://%s/metrics   (point Prometheus here; Grafana dashboard: deploy/grafana/ragwatch-dashboard.json)\n", o.HTTPEndpoint)
	fmt.Fprintf(d.out, "  alerts:   http://%s/api/v1/alerts   scores: http://%s/api/v1/scores\n", o.HTTPEndpoint, o.HTTPEndpoint)
	if o.DegradeFor > 0 {
		fmt.Fprintf(d.out, "  the index breaks at %s and is repaired at %s\n", o.DegradeAfter, o.DegradeAfter+o.DegradeFor)
	} else {
		fmt.Fprintf(d.out, "  the index breaks at %s\n", o.DegradeAfter)
	}
}

// render prints the view: a redrawn screen, or one status line per refresh in plain mode.
func (d *demo) render() {
	fams, _ := d.app.Registry.Gather()
	m := metricsOf(fams)
	d.mu.Lock()
	defer d.mu.Unlock()
	el := time.Since(d.start).Seconds()
	if d.opts.Plain {
		if int(el)%5 == 0 {
			fmt.Fprintf(d.out, "[%6.1fs] %s: sent=%d records=%.0f sampled=%.0f scored=%.0f citation_precision=%s retrieval_score=%s psi=%s firing=%d\n",
				el, d.phase, d.sent.Load(), m.sum("ragwatch_requests_total", nil), m.sum("ragwatch_sampled_total", nil),
				m.count("ragwatch_eval_score", map[string]string{"metric": "citation_precision"}),
				m.fmtGauge("ragwatch_slo_value", map[string]string{"slo": "citation-precision"}),
				fmtMean(m.mean("ragwatch_retrieval_score", nil)),
				m.fmtGauge("ragwatch_drift_score", map[string]string{"detector": "retrieval-score-psi"}),
				d.firing())
		}
		return
	}
	var b strings.Builder
	b.WriteString("\033[H\033[2J")
	fmt.Fprintf(&b, "ragwatch demo  t=%5.1fs  phase: %s\n\n", el, strings.ToUpper(d.phase))
	fmt.Fprintf(&b, "TRAFFIC   sent %d traces (%.1f/s)   feedback %d   send errors %d\n", d.sent.Load(), float64(d.sent.Load())/el, d.feedback.Load(), d.sendErrs.Load())
	fmt.Fprintf(&b, "SIGNALS   records %.0f   mean retrieval score %s   mean top score %s   empty retrievals %.0f\n",
		m.sum("ragwatch_requests_total", nil), fmtMean(m.mean("ragwatch_retrieval_score", nil)),
		fmtMean(m.mean("ragwatch_retrieval_top_score", nil)), m.sum("ragwatch_empty_retrievals_total", nil))
	fmt.Fprintf(&b, "          feedback +%.0f / -%.0f\n", m.sum("ragwatch_feedback_total", map[string]string{"sentiment": "positive"}), m.sum("ragwatch_feedback_total", map[string]string{"sentiment": "negative"}))
	fmt.Fprintf(&b, "SCORING   sampled %.0f   queue depth %.0f   dropped %.0f\n", m.sum("ragwatch_sampled_total", nil), m.sum("ragwatch_scoring_queue_depth", nil), m.sum("ragwatch_scoring_dropped_total", nil))
	for _, metric := range []string{"faithfulness", "citation_precision", "citation_recall", "answer_relevancy"} {
		sel := map[string]string{"metric": metric}
		fmt.Fprintf(&b, "          %-20s n=%-5.0f mean=%s\n", metric, m.count("ragwatch_eval_score", sel), fmtMean(m.mean("ragwatch_eval_score", sel)))
	}
	fmt.Fprintf(&b, "SLO       citation-precision  value %s  (alert below 0.70 over 20s)\n", m.fmtGauge("ragwatch_slo_value", map[string]string{"slo": "citation-precision"}))
	fmt.Fprintf(&b, "DRIFT     retrieval-score-psi %s  (alert above 0.20)\n", m.fmtGauge("ragwatch_drift_score", map[string]string{"detector": "retrieval-score-psi"}))
	b.WriteString("ALERTS\n")
	if len(d.order) == 0 {
		b.WriteString("          none yet\n")
	}
	for _, k := range d.order {
		ev := d.alerts[k]
		state := "FIRING"
		if ev.Resolved != 0 {
			state = fmt.Sprintf("resolved at %s", ev.Resolved.Round(time.Second))
		}
		fmt.Fprintf(&b, "          %-22s %-6s fired at %-6s %s  value %.3f\n", ev.Rule, ev.Severity, ev.FiredAt.Round(time.Second), state, ev.Value)
		if len(ev.Worst) > 0 {
			fmt.Fprintf(&b, "            worst traces: %s\n", strings.Join(ev.Worst, " "))
		}
	}
	b.WriteString("\nEVENTS\n")
	for _, l := range d.lastLines {
		b.WriteString("          " + l + "\n")
	}
	fmt.Fprintf(&b, "\nmetrics: http://%s/metrics   alerts: http://%s/api/v1/alerts   Ctrl-C stops\n", d.opts.HTTPEndpoint, d.opts.HTTPEndpoint)
	fmt.Fprint(d.out, b.String())
}

func (d *demo) firing() int {
	n := 0
	for _, k := range d.order {
		if d.alerts[k].Resolved == 0 {
			n++
		}
	}
	return n
}

func (d *demo) summary() Summary {
	fams, _ := d.app.Registry.Gather()
	m := metricsOf(fams)
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Summary{Requests: d.sent.Load(), SendErrors: d.sendErrs.Load(), Feedback: d.feedback.Load(),
		Scores: map[string]scoreStat{}, DegradedFrom: d.degradedFrom, DegradedTo: d.degradedTo}
	for _, metric := range m.labelValues("ragwatch_eval_score", "metric") {
		sel := map[string]string{"metric": metric}
		s.Scores[metric] = scoreStat{N: uint64(m.count("ragwatch_eval_score", sel)), Mean: m.mean("ragwatch_eval_score", sel)}
	}
	for _, k := range d.order {
		s.Alerts = append(s.Alerts, *d.alerts[k])
	}
	return s
}

// printSummary writes the summary; the lines starting with "alert " are stable for scripts.
func printSummary(w io.Writer, s Summary) {
	fmt.Fprintf(w, "\n=== ragwatch demo summary ===\n")
	fmt.Fprintf(w, "requests %d  feedback %d  send errors %d\n", s.Requests, s.Feedback, s.SendErrors)
	if s.DegradedFrom > 0 {
		fmt.Fprintf(w, "degraded from %s to %s\n", s.DegradedFrom.Round(time.Second), s.DegradedTo.Round(time.Second))
	}
	names := make([]string, 0, len(s.Scores))
	for k := range s.Scores {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "score %-20s n=%d mean=%.3f\n", k, s.Scores[k].N, s.Scores[k].Mean)
	}
	if len(s.Alerts) == 0 {
		fmt.Fprintln(w, "no alerts")
	}
	for _, a := range s.Alerts {
		resolved := "still firing"
		if a.Resolved != 0 {
			resolved = "resolved at " + a.Resolved.Round(time.Second).String()
		}
		fmt.Fprintf(w, "alert %s kind=%s severity=%s fired at %s, %s; worst traces: %s\n",
			a.Rule, a.Kind, a.Severity, a.FiredAt.Round(time.Second), resolved, strings.Join(a.Worst, ","))
	}
}

// metrics reads gathered families.
type metrics map[string]*dto.MetricFamily

func metricsOf(fams []*dto.MetricFamily) metrics {
	m := metrics{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}

func matches(mt *dto.Metric, sel map[string]string) bool {
	for k, v := range sel {
		found := false
		for _, l := range mt.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// sum adds counters, gauges and histogram counts of the matching series.
func (m metrics) sum(name string, sel map[string]string) float64 {
	f := m[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, mt := range f.GetMetric() {
		if !matches(mt, sel) {
			continue
		}
		switch {
		case mt.Counter != nil:
			total += mt.Counter.GetValue()
		case mt.Gauge != nil:
			total += mt.Gauge.GetValue()
		case mt.Histogram != nil:
			total += float64(mt.Histogram.GetSampleCount())
		}
	}
	return total
}

func (m metrics) count(name string, sel map[string]string) float64 { return m.sum(name, sel) }

// mean is a histogram's sum over count across matching series (NaN when empty).
func (m metrics) mean(name string, sel map[string]string) float64 {
	f := m[name]
	if f == nil {
		return -1
	}
	var s float64
	var n uint64
	for _, mt := range f.GetMetric() {
		if mt.Histogram != nil && matches(mt, sel) {
			s += mt.Histogram.GetSampleSum()
			n += mt.Histogram.GetSampleCount()
		}
	}
	if n == 0 {
		return -1
	}
	return s / float64(n)
}

func (m metrics) fmtGauge(name string, sel map[string]string) string {
	f := m[name]
	if f == nil {
		return "  -  "
	}
	for _, mt := range f.GetMetric() {
		if mt.Gauge != nil && matches(mt, sel) {
			return fmt.Sprintf("%.3f", mt.Gauge.GetValue())
		}
	}
	return "  -  "
}

func (m metrics) labelValues(name, label string) []string {
	f := m[name]
	if f == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, mt := range f.GetMetric() {
		for _, l := range mt.GetLabel() {
			if l.GetName() == label && !seen[l.GetValue()] {
				seen[l.GetValue()] = true
				out = append(out, l.GetValue())
			}
		}
	}
	sort.Strings(out)
	return out
}

func fmtMean(v float64) string {
	if v < 0 {
		return "  -  "
	}
	return fmt.Sprintf("%.3f", v)
}
