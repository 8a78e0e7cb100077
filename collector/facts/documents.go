package facts

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// OwnDocs returns the documents a span names itself, by source precedence: OpenInference
// retrieval.documents, GenAI gen_ai.retrieval.documents, traceloop.entity.output of a
// vector_db_retrieve span, OpenLLMetry vector-DB result events. ok is true when the span names
// a result, even an empty one.
func OwnDocs(f *Facts) ([]record.Document, bool) {
	switch {
	case f.oiDocs != nil:
		return CompactDocs(f.oiDocs), true
	case f.genaiDocs.Type != span.TypeEmpty:
		return DocsFromAny(f.genaiDocs.Structured()), true
	case f.toolDocs != nil:
		return f.toolDocs, true
	case f.tlOutput.Type != span.TypeEmpty && f.Retrieval:
		if docs := DocsFromAny(f.tlOutput.Structured()); docs != nil {
			return docs, true
		}
	}
	if f.dbDocs != nil {
		return f.dbDocs, true
	}
	if f.rerankIn != nil {
		return CompactDocs(f.rerankIn), true // a reranker that did not report its output
	}
	return nil, f.emptyHits
}

// MarkRetrieval makes an AI SDK tool call a retrieval (its tool is named in
// conventions.retrieval_tools): its documents are what its result holds, read as
// DocsFromAny reads documents (none when it holds none: an empty retrieval).
func MarkRetrieval(f *Facts) {
	if !f.Tool || f.Retrieval {
		return
	}
	f.Retrieval = true
	f.toolDocs = DocsFromAny(f.toolResult.Structured())
	if f.toolDocs == nil {
		f.toolDocs = []record.Document{}
	}
}

// shapedDocuments reads a value as documents when it is document-shaped: an array, or an
// object holding one under a key of docListKeys (the first such key whose value is an array),
// of objects that each have a text (content, text, pageContent, ...) and an id, a score (id,
// score, similarity, ...) or a metadata object (LangChain's Document: pageContent and
// metadata). Any other value (a string, numbers, objects of another shape, an empty array) is
// not. It is the one recogniser of documents in a value that does not say it holds documents:
// an AI SDK tool's result, and a step's input or output (StepDocs).
func shapedDocuments(v span.Value) ([]record.Document, bool) {
	if v.Type == span.TypeStr {
		s := strings.TrimLeft(v.Str(), " \t\r\n")
		if s == "" || (s[0] != '[' && s[0] != '{') {
			return nil, false // the cheap test: most values hold no JSON structure
		}
	}
	x := v.Structured()
	if m, ok := x.(map[string]any); ok {
		x = nil
		for _, k := range docListKeys {
			if e, found := m[k].([]any); found {
				x = e
				break
			}
		}
	}
	l, ok := x.([]any)
	if !ok || len(l) == 0 {
		return nil, false
	}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok || !docShaped(m) {
			return nil, false
		}
	}
	return DocsFromAny(l), true
}

// docShaped reports whether m reads as a document: a text under one of docTextKeys, and an
// id, a score or a non-empty metadata object.
func docShaped(m map[string]any) bool {
	text := false
	for _, k := range docTextKeys {
		if s, ok := m[k].(string); ok && s != "" {
			text = true
			break
		}
	}
	if !text {
		return false
	}
	for _, k := range docIDKeys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	for _, k := range docScoreKeys {
		if _, ok := asNumber(m[k]); ok {
			return true
		}
	}
	md, ok := m["metadata"].(map[string]any)
	return ok && len(md) > 0
}

// StepDocs returns the documents a step of the app holds in its input or output, for a trace
// that shows no retrieval span: the document-shaped array (shapedDocuments) of the span's
// traceloop.entity.output, else output.value, else traceloop.entity.input, else input.value
// — LangChain's {"context": [{"pageContent", "metadata"}, ...], ...} as OpenLLMetry's
// LangChain.js instrumentation writes a chain's output. Generations, embeddings and
// retrievals are no steps: nil. It parses JSON, so collector/assemble calls it only for
// traces without a retrieval.
func StepDocs(f *Facts) []record.Document {
	if f.Generation || f.Retrieval || f.embedding || f.Tool {
		return nil
	}
	for _, v := range [...]span.Value{f.tlOutput, span.Str(f.outputValue), f.tlInput, span.Str(f.inputValue)} {
		if v.Type == span.TypeEmpty || (v.Type == span.TypeStr && v.Str() == "") {
			continue
		}
		if docs, ok := shapedDocuments(v); ok {
			return docs
		}
	}
	return nil
}

// MarkStepRetrieval makes a step holding documents (StepDocs) a retrieval: its documents are
// those, and collector/assemble pairs it with the generations after it as any retrieval. It
// reports whether it did. Step marks it so that its duration, which is the step's and not a
// search's, is not counted as retrieval latency.
func MarkStepRetrieval(f *Facts) bool {
	docs := StepDocs(f)
	if docs == nil {
		return false
	}
	f.Retrieval, f.Step, f.toolDocs = true, true, docs
	return true
}

// CompactDocs drops the holes a flattened list leaves (indices that carried nothing). A list
// without holes is returned as it is: what it gives goes to AppendDocs, which copies.
func CompactDocs(docs []record.Document) []record.Document {
	if !slices.ContainsFunc(docs, isHole) {
		return docs
	}
	out := make([]record.Document, 0, len(docs))
	for _, d := range docs {
		if !isHole(d) {
			out = append(out, d)
		}
	}
	return out
}

func isHole(d record.Document) bool {
	return d.ID == "" && d.Content == "" && d.Score == nil && d.Metadata == nil
}

// AppendDocs appends docs not already present (by id; documents without id compare by content).
func AppendDocs(dst, docs []record.Document) []record.Document {
	dst = slices.Grow(dst, len(docs))
	for _, d := range docs {
		dup := false
		for k := range dst {
			if (d.ID != "" && dst[k].ID == d.ID) || (d.ID == "" && dst[k].ID == "" && dst[k].Content == d.Content) {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, d)
		}
	}
	return dst
}

var metadataTextKeys = []string{"text", "page_content", "content", "chunk"}

var metadataIDKeys = []string{"id", "doc_id", "document_id", "chunk_id", "node_id", "_id", "uuid", "pk"}

// FinishDocs applies the record limits and gives every document an id: from its metadata when
// there is one, else a stable hash of its content.
func FinishDocs(docs []record.Document) []record.Document {
	if len(docs) > record.MaxDocuments {
		docs = docs[:record.MaxDocuments]
	}
	for k := range docs {
		d := &docs[k]
		d.Content = truncate.String(d.Content, record.MaxTextBytes)
		if d.ID == "" {
			for _, key := range metadataIDKeys {
				if v, ok := d.Metadata[key]; ok {
					switch x := v.(type) {
					case string:
						d.ID = x
					case float64:
						d.ID = strconv.FormatFloat(x, 'f', -1, 64)
					}
					if d.ID != "" {
						break
					}
				}
			}
		}
		if d.ID == "" {
			d.ID = contentID(d.Content)
		}
		if d.Content == "" {
			// Vector stores often keep the chunk text in metadata (Pinecone's "text").
			for _, key := range metadataTextKeys {
				if s, ok := d.Metadata[key].(string); ok && s != "" {
					d.Content = truncate.String(s, record.MaxTextBytes)
					break
				}
			}
		}
		if len(d.ID) > record.MaxIDLength {
			d.ID = contentID(d.ID)
		}
	}
	if len(docs) == 0 {
		return nil
	}
	return docs
}

// contentID is a stable id for a document without one: "h" and the FNV-1a 64-bit hash of its
// content in hex.
func contentID(s string) string {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	var buf [17]byte
	buf[0] = 'h'
	const hexdigits = "0123456789abcdef"
	for i := 16; i >= 1; i-- {
		buf[i] = hexdigits[h&0xf]
		h >>= 4
	}
	return string(buf[:])
}
