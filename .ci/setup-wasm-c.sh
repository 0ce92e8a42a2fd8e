#!/usr/bin/env bash
# Installs a C compiler that targets wasm32 and the WASI libc headers
# (Debian: clang and wasi-libc), which the built-in `sqlite` tool needs: its
# engine is SQLite's C, compiled into the component (host/hands/build.rs).
# Idempotent; runs as root on a fresh Debian machine; says what it does on
# stderr.
set -euo pipefail

if command -v clang >/dev/null 2>&1 && [ -f /usr/include/wasm32-wasi/stdio.h ]; then
    exit 0
fi
echo "setup-wasm-c: installing clang and wasi-libc" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update >&2
apt-get install -y --no-install-recommends clang wasi-libc >&2
