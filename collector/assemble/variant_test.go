package assemble

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// TestVariant reads a record's variant from each place docs/variants.md lists, in its order.
func TestVariant(t *testing.T) {
	turnAttrs := func(extra map[string]any) map[string]any {
		m := map[string]any{"rag.query": "q", "rag.answer": "a", "rag.documents": `[{"id":"d"}]`}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	flag := func(name string, attrs map[string]any) []ev {
		return []ev{{name: name, at: ms(1), attrs: attrs}}
	}
	tests := []struct {
		name     string
		keys     []string // variants.attributes; nil: the default
		resource map[string]string
		spans    []sp
		want     string
	}{{
		name:     "rag.variant on the turn beats a flag and the service version",
		resource: map[string]string{"service.version": "1.4.2"},
		spans: []sp{
			{id: 1, name: "root", end: ms(10), events: flag("feature_flag.evaluation", map[string]any{
				"feature_flag.key": "prompt", "feature_flag.result.variant": "flag-b"})},
			{id: 2, parent: 1, name: "turn", start: ms(1), end: ms(9), attrs: turnAttrs(map[string]any{"rag.variant": " prompt-v2 "})},
		},
		want: "prompt-v2",
	}, {
		name:     "feature_flag.evaluation event (OpenTelemetry feature-flag conventions) on an ancestor",
		resource: map[string]string{"service.version": "1.4.2"},
		spans: []sp{
			{id: 1, name: "root", end: ms(10), events: flag("feature_flag.evaluation", map[string]any{
				"feature_flag.key": "prompt", "feature_flag.result.variant": "canary"})},
			{id: 2, parent: 1, name: "turn", start: ms(1), end: ms(9), attrs: turnAttrs(nil)},
		},
		want: "canary",
	}, {
		name: "feature flag as a span attribute",
		spans: []sp{
			{id: 1, name: "turn", end: ms(9), attrs: turnAttrs(map[string]any{"feature_flag.result.variant": "b"})},
		},
		want: "b",
	}, {
		name: "a flag evaluated in a sibling span outside the turn",
		spans: []sp{
			{id: 1, name: "root", end: ms(10)},
			{id: 2, parent: 1, name: "flags", start: ms(1), end: ms(2), events: flag("feature_flag.evaluation", map[string]any{
				"feature_flag.result.variant": "treatment"})},
			{id: 3, parent: 1, name: "turn", start: ms(2), end: ms(9), attrs: turnAttrs(nil)},
		},
		want: "treatment",
	}, {
		name:     "service.version of the resource (every family: the OpenTelemetry SDK's resource)",
		resource: map[string]string{"service.version": "2026.11.3"},
		spans:    []sp{{id: 1, name: "turn", end: ms(9), attrs: turnAttrs(nil)}},
		want:     "2026.11.3",
	}, {
		name: "an event that is not a flag evaluation is not read",
		spans: []sp{{id: 1, name: "turn", end: ms(9), attrs: turnAttrs(nil), events: flag("log", map[string]any{
			"feature_flag.result.variant": "no"})}},
		want: "",
	}, {
		name:     "configured keys: Traceloop association property first, OpenInference tag second",
		keys:     []string{"traceloop.association.properties.variant", "feature_flag.result.variant"},
		resource: map[string]string{"service.version": "9"},
		spans: []sp{
			{id: 1, name: "root", end: ms(10), attrs: map[string]any{"feature_flag.result.variant": "flag"}},
			{id: 2, parent: 1, name: "turn", start: ms(1), end: ms(9), attrs: turnAttrs(map[string]any{
				"traceloop.association.properties.variant": "tl-v3"})},
		},
		want: "tl-v3",
	}, {
		name:     "configured keys without service.version ignore it",
		keys:     []string{"deployment.variant"},
		resource: map[string]string{"service.version": "9", "deployment.variant": "blue"},
		spans:    []sp{{id: 1, name: "turn", end: ms(9), attrs: turnAttrs(nil)}},
		want:     "blue",
	}, {
		name: "legacy feature_flag event with a configured key",
		keys: []string{"feature_flag.variant"},
		spans: []sp{{id: 1, name: "turn", end: ms(9), attrs: turnAttrs(nil), events: flag("feature_flag", map[string]any{
			"feature_flag.variant": 3})}},
		want: "3",
	}, {
		name:  "too long: cut to 128 bytes",
		spans: []sp{{id: 1, name: "turn", end: ms(9), attrs: turnAttrs(map[string]any{"rag.variant": strings.Repeat("v", 300)})}},
		want:  strings.Repeat("v", record.MaxVariantLength),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := build(t, 1, "svc", tc.spans...)
			for k, v := range tc.resource {
				td.ResourceSpans().At(0).Resource().Attributes().PutStr(k, v)
			}
			var keys span.VariantKeys
			if tc.keys != nil {
				keys = span.NewVariantKeys(tc.keys)
			}
			res := Assemble(span.FromTraces(td, nil, keys))
			if len(res.Records) != 1 {
				t.Fatalf("got %d records: %s", len(res.Records), js(res.Records))
			}
			if got := res.Records[0].Variant; got != tc.want {
				t.Fatalf("variant %q, want %q", got, tc.want)
			}
			if err := res.Records[0].Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestVariantPerTurn gives each turn of one trace its own variant, and the Assembler reads
// the configured keys.
func TestVariantPerTurn(t *testing.T) {
	got := make(chan *record.Record, 4)
	a, err := New(Settings{
		Config: config.Assembly{Wait: time.Millisecond, CompleteWait: time.Millisecond, Timeout: time.Second, MaxTraces: 10},
		Next: record.ConsumerFunc(func(_ context.Context, r *record.Record) error {
			got <- r
			return nil
		}),
		VariantAttributes: []string{"app.variant"},
	})
	if err != nil {
		t.Fatal(err)
	}
	td := build(t, 1, "svc",
		sp{id: 1, name: "agent", end: ms(30), attrs: map[string]any{"openinference.span.kind": "AGENT"}},
		sp{id: 2, parent: 1, name: "t1", start: ms(1), end: ms(9), attrs: map[string]any{
			"openinference.span.kind": "CHAIN", "input.value": "q1", "app.variant": "a"}},
		sp{id: 3, parent: 2, name: "r1", start: ms(2), end: ms(3), attrs: map[string]any{
			"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d1"}},
		sp{id: 4, parent: 2, name: "g1", start: ms(4), end: ms(8), attrs: map[string]any{
			"openinference.span.kind": "LLM", "output.value": "a1"}},
		sp{id: 5, parent: 1, name: "t2", start: ms(10), end: ms(19), attrs: map[string]any{
			"openinference.span.kind": "CHAIN", "input.value": "q2", "app.variant": "b"}},
		sp{id: 6, parent: 5, name: "r2", start: ms(11), end: ms(12), attrs: map[string]any{
			"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d2"}},
		sp{id: 7, parent: 5, name: "g2", start: ms(13), end: ms(18), attrs: map[string]any{
			"openinference.span.kind": "LLM", "output.value": "a2"}},
	)
	if err := a.ConsumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	byQuery := map[string]string{}
	for len(got) > 0 {
		r := <-got
		byQuery[r.Query] = r.Variant
	}
	if byQuery["q1"] != "a" || byQuery["q2"] != "b" {
		t.Fatalf("variants by query: %v", byQuery)
	}
}
