package join

import (
	"math"
	"time"

	"github.com/ragwatch/ragwatch/internal/hexid"
	"github.com/ragwatch/ragwatch/internal/offheap"
)

// table holds what the join remembers of each key — a trace (feedback and labels wait for
// their record by trace id), a shadow pair (by pair id) or a conversation session (by session
// id) — in an offheap.Table: slots without pointers outside the Go heap, in arrival order (the
// oldest is evicted or expires first), found by id. At the default bound (200,000 traces) that
// is ≈ 49 bytes per trace instead of ≈ 300 with a map of pointers to entries in a
// container/list, and the garbage collector's heap goal, about twice the live heap, does not
// double it in resident memory (≈ 10 MB at the default bound).
//
// A trace id of 32 lowercase hex characters (what OTLP carries) is kept as its 16 bytes; a
// span id of 16 as its 8; the service as a reference to one shared copy of its name.
// Whatever does not fit goes to small side maps, so nothing is lost: other trace ids to rawIDs
// (≈ 106 bytes per trace in all), other span ids and feedback waiting for its record to extra.
//
// Each namespace (nsTrace, nsPair, nsSession) is a lane of the table: ids of different
// namespaces never match, and each has its own arrival order and bound, so the oldest trace,
// pair or session is evicted or expires first within its own kind.
//
// A table is not safe for concurrent use: the Join guards it with its mutex.
type table struct {
	tab *offheap.Table[[16]byte, slot]

	rawIDs map[uint32]string // by slot index: trace ids not in OTLP's hex form (flagRawID)
	extra  map[uint32]*extra // by slot index

	svc offheap.Strings // the services the slots name, one reference by each
	// vars are the variants the slots name (Record.Variant, as the record carried it: the
	// stages cap it to variants.max_values when they label it, as for the record itself), one
	// reference by each. An id beyond a slot's 16 bits (more than 65535 distinct variants held
	// at once) leaves the name in the slot's extra instead.
	vars offheap.Strings
}

// slot is what the table keeps of a key beside its id ([16]byte: the trace id decoded from hex,
// or (flagRawID) a 128-bit hash of it); it holds no pointers. With the id and the table's links
// an entry is 40 bytes: every field is packed, as the join keeps one for each of the last
// max_entries traces (44 with the variant's id and padding). The record's time is not kept: nothing joined later needs it (feedback and
// labels carry their own).
type slot struct {
	span    [8]byte // the record's span id decoded from hex (flagSpan)
	expires int32   // whole seconds after Join.base, rounded up (expiresNS)
	// meta packs the record's service (the id of its interned name, 0 = none: svcBits bits)
	// and the flags (4 bits).
	meta uint32
	// variant is the id of the record's interned variant (0 = none, or in extra.variant).
	variant uint16
}

// svcBits holds any service id: ids count the names the slots refer to, at most
// maxTableEntries.
const svcBits = 25

func (s *slot) svc() uint32      { return s.meta & (1<<svcBits - 1) }
func (s *slot) setSvc(id uint32) { s.meta = s.meta&^(1<<svcBits-1) | id }
func (s *slot) flags() uint8     { return uint8(s.meta>>svcBits) & 0xf }
func (s *slot) setFlags(f uint8) { s.meta = s.meta&^(0xf<<svcBits) | uint32(f)<<svcBits }

// expirySeconds rounds an expiry in nanoseconds after Join.base up to whole seconds: an entry
// lives less than a second longer than asked, within the sweep's own granularity (a second at
// least). Division truncates towards zero, which rounds a past expiry (negative) up too.
func expirySeconds(ns int64) int32 {
	sec := ns / int64(time.Second)
	if ns%int64(time.Second) > 0 {
		sec++
	}
	return int32(min(max(sec, math.MinInt32), math.MaxInt32))
}

// expiresNS is the slot's expiry in nanoseconds after Join.base.
func (s *slot) expiresNS() int64 { return int64(s.expires) * int64(time.Second) }

// Namespaces of the table's keys.
const (
	nsTrace   uint8 = iota // a trace id: feedback and labels wait here for their record
	nsPair                 // a pair id: the first record of a shadow pair waits for the second
	nsSession              // a session id: a conversation's turn count and last turns
	numNS
)

const (
	flagSeen  uint8 = 1 << iota // the record was seen (here or, joined remotely, elsewhere)
	flagRawID                   // id is a hash: the trace id itself is in rawIDs
	flagSpan                    // span holds the record's span id
	flagTurns                   // records of several turns (span ids) of the trace were seen
)

// extra is what a slot cannot hold. Few traces have one: those with feedback or labels
// waiting for their record, and those whose span id or time are not in the OTLP form. Every
// pair and session slot has one: its state.
type extra struct {
	id      string // the key's id (trace, pair or session id)
	spanID  string // a span id that is not 16 lowercase hex characters
	variant string // the record's variant when its id does not fit the slot's 16 bits
	pending []pending
	pair    *pairState    // nsPair
	sess    *sessionState // nsSession
	// answers maps the answering generation's span of each record that awaits its answer to
	// the record's span (its turn): late content names the generation's span.
	answers []answerSpan
}

// answerSpan is one record awaiting its answer: the span its answer's events will name (the
// generation's) and the record's own (its turn's).
type answerSpan struct{ answer, turn string }

// maxAwaitingTurns bounds the answers one trace's extra remembers: the oldest go first.
const maxAwaitingTurns = 64

// maxTableEntries bounds max_entries: the table's own bound.
const maxTableEntries = offheap.MaxEntries

// newTable returns a table for traces only (tests).
func newTable(maxEntries int) *table { return newTableNS([numNS]int{nsTrace: maxEntries}) }

// newTableNS returns a table holding at most limits[ns] keys of each namespace. The index is
// dense: the join holds many keys, and most lookups find theirs.
func newTableNS(limits [numNS]int) *table {
	return &table{tab: offheap.NewTable[[16]byte, slot](offheap.LoadDense, limits[:]...),
		rawIDs: map[uint32]string{}, extra: map[uint32]*extra{}}
}

// offHeapBytes is the memory of the slots and index cells in use, outside the Go heap.
func (t *table) offHeapBytes() int { return t.tab.Bytes() }

// traceKey is a key (a trace id, or a pair or session id) in slot form.
type traceKey struct {
	id  [16]byte
	raw bool
	ns  uint8
}

func (t *table) key(traceID string) traceKey { return t.keyNS(nsTrace, traceID) }

func (t *table) keyNS(ns uint8, id string) traceKey {
	k := traceKey{ns: ns}
	if len(id) == 32 && hexid.Decode(k.id[:], id) {
		return k
	}
	k.raw, k.id = true, t.tab.Sum128(id)
	return k
}

// find returns the slot holding traceID, or -1.
func (t *table) find(traceID string) int { return t.findNS(nsTrace, traceID) }

// findNS returns the slot holding id in namespace ns, or -1.
func (t *table) findNS(ns uint8, id string) int {
	if t.tab.Len(int(ns)) == 0 {
		return -1
	}
	return t.lookup(t.keyNS(ns, id), id)
}

// lookup returns the slot holding the trace of key k (traceID), or -1. A hex id and a hash of
// another id are told apart, and a hashed id is compared with the one kept.
func (t *table) lookup(k traceKey, traceID string) int {
	i := t.tab.Find(int(k.ns), k.id)
	if i < 0 || (t.tab.Val(i).flags()&flagRawID != 0) != k.raw || k.raw && t.rawIDs[uint32(i)] != traceID {
		return -1
	}
	return i
}

// full reports whether adding a trace needs the oldest evicted first.
func (t *table) full() bool { return t.fullNS(nsTrace) }

// fullNS reports whether adding a key of namespace ns needs its oldest evicted first.
func (t *table) fullNS(ns uint8) bool { return t.tab.Full(int(ns)) }

// len is the number of keys held in all namespaces; countNS in namespace ns.
func (t *table) len() int             { return t.tab.Total() }
func (t *table) countNS(ns uint8) int { return t.tab.Len(int(ns)) }

// slot returns slot i, to read or change in place.
func (t *table) slot(i int) *slot { return t.tab.Val(i) }

// ns returns the namespace of slot i.
func (t *table) ns(i int) uint8 { return uint8(t.tab.Lane(i)) }

// next returns the slot after i in its namespace's arrival order, or -1.
func (t *table) next(i int) int { return t.tab.Newer(i) }

// add remembers a new trace (absent, and the table not full) as the newest and returns its
// slot.
func (t *table) add(k traceKey, traceID string, expires int64) int {
	i := t.tab.Add(int(k.ns), k.id, slot{expires: expirySeconds(expires)})
	if k.raw {
		t.tab.Val(i).setFlags(flagRawID)
		t.rawIDs[uint32(i)] = traceID
	}
	return i
}

// remove forgets slot i. Its extra, if any, is dropped: callers take what they need first.
func (t *table) remove(i int) {
	s := t.tab.Val(i)
	t.svc.Unref(s.svc())
	t.vars.Unref(uint32(s.variant))
	if s.flags()&flagRawID != 0 {
		delete(t.rawIDs, uint32(i))
	}
	delete(t.extra, uint32(i))
	t.tab.Remove(i)
}

// touch makes slot i the newest, expiring at expires.
func (t *table) touch(i int, expires int64) {
	t.tab.Touch(i)
	t.tab.Val(i).expires = expirySeconds(expires)
}

// oldest returns the oldest trace slot, or -1.
func (t *table) oldest() int { return t.oldestNS(nsTrace) }

// oldestNS returns the oldest slot of namespace ns, or -1.
func (t *table) oldestNS(ns uint8) int { return t.tab.Oldest(int(ns)) }

// ext returns slot i's extra, creating it (for traceID) when create is set.
func (t *table) ext(i int, traceID string, create bool) *extra {
	x := t.extra[uint32(i)]
	if x == nil && create {
		x = &extra{id: traceID}
		t.extra[uint32(i)] = x
	}
	return x
}

// tidy drops slot i's extra when the slot holds everything again.
func (t *table) tidy(i int) {
	x := t.extra[uint32(i)]
	if x != nil && x.spanID == "" && x.variant == "" && len(x.pending) == 0 && x.pair == nil && x.sess == nil && len(x.answers) == 0 {
		delete(t.extra, uint32(i))
	}
}

// noteAnswer remembers, for slot i's trace, that the record of span turn awaits an answer whose
// events will name span answer.
func (t *table) noteAnswer(i int, traceID, answer, turn string) {
	x := t.ext(i, traceID, true)
	for k := range x.answers {
		if x.answers[k].answer == answer {
			x.answers[k].turn = turn
			return
		}
	}
	if len(x.answers) == maxAwaitingTurns {
		x.answers = append(x.answers[:0], x.answers[1:]...)
	}
	x.answers = append(x.answers, answerSpan{answer: answer, turn: turn})
}

// turnOfAnswer returns the span of the record of slot i whose answer's events name span answer.
func (t *table) turnOfAnswer(i int, answer string) (string, bool) {
	if x := t.extra[uint32(i)]; x != nil {
		for _, a := range x.answers {
			if a.answer == answer {
				return a.turn, true
			}
		}
	}
	return "", false
}

// pendingOf returns the feedback waiting in slot i.
func (t *table) pendingOf(i int) []pending {
	if x := t.extra[uint32(i)]; x != nil {
		return x.pending
	}
	return nil
}

// setSeen records that the record of slot i (its trace traceID) was seen, with its ids and
// variant. A record of another turn of a trace seen already marks the slot flagTurns: its span
// id then names the last turn only.
func (t *table) setSeen(i int, traceID, service, spanID, variant string) {
	s := t.tab.Val(i)
	turns := s.flags() & flagTurns
	if turns == 0 && s.flags()&flagSeen != 0 {
		if _, _, prev, _ := t.seen(i); prev != spanID {
			turns = flagTurns
		}
	}
	s.setFlags(s.flags()&flagRawID | flagSeen | turns)
	if id := t.svc.Ref(service); id != s.svc() {
		t.svc.Unref(s.svc())
		s.setSvc(id)
	} else {
		t.svc.Unref(id) // the slot already held a reference
	}
	x := t.extra[uint32(i)]
	if x != nil {
		x.spanID, x.variant = "", ""
	}
	id := t.vars.Ref(variant)
	t.vars.Unref(uint32(s.variant)) // after Ref: the same variant again keeps its name
	s.variant = 0
	if id <= math.MaxUint16 {
		s.variant = uint16(id)
	} else {
		t.vars.Unref(id)
		x = t.ext(i, traceID, true)
		x.variant = variant
	}
	switch {
	case spanID == "":
	case len(spanID) == 16 && hexid.Decode(s.span[:], spanID):
		s.setFlags(s.flags() | flagSpan)
	default:
		x = t.ext(i, traceID, true)
		x.spanID = spanID
	}
	t.tidy(i)
}

// seen returns what slot i knows of its record: whether it was seen, its service, span id
// and variant.
func (t *table) seen(i int) (ok bool, service, spanID, variant string) {
	s := t.tab.Val(i)
	if s.flags()&flagSeen == 0 {
		return false, "", "", ""
	}
	service = t.svc.Name(s.svc())
	variant = t.vars.Name(uint32(s.variant))
	if s.flags()&flagSpan != 0 {
		spanID = hexid.Encode(s.span[:])
	}
	if x := t.extra[uint32(i)]; x != nil {
		if x.spanID != "" {
			spanID = x.spanID
		}
		if x.variant != "" {
			variant = x.variant
		}
	}
	return true, service, spanID, variant
}
