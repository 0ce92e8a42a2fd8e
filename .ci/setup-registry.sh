#!/usr/bin/env bash
# Installs the OCI registry the distribution tests publish to and install
# from (host/tests/all/dist.rs, issue 18): Debian's `docker-registry`
# (CNCF Distribution). The tests start one per test on 127.0.0.1 with
# filesystem storage in a temporary directory; nothing here starts one.
#
# Idempotent. Progress goes to stderr; stdout carries only the `export`
# line for the tests, so CI runs: eval "$(bash .ci/setup-registry.sh)"
set -euo pipefail

bin=/usr/bin/docker-registry
{
    if [ ! -x "$bin" ]; then
        sudo=""
        if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
        $sudo apt-get update
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker-registry
    fi
    # The package may start its own service on :5000; the tests never use it.
    "$bin" --version
} >&2

echo "export LONGHAND_REGISTRY_BIN=$bin"
