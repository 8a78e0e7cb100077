package facts

import (
	"slices"
	"strings"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// facts is what one span says, read in one pass over its attributes and events. Heavy JSON
// (GenAI messages, documents JSON, traceloop entity values) is kept raw and decoded only when
// the span turns out to matter for a record.
type Facts struct {
	oiKind string // OpenInference span kind, upper case
	op     string // gen_ai.operation.name, lower case
	tlKind string // traceloop.span.kind
	llmReq string // llm.request.type (OpenLLMetry)
	aiOp   string // ai.operationId (the Vercel AI SDK)

	// Call: an AI SDK call around its model calls (generateText, ...; conventions.KindCall),
	// a generation until collector/assemble finds one nested in it (NotGeneration).
	Call bool
	// Tool: an AI SDK tool call, named ToolName; a retrieval when its result is
	// document-shaped (Read) or its tool is configured as one (MarkRetrieval).
	Tool       bool
	ToolName   string
	toolResult span.Value        // ai.toolCall.result
	toolDocs   []record.Document // the documents of a tool call's result, or of a step (Step)

	// Step: a span that is no retrieval by its kind, made one by MarkStepRetrieval because its
	// input or output holds documents (a trace without a retrieval span).
	Step bool

	Retrieval  bool
	Generation bool
	embedding  bool

	// Documents by source; nil when the source is absent.
	oiDocs     []record.Document // retrieval.documents.{i}.document.*
	RerankDocs []record.Document // reranker.output_documents.{i}.document.*
	rerankIn   []record.Document // reranker.input_documents.{i}.document.* (when no output is given)
	dbDocs     []record.Document // db.query.result / db.search.result events
	genaiDocs  span.Value        // gen_ai.retrieval.documents
	RAGDocs    span.Value        // rag.documents
	emptyHits  bool              // db.vector.query.result_count = 0
	scores     []float64         // the current block of document scores (setDocField)

	retrievalQuery string // gen_ai.retrieval.query.text, reranker.query
	inputValue     string
	inputMime      string
	outputValue    string
	outputMime     string
	tlInput        span.Value
	tlOutput       span.Value

	// Prompt and completion, by convention.
	oiIn, oiOut         []span.Message // llm.input_messages / llm.output_messages
	oiPrompts           []string       // llm.prompts.{i}.prompt.text, llm.prompts
	oiChoices           []string       // llm.choices.{i}.completion.text
	genaiIn, genaiOut   span.Value     // gen_ai.input.messages / gen_ai.output.messages
	legacyIn, legacyOut []span.Message // gen_ai.prompt.{i}.* / gen_ai.completion.{i}.*
	eventIn, eventOut   []span.Message // gen_ai.*.message / gen_ai.choice events

	requestModel, responseModel string
	// ResponseID is the provider's id of the call's response (gen_ai.response.id).
	ResponseID          string
	InTokens, OutTokens int64
	HasIn, HasOut       bool

	Session, User, Route, DataSource, Workflow string
	// Context ids by convention, combined by precedence at the end of Read: rag, then
	// OpenInference / enduser, then GenAI, then traceloop association properties.
	ids           [conventions.NumSources][2]string
	MetadataRoute string

	RAGQuery, RAGAnswer, RAGReference string
	RAGCitations, RAGRelevance        span.Value
	ragFeedback                       span.Value

	// Feedback candidates by precedence (0 = highest).
	Feedback     *record.Feedback
	FeedbackRank int

	// Backing arrays kept across the pooled scratch's uses (reset) for the lists most spans
	// fill: OpenInference documents and messages. Empty, and every element zero: the next
	// span's list starts in them instead of allocating. No record keeps oiDocs, oiIn or oiOut
	// (AppendDocs and the readers copy what they take).
	docBuf        []record.Document
	inBuf, outBuf []span.Message
}

// maxSpare bounds the elements of a kept backing array: a hostile span's long list is not kept.
const maxSpare = 64

// reset zeroes f for the next span, keeping the backing arrays of oiDocs, oiIn and oiOut.
func (f *Facts) Reset() {
	docs, in, out := spare(f.oiDocs, f.docBuf), spare(f.oiIn, f.inBuf), spare(f.oiOut, f.outBuf)
	// Cleared in place, then the three kept: a composite literal with fields set is built
	// on the stack and copied in (1.3 KB twice, behind the write barrier while GC marks).
	*f = Facts{}
	f.docBuf, f.inBuf, f.outBuf = docs, in, out
}

// spare returns the backing array to keep, emptied and zeroed, after a span's list used was
// built starting in buf (see startIn): used is buf's array or, once it outgrew it, a larger
// one.
func spare[T any](used, buf []T) []T {
	if used == nil {
		return buf // untouched
	}
	clear(used)
	if cap(used) > cap(buf) { // outgrew buf, whose elements the copy left behind
		if cap(used) > maxSpare {
			return nil
		}
		return used[:0]
	}
	return buf[:0]
}

// startIn is list, or when it is still nil, an empty list in buf's backing array; so a
// setter's growth fills buf first. Callers keep a result of length 0 out of the facts (nil
// means the source is absent).
func startIn[T any](list, buf []T) []T {
	if list == nil && cap(buf) > 0 {
		return buf[:0]
	}
	return list
}

// nonEmpty is list, or nil when it is empty (startIn's list that a setter left unset).
func nonEmpty[T any](list []T) []T {
	if len(list) == 0 {
		return nil
	}
	return list
}

// Feedback precedence ranks: lower wins.
const (
	rankRAG   = 0   // rag.feedback
	rankHuman = 1   // annotations with annotator_kind HUMAN
	rankPlain = 2   // annotations without annotator_kind
	rankAuto  = 3   // LLM / CODE annotations, evaluations.*, gen_ai.evaluation.result
	RankNone  = 100 // no feedback
)

// Read reads one span into f, which must be zero but for the backing arrays reset keeps.
// It fills in place: facts is large and holds pointers, so returning it by value would cost a
// copy with write barriers. What each key means is the conventions' table's (Field, Source,
// Weak); a key of a held span is mostly a shared copy, known by its address.
func Read(f *Facts, s *span.Span) {
	f.FeedbackRank = RankNone
	var anns []annotation
	for i := range s.Attrs {
		k, v := s.Attrs[i].Key, s.Attrs[i].Value
		if in, ok := conventions.Shared(k); ok {
			if in.Fixed {
				f.readKey(in.Key, v)
			} else {
				f.readIndexed(in, v) // a list's element
			}
			continue
		}
		if key, ok := conventions.Lookup(k); ok {
			f.readKey(key, v)
			continue
		}
		fam, rest, ok := conventions.FamilyOf(k)
		if !ok {
			continue
		}
		switch fam {
		case conventions.FamRetrieval:
			f.oiDocs = nonEmpty(setDocField(startIn(f.oiDocs, f.docBuf), rest, v, &f.scores))
		case conventions.FamRerankIn:
			f.rerankIn = setDocField(f.rerankIn, rest, v, &f.scores)
		case conventions.FamRerankOut:
			f.RerankDocs = setDocField(f.RerankDocs, rest, v, &f.scores)
			if f.RerankDocs == nil {
				f.RerankDocs = []record.Document{}
			}
		case conventions.FamInMessages:
			f.oiIn = nonEmpty(span.SetOIMessage(startIn(f.oiIn, f.inBuf), rest, v))
		case conventions.FamOutMessages:
			f.oiOut = nonEmpty(span.SetOIMessage(startIn(f.oiOut, f.outBuf), rest, v))
		case conventions.FamPrompt:
			f.legacyIn = span.SetRoleContent(f.legacyIn, rest, v)
		case conventions.FamCompletion:
			f.legacyOut = span.SetRoleContent(f.legacyOut, rest, v)
		case conventions.FamPrompts:
			if i, field, ok := conventions.SplitIndex(rest, span.MaxIndexed); ok && field == "prompt.text" {
				f.oiPrompts = span.SetIndexed(f.oiPrompts, i, v.Text())
			}
		case conventions.FamChoices:
			if i, field, ok := conventions.SplitIndex(rest, span.MaxIndexed); ok && field == "completion.text" {
				f.oiChoices = span.SetIndexed(f.oiChoices, i, v.Text())
			}
		case conventions.FamAnnotations:
			anns = setAnnotation(anns, rest, "annotation.", v)
		case conventions.FamEvaluations:
			anns = setAnnotation(anns, rest, "evaluation.", v)
		}
	}
	for i := range s.Events {
		f.readEvent(&s.Events[i])
	}
	for _, ids := range f.ids {
		if f.Session == "" {
			f.Session = ids[0]
		}
		if f.User == "" {
			f.User = ids[1]
		}
	}
	for i := range anns {
		f.offerFeedback(anns[i].feedback())
	}

	for _, kind := range [...]conventions.Kind{
		conventions.KindOf(conventions.OIKind, f.oiKind),
		conventions.KindOf(conventions.Operation, f.op),
		conventions.KindOf(conventions.LLMRequestType, f.llmReq),
		conventions.KindOf(conventions.AIOperation, f.aiOp),
	} {
		switch kind {
		case conventions.KindRetrieval:
			f.Retrieval = true
		case conventions.KindGeneration:
			f.Generation = true
		case conventions.KindEmbedding:
			f.embedding = true
		case conventions.KindCall:
			f.Generation, f.Call = true, true
		case conventions.KindTool:
			f.Tool = true
		}
	}
	if f.Tool && f.toolResult.Type != span.TypeEmpty {
		if docs, ok := shapedDocuments(f.toolResult); ok {
			f.Retrieval, f.toolDocs = true, docs
		}
	}
	if strings.HasPrefix(s.Name, "vector_db_retrieve") {
		f.Retrieval = true
	}
	if f.oiDocs != nil || f.dbDocs != nil || f.genaiDocs.Type != span.TypeEmpty || f.RAGDocs.Type != span.TypeEmpty {
		f.Retrieval = true
	}
	if f.RerankDocs != nil {
		f.Retrieval = true
	}
	if f.RAGAnswer != "" || f.oiOut != nil || f.oiChoices != nil || f.genaiOut.Type != span.TypeEmpty ||
		f.legacyOut != nil || f.eventOut != nil {
		f.Generation = true
	}
	if f.embedding {
		f.Generation = false
	}
}

// readKey reads an attribute of a key of the conventions' table.
func (f *Facts) readKey(key *conventions.Key, v span.Value) {
	switch key.Field {
	case conventions.OIKind, conventions.Operation, conventions.LLMRequestType, conventions.TraceloopKind,
		conventions.AIOperation:
		kind := conventions.Normalize(key.Field, v.Text())
		switch key.Field {
		case conventions.OIKind:
			f.oiKind = kind
		case conventions.Operation:
			f.op = kind
		case conventions.LLMRequestType:
			f.llmReq = kind
		case conventions.AIOperation:
			f.aiOp = kind
		default:
			f.tlKind = kind
		}
	case conventions.ToolName:
		f.ToolName = v.Text()
	case conventions.ToolResult:
		f.toolResult = v
	case conventions.InputValue:
		f.inputValue = v.Text()
	case conventions.InputMime:
		f.inputMime = v.Text()
	case conventions.OutputValue:
		f.outputValue = v.Text()
	case conventions.OutputMime:
		f.outputMime = v.Text()
	case conventions.EntityInput:
		f.tlInput = v
	case conventions.EntityOutput:
		f.tlOutput = v
	case conventions.SessionID:
		f.ids[key.Source][0] = v.Text()
	case conventions.UserID:
		f.ids[key.Source][1] = v.Text()
	case conventions.Metadata:
		f.MetadataRoute = metadataString(v, "route")
	case conventions.MetadataRoute:
		if !key.Weak || f.MetadataRoute == "" {
			f.MetadataRoute = v.Text()
		}
	case conventions.RetrievalQuery:
		f.retrievalQuery = v.Text()
	case conventions.VectorTopK:
		f.Retrieval = true
	case conventions.VectorResultCount:
		f.Retrieval = true
		if n, ok := v.Number(); ok && n == 0 {
			f.emptyHits = true
		}
	case conventions.Prompts:
		if l, ok := v.Raw().([]any); ok {
			for _, e := range l {
				f.oiPrompts = append(f.oiPrompts, span.AsString(e))
			}
		} else if v.Type == span.TypeStr {
			f.oiPrompts = append(f.oiPrompts, v.Str())
		}
	case conventions.RequestModel:
		if !key.Weak || f.requestModel == "" {
			f.requestModel = v.Text()
		}
	case conventions.ResponseID:
		if !key.Weak || f.ResponseID == "" {
			f.ResponseID = v.Text()
		}
	case conventions.ResponseModel:
		if !key.Weak || f.responseModel == "" {
			f.responseModel = v.Text()
		}
	case conventions.InputTokens:
		if !key.Weak || !f.HasIn {
			f.InTokens, f.HasIn = tokensOr(v, f.InTokens, f.HasIn)
		}
	case conventions.OutputTokens:
		if !key.Weak || !f.HasOut {
			f.OutTokens, f.HasOut = tokensOr(v, f.OutTokens, f.HasOut)
		}
	case conventions.GenAIDocuments:
		f.genaiDocs = v
	case conventions.DataSource:
		f.DataSource = v.Text()
	case conventions.InputMessages:
		f.genaiIn = v
	case conventions.OutputMessages:
		f.genaiOut = v
	case conventions.Prompt: // OpenLLMetry event-era single attribute
		f.legacyIn = append(f.legacyIn, span.Message{Role: "user", Content: v.Text()})
	case conventions.Completion:
		f.legacyOut = append(f.legacyOut, span.Message{Role: "assistant", Content: v.Text()})
	case conventions.Workflow:
		f.Workflow = v.Text()
	case conventions.Route:
		f.Route = v.Text()
	case conventions.RAGQuery:
		f.RAGQuery = v.Text()
	case conventions.RAGAnswer:
		f.RAGAnswer = v.Text()
	case conventions.RAGDocuments:
		f.RAGDocs = v
	case conventions.RAGCitations:
		f.RAGCitations = v
	case conventions.RAGReference:
		f.RAGReference = v.Text()
	case conventions.RAGRelevance:
		f.RAGRelevance = v
	case conventions.RAGFeedback:
		f.ragFeedback = v
		f.offerFeedback(feedbackFromValue(v), rankRAG)
	}
}

// readIndexed reads an attribute of a shared key of a flattened list as the text path of
// Read reads the same key: the element of an OpenInference document or message list, or
// of gen_ai.prompt / gen_ai.completion.
func (f *Facts) readIndexed(in *conventions.Info, v span.Value) {
	i, field := int(in.I), int(in.Field)
	switch in.Fam {
	case conventions.FamRetrieval:
		f.oiDocs = setDoc(startIn(f.oiDocs, f.docBuf), i, field, v, &f.scores)
	case conventions.FamRerankIn:
		f.rerankIn = setDoc(f.rerankIn, i, field, v, &f.scores)
	case conventions.FamRerankOut:
		f.RerankDocs = setDoc(f.RerankDocs, i, field, v, &f.scores)
	case conventions.FamInMessages:
		f.oiIn = span.SetMessage(startIn(f.oiIn, f.inBuf), i, field, v)
	case conventions.FamOutMessages:
		f.oiOut = span.SetMessage(startIn(f.oiOut, f.outBuf), i, field, v)
	case conventions.FamPrompt:
		f.legacyIn = span.SetLegacyMessage(f.legacyIn, i, field, v)
	case conventions.FamCompletion:
		f.legacyOut = span.SetLegacyMessage(f.legacyOut, i, field, v)
	}
}

func tokensOr(v span.Value, cur int64, has bool) (int64, bool) {
	if n, ok := v.Tokens(); ok {
		return n, true
	}
	return cur, has
}

func (f *Facts) readEvent(ev *span.Event) {
	e, ok := conventions.EventOf(ev.Name)
	if !ok {
		return
	}
	switch e.Kind {
	case conventions.EventDocument:
		f.dbDocs = append(f.dbDocs, docFromDBEvent(ev))
	case conventions.EventMessage:
		f.eventIn = append(f.eventIn, span.MessageFromEvent(ev, e.Role))
	case conventions.EventChoice:
		f.eventOut = append(f.eventOut, span.MessageFromEvent(ev, "assistant"))
	case conventions.EventSpanKeys:
		for i := range ev.Attrs {
			f.readEventKey(ev.Attrs[i].Key, ev.Attrs[i].Value)
		}
	case conventions.EventEvaluation:
		f.offerFeedback(feedbackFromEvaluationEvent(ev), rankAuto)
	}
}

// readEventKey reads the attributes of events that carry the same keys as a span
// (conventions.EventKeys).
func (f *Facts) readEventKey(k string, v span.Value) {
	key, ok := lookupKey(k)
	if !ok {
		return
	}
	switch key.Field {
	case conventions.InputMessages:
		if f.genaiIn.Type == span.TypeEmpty {
			f.genaiIn = v
		}
	case conventions.OutputMessages:
		if f.genaiOut.Type == span.TypeEmpty {
			f.genaiOut = v
		}
	case conventions.Prompt:
		f.legacyIn = append(f.legacyIn, span.Message{Role: "user", Content: v.Text()})
	case conventions.Completion:
		f.legacyOut = append(f.legacyOut, span.Message{Role: "assistant", Content: v.Text()})
	}
}

// lookupKey returns the row of the conventions' table that k is: by its address when it is a
// shared copy, else by its text.
func lookupKey(k string) (*conventions.Key, bool) {
	if in, ok := conventions.Shared(k); ok {
		return in.Key, in.Fixed
	}
	return conventions.Lookup(k)
}

func (f *Facts) offerFeedback(fb *record.Feedback, rank int) {
	if fb == nil || rank >= f.FeedbackRank {
		return
	}
	f.Feedback, f.FeedbackRank = fb, rank
}

// setDocField sets one field of the OpenInference flattened document list from the key suffix
// "{i}.document.{field}".
func setDocField(docs []record.Document, rest string, v span.Value, scores *[]float64) []record.Document {
	i, field, ok := conventions.SplitIndex(rest, span.MaxIndexed)
	if !ok || !strings.HasPrefix(field, "document.") {
		return docs
	}
	// The field's position in docFields, as a shared key's; -1 for another field (the
	// document is there, without it).
	return setDoc(docs, i, slices.Index(conventions.DocFields, field), v, scores)
}

// setDoc sets field f (docID, docScore, docContent, docMetadata; any other: none) of document
// i, growing docs up to it. Scores are stored in blocks of *scores (a record's documents point
// into it), not one allocation each.
func setDoc(docs []record.Document, i, f int, v span.Value, scores *[]float64) []record.Document {
	if len(docs) <= i {
		if cap(docs) <= i {
			docs = slices.Grow(docs, max(i+1, 8)-len(docs))
		}
		n := len(docs)
		docs = docs[:i+1]
		clear(docs[n:])
	}
	d := &docs[i]
	switch f {
	case conventions.DocID:
		d.ID = v.Text()
	case conventions.DocScore:
		if n, ok := v.Number(); ok {
			if len(*scores) == cap(*scores) {
				*scores = make([]float64, 0, 8) // a new block: pointers into the last stay valid
			}
			*scores = append(*scores, n)
			d.Score = &(*scores)[len(*scores)-1]
		}
	case conventions.DocContent:
		d.Content = v.Text()
	case conventions.DocMetadata:
		d.Metadata = parseMetadata(v)
	}
	return docs
}

// docFromDBEvent reads one OpenLLMetry vector-DB hit.
func docFromDBEvent(ev *span.Event) record.Document {
	var d record.Document
	var distance *float64
	for i := range ev.Attrs {
		k, v := ev.Attrs[i].Key, ev.Attrs[i].Value
		k = strings.TrimPrefix(strings.TrimPrefix(k, "db.query.result."), "db.search.result.")
		switch k {
		case "id":
			d.ID = v.Text()
		case "score":
			if n, ok := v.Number(); ok {
				d.Score = &n
			}
		case "distance":
			if n, ok := v.Number(); ok {
				distance = &n
			}
		case "metadata":
			d.Metadata = parseMetadata(v)
		case "document":
			d.Content = v.Text()
		case "entity":
			if m := parseMetadata(v); m != nil {
				if c := span.TextOf(m, docTextKeys, 0); c != "" {
					d.Content = c
				}
				if d.Metadata == nil {
					d.Metadata = m
				}
			}
		}
	}
	if distance != nil {
		if d.Metadata == nil {
			d.Metadata = map[string]any{}
		}
		d.Metadata["distance"] = *distance
	}
	return d
}

var docTextKeys = []string{"page_content", "pageContent", "content", "text", "document", "chunk", "body"}
