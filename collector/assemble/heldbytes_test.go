package assemble

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// heldHeap holds n copies of td (each a new trace, decoded from protobuf like the receiver does)
// in an Assembler and returns the accounted bytes and the heap growth they caused.
func heldHeap(t *testing.T, td ptrace.Traces, n int) (accounted, grown int64) {
	t.Helper()
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Settings{
		Config: config.Assembly{Wait: time.Second, Timeout: time.Hour, MaxTraces: 2 * n, MaxBytes: 1 << 40},
		Next:   record.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // twice: sync.Pool keeps a victim cache for one cycle
	runtime.ReadMemStats(&before)
	for i := range n {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			t.Fatal(err)
		}
		setTraceID(td, uint64(i)+1)
		if err := a.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	a.mu.Lock()
	accounted = a.bytes
	held := len(a.traces)
	a.mu.Unlock()
	if held != n {
		t.Fatalf("held %d traces, want %d", held, n)
	}
	grown = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(a)
	return accounted, grown
}

// TestHeldBytesMatchHeap checks that ragwatch_assembly_held_bytes (what assembly.max_bytes
// bounds) is the heap held traces really keep alive, within 10 %.
func TestHeldBytesMatchHeap(t *testing.T) {
	cases := map[string]ptrace.Traces{"bench": benchTrace(t), "no root": noRoot(benchTrace(t)), "events and structured values": genaiTrace(t)}
	for name, td := range cases {
		t.Run(name, func(t *testing.T) {
			const n = 3000
			accounted, grown := heldHeap(t, td, n)
			ratio := float64(accounted) / float64(grown)
			t.Logf("accounted %d B/trace, heap grew %d B/trace (ratio %.3f)", accounted/n, grown/n, ratio)
			if ratio < 0.9 || ratio > 1.1 {
				t.Fatalf("accounted %d bytes for %d held traces, the heap grew by %d (ratio %.3f)", accounted, n, grown, ratio)
			}
		})
	}
}

// noRoot returns td without its root span (a trace that waits for its timeout).
func noRoot(td ptrace.Traces) ptrace.Traces {
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.RemoveIf(func(s ptrace.Span) bool { return s.ParentSpanID().IsEmpty() })
	return td
}

// genaiTrace is a GenAI-convention trace: structured attribute values and events with attributes.
func genaiTrace(t *testing.T) ptrace.Traces {
	docs := make([]any, 5)
	for i := range docs {
		docs[i] = map[string]any{"id": fmt.Sprintf("d%d", i), "score": 0.5, "content": strings.Repeat("text of a document ", 20)}
	}
	var events []ev
	for i := range 4 {
		events = append(events, ev{name: "gen_ai.user.message", at: ms(10), attrs: map[string]any{
			"content": fmt.Sprintf("message %d: %s", i, strings.Repeat("words ", 40)), "gen_ai.system": "openai"}})
	}
	return build(t, 1, "svc",
		sp{id: 1, name: "rag", end: ms(100), attrs: map[string]any{"gen_ai.operation.name": "invoke_agent"}},
		sp{id: 2, parent: 1, name: "retrieve", start: ms(1), end: ms(10), attrs: map[string]any{
			"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "how?", "gen_ai.retrieval.documents": docs}},
		sp{id: 3, parent: 1, name: "chat", start: ms(11), end: ms(90), events: events, attrs: map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 10,
			"tags": []any{"a", "b"}, "gen_ai.output.messages": []any{map[string]any{"role": "assistant", "content": "yes"}}}},
	)
}
