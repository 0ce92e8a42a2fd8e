#!/usr/bin/env bash
# Installs the real toolchains that turn Python and JavaScript into tool
# components, for host/tests/all/author.rs (issue 18) and
# host/tests/all/interpreters.rs (`tool install python|js`, issue 28, which
# the binary builds with the toolchain LONGHAND_PY_VENV / LONGHAND_JS_MODULES
# name instead of fetching its own): componentize-py
# (PyPI, pinned below) into a venv, and componentize-js (npm, pinned by
# tools/componentize/package-lock.json) into a node_modules beside it. Both
# go under target/componentize/ (ignored by git; `cargo clean` removes them,
# and running this again puts them back).
#
# Idempotent. Needs python3 (3.10+) with venv and pip, node 18+ and npm.
# Progress goes to stderr; stdout carries only the `export` lines for the
# tests, so CI runs: eval "$(bash .ci/setup-componentize.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."

COMPONENTIZE_PY_VERSION=0.25.1
root=$PWD/target/componentize
venv=$root/venv
js=$root/js

{
    mkdir -p "$root"
    # A venv cut off while it was made (no pip in it) is made again.
    if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$venv"
        # Debian's own python3 keeps venv (ensurepip) in a package of its own.
        if ! python3 -m venv "$venv"; then
            rm -rf "$venv"
            apt-get update && apt-get install -y python3-venv
            python3 -m venv "$venv"
        fi
    fi
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('componentize-py') != '$COMPONENTIZE_PY_VERSION')" 2>/dev/null; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            "componentize-py==$COMPONENTIZE_PY_VERSION"
    fi
    mkdir -p "$js"
    if ! cmp -s tools/componentize/package-lock.json "$js/package-lock.json" \
        || [ ! -d "$js/node_modules/@bytecodealliance/componentize-js" ]; then
        cp tools/componentize/package.json tools/componentize/package-lock.json "$js/"
        (cd "$js" && npm ci --no-audit --no-fund)
    fi
    # The SDKs from this checkout, as a tool project gets them from
    # `pip install -r requirements.txt` / `npm install` (host/tests/all/author.rs).
    # From a copy: setuptools writes build/ and *.egg-info/ beside the
    # pyproject.toml it installs, and the checkout is not the place.
    copy=$(mktemp -d)
    cp -r sdk/python "$copy/"
    rm -rf "$copy/python/build" "$copy"/python/*.egg-info
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$copy/python"
    rm -rf "$copy"
    mkdir -p "$js/node_modules/@longhand"
    ln -sfn "$PWD/sdk/js" "$js/node_modules/@longhand/tool"
} >&2

echo "export LONGHAND_COMPONENTIZE_PY=$venv/bin/componentize-py"
echo "export LONGHAND_COMPONENTIZE_JS=$js/node_modules/.bin/componentize-js"
echo "export LONGHAND_PY_VENV=$venv"
echo "export LONGHAND_JS_MODULES=$js/node_modules"
