package span

import (
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/collector/conventions"
)

func TestDocField(t *testing.T) {
	for _, c := range []struct {
		k      string
		fam, i int
		field  int
		ok     bool
	}{
		{"retrieval.documents.3.document.content", famRetrieval, 3, conventions.DocContent, true},
		{"reranker.input_documents.0.document.id", famRerankIn, 0, conventions.DocID, true},
		{"reranker.output_documents.15.document.content", famRerankOut, 15, conventions.DocContent, true},
		{"retrieval.documents.2.document.score", famRetrieval, 2, conventions.DocScore, true},
		{"reranker.input_documents.9.document.metadata", famRerankIn, 9, conventions.DocMetadata, true},
		{"retrieval.documents.03.document.content", famRetrieval, 3, conventions.DocContent, true}, // not shared, read by its text
		{"retrieval.documents.4.document.other", famRetrieval, 4, -1, true},
		{"retrieval.documents.4", famRetrieval, 4, -1, true},
		{"reranker.output_documents.16.document.content", 0, 0, 0, false}, // past the shared keys
		{"retrieval.documents.x.document.content", 0, 0, 0, false},
		{"rag.documents", 0, 0, 0, false},
		{"reranker.query", 0, 0, 0, false},
		{"input.value", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		// Each key by its text, and by its shared copy's address when it has one: the same.
		shared, _ := conventions.KeptKey(c.k)
		for _, k := range []string{strings.Clone(c.k), shared} {
			fam, i, field, ok := docField(k)
			if ok != c.ok || (ok && (fam != c.fam || i != c.i || field != c.field)) {
				t.Errorf("docField(%q, shared %v) = %d %d %d %v, want %d %d %d %v", c.k, conventions.IsShared(k), fam, i, field, ok, c.fam, c.i, c.field, c.ok)
			}
		}
	}
}
