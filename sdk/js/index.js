// Write Longhand tools in JavaScript. A Longhand tool is a WebAssembly
// component exporting `longhand:tool/tools` (`describe`, `call`); this module
// turns `tool()` definitions into that export:
//
//   import { tool, exportTools, s } from '@longhand/tool';
//   const greet = tool({
//     name: 'greet',
//     description: 'Say hello to someone by name.',
//     effect: 'read-only',
//     input: s.object({ name: s.string() }),
//     run: ({ name }) => ({ greeting: `Hello, ${name}!` }),
//   });
//   export const tools = exportTools({ name: 'greet', version: '0.1.0',
//     description: 'Says hello.', tools: [greet] });
//
// The module imports nothing from the component world, so a tool's handlers
// and this file are unit-tested in plain Node (`node --test`). Host services
// (`log`, `progress`) live in `@longhand/tool/host`, which only a component
// can import.
//
// How a call ends: a returned value (or a resolved promise) is the output,
// as JSON; `InvalidInput`, `NotFound` and `AccessDenied` tell the model what
// to fix, find or ask for; `Failed` is `failed` with its message as given (a
// stack trace, a compiler's output); ANY other exception is `failed` with its
// name and message.
// A thrown exception never traps the component.

const EFFECTS = new Set(['read-only', 'idempotent', 'writes']);
const NAME = /^[a-z0-9_-]+$/;

/** The input does not fit; say which field and what was wrong. */
export class InvalidInput extends Error {
  constructor(message) { super(message); this.name = 'InvalidInput'; }
}

/** The named file, key or record does not exist. */
export class NotFound extends Error {
  constructor(message) { super(message); this.name = 'NotFound'; }
}

/** The tool tried to use something it was not granted. */
export class AccessDenied extends Error {
  constructor(resource, reason) {
    super(`${resource}: ${reason}`);
    this.name = 'AccessDenied';
    this.resource = String(resource);
    this.reason = String(reason);
  }
}

/** The tool ran and could not do the job; the message reaches the model as written. */
export class Failed extends Error {
  constructor(message) { super(message); this.name = 'Failed'; }
}

// A small JSON Schema builder whose TypeScript types (index.d.ts) give the
// handler its input type. Plain JSON Schema objects are accepted as well.
const OPTIONAL = Symbol('longhand.optional');

export const s = {
  string: (extra = {}) => ({ type: 'string', ...extra }),
  number: (extra = {}) => ({ type: 'number', ...extra }),
  integer: (extra = {}) => ({ type: 'integer', ...extra }),
  boolean: (extra = {}) => ({ type: 'boolean', ...extra }),
  literal: (...values) => ({ enum: values }),
  array: (items, extra = {}) => ({ type: 'array', items, ...extra }),
  record: (values) => ({ type: 'object', additionalProperties: values }),
  nullable: (inner) => ({ anyOf: [inner, { type: 'null' }] }),
  optional: (inner) => ({ ...inner, [OPTIONAL]: true }),
  describe: (inner, description) => ({ ...inner, description }),
  object(properties, extra = {}) {
    const props = {};
    const required = [];
    for (const [key, schema] of Object.entries(properties)) {
      const { [OPTIONAL]: optional, ...plain } = schema;
      props[key] = plain;
      if (!optional) required.push(key);
    }
    const out = { type: 'object', properties: props, additionalProperties: false, ...extra };
    if (required.length) out.required = required;
    return out;
  },
};

function fail(what) {
  throw new TypeError(`@longhand/tool: ${what}`);
}

/** Define one tool; checked now, so a mistake fails the build, not a call. */
export function tool(def) {
  if (!def || typeof def !== 'object') fail('tool() takes { name, description, effect, input, run }');
  const { name, description, effect = 'read-only', input, run } = def;
  if (typeof name !== 'string' || !NAME.test(name)) {
    fail(`tool name ${JSON.stringify(name)}: use lowercase letters, digits, '-' and '_' only`);
  }
  if (typeof description !== 'string' || !description.trim()) {
    fail(`tool ${name}: a description is required (the model reads it)`);
  }
  if (!EFFECTS.has(effect)) {
    fail(`tool ${name}: effect must be 'read-only', 'idempotent' or 'writes', not ${JSON.stringify(effect)}`);
  }
  if (!input || typeof input !== 'object' || input.type !== 'object') {
    fail(`tool ${name}: input must be an object schema (s.object({...}) or { type: 'object', ... })`);
  }
  if (typeof run !== 'function') fail(`tool ${name}: run must be a function`);
  return Object.freeze({ name, description: description.trim(), effect, input, run });
}

function message(e) {
  if (e instanceof Error) return e.message ? `${e.name}: ${e.message}` : e.name;
  try { return `thrown: ${JSON.stringify(e)}`; } catch { return `thrown: ${String(e)}`; }
}

// What the component returns for an error: a plain `tool-error` value. A
// thrown non-Error value is how componentize-js and componentize-qjs turn a
// result-returning export into `err(...)` instead of a trap.
function toolError(e) {
  if (e instanceof InvalidInput) return { tag: 'invalid-input', val: e.message };
  if (e instanceof NotFound) return { tag: 'not-found', val: e.message };
  if (e instanceof AccessDenied) return { tag: 'access-denied', val: { resource: e.resource, reason: e.reason } };
  if (e instanceof Failed) return { tag: 'failed', val: e.message };
  return { tag: 'failed', val: message(e) };
}

function output(value) {
  const text = JSON.stringify(value === undefined ? null : value);
  if (text === undefined) throw new TypeError('the tool returned a value that is not JSON');
  return text;
}

/**
 * Run tool `name` of `tools` on `input` (JSON text). Returns
 * `{ ok: outputText }` or `{ err: toolError }`; a promise of the same when
 * the handler is async. Never throws.
 */
export function outcome(tools, name, input) {
  const def = tools.find((t) => t.name === name);
  if (!def) return { err: { tag: 'not-found', val: `no tool named ${JSON.stringify(name)} in this component` } };
  let value;
  try {
    value = JSON.parse(input);
  } catch (e) {
    return { err: { tag: 'invalid-input', val: `input is not JSON: ${e.message}` } };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { err: { tag: 'invalid-input', val: 'input must be a JSON object' } };
  }
  try {
    const result = def.run(value);
    if (result && typeof result.then === 'function') {
      return result.then((v) => {
        try { return { ok: output(v) }; } catch (e) { return { err: toolError(e) }; }
      }, (e) => ({ err: toolError(e) }));
    }
    return { ok: output(result) };
  } catch (e) {
    return { err: toolError(e) };
  }
}

function settle(result) {
  if ('ok' in result) return result.ok;
  throw result.err;
}

/** The `tools` export: bind it with `export const tools = exportTools({...})`. */
export function exportTools({ name, version, description, tools, requests = {} }) {
  if (!Array.isArray(tools) || tools.length === 0) fail('exportTools needs tools: [tool({...}), ...]');
  const seen = new Set();
  for (const t of tools) {
    if (seen.has(t.name)) fail(`two tools are named ${t.name}`);
    seen.add(t.name);
  }
  const { dirs = [], hosts = [], env = [], secrets = [] } = requests;
  const info = {
    name: String(name),
    version: String(version),
    description: String(description),
    tools: tools.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: JSON.stringify(t.input),
      effect: t.effect,
    })),
    requests: {
      dirs: dirs.map((d) => ({
        guestPath: String(d.guestPath),
        access: d.writable ? 'read-write' : 'read-only',
        why: String(d.why ?? ''),
      })),
      hosts: hosts.map(String),
      env: env.map(String),
      secrets: secrets.map(String),
    },
  };
  return {
    describe: () => info,
    call(toolName, input) {
      const result = outcome(tools, toolName, input);
      if (typeof result.then !== 'function') return settle(result);
      // SpiderMonkey (componentize-js) runs the event loop until a returned
      // promise settles. QuickJS built with `--sync` cannot: a promise would
      // reach the host as a crash, so it is refused as a clear error. The
      // sign is the engine's missing `fetch` (QuickJS has none).
      if (typeof globalThis.fetch !== 'function') {
        result.then(() => {}, () => {});
        throw {
          tag: 'failed',
          val: `tool ${toolName} is async, which this engine (quickjs) cannot run: make run() synchronous, or build with --engine spidermonkey`,
        };
      }
      return result.then(settle);
    },
  };
}
