package assemble

import (
	"slices"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
)

// facts is what one span says, read in one pass over its attributes and events. Heavy JSON
// (GenAI messages, documents JSON, traceloop entity values) is kept raw and decoded only when
// the span turns out to matter for a record.
type facts struct {
	oiKind string // OpenInference span kind, upper case
	op     string // gen_ai.operation.name, lower case
	tlKind string // traceloop.span.kind
	llmReq string // llm.request.type (OpenLLMetry)

	retrieval  bool
	generation bool
	embedding  bool

	// Documents by source; nil when the source is absent.
	oiDocs     []record.Document // retrieval.documents.{i}.document.*
	rerankDocs []record.Document // reranker.output_documents.{i}.document.*
	rerankIn   []record.Document // reranker.input_documents.{i}.document.* (when no output is given)
	dbDocs     []record.Document // db.query.result / db.search.result events
	genaiDocs  Value             // gen_ai.retrieval.documents
	ragDocs    Value             // rag.documents
	emptyHits  bool              // db.vector.query.result_count = 0
	scores     []float64         // the current block of document scores (setDocField)

	retrievalQuery string // gen_ai.retrieval.query.text, reranker.query
	inputValue     string
	inputMime      string
	outputValue    string
	outputMime     string
	tlInput        Value
	tlOutput       Value

	// Prompt and completion, by convention.
	oiIn, oiOut         []message // llm.input_messages / llm.output_messages
	oiPrompts           []string  // llm.prompts.{i}.prompt.text, llm.prompts
	oiChoices           []string  // llm.choices.{i}.completion.text
	genaiIn, genaiOut   Value     // gen_ai.input.messages / gen_ai.output.messages
	legacyIn, legacyOut []message // gen_ai.prompt.{i}.* / gen_ai.completion.{i}.*
	eventIn, eventOut   []message // gen_ai.*.message / gen_ai.choice events

	requestModel, responseModel string
	inTokens, outTokens         int64
	hasIn, hasOut               bool

	session, user, route, dataSource, workflow string
	// Context ids by convention, combined by precedence at the end of readFacts: rag, then
	// OpenInference / enduser, then GenAI, then traceloop association properties.
	ids           [4][2]string
	metadataRoute string

	ragQuery, ragAnswer, ragReference string
	ragCitations, ragRelevance        Value
	ragFeedback                       Value

	// Feedback candidates by precedence (0 = highest).
	feedback     *record.Feedback
	feedbackRank int

	// Backing arrays kept across the pooled scratch's uses (reset) for the lists most spans
	// fill: OpenInference documents and messages. Empty, and every element zero: the next
	// span's list starts in them instead of allocating. No record keeps oiDocs, oiIn or oiOut
	// (appendDocs and the readers copy what they take).
	docBuf        []record.Document
	inBuf, outBuf []message
}

// maxSpare bounds the elements of a kept backing array: a hostile span's long list is not kept.
const maxSpare = 64

// reset zeroes f for the next span, keeping the backing arrays of oiDocs, oiIn and oiOut.
func (f *facts) reset() {
	docs, in, out := spare(f.oiDocs, f.docBuf), spare(f.oiIn, f.inBuf), spare(f.oiOut, f.outBuf)
	// Cleared in place, then the three kept: a composite literal with fields set is built
	// on the stack and copied in (1.3 KB twice, behind the write barrier while GC marks).
	*f = facts{}
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

// message is one chat message; parts are its text parts.
type message struct {
	role    string
	content string
	parts   []string
}

func (m *message) text() string {
	if m.content != "" {
		return m.content
	}
	return strings.Join(m.parts, "\n")
}

// Context id sources, by precedence.
const (
	idRAG = iota
	idOI
	idGenAI
	idTraceloop
)

// Feedback precedence ranks: lower wins.
const (
	rankRAG   = 0   // rag.feedback
	rankHuman = 1   // annotations with annotator_kind HUMAN
	rankPlain = 2   // annotations without annotator_kind
	rankAuto  = 3   // LLM / CODE annotations, evaluations.*, gen_ai.evaluation.result
	rankNone  = 100 // no feedback
)

// maxIndexed bounds the {i} of flattened keys (documents, messages), so a hostile index cannot
// allocate.
const maxIndexed = record.MaxDocuments

// readFacts reads one span into f, which must be zero but for the backing arrays reset keeps.
// It fills in place: facts is large and holds pointers, so returning it by value would cost a
// copy with write barriers.
func readFacts(f *facts, s *Span) {
	f.feedbackRank = rankNone
	var anns []annotation
	for i := range s.Attrs {
		k := s.Attrs[i].Key
		if in, ok := sharedKey(k); ok && in.fam != keyFixed {
			f.readIndexed(in, s.Attrs[i].Value) // a list's element, known by its key's address
			continue
		}
		if len(k) < 3 {
			continue // shorter than every key read
		}
		// Dispatched on the first byte: a key of none of the prefixed families costs one
		// comparison before the plain keys' switch.
		switch k[0] {
		case 'l':
			if strings.HasPrefix(k, "llm.") {
				f.readLLM(k[4:], s.Attrs[i].Value)
				continue
			}
		case 'g':
			if strings.HasPrefix(k, "gen_ai.") {
				f.readGenAI(k[7:], s.Attrs[i].Value)
				continue
			}
		case 'r':
			switch {
			case strings.HasPrefix(k, "retrieval.documents."):
				f.oiDocs = nonEmpty(setDocField(startIn(f.oiDocs, f.docBuf), k[len("retrieval.documents."):], s.Attrs[i].Value, &f.scores))
				continue
			case strings.HasPrefix(k, "reranker."):
				v := s.Attrs[i].Value
				switch rest := k[len("reranker."):]; {
				case strings.HasPrefix(rest, "input_documents."):
					f.rerankIn = setDocField(f.rerankIn, rest[len("input_documents."):], v, &f.scores)
				case strings.HasPrefix(rest, "output_documents."):
					f.rerankDocs = setDocField(f.rerankDocs, rest[len("output_documents."):], v, &f.scores)
					if f.rerankDocs == nil {
						f.rerankDocs = []record.Document{}
					}
				case rest == "query":
					f.retrievalQuery = v.Text()
				}
				continue
			case strings.HasPrefix(k, "rag."):
				f.readRAG(k[4:], s.Attrs[i].Value)
				continue
			}
		case 'a':
			if strings.HasPrefix(k, "annotations.") {
				anns = setAnnotation(anns, k[len("annotations."):], "annotation.", s.Attrs[i].Value)
				continue
			}
		case 'e':
			if strings.HasPrefix(k, "evaluations.") {
				anns = setAnnotation(anns, k[len("evaluations."):], "evaluation.", s.Attrs[i].Value)
				continue
			}
		case 't':
			if strings.HasPrefix(k, "traceloop.") {
				f.readTraceloop(k[len("traceloop."):], s.Attrs[i].Value)
				continue
			}
		case 'd':
			if strings.HasPrefix(k, "db.") {
				switch k {
				case "db.vector.query.top_k":
					f.retrieval = true
				case "db.vector.query.result_count":
					f.retrieval = true
					if n, ok := s.Attrs[i].Value.Number(); ok && n == 0 {
						f.emptyHits = true
					}
				}
				continue
			}
		}
		switch v := &s.Attrs[i].Value; k {
		case "openinference.span.kind":
			f.oiKind = upperKind(v.Text())
		case "input.value":
			f.inputValue = v.Text()
		case "input.mime_type":
			f.inputMime = v.Text()
		case "output.value":
			f.outputValue = v.Text()
		case "output.mime_type":
			f.outputMime = v.Text()
		case "session.id":
			f.ids[idOI][0] = v.Text()
		case "user.id":
			f.ids[idOI][1] = v.Text()
		case "enduser.id":
			f.ids[idGenAI][1] = v.Text()
		case "metadata":
			f.metadataRoute = metadataString(*v, "route")
		}
	}
	for i := range s.Events {
		f.readEvent(&s.Events[i])
	}
	for _, ids := range f.ids {
		if f.session == "" {
			f.session = ids[0]
		}
		if f.user == "" {
			f.user = ids[1]
		}
	}
	for i := range anns {
		f.offerFeedback(anns[i].feedback())
	}

	switch f.oiKind {
	case "RETRIEVER":
		f.retrieval = true
	case "RERANKER":
		f.retrieval = true
	case "LLM":
		f.generation = true
	case "EMBEDDING":
		f.embedding = true
	}
	switch f.op {
	case "retrieval", "vector_db_retrieve":
		f.retrieval = true
	case "chat", "text_completion", "generate_content", "completion":
		f.generation = true
	case "embeddings", "embedding":
		f.embedding = true
	}
	switch f.llmReq {
	case "chat", "completion":
		f.generation = true
	case "embedding", "embeddings":
		f.embedding = true
	}
	if strings.HasPrefix(s.Name, "vector_db_retrieve") {
		f.retrieval = true
	}
	if f.oiDocs != nil || f.dbDocs != nil || f.genaiDocs.Type != TypeEmpty || f.ragDocs.Type != TypeEmpty {
		f.retrieval = true
	}
	if f.rerankDocs != nil {
		f.retrieval = true
	}
	if f.ragAnswer != "" || f.oiOut != nil || f.oiChoices != nil || f.genaiOut.Type != TypeEmpty ||
		f.legacyOut != nil || f.eventOut != nil {
		f.generation = true
	}
	if f.embedding {
		f.generation = false
	}
}

// readIndexed reads an attribute of a shared indexed key (sharedKey) as the text path below
// reads the same key: the element of an OpenInference document or message list, or of
// gen_ai.prompt / gen_ai.completion.
func (f *facts) readIndexed(in keyInfo, v Value) {
	i, field := int(in.i), int(in.field)
	switch in.fam {
	case keyRetrieval:
		f.oiDocs = setDoc(startIn(f.oiDocs, f.docBuf), i, field, v, &f.scores)
	case keyRerankIn:
		f.rerankIn = setDoc(f.rerankIn, i, field, v, &f.scores)
	case keyRerankOut:
		f.rerankDocs = setDoc(f.rerankDocs, i, field, v, &f.scores)
	case keyInMessages:
		f.oiIn = setMessage(startIn(f.oiIn, f.inBuf), i, field, v)
	case keyOutMessages:
		f.oiOut = setMessage(startIn(f.oiOut, f.outBuf), i, field, v)
	case keyPrompt:
		f.legacyIn = setLegacyMessage(f.legacyIn, i, field, v)
	case keyCompletion:
		f.legacyOut = setLegacyMessage(f.legacyOut, i, field, v)
	}
}

func (f *facts) readLLM(k string, v Value) {
	switch {
	case strings.HasPrefix(k, "input_messages."):
		f.oiIn = nonEmpty(setOIMessage(startIn(f.oiIn, f.inBuf), k[len("input_messages."):], v))
	case strings.HasPrefix(k, "output_messages."):
		f.oiOut = nonEmpty(setOIMessage(startIn(f.oiOut, f.outBuf), k[len("output_messages."):], v))
	case strings.HasPrefix(k, "prompts."):
		if i, rest, ok := splitIndex(k[len("prompts."):], maxIndexed); ok && rest == "prompt.text" {
			f.oiPrompts = setIndexed(f.oiPrompts, i, v.Text())
		}
	case strings.HasPrefix(k, "choices."):
		if i, rest, ok := splitIndex(k[len("choices."):], maxIndexed); ok && rest == "completion.text" {
			f.oiChoices = setIndexed(f.oiChoices, i, v.Text())
		}
	}
	switch k {
	case "prompts":
		if l, ok := v.Raw().([]any); ok {
			for _, e := range l {
				f.oiPrompts = append(f.oiPrompts, asString(e))
			}
		} else if v.Type == TypeStr {
			f.oiPrompts = append(f.oiPrompts, v.Str())
		}
	case "model_name", "request.model_name":
		if f.requestModel == "" || k == "request.model_name" {
			f.requestModel = v.Text()
		}
	case "response.model_name":
		f.responseModel = v.Text()
	case "token_count.prompt", "usage.prompt_tokens":
		f.inTokens, f.hasIn = tokensOr(v, f.inTokens, f.hasIn)
	case "token_count.completion", "usage.completion_tokens":
		f.outTokens, f.hasOut = tokensOr(v, f.outTokens, f.hasOut)
	case "request.type":
		f.llmReq = lowerName(v.Text())
	}
}

func tokensOr(v Value, cur int64, has bool) (int64, bool) {
	if n, ok := v.tokens(); ok {
		return n, true
	}
	return cur, has
}

func (f *facts) readGenAI(k string, v Value) {
	switch {
	case strings.HasPrefix(k, "prompt."):
		f.legacyIn = setRoleContent(f.legacyIn, k[len("prompt."):], v)
		return
	case strings.HasPrefix(k, "completion."):
		f.legacyOut = setRoleContent(f.legacyOut, k[len("completion."):], v)
		return
	}
	switch k {
	case "operation.name":
		f.op = lowerName(v.Text())
	case "retrieval.query.text":
		f.retrievalQuery = v.Text()
	case "retrieval.documents":
		f.genaiDocs = v
	case "data_source.id":
		f.dataSource = v.Text()
	case "request.model":
		f.requestModel = v.Text()
	case "response.model":
		f.responseModel = v.Text()
	case "usage.input_tokens":
		f.inTokens, f.hasIn = tokensOr(v, f.inTokens, f.hasIn)
	case "usage.output_tokens":
		f.outTokens, f.hasOut = tokensOr(v, f.outTokens, f.hasOut)
	case "usage.prompt_tokens":
		if !f.hasIn {
			f.inTokens, f.hasIn = tokensOr(v, f.inTokens, f.hasIn)
		}
	case "usage.completion_tokens":
		if !f.hasOut {
			f.outTokens, f.hasOut = tokensOr(v, f.outTokens, f.hasOut)
		}
	case "conversation.id":
		f.ids[idGenAI][0] = v.Text()
	case "input.messages":
		f.genaiIn = v
	case "output.messages":
		f.genaiOut = v
	case "prompt": // OpenLLMetry event-era single attribute
		f.legacyIn = append(f.legacyIn, message{role: "user", content: v.Text()})
	case "completion":
		f.legacyOut = append(f.legacyOut, message{role: "assistant", content: v.Text()})
	}
}

func (f *facts) readTraceloop(k string, v Value) {
	switch {
	case strings.HasPrefix(k, "association.properties."):
		switch k[len("association.properties."):] {
		case "session_id", "session.id", "conversation_id":
			f.ids[idTraceloop][0] = v.Text()
		case "user_id", "user.id":
			f.ids[idTraceloop][1] = v.Text()
		case "route":
			if f.metadataRoute == "" {
				f.metadataRoute = v.Text()
			}
		}
		return
	}
	switch k {
	case "span.kind":
		f.tlKind = lowerName(v.Text())
	case "entity.input":
		f.tlInput = v
	case "entity.output":
		f.tlOutput = v
	case "workflow.name":
		f.workflow = v.Text()
	}
}

func (f *facts) readRAG(k string, v Value) {
	switch k {
	case "query":
		f.ragQuery = v.Text()
	case "answer":
		f.ragAnswer = v.Text()
	case "documents":
		f.ragDocs = v
	case "citations":
		f.ragCitations = v
	case "reference":
		f.ragReference = v.Text()
	case "relevance":
		f.ragRelevance = v
	case "feedback":
		f.ragFeedback = v
		f.offerFeedback(feedbackFromValue(v), rankRAG)
	case "route":
		f.route = v.Text()
	case "session_id", "session.id":
		f.ids[idRAG][0] = v.Text()
	case "user_id", "user.id":
		f.ids[idRAG][1] = v.Text()
	}
}

func (f *facts) readEvent(ev *Event) {
	switch ev.Name {
	case "db.query.result", "db.search.result":
		f.dbDocs = append(f.dbDocs, docFromDBEvent(ev))
	case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
		role := strings.TrimSuffix(strings.TrimPrefix(ev.Name, "gen_ai."), ".message")
		f.eventIn = append(f.eventIn, messageFromEvent(ev, role))
	case "gen_ai.choice":
		f.eventOut = append(f.eventOut, messageFromEvent(ev, "assistant"))
	case "gen_ai.content.prompt", "gen_ai.content.completion", "gen_ai.client.inference.operation.details":
		for i := range ev.Attrs {
			f.readGenAIEventAttr(ev.Attrs[i].Key, ev.Attrs[i].Value)
		}
	case "gen_ai.evaluation.result":
		f.offerFeedback(feedbackFromEvaluationEvent(ev), rankAuto)
	}
}

// readGenAIEventAttr reads the attributes of events that carry the same keys as a span.
func (f *facts) readGenAIEventAttr(k string, v Value) {
	switch k {
	case "gen_ai.input.messages":
		if f.genaiIn.Type == TypeEmpty {
			f.genaiIn = v
		}
	case "gen_ai.output.messages":
		if f.genaiOut.Type == TypeEmpty {
			f.genaiOut = v
		}
	case "gen_ai.prompt":
		f.legacyIn = append(f.legacyIn, message{role: "user", content: v.Text()})
	case "gen_ai.completion":
		f.legacyOut = append(f.legacyOut, message{role: "assistant", content: v.Text()})
	}
}

func (f *facts) offerFeedback(fb *record.Feedback, rank int) {
	if fb == nil || rank >= f.feedbackRank {
		return
	}
	f.feedback, f.feedbackRank = fb, rank
}

func setIndexed(l []string, i int, s string) []string {
	for len(l) <= i {
		l = append(l, "")
	}
	l[i] = s
	return l
}

// setDocField sets one field of the OpenInference flattened document list from the key suffix
// "{i}.document.{field}".
func setDocField(docs []record.Document, rest string, v Value, scores *[]float64) []record.Document {
	i, field, ok := splitIndex(rest, maxIndexed)
	if !ok || !strings.HasPrefix(field, "document.") {
		return docs
	}
	// The field's position in docFields, as a shared key's; -1 for another field (the
	// document is there, without it).
	return setDoc(docs, i, slices.Index(docFields, field), v, scores)
}

// setDoc sets field f (docID, docScore, docContent, docMetadata; any other: none) of document
// i, growing docs up to it. Scores are stored in blocks of *scores (a record's documents point
// into it), not one allocation each.
func setDoc(docs []record.Document, i, f int, v Value, scores *[]float64) []record.Document {
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
	case docID:
		d.ID = v.Text()
	case docScore:
		if n, ok := v.Number(); ok {
			if len(*scores) == cap(*scores) {
				*scores = make([]float64, 0, 8) // a new block: pointers into the last stay valid
			}
			*scores = append(*scores, n)
			d.Score = &(*scores)[len(*scores)-1]
		}
	case docContent:
		d.Content = v.Text()
	case docMetadata:
		d.Metadata = parseMetadata(v)
	}
	return docs
}

// setOIMessage sets a field of llm.{input,output}_messages from "{i}.message.{field}".
func setOIMessage(msgs []message, rest string, v Value) []message {
	i, field, ok := splitIndex(rest, maxIndexed)
	if !ok || !strings.HasPrefix(field, "message.") {
		return msgs
	}
	if f := slices.Index(msgFields, field); f >= 0 { // its position, as a shared key's
		return setMessage(msgs, i, f, v)
	}
	msgs = growMessages(msgs, i)
	if parts, ok := strings.CutPrefix(field, "message.contents."); ok {
		j, sub, ok := splitIndex(parts, maxIndexed)
		if ok && sub == "message_content.text" {
			msgs[i].parts = setIndexed(msgs[i].parts, j, v.Text())
		}
	}
	return msgs
}

// setMessage sets field f (msgRole, msgContent) of OpenInference message i, growing msgs up to
// it.
func setMessage(msgs []message, i, f int, v Value) []message {
	msgs = growMessages(msgs, i)
	if f == msgRole {
		msgs[i].role = v.Text()
	} else {
		msgs[i].content = v.Text()
	}
	return msgs
}

// growMessages extends msgs with empty messages up to index i, allocating once for short lists.
func growMessages(msgs []message, i int) []message {
	if len(msgs) > i {
		return msgs
	}
	if cap(msgs) <= i {
		msgs = slices.Grow(msgs, max(i+1, 4)-len(msgs))
	}
	n := len(msgs)
	msgs = msgs[:i+1]
	clear(msgs[n:])
	return msgs
}

// setRoleContent sets gen_ai.prompt.{i}.role|content style messages.
func setRoleContent(msgs []message, rest string, v Value) []message {
	i, field, ok := splitIndex(rest, maxIndexed)
	if !ok {
		return msgs
	}
	// The field's position in legacyFields, as a shared key's; -1 for another field (the
	// message is there, without it).
	return setLegacyMessage(msgs, i, slices.Index(legacyFields, field), v)
}

// setLegacyMessage sets field f (msgRole, msgContent; any other: none) of gen_ai.prompt or
// gen_ai.completion message i, growing msgs up to it.
func setLegacyMessage(msgs []message, i, f int, v Value) []message {
	msgs = growMessages(msgs, i)
	switch f {
	case msgRole:
		msgs[i].role = v.Text()
	case msgContent:
		msgs[i].content = contentText(v)
	}
	return msgs
}

// contentText reads a message content that may be a JSON list of content blocks (OpenLLMetry
// writes Anthropic's and OpenAI's multi-part content that way): the text of its text blocks.
// Anything else is the text itself.
func contentText(v Value) string {
	s := v.Text()
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return s
	}
	blocks, ok := parseJSON(s).([]any)
	if !ok || len(blocks) == 0 {
		return s
	}
	var parts []string
	for _, b := range blocks {
		m, ok := b.(map[string]any)
		if !ok || asString(m["type"]) == "" {
			return s // not content blocks
		}
		if t := asString(m["text"]); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

// messageFromEvent reads a v1.36-era GenAI event: `content` (string or structured), or a
// `message` object ({role, content}), or the Python SDK's `gen_ai.event.content` JSON.
func messageFromEvent(ev *Event, role string) message {
	m := message{role: role}
	for i := range ev.Attrs {
		k, v := ev.Attrs[i].Key, ev.Attrs[i].Value
		switch k {
		case "role", "gen_ai.role":
			m.role = v.Text()
		case "content", "gen_ai.content":
			if v.Type == TypeRaw {
				m.content = textOf(v.Raw(), messageTextKeys, 0)
			} else {
				m.content = v.Text()
			}
		case "message", "gen_ai.event.content", "body":
			if x := v.structured(); x != nil {
				if obj, ok := x.(map[string]any); ok {
					if msg, ok := obj["message"].(map[string]any); ok {
						obj = msg
					}
					if r := asString(obj["role"]); r != "" {
						m.role = r
					}
					if c := textOf(obj["content"], messageTextKeys, 0); c != "" {
						m.content = c
					}
					continue
				}
				if s, ok := x.(string); ok {
					m.content = s
				}
			} else if v.Type == TypeStr && m.content == "" {
				m.content = v.Str()
			}
		}
	}
	return m
}

var messageTextKeys = []string{"content", "text", "parts"}

// docFromDBEvent reads one OpenLLMetry vector-DB hit.
func docFromDBEvent(ev *Event) record.Document {
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
				if c := textOf(m, docTextKeys, 0); c != "" {
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

var docTextKeys = []string{"page_content", "content", "text", "document", "chunk", "body"}
