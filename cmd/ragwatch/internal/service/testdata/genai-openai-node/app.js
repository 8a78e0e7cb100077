// Records the OTLP/HTTP JSON requests that a small RAG app instrumented by the official
// OpenTelemetry GenAI instrumentation for the OpenAI Node SDK sends: its traces and its logs
// (the GenAI events that carry the prompts and answers). Everything runs on loopback: a fake
// OpenAI server answers /v1/chat/completions, a capture server writes each OTLP request body to
// <out>/NNN-traces.json or NNN-logs.json in arrival order. See README.md.
//
//   OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true node app.js <out dir>
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');

const out = process.argv[2] || '.';
fs.mkdirSync(out, { recursive: true });

const docs = [
  { id: 'doc-refunds', content: 'Refunds are accepted within 30 days of delivery.' },
  { id: 'doc-shipping', content: 'We ship to the EU, the UK and Switzerland; shipping abroad takes 5 to 8 days.' },
  { id: 'doc-warranty', content: 'Every device has a two-year warranty covering manufacturing defects.' },
  { id: 'doc-orders', content: 'An order can be changed until it is packed, usually within two hours.' },
  { id: 'doc-password', content: 'Reset your password from the sign-in page with "Forgot password".' },
];
const questions = [
  ['What is the refund window?', 'doc-refunds', 'Refunds are accepted within 30 days of delivery [doc-refunds].'],
  ['Do you ship abroad?', 'doc-shipping', 'Yes: to the EU, the UK and Switzerland, in 5 to 8 days [doc-shipping].'],
  ['Is there a warranty?', 'doc-warranty', 'Yes, a two-year warranty covers manufacturing defects [doc-warranty].'],
  ['Can I change my order?', 'doc-orders', 'Yes, until it is packed, usually within two hours [doc-orders].'],
  ['How do I reset my password?', 'doc-password', 'Use "Forgot password" on the sign-in page [doc-password].'],
];

function listen(handler) {
  return new Promise((resolve) => {
    const srv = http.createServer(handler);
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

async function main() {
  // The fake OpenAI API: answers each question with its document cited.
  const openaiSrv = await listen(async (req, res) => {
    const body = JSON.parse((await readBody(req)).toString());
    const user = body.messages.filter((m) => m.role === 'user').pop().content;
    const q = questions.find(([text]) => text === user);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      id: 'chatcmpl-' + questions.indexOf(q), object: 'chat.completion', created: 1764806400,
      model: 'gpt-4o-mini-2024-07-18',
      choices: [{ index: 0, message: { role: 'assistant', content: q[2] }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 96, completion_tokens: 18, total_tokens: 114 },
    }));
  });
  // The OTLP/HTTP capture server.
  let seq = 0;
  const captureSrv = await listen(async (req, res) => {
    const body = await readBody(req);
    const kind = req.url.endsWith('/v1/logs') ? 'logs' : req.url.endsWith('/v1/traces') ? 'traces' : 'other';
    seq++;
    fs.writeFileSync(path.join(out, `${String(seq).padStart(3, '0')}-${kind}.json`), JSON.stringify(JSON.parse(body.toString()), null, 1) + '\n');
    res.setHeader('content-type', 'application/json');
    res.end('{}');
  });
  const otlp = `http://127.0.0.1:${captureSrv.address().port}`;

  // The app's telemetry, as the OpenTelemetry JS docs set it up.
  const { resourceFromAttributes } = require('@opentelemetry/resources');
  const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
  const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
  const { LoggerProvider, BatchLogRecordProcessor } = require('@opentelemetry/sdk-logs');
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
  const { OTLPLogExporter } = require('@opentelemetry/exporter-logs-otlp-http');
  const { logs } = require('@opentelemetry/api-logs');
  const { registerInstrumentations } = require('@opentelemetry/instrumentation');
  const { OpenAIInstrumentation } = require('@opentelemetry/instrumentation-openai');
  const api = require('@opentelemetry/api');

  const resource = resourceFromAttributes({ 'service.name': 'support-rag' });
  const tp = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: otlp + '/v1/traces' }))] });
  tp.register();
  const lp = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter: new OTLPLogExporter({ url: otlp + '/v1/logs' }) })] });
  logs.setGlobalLoggerProvider(lp);
  registerInstrumentations({ instrumentations: [new OpenAIInstrumentation()] });

  const { OpenAI } = require('openai');
  const client = new OpenAI({ apiKey: 'sk-fake', baseURL: `http://127.0.0.1:${openaiSrv.address().port}/v1` });
  const tracer = api.trace.getTracer('support-rag');

  for (const [question, docId] of questions) {
    await tracer.startActiveSpan('POST /ask', { kind: api.SpanKind.SERVER }, async (root) => {
      // The app's own retrieval span, with the GenAI retrieval attributes.
      const hits = [docs.find((d) => d.id === docId), ...docs.filter((d) => d.id !== docId).slice(0, 1)];
      const found = hits.map((d, i) => ({ id: d.id, score: i === 0 ? 0.91 : 0.42, content: d.content }));
      tracer.startActiveSpan('retrieval support-docs', (span) => {
        span.setAttributes({
          'gen_ai.operation.name': 'retrieval',
          'gen_ai.data_source.id': 'support-docs',
          'gen_ai.retrieval.query.text': question,
          'gen_ai.retrieval.documents': JSON.stringify(found),
        });
        span.end();
      });
      const context = found.map((d) => `[${d.id}] ${d.content}`).join('\n');
      await client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [
          { role: 'system', content: 'Answer from the context only and cite the document ids.\n' + context },
          { role: 'user', content: question },
        ],
      });
      root.end();
    });
  }
  await lp.forceFlush();
  await tp.forceFlush();
  await lp.shutdown();
  await tp.shutdown();
  openaiSrv.close();
  captureSrv.close();
}

main().catch((err) => { console.error(err); process.exit(1); });
