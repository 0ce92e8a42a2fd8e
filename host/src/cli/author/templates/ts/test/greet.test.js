// The tool's logic in plain Node: npm test (esbuild strips the types of
// src/index.ts into dist/node/index.js first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { outcome } from '@longhand/tool';
import { greet } from '../dist/node/index.js';

test('greets by name', () => {
  assert.deepEqual(greet.run({ name: 'Ada' }), { greeting: 'Hello, Ada!' });
});

test('a call returns JSON and errors are values', () => {
  assert.deepEqual(outcome([greet], 'greet', '{"name":"Ada"}'), { ok: '{"greeting":"Hello, Ada!"}' });
  assert.deepEqual(outcome([greet], 'greet', '{"name":" "}'), { err: { tag: 'invalid-input', val: '`name` is empty' } });
});
