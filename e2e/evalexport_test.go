//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/internal/synth"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// eventsCollector is a Collector that receives OTLP logs and writes them, as OTLP JSON lines,
// to a file: what a team's Collector in front of Loki, Elasticsearch or a trace backend sees.
const eventsCollector = `
receivers:
  otlp:
    protocols:
      grpc: { endpoint: %q }
exporters:
  file/events:
    path: %q
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      readers:
        - pull:
            exporter:
              prometheus: { host: %q, port: %s }
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file/events]
`

const evalReplicaConfig = `
receivers:
  otlp:
    grpc: { endpoint: %q }
    http: { endpoint: "" }
http:
  endpoint: %q
  api_endpoint: ""
nats:
  store_dir: %q
  embedded: { endpoint: %q }
assembly:
  wait: 300ms
  timeout: 4s
sampling:
  rate: 1.0
scoring:
  workers: 1
  backend: builtin
  metrics: [faithfulness, answer_relevancy, context_precision]
  recent: { size: 1000 }
evaluations:
  otlp: { endpoint: %q, insecure: true }
  flush_interval: 200ms
redaction:
  # The builtin scorer's explanations quote no record content; this pattern stands for what a
  # judge quotes, so the test can see that every explanation was redacted on its way out.
  patterns: [{ name: claim_count, regex: "[0-9]+/[0-9]+ claims" }]
`

// conversationTraces makes n traces of two turns each: an AGENT root with two synthetic
// retrieve-then-generate turns (CHAIN spans) below it, so that each record names its turn's
// span. It returns the export and, by trace id, the two turns' span ids.
func conversationTraces(n int, service string, seed uint64) (ptrace.Traces, map[string][]string) {
	gen := synth.New(synth.Options{Seed: seed, Service: service})
	now := time.Now()
	td := ptrace.NewTraces()
	turns := map[string][]string{}
	for i := 0; i < n; i++ {
		first := gen.Next(now)
		tid := pcommon.TraceID(first.TraceID)
		agentID := pcommon.SpanID{0xa6, 0xe0, byte(i >> 8), byte(i), 1, 2, 3, 4}
		one := ptrace.NewTraces()
		for k := 0; k < 2; k++ {
			t := first
			if k == 1 {
				t = gen.Next(now) // its own span ids; moved into the first's trace below
			}
			t.Start = now.Add(-t.Total)
			synth.AppendTraces(one, &t)
		}
		forEachSpan(one, func(s ptrace.Span) {
			s.SetTraceID(tid)
			if s.ParentSpanID().IsEmpty() { // each turn's CHAIN span hangs under the agent
				s.SetParentSpanID(agentID)
				turns[tid.String()] = append(turns[tid.String()], s.SpanID().String())
			}
		})
		one.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		agent := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		agent.SetTraceID(tid)
		agent.SetSpanID(agentID)
		agent.SetName("agent")
		agent.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Minute)))
		agent.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
		agent.Attributes().PutStr("openinference.span.kind", "AGENT")
	}
	return td, turns
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		ss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < ss.Len(); j++ {
			spans := ss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(spans.At(k))
			}
		}
	}
}

// fileEvent is one log record the Collector's file exporter wrote.
type fileEvent struct {
	name, trace, span, metric, scorer, explanation, response string
}

func readEvents(t *testing.T, path string) []fileEvent {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fileEvent
	var u plog.JSONUnmarshaler
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		logs, err := u.UnmarshalLogs(sc.Bytes())
		if err != nil {
			continue // a line the exporter is still writing
		}
		for i := 0; i < logs.ResourceLogs().Len(); i++ {
			sl := logs.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sl.Len(); j++ {
				recs := sl.At(j).LogRecords()
				for k := 0; k < recs.Len(); k++ {
					r := recs.At(k)
					a := r.Attributes()
					get := func(key string) string {
						if v, ok := a.Get(key); ok {
							return v.AsString()
						}
						return ""
					}
					e := fileEvent{name: r.EventName(), trace: r.TraceID().String(), metric: get("gen_ai.evaluation.name"),
						scorer: get("ragwatch.evaluation.scorer"), explanation: get("gen_ai.evaluation.explanation"),
						response: get("gen_ai.response.id")}
					if !r.SpanID().IsEmpty() {
						e.span = r.SpanID().String()
					}
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// ringScore is one entry of GET /api/v1/scores.
type ringScore struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	Metric  string `json:"metric"`
	Scorer  string `json:"scorer"`
}

// TestEvaluationEventsThroughCollector runs ragwatch with evaluations.otlp pointing at a real
// OpenTelemetry Collector (built from the module proxy, scripts/otelcol) whose file exporter
// writes what it receives. Every score of every sampled record arrives once, as a
// gen_ai.evaluation.result event on the trace id and span id of the record's turn, with the
// gen_ai.response.id of the model call that answered, and its explanation redacted.
func TestEvaluationEventsThroughCollector(t *testing.T) {
	otelcol := buildCollector(t)
	ragwatch := buildRagwatch(t)

	dir := t.TempDir()
	events := filepath.Join(dir, "events.jsonl")
	colOTLP, colMetrics := testutil.FreeAddr(t), testutil.FreeAddr(t)
	host, port, _ := strings.Cut(colMetrics, ":")
	colCfg := writeFile(t, dir, "otelcol.yaml", fmt.Sprintf(eventsCollector, colOTLP, events, host, port))
	startEnv(t, os.Environ(), otelcol, "--config", colCfg)
	waitHTTP(t, "http://"+colMetrics+"/metrics")

	otlpAddr, httpAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cfg := writeFile(t, dir, "ragwatch.yaml", fmt.Sprintf(evalReplicaConfig, otlpAddr, httpAddr,
		filepath.Join(dir, "data"), testutil.FreeAddr(t), colOTLP))
	start(t, ragwatch, "run", "-c", cfg, "--log-format", "json")
	base := "http://" + httpAddr
	waitHTTP(t, base+"/readyz")
	r := &replica{name: "sidecar", otlp: otlpAddr, http: base}

	// Ten single-turn traces (each record's turn is its trace's root span) and ten
	// conversations of two turns (each record names its turn's span). Every model call
	// names its response (gen_ai.response.id, from its span id).
	single, singleIDs := ragTraces(10, "support-bot", 11)
	convo, turns := conversationTraces(10, "support-bot", 12)
	roots := map[string]string{}     // single trace id -> its root span
	responses := map[string]string{} // trace/turn span -> the response id of its LLM span (the turn's child)
	for _, td := range append(slices.Clone(single), convo) {
		forEachSpan(td, func(s ptrace.Span) {
			if s.ParentSpanID().IsEmpty() {
				roots[s.TraceID().String()] = s.SpanID().String()
			}
			if k, ok := s.Attributes().Get("openinference.span.kind"); ok && k.Str() == "LLM" {
				id := "resp-" + s.SpanID().String()
				s.Attributes().PutStr("gen_ai.response.id", id)
				responses[s.TraceID().String()+"/"+s.ParentSpanID().String()] = id
			}
		})
	}
	export(t, otlpAddr, append(single, convo)...)
	// Each single trace gives one record, each conversation one per turn the assembler finds
	// (two, unless a synthetic turn's shape merges them); the test follows what it assembled.
	var records int
	testutil.CheckFor(t, 60*time.Second, 250*time.Millisecond, "every trace assembled", func() error {
		v := r.sum(t, "ragwatch_records_total", map[string]string{"outcome": "assembled"})
		held := r.sum(t, "ragwatch_assembly_traces_held", nil)
		if v < float64(len(singleIDs)+len(turns)) || held > 0 {
			return fmt.Errorf("assembled %v records, %v traces held", v, held)
		}
		records = int(v)
		return nil
	})
	if records < len(singleIDs)+len(turns)*3/2 {
		t.Fatalf("only %d records from %d single traces and %d two-turn conversations", records, len(singleIDs), len(turns))
	}
	// Every record's scores, as the process holds them (the recent-scores ring), until they
	// stop growing; then each must be in the Collector's file once.
	var scores []ringScore
	testutil.CheckFor(t, 60*time.Second, 250*time.Millisecond, "every record scored and exported", func() error {
		b, code, err := httpGet(base + "/api/v1/scores?limit=1000")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /api/v1/scores: %d %v", code, err)
		}
		var resp struct{ Scores []ringScore }
		if err := json.Unmarshal(b, &resp); err != nil {
			return err
		}
		scores = resp.Scores
		keys := map[string]bool{}
		for _, s := range scores {
			keys[s.TraceID+"/"+s.SpanID] = true
		}
		if len(keys) < records {
			return fmt.Errorf("scores for %d of %d records", len(keys), records)
		}
		exported := r.sum(t, "ragwatch_evaluation_exported_total", map[string]string{"destination": "otlp"})
		if got := len(readEvents(t, events)); exported < float64(len(scores)) || got < len(scores) {
			return fmt.Errorf("%d scores, %v exported, %d in the Collector's file", len(scores), exported, got)
		}
		return nil
	})
	got := readEvents(t, events)
	t.Logf("%d records assembled, %d scores, %d events in the Collector's file", records, len(scores), len(got))
	count := map[string]int{}
	redacted := regexp.MustCompile(`\[REDACTED:claim_count\]`)
	leaked := regexp.MustCompile(`[0-9]+/[0-9]+ claims`)
	for _, e := range got {
		if e.name != "gen_ai.evaluation.result" {
			t.Errorf("event name %q", e.name)
		}
		if want := responses[e.trace+"/"+e.span]; want == "" || e.response != want {
			t.Errorf("event %s/%s %s: gen_ai.response.id %q, want %q (its turn's call)", e.trace, e.span, e.metric, e.response, want)
		}
		count[e.trace+"/"+e.span+"/"+e.metric+"/"+e.scorer]++
		if e.metric == "faithfulness" && (!redacted.MatchString(e.explanation) || leaked.MatchString(e.explanation)) {
			t.Errorf("faithfulness explanation not redacted: %q", e.explanation)
		}
	}
	var missing, twice []string
	for _, s := range scores {
		k := s.TraceID + "/" + s.SpanID + "/" + s.Metric + "/" + s.Scorer
		switch count[k] {
		case 1:
		case 0:
			missing = append(missing, k)
		default:
			twice = append(twice, k)
		}
	}
	if len(got) != len(scores) || len(missing) > 0 || len(twice) > 0 {
		sort.Strings(missing)
		t.Errorf("%d events for %d scores; missing %v; more than once %v", len(got), len(scores), missing, twice)
	}
	// The conversations' records name their turns: their events sit on those spans.
	onTurns := 0
	for tid, spans := range turns {
		for _, span := range spans {
			onTurns += count[tid+"/"+span+"/faithfulness/builtin"]
		}
	}
	for k := range count {
		parts := strings.Split(k, "/")
		tid, span := parts[0], parts[1]
		if _, convo := turns[tid]; (convo && !slices.Contains(turns[tid], span)) || (!convo && span != roots[tid]) {
			t.Errorf("event on span %q of trace %s, which is no turn of it", span, tid)
		}
	}
	if onTurns < len(turns)*3/2 {
		t.Errorf("faithfulness events on %d turn spans of %d conversations", onTurns, len(turns))
	}
	for _, id := range singleIDs {
		if count[id+"/"+roots[id]+"/faithfulness/builtin"] != 1 {
			t.Errorf("no faithfulness event on the root span %s of trace %s", roots[id], id)
		}
	}
}
