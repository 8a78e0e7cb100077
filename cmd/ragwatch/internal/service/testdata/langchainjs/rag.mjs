// Records what @traceloop/instrumentation-langchain 0.27.0 exports for a LangChain.js RAG
// chain (retriever → prompt → chat model → parser), as an OTLP/HTTP JSON body: one file with
// every span of five questions. No network: the chat model is LangChain's FakeListChatModel,
// the retriever an in-memory one. See README.md.
//
//   node rag.mjs            → langchainjs-rag.json: the chain invoked as is
//   node rag.mjs together   → langchainjs-together.json: each invocation inside an active span
//                             of the app's, with an AsyncLocalStorageContextManager
import { writeFileSync } from "node:fs";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { LangChainInstrumentation } from "@traceloop/instrumentation-langchain";
import * as callbackManagerModule from "@langchain/core/callbacks/manager";
import { BaseRetriever } from "@langchain/core/retrievers";
import { Document } from "@langchain/core/documents";
import { ChatPromptTemplate } from "@langchain/core/prompts";
import { RunnableSequence, RunnablePassthrough } from "@langchain/core/runnables";
import { StringOutputParser } from "@langchain/core/output_parsers";
import { FakeListChatModel } from "@langchain/core/utils/testing";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "lcjs-rag" }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const together = process.argv[2] === "together";
if (together) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}
trace.setGlobalTracerProvider(provider);
const inst = new LangChainInstrumentation();
inst.setTracerProvider(provider);
inst.manuallyInstrument({ callbackManagerModule });

const docs = [
  new Document({ pageContent: "Refunds are issued within 14 days of purchase if the item is unused.", metadata: { id: "doc-refund", source: "faq.md" } }),
  new Document({ pageContent: "Standard shipping takes 3 to 5 business days within the EU.", metadata: { id: "doc-shipping", source: "faq.md" } }),
  new Document({ pageContent: "Every device carries a two-year warranty covering manufacturing defects.", metadata: { id: "doc-warranty", source: "faq.md" } }),
];
class KeywordRetriever extends BaseRetriever {
  lc_namespace = ["ragwatch", "fixture"];
  async _getRelevantDocuments(query) {
    const words = query.toLowerCase().split(/\W+/);
    const scored = docs.map((d) => [words.filter((w) => w.length > 3 && d.pageContent.toLowerCase().includes(w)).length, d]);
    return scored.sort((a, b) => b[0] - a[0]).slice(0, 2).map((x) => x[1]);
  }
}
const questions = ["How long do I have to ask for a refund?", "How long does shipping take?", "What does the warranty cover?",
  "Can I return a used item?", "Is shipping to the EU slow?"];
const model = new FakeListChatModel({ responses: [
  "Refunds are issued within 14 days of purchase if the item is unused [1].",
  "Standard shipping takes 3 to 5 business days within the EU [1].",
  "Every device carries a two-year warranty covering manufacturing defects [1].",
  "Refunds are issued only if the item is unused [1].",
  "Standard shipping takes 3 to 5 business days within the EU [1].",
] });
const prompt = ChatPromptTemplate.fromMessages([
  ["system", "Answer from the numbered context only and cite it as [n].\n\nContext:\n{context}"],
  ["human", "{question}"],
]);
const chain = RunnableSequence.from([
  { context: new KeywordRetriever(), question: new RunnablePassthrough() },
  prompt, model, new StringOutputParser(),
]);
for (const q of questions) {
  if (together) {
    await provider.getTracer("app").startActiveSpan("chat request", async (span) => {
      console.log(q, "→", await chain.invoke(q));
      span.end();
    });
  } else {
    console.log(q, "→", await chain.invoke(q));
  }
}
await provider.forceFlush();
const spans = exporter.getFinishedSpans();
writeFileSync(together ? "langchainjs-together.json" : "langchainjs-rag.json", Buffer.from(JsonTraceSerializer.serializeRequest(spans)));
console.log(spans.length, "spans in", new Set(spans.map((s) => s.spanContext().traceId)).size, "traces");
