// Drive `longhand mcp` with the official MCP TypeScript SDK client.
//
// Usage: node client.mjs LONGHAND_BINARY stdio|http
//
// The same agent and the same checks as client.py: initialize and version,
// the tool list with schemas and annotations, calls, a bad argument as an
// isError result, an unknown tool as a protocol error, a read outside the
// grant refused without leaking the file, a secret added by the host and
// never shown to the client, a long call cancelled (the
// sandbox drops its connection) with the server serving on, and 8 calls in
// flight at once. Everything stays on 127.0.0.1. Exits non-zero naming the
// first failed expectation; prints `ok: <transport> <n> checks` on success.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const WAIT_MS = 30_000; // for an event that should come at once
let checks = 0;
const TOKEN = `tok-${randomBytes(12).toString('hex')}`;

class Failed extends Error {}

function expect(cond, what) {
  if (!cond) throw new Failed(what);
  checks += 1;
}

// A loopback HTTP server the sandboxed http tool talks to. `/hang/...`
// never answers and counts the client's close; `/echo` answers at once with
// the request's Authorization header as its body (kept in `auth`); any
// other path is answered (body: the path) once `release()` is called.
class SlowServer {
  constructor() {
    this.seen = [];
    this.closed = 0;
    this.waiting = [];
    this.released = false;
    this.watchers = [];
    this.server = net.createServer((conn) => this.handle(conn));
  }

  async listen() {
    await new Promise((ok) => this.server.listen(0, '127.0.0.1', ok));
    this.port = this.server.address().port;
  }

  handle(conn) {
    let head = '';
    let path = null;
    conn.on('data', (chunk) => {
      if (path !== null) return;
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      path = head.split(' ')[1];
      this.seen.push(path);
      if (path.startsWith('/echo')) {
        const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith('authorization:'));
        this.auth = line ? line.slice(line.indexOf(':') + 1).trim() : '';
        conn.end(
          `HTTP/1.1 200 OK\r\nConnection: close\r\n` +
            `Content-Length: ${Buffer.byteLength(this.auth)}\r\n\r\n${this.auth}`,
        );
      } else if (!path.startsWith('/hang')) {
        const answer = () => {
          conn.end(
            `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n` +
              `Content-Length: ${Buffer.byteLength(path)}\r\n\r\n${path}`,
          );
        };
        if (this.released) answer();
        else this.waiting.push(answer);
      }
      this.notify();
    });
    conn.on('close', () => {
      if (path !== null && path.startsWith('/hang')) {
        this.closed += 1;
        this.notify();
      }
    });
    conn.on('error', () => {});
  }

  release() {
    this.released = true;
    for (const answer of this.waiting.splice(0)) answer();
  }

  notify() {
    for (const w of [...this.watchers]) w();
  }

  // Resolves true once `predicate(this)` holds, false after WAIT_MS.
  waitFor(predicate) {
    return new Promise((resolve) => {
      const check = () => {
        if (predicate(this)) {
          done(true);
        }
      };
      const done = (value) => {
        clearTimeout(timer);
        this.watchers = this.watchers.filter((w) => w !== check);
        resolve(value);
      };
      const timer = setTimeout(() => done(false), WAIT_MS);
      this.watchers.push(check);
      check();
    });
  }
}

function makeAgent(root, port) {
  const agent = join(root, 'agent');
  mkdirSync(join(agent, 'ws'), { recursive: true });
  writeFileSync(join(agent, 'ws', 'hello.txt'), 'hello from the workspace\n');
  for (let i = 0; i < 8; i++) writeFileSync(join(agent, 'ws', `file-${i}.txt`), `content ${i}\n`);
  writeFileSync(
    join(agent, 'agent.toml'),
    `name = "mcp-test"
instructions = "unused: MCP clients call the tools directly"

[model]
provider = "replay"
model = "none"
cassette = "unused.json"

[approve]
fs__glob = "always"

[[tools]]
component = "fs"
dirs = ["ws:/workspace:rw"]

[[tools]]
component = "http"
allow_hosts = ["127.0.0.1:${port}"]
secrets = ["MCP_TEST_TOKEN@127.0.0.1:${port}"]
timeout = "120s"
`,
  );
  return agent;
}

const text = (r) => r.content[0].text;

async function run(client, negotiated, root, slow) {
  expect(negotiated() === '2025-11-25', `negotiated ${negotiated()}`);
  expect(client.getServerVersion().name === 'longhand', 'server name');
  await client.ping();

  const listed = await client.listTools();
  const tools = Object.fromEntries(listed.tools.map((t) => [t.name, t]));
  for (const name of ['fs__read', 'fs__write', 'fs__edit', 'fs__list', 'http__get', 'http__fetch']) {
    expect(name in tools, `${name} listed (got ${Object.keys(tools)})`);
  }
  expect(!('fs__glob' in tools), 'fs__glob (held for approval) is not served');
  const schema = tools.fs__read.inputSchema;
  expect(schema.type === 'object', 'fs__read schema is an object');
  expect('path' in (schema.properties ?? {}), 'fs__read schema has path');
  expect((schema.required ?? []).includes('path'), 'fs__read requires path');
  const hints = (name) => {
    const a = tools[name].annotations;
    expect(a !== undefined, `${name} has annotations`);
    return JSON.stringify([a.readOnlyHint, a.destructiveHint, a.idempotentHint, a.openWorldHint]);
  };
  expect(hints('fs__read') === '[true,false,true,false]', `fs__read hints ${hints('fs__read')}`);
  expect(hints('fs__write') === '[false,true,true,false]', `fs__write hints ${hints('fs__write')}`);
  expect(hints('fs__edit') === '[false,true,false,false]', `fs__edit hints ${hints('fs__edit')}`);
  expect(hints('http__get') === '[true,false,true,true]', `http__get hints ${hints('http__get')}`);
  expect(hints('http__fetch') === '[false,true,false,true]', `http__fetch hints ${hints('http__fetch')}`);

  // A call, its text and structured output.
  let r = await client.callTool({ name: 'fs__read', arguments: { path: 'hello.txt' } });
  expect(!r.isError, `fs__read failed: ${text(r)}`);
  expect(r.structuredContent.content === 'hello from the workspace\n', 'read content');
  expect(JSON.stringify(JSON.parse(text(r))) === JSON.stringify(r.structuredContent), 'text is the JSON output');
  r = await client.callTool({ name: 'fs__write', arguments: { path: 'out.txt', content: 'written over MCP' } });
  expect(!r.isError, `fs__write failed: ${text(r)}`);
  const written = readFileSync(join(root, 'agent', 'ws', 'out.txt'), 'utf8');
  expect(written === 'written over MCP', `file on disk: ${written}`);

  // A bad argument: a result the model reads, not a protocol error.
  r = await client.callTool({ name: 'fs__read', arguments: { paht: 1 } });
  expect(r.isError === true, 'bad argument is an error result');
  expect(text(r).includes('invalid input') && text(r).includes('path'), text(r));

  // An unknown tool: a protocol error.
  try {
    await client.callTool({ name: 'fs__nope', arguments: {} });
    expect(false, 'unknown tool threw');
  } catch (e) {
    if (e instanceof Failed) throw e;
    expect(e instanceof McpError && e.code === -32602, `unknown tool: ${e}`);
  }

  // A denied capability: nothing of the file, nor where it is, comes back.
  const canary = `CANARY-${randomBytes(8).toString('hex')}`;
  mkdirSync(join(root, 'outside'));
  const secretFile = join(root, 'outside', 'secret.txt');
  writeFileSync(secretFile, canary);
  for (const path of ['/workspace/../outside/secret.txt', secretFile, '../outside/secret.txt']) {
    r = await client.callTool({ name: 'fs__read', arguments: { path } });
    expect(r.isError === true, `reading ${path} outside the grant is an error`);
    const dump = JSON.stringify(r);
    expect(!dump.includes(canary), `canary leaked reading ${path}`);
    expect(!dump.split(secretFile).join('').includes(root), `host path leaked: ${dump}`);
  }
  // A secret: the host adds it to the request, the client never sees it.
  r = await client.callTool({ name: 'http__get', arguments: { url: `http://127.0.0.1:${slow.port}/echo` } });
  expect(!r.isError, `echo call: ${text(r)}`);
  expect(slow.auth === `Bearer ${TOKEN}`, `the host added the secret (server saw ${slow.auth})`);
  expect(!JSON.stringify(r).includes(TOKEN), 'the secret reached the MCP client');
  r = await client.callTool({ name: 'http__get', arguments: { url: 'http://127.0.0.2:9/' } });
  expect(r.isError === true && text(r).includes('denied'), `ungranted host: ${text(r)}`);

  // Cancellation: a call that would hang for 120 s is aborted once the
  // sandbox has connected; the sandbox then drops its connection.
  const abort = new AbortController();
  const hanging = client
    .callTool({ name: 'http__get', arguments: { url: `http://127.0.0.1:${slow.port}/hang/1` } }, undefined, {
      signal: abort.signal,
    })
    .then(
      () => 'answered',
      () => 'rejected',
    );
  expect(await slow.waitFor((s) => s.seen.includes('/hang/1')), 'the slow call reached the loopback server');
  abort.abort('test cancels');
  expect((await hanging) === 'rejected', 'the cancelled call rejected');
  expect(await slow.waitFor((s) => s.closed >= 1), 'cancelling stopped the call (its connection was closed)');
  r = await client.callTool({ name: 'fs__read', arguments: { path: 'hello.txt' } });
  expect(!r.isError, 'the server serves on after a cancellation');

  // Concurrency: 8 calls in flight at once (the server sees all 8 before
  // any is answered), each answered with its own result.
  const calls = [];
  for (let i = 0; i < 8; i++) {
    calls.push(client.callTool({ name: 'http__get', arguments: { url: `http://127.0.0.1:${slow.port}/c/${i}` } }));
  }
  const all = await slow.waitFor((s) => s.seen.filter((p) => p.startsWith('/c/')).length === 8);
  expect(all, `8 calls in flight at once (saw ${slow.seen})`);
  slow.release();
  const results = await Promise.all(calls);
  results.forEach((res, i) => {
    expect(!res.isError, `concurrent call ${i}: ${text(res)}`);
    expect(res.structuredContent.body === `/c/${i}`, `concurrent call ${i} got ${res.structuredContent.body}`);
  });
  const reads = await Promise.all(
    [...Array(8).keys()].map((i) => client.callTool({ name: 'fs__read', arguments: { path: `file-${i}.txt` } })),
  );
  reads.forEach((res, i) => expect(res.structuredContent.content === `content ${i}\n`, `concurrent read ${i}`));
}

// Start `longhand mcp --http 127.0.0.1:0` and read its address from stderr.
function startHttp(binary, agent, env) {
  const proc = spawn(binary, ['mcp', '--http', '127.0.0.1:0', '--agent', agent], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: proc.stderr });
    let url = null;
    lines.on('line', (line) => {
      process.stderr.write(`${line}\n`);
      const m = url === null && line.match(/at (http:\/\/\S+\/mcp)/);
      if (m) {
        url = m[1];
        resolve({ proc, url });
      }
    });
    proc.on('exit', (code) => reject(new Failed(`longhand mcp --http exited (${code}) before serving`)));
  });
}

async function main() {
  const [binary, transport] = process.argv.slice(2);
  if (!binary || !['stdio', 'http'].includes(transport)) {
    throw new Failed('usage: node client.mjs LONGHAND_BINARY stdio|http');
  }
  const slow = new SlowServer();
  await slow.listen();
  const root = mkdtempSync(join(tmpdir(), 'longhand-mcp-'));
  let server = null;
  try {
    const agent = makeAgent(root, slow.port);
    // The Rust test passes a home whose compile cache is already warm.
    const env = {
      LONGHAND_HOME: process.env.LONGHAND_HOME || join(root, 'home'),
      PATH: process.env.PATH ?? '',
      MCP_TEST_TOKEN: TOKEN,
    };
    let clientTransport;
    if (transport === 'stdio') {
      clientTransport = new StdioClientTransport({
        command: binary,
        args: ['mcp', '--stdio', '--agent', agent],
        env,
        stderr: 'inherit',
      });
    } else {
      server = await startHttp(binary, agent, env);
      clientTransport = new StreamableHTTPClientTransport(new URL(server.url));
    }
    // The client tells its transport the version it agreed on.
    let negotiated = null;
    const original = clientTransport.setProtocolVersion?.bind(clientTransport);
    clientTransport.setProtocolVersion = (v) => {
      negotiated = v;
      original?.(v);
    };
    const client = new Client({ name: 'longhand-test', version: '0' });
    await client.connect(clientTransport);
    try {
      await run(client, () => negotiated, root, slow);
    } finally {
      if (transport === 'http') await clientTransport.terminateSession();
      await client.close();
    }
  } finally {
    server?.proc.kill();
    slow.server.close();
    rmSync(root, { recursive: true, force: true });
  }
  console.log(`ok: ${transport} ${checks} checks`);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e instanceof Failed ? `FAILED: ${e.message}` : e);
    process.exit(1);
  },
);
