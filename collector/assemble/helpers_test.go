package assemble

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// base is the start of every test trace.
var base = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// sp describes one span of a hand-built trace; ids are small numbers.
type sp struct {
	id, parent byte
	name       string
	kind       ptrace.SpanKind
	start, end time.Duration // offsets from base
	attrs      map[string]any
	events     []ev
	links      []byte // trace ids of linked spans (span id 1)
	remote     bool   // the parent is remote (OTLP flags)
}

type ev struct {
	name  string
	at    time.Duration
	attrs map[string]any
}

func tid(b byte) pcommon.TraceID { return pcommon.TraceID{0x4b, 0xf9, 15: b} }
func sid(b byte) pcommon.SpanID {
	if b == 0 {
		return pcommon.SpanID{}
	}
	return pcommon.SpanID{0xa0, 7: b}
}

func tidHex(b byte) string { return tid(b).String() }
func sidHex(b byte) string { return sid(b).String() }

// build makes a ptrace.Traces holding one resource (service) with the spans of trace t.
func build(t testing.TB, trace byte, service string, spans ...sp) ptrace.Traces {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	rs.Resource().Attributes().PutStr("host.name", "h1")
	ss := rs.ScopeSpans().AppendEmpty()
	for _, s := range spans {
		ps := ss.Spans().AppendEmpty()
		ps.SetTraceID(tid(trace))
		ps.SetSpanID(sid(s.id))
		ps.SetParentSpanID(sid(s.parent))
		ps.SetName(s.name)
		ps.SetKind(s.kind)
		if s.remote {
			ps.SetFlags(0x100 | 0x200) // OTLP span flags: has-is-remote, is-remote
		}
		ps.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(s.start)))
		ps.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(s.end)))
		if err := ps.Attributes().FromRaw(s.attrs); err != nil {
			t.Fatalf("attrs of span %d: %v", s.id, err)
		}
		ps.Attributes().PutStr("http.url", "https://example.test/ignored")
		for _, e := range s.events {
			pe := ps.Events().AppendEmpty()
			pe.SetName(e.name)
			pe.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(e.at)))
			if err := pe.Attributes().FromRaw(e.attrs); err != nil {
				t.Fatalf("event attrs: %v", err)
			}
		}
		for _, l := range s.links {
			pl := ps.Links().AppendEmpty()
			pl.SetTraceID(tid(l))
			pl.SetSpanID(sid(1))
		}
	}
	return td
}

func assembleTD(td ptrace.Traces) Result {
	return Assemble(span.FromTraces(td, nil, nil))
}

func fp(f float64) *float64 { return &f }

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// sameRecords compares records field by field and prints both as JSON on a difference.
func sameRecords(t *testing.T, got, want []*record.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(got), len(want), js(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		check := func(field string, a, b any) {
			t.Helper()
			if !reflect.DeepEqual(a, b) {
				t.Errorf("record %d %s:\n got  %s\n want %s", i, field, js(a), js(b))
			}
		}
		check("trace_id", g.TraceID, w.TraceID)
		check("span_id", g.SpanID, w.SpanID)
		check("service", g.Service, w.Service)
		check("session_id", g.SessionID, w.SessionID)
		check("user_id", g.UserID, w.UserID)
		check("time", g.Time.UTC(), w.Time.UTC())
		check("query", g.Query, w.Query)
		check("documents", g.Documents, w.Documents)
		check("retrieval_not_seen", g.RetrievalNotSeen, w.RetrievalNotSeen)
		check("answer", g.Answer, w.Answer)
		check("citations", g.Citations, w.Citations)
		check("model", g.Model, w.Model)
		check("response_id", g.ResponseID, w.ResponseID)
		check("usage", g.Usage, w.Usage)
		check("latency", g.Latency, w.Latency)
		check("feedback", g.Feedback, w.Feedback)
		check("reference", g.Reference, w.Reference)
		check("relevance", g.Relevance, w.Relevance)
		check("attributes", g.Attributes, w.Attributes)
		if err := g.Validate(); err != nil {
			t.Errorf("record %d does not validate: %v", i, err)
		}
	}
}

func js(x any) string {
	b, _ := json.MarshalIndent(x, "", "  ")
	return string(b)
}

// contentID is the id a document without one gets (docs/record.md): "h" and the FNV-1a 64-bit
// hash of its content in hex.
func contentID(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("h%016x", h.Sum64())
}
