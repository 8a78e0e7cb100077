package span

import (
	"slices"

	"github.com/ragwatch/ragwatch/collector/conventions"
)

// Documents' texts are most of what a RAG trace holds (five 1 KB passages against a few hundred
// bytes of everything else) and only scoring reads them: signals and alerts read counts,
// scores and lengths. So the protobuf decoder does not copy the texts of a trace whose records
// cannot be scored (collector/assemble Settings.KeepContent, passed to DecodeProto as keep, says so: its trace id is outside the sampling
// probability, no rule could raise it, no label waits for it, nothing exports records). The
// records of such a trace carry Elided, and the sampler skips them as no_content should they
// be chosen after all (a reload raised the rate, a label came in between).
//
// Only a text whose document has an id of its own loses its copy: a document without one takes
// the hash of its text as id, and documents without ids are told apart by their texts.

// The document lists whose texts may be elided (OpenInference's flattened lists).
const (
	famRetrieval = int(conventions.FamRetrieval)
	famRerankIn  = int(conventions.FamRerankIn)
	famRerankOut = int(conventions.FamRerankOut)
	numFams      = 3
)

// elision gathers, while a span's attributes are read, the documents' texts it may leave
// uncopied (views into the request, held in the attributes until resolve drops them or
// ownViews copies them) and which documents have ids. Indices at or above conventions.SharedIndex are copied as any attribute.
type elision struct {
	n     int
	cands [numFams * conventions.SharedIndex * 2]elided
	ids   [numFams]uint16 // documents with a non-empty id
	noIDs [numFams]uint16 // documents with an empty id attribute (the id is then the text's hash)
}

// elided is one document text held as a view: the attribute at position at, document i of fam.
type elided struct {
	at     int
	fam, i uint8
}

func (e *elision) reset() {
	e.n = 0
	e.ids, e.noIDs = [numFams]uint16{}, [numFams]uint16{}
}

// consider notes what the attribute (k, v), to be held at position at, says: a document id, or
// a text that may go uncopied. It returns true for the latter: the caller holds a view of v.
func (e *elision) consider(k string, v *anyv, at int) bool {
	fam, i, field, ok := docField(k)
	if !ok {
		return false
	}
	switch field {
	case conventions.DocID:
		if v.f == 0 || ((v.f == 1 || v.f == 7) && len(v.b) == 0) {
			e.noIDs[fam] |= 1 << i
		} else {
			e.ids[fam] |= 1 << i
		}
	case conventions.DocContent:
		if v.f == 1 && e.n < len(e.cands) {
			e.cands[e.n] = elided{at: at, fam: uint8(fam), i: uint8(i)}
			e.n++
			return true
		}
	}
	return false
}

// resolve drops the text of each document with an id among the views consider handed out
// (an empty string); the others stay views, which ownViews copies. It reports whether a text
// was dropped.
func (e *elision) resolve(attrs []Attr) bool {
	dropped := false
	for _, c := range e.cands[:e.n] {
		bit := uint16(1) << c.i
		if e.ids[c.fam]&bit != 0 && e.noIDs[c.fam]&bit == 0 {
			attrs[c.at].Value = Str("")
			dropped = true
		}
	}
	e.n = 0
	return dropped
}

// docField splits a key of OpenInference's flattened document lists, "{list}.{i}.{field}",
// for i below conventions.SharedIndex; field is conventions.DocID, DocScore, DocContent,
// DocMetadata, or -1 for any other. A shared key is known by its address, any other by its
// text.
func docField(k string) (fam, i, field int, ok bool) {
	if in, shared := conventions.Shared(k); shared {
		if in.Fixed || in.Fam > conventions.FamRerankOut {
			return 0, 0, 0, false
		}
		return int(in.Fam), int(in.I), int(in.Field), true // the fams' order is conventions'
	}
	if len(k) == 0 || k[0] != 'r' {
		return 0, 0, 0, false
	}
	f, rest, ok := conventions.FamilyOf(k)
	if !ok || f > conventions.FamRerankOut {
		return 0, 0, 0, false
	}
	i, name, ok := conventions.SplitIndex(rest, conventions.SharedIndex)
	field = slices.Index(conventions.DocFields, name) // -1 for any other
	return int(f), i, field, ok
}
