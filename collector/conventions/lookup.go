package conventions

import (
	"strings"
)

// Lookups derived from the tables at init. The hot path (every attribute of every span is
// looked up once as it is decoded) must cost no more than the switch statements they replace:
// Lookup is a perfect hash over Keys (a few bytes of the key mixed, one string comparison),
// found at init, and Shared names a held key by its address without reading it.

// Lookup returns the row of Keys that k is, by its text.
func Lookup(k string) (*Key, bool) {
	if len(k) < minKeyLen || len(k) > maxKeyLen {
		return nil, false
	}
	sl := &keySlots[keyHash(k, hashSeed)&hashMask]
	if sl.name != k {
		return nil, false
	}
	return sl.key, true
}

// hashSlots is the perfect hash's table size: a power of two, a few times len(Keys), so that a
// seed without collisions is found in a few tries.
const (
	hashSlots = 512
	hashMask  = hashSlots - 1
)

var (
	keySlots             [hashSlots]slot
	hashSeed             uint32
	minKeyLen, maxKeyLen int
)

// slot is a key of Keys in the hash table; an empty slot's name is "", which no key is.
type slot struct {
	name string
	key  *Key
}

// keyHash mixes k's length, its first four and last four bytes and its middle byte (the keys
// of a convention share prefixes, and some differ only near their end: session_id,
// session.id). k is at least four bytes long.
func keyHash(k string, seed uint32) uint32 {
	n := len(k)
	_ = k[3]
	head := uint32(k[0]) | uint32(k[1])<<8 | uint32(k[2])<<16 | uint32(k[3])<<24
	tail := uint32(k[n-4]) | uint32(k[n-3])<<8 | uint32(k[n-2])<<16 | uint32(k[n-1])<<24
	h := (seed ^ uint32(n)) * 0x9e3779b1
	h = (h ^ tail) * 0x85ebca6b
	h = (h ^ head ^ uint32(k[n/2])<<8) * 0xc2b2ae35
	return h ^ h>>16
}

// FamilyOf returns the family k is of, and the rest of k after the family's prefix. A key of
// a family is longer than its prefix.
func FamilyOf(k string) (Fam, string, bool) {
	if len(k) < 5 {
		return 0, "", false
	}
	var head uint64 // k's first 8 bytes: a family whose prefix starts otherwise is passed by
	if len(k) >= 8 {
		head = uint64(k[0]) | uint64(k[1])<<8 | uint64(k[2])<<16 | uint64(k[3])<<24 |
			uint64(k[4])<<32 | uint64(k[5])<<40 | uint64(k[6])<<48 | uint64(k[7])<<56
	}
	for _, f := range familiesByByte[k[0]] {
		p := &famHeads[f]
		if len(k) <= len(p.prefix) || (len(k) >= 8 && head&p.mask != p.head) {
			continue
		}
		if k[:len(p.prefix)] == p.prefix {
			return f, k[len(p.prefix):], true
		}
	}
	return 0, "", false
}

// famHead is a family's prefix with its first (up to 8) bytes as a word.
type famHead struct {
	prefix     string
	head, mask uint64
}

var (
	familiesByByte [256][]Fam // the families by their prefix's first byte
	famHeads       [numFams]famHead
)

// Kept reports whether a held span keeps the span attribute k: a key of Keys, or of Families.
func Kept(k string) bool {
	if _, ok := Lookup(k); ok {
		return true
	}
	_, _, ok := FamilyOf(k)
	return ok
}

// KindOf returns the span kind value v of a span-kind Field names. v is read as the readers
// read it (Normalize): upper case for OIKind, as sent for AIOperation, lower case for the
// others.
func KindOf(f Field, v string) Kind {
	if v == "" {
		return KindNone
	}
	for _, kv := range kindsByField[f] {
		if kv.Value == v {
			return kv.Kind
		}
	}
	return KindNone
}

// kindsByField holds KindValues by their Field.
var kindsByField [numFields][]KindValue

// Normalize returns v as KindOf compares it for field f: strings.ToUpper for OIKind, v itself
// for AIOperation (one SDK writes it, in camel case), strings.ToLower for the other kinds,
// without their work when v is ASCII already in that case, which is how instrumentations send
// it.
func Normalize(f Field, v string) string {
	if f == AIOperation {
		return v
	}
	lo, hi := byte('a'), byte('z') // the letters OIKind's upper case changes
	if f != OIKind {
		lo, hi = 'A', 'Z'
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= 0x80 || (c >= lo && c <= hi) {
			if f == OIKind {
				return strings.ToUpper(v)
			}
			return strings.ToLower(v)
		}
	}
	return v
}

// EventOf returns the row of Events that name is.
func EventOf(name string) (*Event, bool) {
	for i := range Events {
		if Events[i].Name == name {
			return &Events[i], true
		}
	}
	return nil, false
}

// KeptEvent reports whether a held span keeps a span event named name.
func KeptEvent(name string) bool {
	if strings.HasPrefix(name, "gen_ai.") {
		return true
	}
	e, ok := EventOf(name)
	return ok && e.Kind == EventDocument
}

// EventKey reports whether k is one of EventKeys.
func EventKey(k string) bool {
	for _, e := range EventKeys {
		if e == k {
			return true
		}
	}
	return false
}

func init() {
	minKeyLen, maxKeyLen = 1<<30, 0
	for _, k := range Keys {
		minKeyLen, maxKeyLen = min(minKeyLen, len(k.Name)), max(maxKeyLen, len(k.Name))
	}
	if minKeyLen < 4 {
		panic("conventions: a key under 4 bytes")
	}
seeds:
	for seed := uint32(1); ; seed++ {
		if seed > 1<<20 {
			panic("conventions: no perfect hash for Keys")
		}
		clear(keySlots[:])
		for i, k := range Keys {
			h := keyHash(k.Name, seed) & hashMask
			if keySlots[h].key != nil {
				continue seeds
			}
			keySlots[h] = slot{name: k.Name, key: &Keys[i]}
		}
		hashSeed = seed
		break
	}
	for f := range Families {
		p := Families[f].Prefix
		familiesByByte[p[0]] = append(familiesByByte[p[0]], Fam(f))
		h := &famHeads[f]
		h.prefix = p
		for i := 0; i < len(p) && i < 8; i++ {
			h.head |= uint64(p[i]) << (8 * i)
			h.mask |= 0xff << (8 * i)
		}
	}
	for _, kv := range KindValues {
		kindsByField[kv.Field] = append(kindsByField[kv.Field], kv)
	}
	initShared()
}
