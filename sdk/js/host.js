// Host services for a tool running as a component: a log line recorded with
// the call, and progress on a long call. Only a component can import this
// module (it imports `longhand:tool/host` from the component world).
import { log as hostLog, progress as hostProgress } from 'longhand:tool/host';

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

export function log(level, message) {
  if (!LEVELS.has(level)) throw new TypeError(`log level must be one of ${[...LEVELS].join(', ')}, not ${level}`);
  hostLog(level, String(message));
}

export function progress(done, total, message) {
  hostProgress(BigInt(done), total === undefined || total === null ? undefined : BigInt(total), String(message));
}
