// The SDK in plain Node: schemas, calls and their errors. `node --test test/`
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tool, exportTools, outcome, s, InvalidInput, NotFound, AccessDenied, Failed } from '../index.js';

test('s.object gives a closed object schema with its required keys', () => {
  const schema = s.object({
    pattern: s.describe(s.string(), 'a regular expression'),
    paths: s.array(s.string()),
    limit: s.optional(s.integer({ minimum: 1 })),
    mode: s.literal('fast', 'exact'),
  });
  assert.deepEqual(schema, {
    type: 'object',
    properties: {
      pattern: { type: 'string', description: 'a regular expression' },
      paths: { type: 'array', items: { type: 'string' } },
      limit: { type: 'integer', minimum: 1 },
      mode: { enum: ['fast', 'exact'] },
    },
    additionalProperties: false,
    required: ['pattern', 'paths', 'mode'],
  });
  // The optional marker is a symbol: it never reaches the JSON.
  assert.equal(JSON.stringify(schema).includes('optional'), false);
});

test('describe lists every tool with its schema and effect, and what it asks for', () => {
  const t = tool({ name: 'greet', description: 'Say hello.', input: s.object({ name: s.string() }), run: () => 1 });
  const exp = exportTools({
    name: 'greet', version: '0.1.0', description: 'Says hello.', tools: [t],
    requests: { hosts: ['api.example.com'], dirs: [{ guestPath: '/data', why: 'reads notes' }] },
  });
  const info = exp.describe();
  assert.equal(info.tools[0].effect, 'read-only');
  assert.deepEqual(JSON.parse(info.tools[0].inputSchema).required, ['name']);
  assert.deepEqual(info.requests.dirs, [{ guestPath: '/data', access: 'read-only', why: 'reads notes' }]);
  assert.deepEqual(info.requests.hosts, ['api.example.com']);
});

test('a call returns JSON text, and every exception is an error value', async () => {
  const t = tool({
    name: 'fails',
    description: 'Fails as asked.',
    input: s.object({ kind: s.string() }),
    run({ kind }) {
      if (kind === 'ok') return { fine: true };
      if (kind === 'invalid') throw new InvalidInput('kind: not this one');
      if (kind === 'missing') throw new NotFound('notes.txt');
      if (kind === 'denied') throw new AccessDenied('/etc', 'not granted');
      if (kind === 'type') return null.x;
      if (kind === 'as-is') throw new Failed('Error: boom\n    at <eval>:1');
      if (kind === 'async') return Promise.reject(new RangeError('later'));
      if (kind === 'bigint') return { n: 1n };
      throw 'a string';
    },
  });
  const tools = [t];
  assert.deepEqual(outcome(tools, 'fails', '{"kind":"ok"}'), { ok: '{"fine":true}' });
  assert.deepEqual(outcome(tools, 'fails', '{"kind":"invalid"}'), { err: { tag: 'invalid-input', val: 'kind: not this one' } });
  assert.deepEqual(outcome(tools, 'fails', '{"kind":"missing"}'), { err: { tag: 'not-found', val: 'notes.txt' } });
  assert.deepEqual(outcome(tools, 'fails', '{"kind":"denied"}'), {
    err: { tag: 'access-denied', val: { resource: '/etc', reason: 'not granted' } },
  });
  assert.deepEqual(outcome(tools, 'fails', '{"kind":"as-is"}'), { err: { tag: 'failed', val: 'Error: boom\n    at <eval>:1' } });
  assert.equal(outcome(tools, 'fails', '{"kind":"type"}').err.tag, 'failed');
  assert.match(outcome(tools, 'fails', '{"kind":"type"}').err.val, /^TypeError: /);
  assert.deepEqual(await outcome(tools, 'fails', '{"kind":"async"}'), { err: { tag: 'failed', val: 'RangeError: later' } });
  assert.match(outcome(tools, 'fails', '{"kind":"bigint"}').err.val, /BigInt/);
  assert.deepEqual(outcome(tools, 'fails', '{"kind":"x"}'), { err: { tag: 'failed', val: 'thrown: "a string"' } });
  assert.equal(outcome(tools, 'nope', '{}').err.tag, 'not-found');
  assert.equal(outcome(tools, 'fails', '[1]').err.tag, 'invalid-input');
  assert.equal(outcome(tools, 'fails', '{').err.tag, 'invalid-input');
});

test('the export throws a plain tool-error value, never an Error (an Error would trap)', () => {
  const t = tool({ name: 'x', description: 'X.', input: s.object({}), run: () => { throw new Error('no'); } });
  const exp = exportTools({ name: 'x', version: '1', description: 'x', tools: [t] });
  try {
    exp.call('x', '{}');
    assert.fail('must throw');
  } catch (e) {
    assert.equal(e instanceof Error, false);
    assert.deepEqual(e, { tag: 'failed', val: 'Error: no' });
  }
});

test('definitions are checked when the module loads', () => {
  const ok = { name: 'a', description: 'A.', input: s.object({}), run: () => 1 };
  assert.throws(() => tool({ ...ok, name: 'Bad Name' }), /lowercase/);
  assert.throws(() => tool({ ...ok, description: ' ' }), /description/);
  assert.throws(() => tool({ ...ok, effect: 'delete' }), /effect/);
  assert.throws(() => tool({ ...ok, input: s.string() }), /object schema/);
  assert.throws(() => exportTools({ name: 'a', version: '1', description: 'a', tools: [tool(ok), tool(ok)] }), /two tools/);
});

test('@longhand/tool/host runs in plain Node: log lines and progress go to stderr, checked the same', async () => {
  // Node takes the package's "node" condition: no component import.
  const { log, progress } = await import('@longhand/tool/host');
  const written = [];
  const write = process.stderr.write;
  process.stderr.write = (chunk) => { written.push(String(chunk)); return true; };
  try {
    log('info', 'reading 3 files');
    progress(2, 3, 'two done');
  } finally {
    process.stderr.write = write;
  }
  assert.deepEqual(written, ['[info] reading 3 files\n', '[progress 2/3] two done\n']);
  assert.throws(() => log('loud', 'x'), /log level/);
});
