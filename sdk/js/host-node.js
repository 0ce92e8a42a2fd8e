// Host services outside a component (Node, for a tool's own tests): the
// same checks as in a component, with the log line and progress written to
// stderr instead of recorded by the host. Chosen by package.json's "node"
// export condition; a component build (esbuild, platform neutral) takes
// host.js, which imports `longhand:tool/host` from the component world.

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

export function log(level, message) {
  if (!LEVELS.has(level)) throw new TypeError(`log level must be one of ${[...LEVELS].join(', ')}, not ${level}`);
  process.stderr.write(`[${level}] ${String(message)}\n`);
}

export function progress(done, total, message) {
  const of = total === undefined || total === null ? '' : `/${BigInt(total)}`;
  process.stderr.write(`[progress ${BigInt(done)}${of}] ${String(message)}\n`);
}
