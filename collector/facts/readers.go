package facts

import (
	"math"
	"strconv"
	"strings"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Keys searched, in order, for the text of a JSON value.
var (
	queryKeys  = []string{"query", "question", "input", "user_input", "prompt", "q", "text", "content", "inputs", "kwargs", "args", "messages"}
	answerKeys = []string{"answer", "output", "result", "response", "text", "content", "completion", "choices", "message", "generations", "outputs", "messages"}
)

// AnswerOf reads a generation's output text, most specific convention first.
func AnswerOf(f *Facts) string {
	if s := lastText(f.oiOut, "assistant"); s != "" {
		return s
	}
	for _, c := range f.oiChoices {
		if c != "" {
			return c
		}
	}
	if f.genaiOut.Type != span.TypeEmpty {
		if s := lastText(messagesFromAny(f.genaiOut.Structured()), "assistant"); s != "" {
			return s
		}
	}
	if s := lastText(f.legacyOut, "assistant"); s != "" {
		return s
	}
	for _, m := range f.eventOut {
		if s := m.Text(); s != "" {
			return s
		}
	}
	if s := valueText(f.outputValue, f.outputMime, answerKeys); s != "" {
		return s
	}
	return entityText(f.tlOutput, answerKeys)
}

// InputText reads a span's input (input.value, else traceloop.entity.input) as a query.
func InputText(f *Facts) string {
	if s := valueText(f.inputValue, f.inputMime, queryKeys); s != "" {
		return s
	}
	return entityText(f.tlInput, queryKeys)
}

// retrievalQuery reads the query a retrieval or reranker span searched for.
func RetrievalQuery(f *Facts) string {
	if f.retrievalQuery != "" {
		return f.retrievalQuery
	}
	return InputText(f)
}

// LastUserText returns the last user message a generation was given.
func LastUserText(f *Facts) string {
	if s := lastText(f.oiIn, "user"); s != "" {
		return s
	}
	if f.genaiIn.Type != span.TypeEmpty {
		if s := lastText(messagesFromAny(f.genaiIn.Structured()), "user"); s != "" {
			return s
		}
	}
	if s := lastText(f.legacyIn, "user"); s != "" {
		return s
	}
	if s := lastText(f.eventIn, "user"); s != "" {
		return s
	}
	for k := len(f.oiPrompts) - 1; k >= 0; k-- {
		if f.oiPrompts[k] != "" {
			return f.oiPrompts[k]
		}
	}
	return ""
}

// lastText returns the text of the last message with role (any role when none has it).
func lastText(msgs []span.Message, role string) string {
	for k := len(msgs) - 1; k >= 0; k-- {
		if strings.EqualFold(msgs[k].Role, role) {
			if s := msgs[k].Text(); s != "" {
				return s
			}
		}
	}
	for k := len(msgs) - 1; k >= 0; k-- {
		if msgs[k].Role == "" {
			if s := msgs[k].Text(); s != "" {
				return s
			}
		}
	}
	return ""
}

func entityText(v span.Value, keys []string) string {
	switch v.Type {
	case span.TypeEmpty:
		return ""
	case span.TypeStr:
		if x := span.ParseJSON(v.Str()); x != nil {
			return span.TextOf(x, keys, 0)
		}
		return v.Str()
	}
	return span.TextOf(v.Structured(), keys, 0)
}

func ModelOf(f *Facts) string {
	if f.responseModel != "" {
		return f.responseModel
	}
	return f.requestModel
}

// messagesFromAny reads GenAI JSON messages: v1.37 `[{"role","parts":[{"type":"text","content"}]}]`
// and the OpenAI shape `[{"role","content": "..." | [{"type":"text","text"}]}]`.
func messagesFromAny(x any) []span.Message {
	l, ok := x.([]any)
	if !ok {
		if m, isMap := x.(map[string]any); isMap {
			l = []any{m}
		} else {
			return nil
		}
	}
	out := make([]span.Message, 0, len(l))
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			if s, isStr := e.(string); isStr {
				out = append(out, span.Message{Content: s})
			}
			continue
		}
		msg := span.Message{Role: span.AsString(m["role"])}
		if parts, ok := m["parts"].([]any); ok {
			for _, p := range parts {
				pm, ok := p.(map[string]any)
				if !ok {
					continue
				}
				if t := span.AsString(pm["type"]); t != "" && t != "text" {
					continue
				}
				if s := span.AsString(pm["content"]); s != "" {
					msg.Parts = append(msg.Parts, s)
				} else if s := span.AsString(pm["text"]); s != "" {
					msg.Parts = append(msg.Parts, s)
				}
			}
		}
		switch c := m["content"].(type) {
		case string:
			msg.Content = c
		case []any:
			for _, p := range c {
				if pm, ok := p.(map[string]any); ok {
					if t := span.AsString(pm["type"]); t != "" && t != "text" && t != "output_text" && t != "input_text" {
						continue
					}
					if s := span.AsString(pm["text"]); s != "" {
						msg.Parts = append(msg.Parts, s)
					}
				} else if s, ok := p.(string); ok {
					msg.Parts = append(msg.Parts, s)
				}
			}
		}
		out = append(out, msg)
	}
	return out
}

// DocsFromAny reads documents from JSON: an array of objects ({id, score, content, metadata},
// LangChain {page_content, metadata}, or the serialized form {"kwargs": {...}}) or strings, or an
// object holding such an array under "documents".
func DocsFromAny(x any) []record.Document {
	switch v := x.(type) {
	case map[string]any:
		for _, k := range docListKeys {
			if e, ok := v[k]; ok {
				return DocsFromAny(e)
			}
		}
		return nil
	case []any:
		out := make([]record.Document, 0, len(v))
		for _, e := range v {
			if len(out) == record.MaxDocuments {
				break
			}
			switch d := e.(type) {
			case string:
				out = append(out, record.Document{Content: d})
			case map[string]any:
				out = append(out, docFromMap(d))
			}
		}
		return out
	}
	return nil
}

// The keys of a documents' JSON: the array of an object holding one, a document's id, score.
var (
	docListKeys  = []string{"documents", "docs", "results", "outputs", "output", "context", "source_documents", "sourceDocuments"}
	docIDKeys    = []string{"id", "doc_id", "document_id"}
	docScoreKeys = []string{"score", "relevance_score", "similarity"}
)

func docFromMap(m map[string]any) record.Document {
	if kw, ok := m["kwargs"].(map[string]any); ok {
		m = kw
	}
	var d record.Document
	for _, k := range docIDKeys {
		switch v := m[k].(type) {
		case string:
			d.ID = v
		case float64:
			d.ID = strconv.FormatFloat(v, 'f', -1, 64)
		}
		if d.ID != "" {
			break
		}
	}
	for _, k := range docScoreKeys {
		if n, ok := asNumber(m[k]); ok {
			d.Score = &n
			break
		}
	}
	for _, k := range docTextKeys {
		if s := span.AsString(m[k]); s != "" {
			d.Content = s
			break
		}
	}
	switch md := m["metadata"].(type) {
	case map[string]any:
		d.Metadata = md
	case string:
		d.Metadata = parseMetadata(span.Str(md))
	}
	return d
}

// RelevanceFrom reads rag.relevance: a JSON object document id → grade.
func RelevanceFrom(v span.Value) map[string]int {
	m, ok := v.Structured().(map[string]any)
	if !ok || len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, e := range m {
		if len(out) == record.MaxRelevanceLabel {
			break
		}
		if n, ok := asNumber(e); ok && math.Abs(n) < 1e9 {
			out[k] = int(math.Round(n))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// CitationsFrom reads rag.citations: a JSON array of {"text", "document_ids"}.
func CitationsFrom(v span.Value) []record.Citation {
	l, ok := v.Structured().([]any)
	if !ok {
		return nil
	}
	var out []record.Citation
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		c := record.Citation{Text: span.AsString(m["text"])}
		ids, _ := m["document_ids"].([]any)
		for _, id := range ids {
			if s := span.AsString(id); s != "" {
				c.DocumentIDs = append(c.DocumentIDs, s)
			}
		}
		if c.Text == "" && len(c.DocumentIDs) == 0 {
			continue
		}
		if c.DocumentIDs == nil {
			c.DocumentIDs = []string{}
		}
		out = append(out, c)
	}
	return out
}
