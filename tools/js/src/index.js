// `js`: run a JavaScript snippet on QuickJS inside this component.
//
// Each call is a fresh instance of the component (the host makes one per
// call), so nothing a snippet defines outlives it. The component targets
// the `offline-tool` world: it has no outbound HTTP and no files beyond the
// granted directories QuickJS does not expose anyway; the call's memory,
// fuel and time limits bound what a snippet can spend.
import { tool, exportTools, s, Failed } from '@longhand/tool';

// Output kept per call; past it the text is cut and says so.
const MAX_OUTPUT = 256 * 1024;

function show(value) {
  if (typeof value === 'string') return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const text = JSON.stringify(value);
    if (text !== undefined) return text;
  } catch {
    // a cycle or a BigInt: fall through to String
  }
  return String(value);
}

// The final expression's value as JSON when it is JSON, else as text.
function asJson(value) {
  if (value === undefined || value === null) return null;
  try {
    const text = JSON.stringify(value);
    if (text !== undefined) return JSON.parse(text);
  } catch {
    // not JSON: its text below
  }
  return String(value);
}

// The stack's frames in the snippet: everything from the `eval` that ran it
// down is this tool's own, not the model's concern.
function snippetFrames(stack) {
  const lines = String(stack ?? '').split('\n');
  const end = lines.findIndex((line) => line.trim() === 'at eval (native)');
  return (end < 0 ? lines : lines.slice(0, end)).filter((line) => line.trim()).join('\n');
}

function kept(text) {
  if (text.length <= MAX_OUTPUT) return text;
  return `${text.slice(0, MAX_OUTPUT)}\n[${text.length - MAX_OUTPUT} more characters cut]\n`;
}

export const run = tool({
  name: 'run',
  description:
    'Run JavaScript (QuickJS, ES2023) in a fresh sandbox and return what console.log printed ' +
    'and, like a REPL, the value of the last expression (JSON when it is JSON, else its text). ' +
    'No network, files, timers or promises that outlive the call. An exception fails the call ' +
    'with its message and stack.',
  effect: 'read-only',
  input: s.object({ code: s.describe(s.string(), 'The JavaScript to run, as a script (not a module).') }),
  run({ code }) {
    const lines = [];
    const log = (...args) => { lines.push(args.map(show).join(' ')); };
    const saved = globalThis.console;
    globalThis.console = { log, info: log, warn: log, error: log, debug: log };
    let value;
    try {
      // Indirect eval: global scope, and the completion value of the last
      // statement, as a REPL shows it.
      value = (0, eval)(code);
    } catch (e) {
      const stdout = lines.length ? `\nconsole output before the error:\n${kept(lines.join('\n'))}\n` : '';
      const what = e instanceof Error
        ? [`${e.name}: ${e.message}`, snippetFrames(e.stack)].filter(Boolean).join('\n')
        : `uncaught ${show(e)}`;
      throw new Failed(`${what}${stdout}`);
    } finally {
      globalThis.console = saved;
    }
    return { stdout: kept(lines.length ? `${lines.join('\n')}\n` : ''), value: asJson(value) };
  },
});

// The component's `longhand:tool/tools` export.
export const tools = exportTools({
  name: 'js',
  version: '0.1.0',
  description: 'Runs JavaScript snippets on QuickJS, sandboxed to the tool\'s grants.',
  tools: [run],
});
