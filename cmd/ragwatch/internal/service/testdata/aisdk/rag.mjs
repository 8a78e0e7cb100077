// A tiny RAG app in the shape of the AI SDK's RAG guide (ai 5.x), run against a local fake
// OpenAI-compatible server, its telemetry exported over OTLP/HTTP JSON to a local capture server
// that writes each request body to OUT_DIR. No network beyond 127.0.0.1.
//
//   node rag.mjs OUT_DIR
//
// Runs: 5 x generateText with a retrieval tool (the model calls getInformation, then answers),
// 1 x streamText with the same tool, 1 x generateObject with the documents retrieved by the
// same tool first, 1 x generateText with a plain (uninstrumented) retrieval function whose
// documents are only in the prompt. Each run is flushed to its own file: NN-<kind>.json.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { trace, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { generateText, streamText, generateObject, embed, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const outDir = process.argv[2] || 'out';
fs.mkdirSync(outDir, { recursive: true });

// The knowledge base: an in-memory list, as the guide's database.
const KB = [
  { id: 'doc-refund', content: 'Refunds are issued within 14 days of purchase if the item is unused.' },
  { id: 'doc-shipping', content: 'Standard shipping takes 3 to 5 business days within the EU.' },
  { id: 'doc-warranty', content: 'Every device carries a two-year warranty covering manufacturing defects.' },
  { id: 'doc-returns', content: 'Returns are free: print the prepaid label from your account page.' },
];
const QUESTIONS = [
  'How long do I have to ask for a refund?',
  'How long does shipping take?',
  'What does the warranty cover?',
  'How do I return an item?',
  'Is the return label free?',
];

// Word-overlap similarity, standing in for cosine similarity of embeddings.
function findRelevantContent(question) {
  const words = new Set(question.toLowerCase().match(/[a-z]+/g));
  return KB.map((d) => {
    const dw = d.content.toLowerCase().match(/[a-z]+/g);
    const hits = dw.filter((w) => words.has(w) && w.length > 3).length;
    return { id: d.id, content: d.content, similarity: Math.round((0.5 + hits / 10) * 1000) / 1000 };
  })
    .sort((a, b) => b.similarity - a.similarity)
    .slice(0, 2);
}

// --- the fake OpenAI-compatible server -------------------------------------------------------
let created = 1764800000;
function completion(model, message, finish, usage) {
  return {
    id: 'chatcmpl-' + created, object: 'chat.completion', created: created++, model,
    choices: [{ index: 0, message, finish_reason: finish }],
    usage: { prompt_tokens: usage[0], completion_tokens: usage[1], total_tokens: usage[0] + usage[1] },
  };
}
function lastUser(messages) {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === 'user') {
    const c = messages[i].content;
    return typeof c === 'string' ? c : c.map((p) => p.text || '').join('');
  }
  return '';
}
function answerFrom(messages) {
  // The documents: from the tool results, else from the system prompt.
  const tools = messages.filter((m) => m.role === 'tool');
  let docs = [];
  for (const t of tools) docs = docs.concat(JSON.parse(t.content));
  if (docs.length === 0) {
    const sys = messages.find((m) => m.role === 'system');
    for (const m of (sys ? sys.content : '').matchAll(/\[(doc-[a-z]+)\] ([^\n]+)/g)) docs.push({ id: m[1], content: m[2] });
  }
  const top = docs[0];
  return top ? `${top.content} [${top.id}]` : "I don't know.";
}
const fake = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const r = JSON.parse(body);
    res.setHeader('content-type', 'application/json');
    if (req.url.endsWith('/embeddings')) {
      const inputs = Array.isArray(r.input) ? r.input : [r.input];
      res.end(JSON.stringify({
        object: 'list', model: r.model,
        data: inputs.map((_, i) => ({ object: 'embedding', index: i, embedding: [0.1, 0.2, 0.3] })),
        usage: { prompt_tokens: 8, total_tokens: 8 },
      }));
      return;
    }
    const model = r.model + '-2024-07-18';
    const msgs = r.messages;
    const toolTurn = r.tools && !msgs.some((m) => m.role === 'tool');
    let out;
    if (toolTurn) {
      out = completion(model, {
        role: 'assistant', content: null,
        tool_calls: [{ id: 'call_' + created, type: 'function', function: { name: 'getInformation', arguments: JSON.stringify({ question: lastUser(msgs) }) } }],
      }, 'tool_calls', [120, 18]);
    } else if (r.response_format) {
      const a = answerFrom(msgs);
      out = completion(model, { role: 'assistant', content: JSON.stringify({ answer: a, sources: [a.match(/\[(.*)\]/)[1]] }) }, 'stop', [160, 30]);
    } else {
      out = completion(model, { role: 'assistant', content: answerFrom(msgs) }, 'stop', [180, 25]);
    }
    if (!r.stream) {
      res.end(JSON.stringify(out));
      return;
    }
    res.setHeader('content-type', 'text/event-stream');
    const base = { id: out.id, object: 'chat.completion.chunk', created: out.created, model };
    const m = out.choices[0].message;
    const send = (o) => res.write('data: ' + JSON.stringify(o) + '\n\n');
    send({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    if (m.tool_calls) {
      send({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, ...m.tool_calls[0] }] }, finish_reason: null }] });
    } else {
      for (const w of m.content.match(/\S+\s*/g)) send({ ...base, choices: [{ index: 0, delta: { content: w }, finish_reason: null }] });
    }
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: out.choices[0].finish_reason }] });
    send({ ...base, choices: [], usage: out.usage });
    res.end('data: [DONE]\n\n');
  });
});

// --- the OTLP/HTTP capture server ------------------------------------------------------------
let label = 'none';
let seq = 0;
const capture = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const file = path.join(outDir, `${label}-${seq++}.json`);
    fs.writeFileSync(file, Buffer.concat(chunks));
    res.setHeader('content-type', 'application/json');
    res.end('{}');
  });
});

const listen = (s) => new Promise((ok) => s.listen(0, '127.0.0.1', () => ok(s.address().port)));
const fakePort = await listen(fake);
const capPort = await listen(capture);

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-rag' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${capPort}/v1/traces` }), { scheduledDelayMillis: 60000, maxExportBatchSize: 512 })],
});
trace.setGlobalTracerProvider(provider);

const openai = createOpenAI({ baseURL: `http://127.0.0.1:${fakePort}/v1`, apiKey: 'sk-fake' });
const model = openai.chat('gpt-4o-mini');

const getInformation = tool({
  description: 'get information from your knowledge base to answer questions.',
  inputSchema: z.object({ question: z.string().describe('the users question') }),
  execute: async ({ question }) => {
    // As the guide: embed the question, then search (here: word overlap).
    await embed({ model: openai.textEmbeddingModel('text-embedding-3-small'), value: question, experimental_telemetry: { isEnabled: true } });
    return findRelevantContent(question);
  },
});
const system = 'You are a helpful assistant. Check your knowledge base before answering any questions. Only respond to questions using information from tool calls.';
// functionId names the route; metadata.promptVersion is the variant when variants.attributes
// names ai.telemetry.metadata.promptVersion; metadata.userId is the record's user.
const telemetry = { isEnabled: true, functionId: 'support-chat', metadata: { promptVersion: 'v2', userId: 'user-1' } };

async function run(name, f) {
  label = name;
  await f();
  await provider.forceFlush();
  console.log(name, 'done');
}

for (let i = 0; i < QUESTIONS.length; i++) {
  await run(`0${i + 1}-generateText`, async () => {
    const r = await generateText({ model, system, prompt: QUESTIONS[i], tools: { getInformation }, stopWhen: stepCountIs(5), experimental_telemetry: telemetry });
    console.log(' ', r.text);
  });
}
await run('06-streamText', async () => {
  const r = streamText({ model, system, prompt: 'How long does shipping take?', tools: { getInformation }, stopWhen: stepCountIs(5), experimental_telemetry: { ...telemetry, functionId: 'support-stream' } });
  console.log(' ', await r.text);
});
await run('07-generateObject', async () => {
  // The documents come from the instrumented tool run by hand, as an app would call its own search.
  const question = 'What does the warranty cover?';
  const docs = await getInformation.execute({ question }, { toolCallId: 'manual', messages: [] });
  const r = await generateObject({
    model,
    schema: z.object({ answer: z.string(), sources: z.array(z.string()) }),
    system: 'Answer from these documents only:\n' + docs.map((d) => `[${d.id}] ${d.content}`).join('\n'),
    prompt: question,
    experimental_telemetry: { ...telemetry, functionId: 'support-object' },
  });
  console.log(' ', JSON.stringify(r.object));
});
await run('08-plain-retrieval', async () => {
  const question = 'Is the return label free?';
  const docs = findRelevantContent(question); // not instrumented: the documents are only in the prompt
  const r = await generateText({
    model,
    system: 'Answer from these documents only:\n' + docs.map((d) => `[${d.id}] ${d.content}`).join('\n'),
    prompt: question,
    experimental_telemetry: { ...telemetry, functionId: 'support-plain' },
  });
  console.log(' ', r.text);
});
await provider.shutdown();
fake.close();
capture.close();
