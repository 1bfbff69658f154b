// A third-party agent: the official TypeScript SDK v2 client (@modelcontextprotocol/client 2.4.0,
// revision 2026-07-28) with @modelcontextprotocol/ext-tasks 0.2.2 calling one tool as a task.
//
//   node tests/peers/npm/ts2_agent.mjs URL TOKEN TOOL [ARGUMENTS_JSON] [ANSWER_JSON]
//
// Connects with `Authorization: Bearer TOKEN` (the SDK negotiates the modern era with
// server/discover), starts TOOL through ext-tasks' session, and prints one JSON line per step:
//   {"kind": "task" | "immediate", "taskId": ...}   when the call was answered
//   {"status": ...}                                 for each task view ext-tasks observed
//   {"asked": "elicitation" | ...}                  when the task asked this agent for input
//   {"outcome": "completed" | "failed" | "cancelled", "texts": [...], "isError": ...}
// An input request is answered with ANSWER_JSON (an ElicitResult); without one the agent declines.
//
// ext-tasks needs a host-owned raw request path for 2026-07-28 task traffic (the SDK's own codecs
// reject it): rawDispatch below POSTs each framed request with the routing headers a modern client
// sends (Mcp-Method, Mcp-Name) and the same bearer token.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';

const [url, token, tool, argumentsJson = '{}', answerJson = ''] = process.argv.slice(2);
const PROTOCOL_VERSION = '2026-07-28';
const clientInfo = { name: 'ts2-ext-tasks-agent', version: '2.4.0' };
const clientCapabilities = { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } };
const auth = { Authorization: `Bearer ${token}` };

function say(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function routingName(request) {
  const params = request.params ?? {};
  if (request.method === 'tools/call') return params.name;
  if (request.method.startsWith('tasks/')) return params.taskId;
  return undefined;
}

async function readAnswer(response, id) {
  const type = response.headers.get('content-type') ?? '';
  const text = await response.text();
  if (!type.includes('text/event-stream')) return JSON.parse(text);
  for (const block of text.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trim())
      .join('\n');
    if (!data) continue;
    const message = JSON.parse(data);
    if (message.id === id && ('result' in message || 'error' in message)) return message;
  }
  throw new Error(`no answer to request ${id} in the event stream`);
}

let nextId = 1;
async function rawDispatch(request, options = {}) {
  const id = `raw-${nextId++}`;
  const headers = {
    ...auth,
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': PROTOCOL_VERSION,
    'Mcp-Method': request.method,
    ...(options.context?.headers ?? {})
  };
  const name = routingName(request);
  if (name !== undefined) headers['Mcp-Name'] = name;
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ ...request, jsonrpc: '2.0', id }),
    signal: options.signal
  });
  const message = await readAnswer(response, id);
  return 'error' in message ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result };
}

async function onInputRequest(request) {
  say({ asked: request.kind });
  if (request.kind === 'elicitation' && answerJson) return JSON.parse(answerJson);
  if (request.kind === 'elicitation') return { action: 'decline' };
  throw new Error(`this agent answers no ${request.kind}`);
}

const client = new Client(clientInfo, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode: { pin: PROTOCOL_VERSION } }
});
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } }));
const session = createTaskSessionFromClient(client, {
  endpointId: url,
  rawDispatch,
  v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo, clientCapabilities },
  onInputRequest
});
try {
  const execution = await session.callTool(tool, JSON.parse(argumentsJson), { task: { preference: 'prefer' } });
  say({ kind: execution.kind, taskId: execution.handle?.taskId ?? null });
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === 'task') say({ status: event.task.status });
    }
  });
  const result = outcome.status === 'completed' ? outcome.result : undefined;
  const texts = (result?.content ?? []).map((block) => block.text ?? null);
  say({ outcome: outcome.status, texts, isError: Boolean(result?.isError) });
} finally {
  await session.close();
  await client.close();
}
