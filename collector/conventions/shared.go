package conventions

import (
	"strconv"
	"strings"
	"unsafe"
)

// Held attributes share one copy of each well-known key instead of keeping the key string
// pdata allocated for every attribute of every span (e.g. 20 "retrieval.documents.{i}.document.*"
// keys of 48 bytes per retriever span, each a heap object for the collector to mark). The
// shared keys are slices of one string, so sizing recognises them by address (IsShared), and
// readers that meet one know which it is without reading its text again (Shared).

// SharedIndex bounds the {i} of the flattened lists' keys that are shared.
const SharedIndex = 16

// keySlot is the bytes each shared key's slot takes in arena: every shared key starts a slot,
// so its address names it.
const keySlot = 64

// Info is what a shared key is: a row of Keys (Fixed), or the element i of a flattened list
// (Fam) and its field's position in the family's Fields.
type Info struct {
	Fixed bool
	Fam   Fam
	I     uint8
	Field uint8
	Key   *Key // of a Fixed key
	n     uint8
}

var (
	arena      string
	arenaBase  uintptr
	infos      []Info                             // by slot
	fixedCopy  [len(Keys)]string                  // Keys[i].Name's shared copy
	listCopies [numListFams][SharedIndex][]string // list fam, i, field
)

func initShared() {
	var b strings.Builder
	add := func(k string, in Info) {
		if len(k) > keySlot {
			panic("conventions: shared key longer than its slot: " + k)
		}
		in.n = uint8(len(k))
		b.WriteString(k)
		b.WriteString(strings.Repeat("\x00", keySlot-len(k)))
		infos = append(infos, in)
	}
	for i := range Keys {
		add(Keys[i].Name, Info{Fixed: true, Key: &Keys[i]})
	}
	for f := range numListFams {
		fam := &Families[f]
		for i := range SharedIndex {
			for j, field := range fam.Fields {
				add(fam.Prefix+strconv.Itoa(i)+"."+field, Info{Fam: f, I: uint8(i), Field: uint8(j)})
			}
		}
	}
	arena = b.String()
	arenaBase = uintptr(unsafe.Pointer(unsafe.StringData(arena)))
	slot := func(n int) string { return arena[n*keySlot : n*keySlot+int(infos[n].n)] }
	n := 0
	for i := range Keys {
		fixedCopy[i] = slot(n)
		n++
	}
	for f := range numListFams {
		for i := range SharedIndex {
			listCopies[f][i] = make([]string, len(Families[f].Fields))
			for j := range Families[f].Fields {
				listCopies[f][i][j] = slot(n)
				n++
			}
		}
	}
}

// Shared says which shared key k is, by its address; false when k is not a copy KeptKey
// returned (a key that is not well-known, or the same text elsewhere).
func Shared(k string) (*Info, bool) {
	off := uintptr(unsafe.Pointer(unsafe.StringData(k))) - arenaBase
	if off%keySlot != 0 || off/keySlot >= uintptr(len(infos)) {
		return nil, false
	}
	in := &infos[off/keySlot]
	if int(in.n) != len(k) || len(k) == 0 {
		return nil, false
	}
	return in, true
}

// IsShared reports whether k's bytes are those of a shared key (held attributes' keys that
// keep no heap of their own).
func IsShared(k string) bool {
	if len(k) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(k)))
	return p >= arenaBase && p < arenaBase+uintptr(len(arena))
}

// KeptKey reports whether a held span keeps the span attribute k (Kept), and returns its
// shared copy (k itself when it is not well-known).
func KeptKey(k string) (string, bool) {
	f, rest, ok := FamilyOf(k)
	if ok && f < numListFams { // a retriever's or a generation's many list keys: found first
		return listKey(k, f, rest), true
	}
	if key, found := Lookup(k); found {
		return fixedCopy[key.index()], true
	}
	return k, ok
}

// FixedKey returns the shared copy of k when it is one of Keys.
func FixedKey(k string) (string, bool) {
	if key, ok := Lookup(k); ok {
		return fixedCopy[key.index()], true
	}
	return k, false
}

// index is k's position in Keys.
func (k *Key) index() int {
	return int((uintptr(unsafe.Pointer(k)) - uintptr(unsafe.Pointer(&Keys[0]))) / unsafe.Sizeof(Key{}))
}

// listKey returns the shared copy of the flattened list key k ("{i}.{field}" after the prefix
// is rest), or k when its spelling is not canonical or i is not below SharedIndex.
func listKey(k string, f Fam, rest string) string {
	i, field, ok := SplitIndex(rest, SharedIndex)
	digits := 1
	if i >= 10 {
		digits = 2 // SharedIndex <= 100
	}
	if !ok || len(rest) != digits+1+len(field) {
		return k // "01", "1" without field: not the canonical spelling
	}
	for j, fd := range Families[f].Fields {
		if field == fd {
			return listCopies[f][i][j]
		}
	}
	return k
}

// SplitIndex parses "12.rest" into (12, "rest"). Indices at or above limit are refused, so a
// hostile index cannot allocate.
func SplitIndex(s string, limit int) (int, string, bool) {
	n := 0
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int(s[i]-'0')
		i++
		if n >= limit {
			return 0, "", false
		}
	}
	if i == 0 {
		return 0, "", false
	}
	if i == len(s) {
		return n, "", true
	}
	if s[i] != '.' {
		return 0, "", false
	}
	return n, s[i+1:], true
}
