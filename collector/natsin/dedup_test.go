package natsin

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestDedupWindowAndBound(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	d := newDedup(time.Minute, 3, nil, func() time.Time { return now })
	ctx := context.Background()
	seen := func(k string) bool {
		t.Helper()
		ok, err := d.seenBefore(ctx, k, true)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, k := range []string{"a", "b", "c"} {
		if seen(k) {
			t.Fatalf("%s seen before marking", k)
		}
		if err := d.mark(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if !seen("a") || !seen("c") {
		t.Fatal("marked keys must be seen")
	}
	_ = d.mark(ctx, "d") // over the bound: the oldest ("a") goes
	if seen("a") || !seen("b") || d.len() != 3 {
		t.Fatalf("bound: a=%v b=%v len=%d", seen("a"), seen("b"), d.len())
	}
	now = now.Add(time.Minute)
	if seen("b") || seen("d") || d.len() != 0 {
		t.Fatalf("after the window: b=%v d=%v len=%d", seen("b"), seen("d"), d.len())
	}
}

func TestDedupKVAcrossInstances(t *testing.T) {
	conn, _, cfg := embedded(t)
	ctx := context.Background()
	kv, err := conn.KeyValue(ctx, "dedup_test", time.Hour, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	long := "r_" + strings.Repeat("x", 300) + "/span" // not a valid KV key as is: hashed
	first := newDedup(cfg.Consume.DedupWindow, 10, kv, clock)
	for _, k := range []string{"r_4bf92f3577b34da6a3ce929d0e0e4736", long} {
		if err := first.mark(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	second := newDedup(cfg.Consume.DedupWindow, 10, kv, clock) // a restarted process
	for _, k := range []string{"r_4bf92f3577b34da6a3ce929d0e0e4736", long} {
		if ok, _ := second.seenBefore(ctx, k, false); ok {
			t.Fatalf("%s: a first delivery must not consult KV", k[:10])
		}
		if ok, err := second.seenBefore(ctx, k, true); !ok || err != nil {
			t.Fatalf("%s: a redelivery must find the mark: %v %v", k[:10], ok, err)
		}
	}
	now = now.Add(cfg.Consume.DedupWindow + time.Second)
	third := newDedup(cfg.Consume.DedupWindow, 10, kv, clock)
	if ok, _ := third.seenBefore(ctx, long, true); ok {
		t.Fatal("a mark older than the window must not count")
	}
}
