// Host services for a tool running as a component: a log line recorded with
// the call, and progress on a long call. Only a component can import this
// module (it imports `longhand:tool/host` from the component world).
import { log as hostLog, progress as hostProgress } from 'longhand:tool/host@0.1.0';

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

export function log(level, message) {
  if (!LEVELS.has(level)) throw new TypeError(`log level must be one of ${[...LEVELS].join(', ')}, not ${level}`);
  hostLog(level, String(message));
}

// How the engine's bindings take a u64: a BigInt (componentize-js) or a
// number (componentize-qjs). `longhand tool build` defines the engine.
/* global __LONGHAND_ENGINE__ */
const u64 = typeof __LONGHAND_ENGINE__ !== 'undefined' && __LONGHAND_ENGINE__ === 'quickjs'
  ? (n) => Number(BigInt(n))
  : (n) => BigInt(n);

export function progress(done, total, message) {
  hostProgress(u64(done), total === undefined || total === null ? undefined : u64(total), String(message));
}
