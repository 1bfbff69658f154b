// The official TypeScript SDK v2 server (@modelcontextprotocol/server 2.4.0, revision 2026-07-28,
// no tasks) in its default response mode, served over node:http for the tests.
//
//   node tests/peers/npm/ts2_server.mjs --host 127.0.0.1 --port PORT
//
// Prints "ts2 peer listening on http://HOST:PORT/mcp" once it accepts connections.
// Tools: echo(text); slow_answer(seconds = 40), which stays silent that long and then answers
// in plain JSON (the default 'auto' mode streams only when a handler notifies first).
import http from 'node:http';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { z } from 'zod';

function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? process.argv[index + 1] : fallback;
}

function factory() {
  const server = new McpServer({ name: 'ts2-peer', version: '2.4.0' });
  server.registerTool(
    'echo',
    { description: 'Returns the text unchanged.', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] })
  );
  server.registerTool(
    'slow_answer',
    {
      description: 'Answers after `seconds` of silence, in plain JSON.',
      inputSchema: z.object({ seconds: z.number().min(0).max(300).default(40) })
    },
    async ({ seconds }) => {
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      return { content: [{ type: 'text', text: `answered after ${seconds} s` }] };
    }
  );
  return server;
}

const handler = createMcpHandler(factory);

async function serve(req, res) {
  if (!req.url.startsWith('/mcp')) {
    res.writeHead(404).end('Not Found');
    return;
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const abort = new AbortController();
  res.on('close', () => abort.abort());
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers,
    body: ['GET', 'HEAD'].includes(req.method) ? undefined : Buffer.concat(chunks),
    signal: abort.signal
  });
  const response = await handler.fetch(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) {
    for await (const chunk of response.body) res.write(chunk);
  }
  res.end();
}

const host = option('host', '127.0.0.1');
const port = Number(option('port', '0'));
const server = http.createServer((req, res) => {
  serve(req, res).catch((error) => {
    console.error(error);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
server.listen(port, host, () => {
  const address = server.address();
  console.log(`ts2 peer listening on http://${host}:${address.port}/mcp`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    handler.close().finally(() => process.exit(0));
    server.close();
  });
}
