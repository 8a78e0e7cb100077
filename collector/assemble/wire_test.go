package assemble

import (
	"runtime"
	"testing"
	"unique"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
)

// A resource's service name is a copy, never a view of the request (the transport reuses its
// buffers), and requests naming the same service share one copy.
func TestServiceNameIsOneSharedCopy(t *testing.T) {
	lim := span.Limits{MaxSpansPerRequest: 100, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
	decode := func(svc string) []span.Span {
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(build(t, 1, svc, rootSpan(ms(100))))
		if err != nil {
			t.Fatal(err)
		}
		spans, _, werr := span.DecodeProto(body, lim, nil, nil, nil)
		if werr != nil || len(spans) != 1 {
			t.Fatalf("span.DecodeProto: %d spans, %v", len(spans), werr)
		}
		for i := range body {
			body[i] = 'x'
		}
		return spans
	}
	// A handle keeps unique's entry through any collection the test meets; in the running
	// process a collection may drop it, and the next name is copied once again.
	canonical := unique.Make("checkout-api")
	first, again := decode("checkout-api"), decode("checkout-api")
	if first[0].Service != "checkout-api" || again[0].Service != "checkout-api" {
		t.Fatalf("services %q, %q after the requests changed", first[0].Service, again[0].Service)
	}
	want := unsafe.StringData(canonical.Value())
	if unsafe.StringData(first[0].Service) != want || unsafe.StringData(again[0].Service) != want {
		t.Error("requests naming one service hold copies of their own of its name")
	}
	runtime.KeepAlive(canonical)
	if other := decode("billing"); other[0].Service != "billing" {
		t.Fatalf("service %q", other[0].Service)
	}
}
