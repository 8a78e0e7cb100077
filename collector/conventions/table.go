package conventions

// The conventions' attribute keys, declared once. Every lookup of the package is derived from
// these tables at init: which span attributes a held span keeps (Kept), the shared copy of each
// key (Shared), what a key means to the readers (Lookup), and what its presence or value says
// about the span's kind (Key.Sign, KindOf). Adding an attribute of a new instrumentation that
// means what a known one means is one row here; TestTableDerived checks that every row is
// recognised by every derived lookup, and that nothing else is.

// Field is what an attribute means to the readers (collector/facts Read switches on it).
type Field uint8

// Fields. A key whose Field is None is kept (its family is) but read only by a family reader.
const (
	None              Field = iota
	OIKind                  // the OpenInference span kind (KindOf reads it upper case)
	Operation               // the GenAI operation name (lower case)
	LLMRequestType          // OpenLLMetry's request type (lower case)
	TraceloopKind           // traceloop.span.kind (lower case)
	InputValue              // the span's input text or JSON
	InputMime               // its mime type
	OutputValue             // the span's output text or JSON
	OutputMime              // its mime type
	EntityInput             // traceloop's entity input (structured)
	EntityOutput            // traceloop's entity output (structured)
	SessionID               // a session id, by Source
	UserID                  // a user id, by Source
	Metadata                // an OpenInference metadata object (its "route")
	MetadataRoute           // a route, read as metadata's
	RetrievalQuery          // what a retrieval or reranker searched for
	VectorTopK              // a vector query's top_k (a retrieval)
	VectorResultCount       // a vector query's result count (a retrieval; 0: no hits)
	Prompts                 // llm.prompts: a list of prompt texts
	RequestModel            // the model asked for
	ResponseModel           // the model that answered
	ResponseID              // the provider's id of the response (where evaluations of it are placed)
	InputTokens             // prompt tokens
	OutputTokens            // completion tokens
	GenAIDocuments          // GenAI retrieval documents (JSON)
	DataSource              // the data source a retrieval searched
	InputMessages           // GenAI input messages (JSON)
	OutputMessages          // GenAI output messages (JSON)
	Prompt                  // a single legacy prompt text (a user message)
	Completion              // a single legacy completion text (an assistant message)
	Workflow                // the workflow's name
	Route                   // ragwatch's route
	RAGQuery                // ragwatch's explicit keys
	RAGAnswer
	RAGDocuments
	RAGCitations
	RAGReference
	RAGRelevance
	RAGFeedback
	AIOperation // the Vercel AI SDK's ai.operationId (read as sent: KindOf compares it exactly)
	ToolName    // the name of the tool an AI SDK tool call ran
	ToolResult  // what the tool returned (JSON): a retrieval's documents when document-shaped
	numFields
)

// Source is the convention a context id comes from; readers combine them by this precedence
// (lower wins).
type Source uint8

// Sources, by precedence.
const (
	SrcRAG Source = iota
	SrcOI
	SrcGenAI
	SrcTraceloop
	SrcAI // the Vercel AI SDK's ai.telemetry.metadata.*
	NumSources
)

// Sign is what an attribute's presence (or an event's) says about its span without reading the
// value: the cheap signs span-kind sniffing reads (collector/assemble quickKind, hasFeedback).
type Sign uint8

// Signs.
const (
	SignRetrieval Sign = 1 << iota
	SignGeneration
	SignFeedback
)

// Key is one attribute key of a convention.
type Key struct {
	Name   string
	Field  Field
	Source Source // of SessionID and UserID
	// Weak: the key is read only when no other key of its Field was (an older or less
	// specific spelling of the same thing).
	Weak bool
	Sign Sign
}

// Keys are the attribute keys readers read by name. Each is kept on held spans and shared.
var Keys = [...]Key{
	// OpenInference.
	{Name: "openinference.span.kind", Field: OIKind},
	{Name: "input.value", Field: InputValue},
	{Name: "input.mime_type", Field: InputMime},
	{Name: "output.value", Field: OutputValue},
	{Name: "output.mime_type", Field: OutputMime},
	{Name: "session.id", Field: SessionID, Source: SrcOI},
	{Name: "user.id", Field: UserID, Source: SrcOI},
	{Name: "metadata", Field: Metadata},
	{Name: "reranker.query", Field: RetrievalQuery},
	{Name: "llm.prompts", Field: Prompts},
	{Name: "llm.model_name", Field: RequestModel, Weak: true},
	{Name: "llm.token_count.prompt", Field: InputTokens},
	{Name: "llm.token_count.completion", Field: OutputTokens},
	// OpenTelemetry (general, database and GenAI).
	{Name: "enduser.id", Field: UserID, Source: SrcGenAI},
	{Name: "db.vector.query.top_k", Field: VectorTopK, Sign: SignRetrieval},
	{Name: "db.vector.query.result_count", Field: VectorResultCount, Sign: SignRetrieval},
	{Name: "gen_ai.operation.name", Field: Operation},
	{Name: "gen_ai.retrieval.query.text", Field: RetrievalQuery},
	{Name: "gen_ai.retrieval.documents", Field: GenAIDocuments, Sign: SignRetrieval},
	{Name: "gen_ai.data_source.id", Field: DataSource},
	{Name: "gen_ai.request.model", Field: RequestModel},
	{Name: "gen_ai.response.model", Field: ResponseModel},
	{Name: "gen_ai.response.id", Field: ResponseID},
	{Name: "gen_ai.usage.input_tokens", Field: InputTokens},
	{Name: "gen_ai.usage.output_tokens", Field: OutputTokens},
	{Name: "gen_ai.usage.prompt_tokens", Field: InputTokens, Weak: true},
	{Name: "gen_ai.usage.completion_tokens", Field: OutputTokens, Weak: true},
	{Name: "gen_ai.conversation.id", Field: SessionID, Source: SrcGenAI},
	{Name: "gen_ai.input.messages", Field: InputMessages},
	{Name: "gen_ai.output.messages", Field: OutputMessages, Sign: SignGeneration},
	{Name: "gen_ai.prompt", Field: Prompt},
	{Name: "gen_ai.completion", Field: Completion},
	// OpenLLMetry (traceloop).
	{Name: "llm.request.model_name", Field: RequestModel},
	{Name: "llm.response.model_name", Field: ResponseModel},
	{Name: "llm.usage.prompt_tokens", Field: InputTokens},
	{Name: "llm.usage.completion_tokens", Field: OutputTokens},
	{Name: "llm.request.type", Field: LLMRequestType},
	{Name: "traceloop.span.kind", Field: TraceloopKind},
	{Name: "traceloop.entity.input", Field: EntityInput},
	{Name: "traceloop.entity.output", Field: EntityOutput},
	{Name: "traceloop.workflow.name", Field: Workflow},
	{Name: "traceloop.association.properties.session_id", Field: SessionID, Source: SrcTraceloop},
	{Name: "traceloop.association.properties.session.id", Field: SessionID, Source: SrcTraceloop},
	{Name: "traceloop.association.properties.conversation_id", Field: SessionID, Source: SrcTraceloop},
	{Name: "traceloop.association.properties.user_id", Field: UserID, Source: SrcTraceloop},
	{Name: "traceloop.association.properties.user.id", Field: UserID, Source: SrcTraceloop},
	{Name: "traceloop.association.properties.route", Field: MetadataRoute, Weak: true},
	// The Vercel AI SDK (ai 4.x and 5.x, experimental_telemetry). The span's kind is its
	// ai.operationId (KindValues); a call's prompt and answer are its input and output values,
	// a tool call's arguments its input.
	{Name: "ai.operationId", Field: AIOperation},
	{Name: "ai.prompt", Field: InputValue},
	{Name: "ai.prompt.messages", Field: InputMessages},
	{Name: "ai.response.text", Field: OutputValue},
	{Name: "ai.response.object", Field: OutputValue},
	{Name: "ai.model.id", Field: RequestModel, Weak: true},
	{Name: "ai.response.model", Field: ResponseModel, Weak: true},
	{Name: "ai.response.id", Field: ResponseID, Weak: true},
	{Name: "ai.usage.promptTokens", Field: InputTokens, Weak: true},
	{Name: "ai.usage.inputTokens", Field: InputTokens, Weak: true},
	{Name: "ai.usage.completionTokens", Field: OutputTokens, Weak: true},
	{Name: "ai.usage.outputTokens", Field: OutputTokens, Weak: true},
	{Name: "ai.toolCall.name", Field: ToolName},
	{Name: "ai.toolCall.args", Field: InputValue},
	{Name: "ai.toolCall.result", Field: ToolResult},
	{Name: "ai.telemetry.functionId", Field: MetadataRoute, Weak: true},
	{Name: "ai.telemetry.metadata.route", Field: MetadataRoute},
	{Name: "ai.telemetry.metadata.sessionId", Field: SessionID, Source: SrcAI},
	{Name: "ai.telemetry.metadata.session_id", Field: SessionID, Source: SrcAI},
	{Name: "ai.telemetry.metadata.userId", Field: UserID, Source: SrcAI},
	{Name: "ai.telemetry.metadata.user_id", Field: UserID, Source: SrcAI},
	// ragwatch's own (docs/conventions.md); every other rag.* key is kept too (Families).
	{Name: "rag.query", Field: RAGQuery},
	{Name: "rag.answer", Field: RAGAnswer, Sign: SignGeneration},
	{Name: "rag.documents", Field: RAGDocuments, Sign: SignRetrieval},
	{Name: "rag.citations", Field: RAGCitations},
	{Name: "rag.reference", Field: RAGReference},
	{Name: "rag.relevance", Field: RAGRelevance},
	{Name: "rag.feedback", Field: RAGFeedback, Sign: SignFeedback},
	{Name: "rag.route", Field: Route},
	{Name: "rag.session_id", Field: SessionID, Source: SrcRAG},
	{Name: "rag.session.id", Field: SessionID, Source: SrcRAG},
	{Name: "rag.user_id", Field: UserID, Source: SrcRAG},
	{Name: "rag.user.id", Field: UserID, Source: SrcRAG},
}

// Fam is a family of attribute keys that share a prefix: flattened lists ("{prefix}{i}.{field}")
// and namespaces kept whole.
type Fam uint8

// Families. The first seven are the flattened lists whose canonical keys are shared (Fields
// lists their fields, each field's position being what the setters take).
const (
	FamRetrieval   Fam = iota // retrieval.documents.{i}.document.*
	FamRerankIn               // reranker.input_documents.{i}.document.*
	FamRerankOut              // reranker.output_documents.{i}.document.*
	FamInMessages             // llm.input_messages.{i}.message.*
	FamOutMessages            // llm.output_messages.{i}.message.*
	FamPrompt                 // gen_ai.prompt.{i}.{role,content}
	FamCompletion             // gen_ai.completion.{i}.{role,content}
	FamPrompts                // llm.prompts.{i}.prompt.text
	FamChoices                // llm.choices.{i}.completion.text
	FamAnnotations            // annotations.{name}.annotation.*
	FamEvaluations            // evaluations.{name}.evaluation.*
	FamRAG                    // rag.*: ragwatch's namespace, held whole
	numFams
	numListFams = FamCompletion + 1
)

// Family is one family of keys.
type Family struct {
	Fam    Fam
	Prefix string
	// Fields are the canonical fields of a flattened list, in the order the setters number
	// them (DocID, DocScore, ...); nil for the others.
	Fields []string
	Sign   Sign
}

// Field lists of the flattened families.
var (
	DocFields    = []string{"document.id", "document.score", "document.content", "document.metadata"}
	MsgFields    = []string{"message.role", "message.content"}
	LegacyFields = []string{"role", "content"}
)

// Positions in DocFields, MsgFields and LegacyFields.
const (
	DocID, DocScore, DocContent, DocMetadata = 0, 1, 2, 3
	MsgRole, MsgContent                      = 0, 1
)

// Families are the key families; every key of one is kept on held spans.
var Families = [numFams]Family{
	{FamRetrieval, "retrieval.documents.", DocFields, SignRetrieval},
	{FamRerankIn, "reranker.input_documents.", DocFields, 0},
	{FamRerankOut, "reranker.output_documents.", DocFields, SignRetrieval},
	{FamInMessages, "llm.input_messages.", MsgFields, 0},
	{FamOutMessages, "llm.output_messages.", MsgFields, SignGeneration},
	{FamPrompt, "gen_ai.prompt.", LegacyFields, 0},
	{FamCompletion, "gen_ai.completion.", LegacyFields, SignGeneration},
	{FamPrompts, "llm.prompts.", nil, 0},
	{FamChoices, "llm.choices.", nil, SignGeneration},
	{FamAnnotations, "annotations.", nil, SignFeedback},
	{FamEvaluations, "evaluations.", nil, SignFeedback},
	{FamRAG, "rag.", nil, 0},
}

// Kind is a span kind a value names.
type Kind uint8

// Kinds.
const (
	KindNone Kind = iota
	KindRetrieval
	KindGeneration
	KindEmbedding
	// KindCall is a call that generates through nested model calls (the AI SDK's generateText
	// around its doGenerate steps): a generation only when no generation is nested in it
	// (collector/assemble), so that one model call is counted once.
	KindCall
	// KindTool is a tool call: a retrieval when its result is document-shaped, or its tool is
	// named in conventions.retrieval_tools.
	KindTool
)

// KindValue is a value of a span-kind attribute (OIKind, Operation, LLMRequestType, AIOperation), spelled
// as the convention spells it, and the kind it names.
type KindValue struct {
	Field Field
	Value string
	Kind  Kind
}

// KindValues are the span-kind values the readers act on.
var KindValues = [...]KindValue{
	{OIKind, "RETRIEVER", KindRetrieval},
	{OIKind, "RERANKER", KindRetrieval},
	{OIKind, "LLM", KindGeneration},
	{OIKind, "EMBEDDING", KindEmbedding},
	{Operation, "retrieval", KindRetrieval},
	{Operation, "vector_db_retrieve", KindRetrieval},
	{Operation, "chat", KindGeneration},
	{Operation, "text_completion", KindGeneration},
	{Operation, "generate_content", KindGeneration},
	{Operation, "completion", KindGeneration},
	{Operation, "embeddings", KindEmbedding},
	{Operation, "embedding", KindEmbedding},
	{LLMRequestType, "chat", KindGeneration},
	{LLMRequestType, "completion", KindGeneration},
	{LLMRequestType, "embedding", KindEmbedding},
	{LLMRequestType, "embeddings", KindEmbedding},
	{AIOperation, "ai.generateText", KindCall},
	{AIOperation, "ai.streamText", KindCall},
	{AIOperation, "ai.generateObject", KindCall},
	{AIOperation, "ai.streamObject", KindCall},
	{AIOperation, "ai.generateText.doGenerate", KindGeneration},
	{AIOperation, "ai.streamText.doStream", KindGeneration},
	{AIOperation, "ai.generateObject.doGenerate", KindGeneration},
	{AIOperation, "ai.streamObject.doStream", KindGeneration},
	{AIOperation, "ai.embed", KindEmbedding},
	{AIOperation, "ai.embed.doEmbed", KindEmbedding},
	{AIOperation, "ai.embedMany", KindEmbedding},
	{AIOperation, "ai.embedMany.doEmbed", KindEmbedding},
	{AIOperation, "ai.toolCall", KindTool},
}

// EventKind is what a span event of a convention carries.
type EventKind uint8

// Event kinds.
const (
	EventDocument   EventKind = iota + 1 // one vector-database hit
	EventMessage                         // an input message (its role in the name)
	EventChoice                          // an output message
	EventSpanKeys                        // GenAI span keys (EventKeys) as event attributes
	EventEvaluation                      // an evaluation result (feedback)
)

// Event is one span event name of a convention.
type Event struct {
	Name string
	Kind EventKind
	Role string // of EventMessage
	Sign Sign
}

// Events are the span events readers read; a held span keeps these and every other gen_ai.*
// event.
var Events = [...]Event{
	{Name: "db.query.result", Kind: EventDocument, Sign: SignRetrieval},
	{Name: "db.search.result", Kind: EventDocument, Sign: SignRetrieval},
	{Name: "gen_ai.system.message", Kind: EventMessage, Role: "system"},
	{Name: "gen_ai.user.message", Kind: EventMessage, Role: "user"},
	{Name: "gen_ai.assistant.message", Kind: EventMessage, Role: "assistant"},
	{Name: "gen_ai.tool.message", Kind: EventMessage, Role: "tool"},
	{Name: "gen_ai.choice", Kind: EventChoice, Sign: SignGeneration},
	{Name: "gen_ai.content.prompt", Kind: EventSpanKeys},
	{Name: "gen_ai.content.completion", Kind: EventSpanKeys, Sign: SignGeneration},
	{Name: "gen_ai.client.inference.operation.details", Kind: EventSpanKeys},
	{Name: "gen_ai.evaluation.result", Kind: EventEvaluation, Sign: SignFeedback},
}

// EventKeys are the span keys an EventSpanKeys event carries; the rest of its attributes are
// dropped.
var EventKeys = [...]string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion"}
