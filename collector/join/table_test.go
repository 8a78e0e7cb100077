package join

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/hexid"
)

func TestSlotSize(t *testing.T) {
	// The per-trace cost: keep it in mind before adding a field. 40 until the variant's id
	// (2 bytes, padded to 4) joined the slot.
	if got := newTable(1).tab.EntryBytes(); got != 44 {
		t.Fatalf("an entry is %d bytes, want 44", got)
	}
}

// The packed fields keep their values whatever the others hold: the largest service id next
// to every flag.
func TestSlotPacking(t *testing.T) {
	allFlags := flagSeen | flagRawID | flagSpan
	for _, svc := range []uint32{0, 1, maxTableEntries} {
		for _, f := range []uint8{0, flagSeen, allFlags} {
			s := slot{expires: -1}
			s.setSvc(svc)
			s.setFlags(f)
			if s.svc() != svc || s.flags() != f {
				t.Errorf("svc %d flags %#x: read back %d %#x", svc, f, s.svc(), s.flags())
			}
			s.setSvc(0)
			s.setFlags(allFlags)
			if s.svc() != 0 || s.flags() != allFlags || s.expires != -1 {
				t.Errorf("after setting svc 0 and every flag: %d %#x", s.svc(), s.flags())
			}
		}
	}
}

// Expiries round up to whole seconds after the join's base, never down: an entry is not
// dropped before its time.
func TestExpirySeconds(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want int32
	}{
		{0, 0},
		{1, 1},
		{int64(time.Second), 1},
		{int64(time.Second) + 1, 2},
		{int64(24 * time.Hour), 86400},
		{-1, 0}, // an expiry already past when loaded from the KV bucket
		{-int64(time.Second) - 1, -1},
		{math.MaxInt64, math.MaxInt32},
		{math.MinInt64, math.MinInt32},
	} {
		got := expirySeconds(tc.ns)
		if got != tc.want {
			t.Errorf("expirySeconds(%d) = %d, want %d", tc.ns, got, tc.want)
		}
		if s := (slot{expires: got}); tc.ns > math.MinInt64/2 && tc.ns < math.MaxInt64/2 && s.expiresNS() < tc.ns {
			t.Errorf("expiresNS = %d, before %d", s.expiresNS(), tc.ns)
		}
	}
}

// checkTable verifies the table against the model: every live trace found in its slot, the
// arrival order, the count, and absent ids absent. (internal/offheap checks its index.)
func checkTable(t *testing.T, tab *table, order []string, absent []string) {
	t.Helper()
	if tab.len() != len(order) || tab.tab.Indexed() != len(order) {
		t.Fatalf("len = %d, indexed %d, want %d", tab.len(), tab.tab.Indexed(), len(order))
	}
	var got []string
	for i := tab.oldest(); i >= 0; i = tab.next(i) {
		got = append(got, idOf(tab, i))
	}
	if !slices.Equal(got, order) {
		t.Fatalf("order = %v, want %v", got, order)
	}
	for _, id := range order {
		i := tab.find(id)
		if i < 0 || idOf(tab, i) != id {
			t.Fatalf("find(%q) = %d", id, i)
		}
	}
	for _, id := range absent {
		if i := tab.find(id); i >= 0 {
			t.Fatalf("find(%q) = %d, want absent", id, i)
		}
	}
}

func idOf(tab *table, i int) string {
	if tab.slot(i).flags()&flagRawID != 0 {
		return tab.rawIDs[uint32(i)]
	}
	return hexid.Encode(tab.tab.Key(i)[:])
}

// TestTableMatchesModel adds, refreshes and removes random traces (OTLP ids and others) and
// checks the table against a plain ordered list after each step.
func TestTableMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		max int
	}{{max: 1}, {max: 7}, {max: 300}, {max: 5000}} {
		t.Run(fmt.Sprintf("max=%d", tc.max), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.max), 7))
			tab := newTable(tc.max)
			var order []string
			newID := func() string {
				if rng.IntN(4) == 0 {
					return fmt.Sprintf("raw-%d", rng.Uint64())
				}
				var b [16]byte
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				return hexid.Encode(b[:])
			}
			for step := range 4 * tc.max {
				switch op := rng.IntN(10); {
				case op < 6: // a new trace; at the bound the oldest goes first
					if tab.full() {
						tab.remove(tab.oldest())
						order = order[1:]
					}
					id := newID()
					tab.add(tab.key(id), id, int64(step))
					order = append(order, id)
				case op < 8 && len(order) > 0: // refresh one
					k := rng.IntN(len(order))
					id := order[k]
					tab.touch(tab.find(id), int64(step))
					order = append(slices.Delete(order, k, k+1), id)
				case len(order) > 0: // remove one
					k := rng.IntN(len(order))
					tab.remove(tab.find(order[k]))
					order = slices.Delete(order, k, k+1)
				}
				if tc.max < 50 || step%max(tc.max/20, 7) == 0 {
					checkTable(t, tab, order, []string{newID(), newID()})
				}
			}
			checkTable(t, tab, order, nil)
			if tab.tab.Cap() != tc.max {
				t.Fatalf("a slab of %d slots for max %d", tab.tab.Cap(), tc.max)
			}
		})
	}
}

// TestTableKeepsIDsExactly: ids the slot cannot hold are kept as given, and OTLP ids that
// differ only in case are different traces.
func TestTableKeepsIDsExactly(t *testing.T) {
	tab := newTable(10)
	lower := "4bf92f3577b34da6a3ce929d0e0e4736"
	upper := "4BF92F3577B34DA6A3CE929D0E0E4736"
	for _, id := range []string{lower, upper, "t1", "4bf92f3577b34da6a3ce929d0e0e473g", lower + "0"} {
		i := tab.add(tab.key(id), id, 0)
		if got := idOf(tab, i); got != id {
			t.Fatalf("slot %d holds %q, want %q", i, got, id)
		}
	}
	if tab.find(lower) == tab.find(upper) || len(tab.rawIDs) != 4 || len(tab.extra) != 0 {
		t.Fatalf("lower=%d upper=%d raw=%d extra=%d", tab.find(lower), tab.find(upper), len(tab.rawIDs), len(tab.extra))
	}
	tests := []struct {
		service, span string
		extra         bool
	}{
		{"support-bot", "00f067aa0ba902b7", false},
		{"", "", false},
		{"search", "00F067AA0BA902B7", true},
		{"search", "turn-1", true},
		{"search", "", false},
	}
	i := tab.find(lower)
	for _, tt := range tests {
		tab.setSeen(i, lower, tt.service, tt.span, "")
		ok, service, span, _ := tab.seen(i)
		if !ok || service != tt.service || span != tt.span {
			t.Errorf("seen = %v %q %q, want %q %q", ok, service, span, tt.service, tt.span)
		}
		if got := tab.extra[uint32(i)] != nil; got != tt.extra {
			t.Errorf("%+v: extra = %v, want %v", tt, got, tt.extra)
		}
	}
}

// TestTableInternsServices: one copy of each service name, dropped with its last trace.
func TestTableInternsServices(t *testing.T) {
	tab := newTable(10)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		i := tab.add(tab.key(id), id, 0)
		tab.setSeen(i, id, "support-bot", "", "")
	}
	tab.setSeen(tab.find("c"), "c", "search", "", "")
	tab.setSeen(tab.find("c"), "c", "search", "", "") // the same record again
	a, c := tab.slot(tab.find("a")).svc(), tab.slot(tab.find("c")).svc()
	if tab.svc.Len() != 2 || tab.slot(tab.find("b")).svc() != a || a == c || tab.svc.Name(c) != "search" {
		t.Fatalf("%d services, ids %d %d", tab.svc.Len(), a, c)
	}
	tab.remove(tab.find("c"))
	tab.remove(tab.find("a"))
	if tab.svc.Len() != 1 || tab.svc.Name(a) != "support-bot" {
		t.Fatalf("%d services", tab.svc.Len())
	}
	tab.remove(tab.find("b"))
	if tab.svc.Len() != 0 || len(tab.extra) != 0 || len(tab.rawIDs) != 0 {
		t.Fatalf("services %d extra %d raw %d", tab.svc.Len(), len(tab.extra), len(tab.rawIDs))
	}
	i := tab.add(tab.key("d"), "d", 0)
	tab.setSeen(i, "d", "billing", "", "")
	if _, service, _, _ := tab.seen(i); service != "billing" || tab.slot(i).svc() > 2 {
		t.Fatalf("service %q, id %d: a freed id is reused", service, tab.slot(i).svc())
	}
}

// TestTableInternsVariants: a record's variant is kept by the id of one shared copy, read back
// with the other ids, replaced when the record is seen again, and dropped with its last trace;
// a variant whose id does not fit the slot is kept whole in the slot's extra.
func TestTableInternsVariants(t *testing.T) {
	tab := newTable(10)
	for _, id := range []string{"a", "b"} {
		tab.setSeen(tab.add(tab.key(id), id, 0), id, "web", "", "candidate")
	}
	if _, _, _, v := tab.seen(tab.find("a")); v != "candidate" || tab.vars.Len() != 1 {
		t.Fatalf("variant %q, %d names", v, tab.vars.Len())
	}
	tab.setSeen(tab.find("b"), "b", "web", "", "control")
	tab.setSeen(tab.find("b"), "b", "web", "", "control") // the same record again
	if _, _, _, v := tab.seen(tab.find("b")); v != "control" || tab.vars.Len() != 2 {
		t.Fatalf("variant %q, %d names", v, tab.vars.Len())
	}
	tab.setSeen(tab.find("a"), "a", "web", "", "")
	if _, _, _, v := tab.seen(tab.find("a")); v != "" || tab.vars.Len() != 1 {
		t.Fatalf("variant %q, %d names: none left for candidate", v, tab.vars.Len())
	}
	tab.remove(tab.find("b"))
	if tab.vars.Len() != 0 {
		t.Fatalf("%d variant names after the last trace went", tab.vars.Len())
	}
	// Ids beyond 16 bits: fill the interned names up to the slot's limit.
	for n := 1; n <= math.MaxUint16; n++ {
		tab.vars.Ref(fmt.Sprint("v", n))
	}
	i := tab.add(tab.key("c"), "c", 0)
	tab.setSeen(i, "c", "web", "", "wide")
	if _, _, _, v := tab.seen(i); v != "wide" || tab.slot(i).variant != 0 || tab.extra[uint32(i)] == nil {
		t.Fatalf("variant %q, slot id %d", v, tab.slot(i).variant)
	}
	tab.setSeen(i, "c", "web", "", "")
	if _, _, _, v := tab.seen(i); v != "" || tab.extra[uint32(i)] != nil {
		t.Fatalf("variant %q: extra kept", v)
	}
}

// FuzzTableIDs: any trace id strings (split at newlines) are each found again, kept exactly,
// and never confused with one another.
func FuzzTableIDs(f *testing.F) {
	f.Add("4bf92f3577b34da6a3ce929d0e0e4736\n4BF92F3577B34DA6A3CE929D0E0E4736\nt1\n\x00\xff")
	f.Add("00000000000000000000000000000000\n0000000000000000000000000000000\n")
	f.Fuzz(func(t *testing.T, in string) {
		tab := newTable(8)
		var order []string
		for _, id := range strings.Split(in, "\n") {
			if slices.Contains(order, id) {
				if i := tab.find(id); i < 0 || idOf(tab, i) != id {
					t.Fatalf("find(%q) = %d", id, i)
				}
				continue
			}
			if i := tab.find(id); i >= 0 {
				t.Fatalf("find(%q) = %d (%q), want absent", id, i, idOf(tab, i))
			}
			if tab.full() {
				tab.remove(tab.oldest())
				order = order[1:]
			}
			tab.add(tab.key(id), id, 0)
			order = append(order, id)
		}
		checkTable(t, tab, order, nil)
	})
}
