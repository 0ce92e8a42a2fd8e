#!/usr/bin/env bash
# The browser test of `longhand serve` (host/tests/all/serve.rs): Debian's
# Chromium and Playwright's driver (playwright-core, pinned by
# tests/browser/package-lock.json). Idempotent; runs as root on a fresh
# Debian machine. Prints nothing on stdout (no variables to export).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi
(cd tests/browser && npm ci --no-audit --no-fund >&2)
/usr/bin/chromium --version >&2
