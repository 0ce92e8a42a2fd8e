#!/usr/bin/env bash
# Installs PostgreSQL from Debian's packages, starts the cluster, creates the
# `longhand` role and database the tests use, and prints on stdout
#   export LONGHAND_TEST_PG=postgres://longhand:longhand@127.0.0.1:5432/longhand
# for the caller to `eval "$(bash .ci/setup-postgres.sh)"`. Idempotent: run it
# as often as you like. Runs as root (CI, a fresh Debian machine); everything
# else it says goes to stderr. The password is a test fixture for a server
# listening on loopback only (Debian's default `listen_addresses`).
set -euo pipefail

log() { echo "setup-postgres: $*" >&2; }

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "installing postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y postgresql >&2
fi

# Debian's package creates a cluster (VERSION/main); make one if it did not.
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $1"/"$2}' | grep -qx "$version/main"; then
    log "creating cluster $version/main"
    pg_createcluster "$version" main >&2
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $4}' | grep -qx online; then
    log "starting cluster $version/main"
    pg_ctlcluster "$version" main start >&2
fi

# Wait for the server to take connections (a cold start takes a moment).
for _ in $(seq 1 60); do
    if su postgres -c "psql -qtAc 'SELECT 1'" >/dev/null 2>&1; then break; fi
    sleep 0.5
done

psql_admin() { su postgres -c "psql -v ON_ERROR_STOP=1 -qtA $*"; }
if [ "$(psql_admin "-c \"SELECT 1 FROM pg_roles WHERE rolname = 'longhand'\"")" != "1" ]; then
    log "creating role longhand"
    # CREATEDB: the conformance suite makes a schema per test; the role owns
    # its database, so it may create schemas there without this, but a
    # developer may also want scratch databases.
    psql_admin "-c \"CREATE ROLE longhand LOGIN PASSWORD 'longhand' CREATEDB\"" >&2
fi
if [ "$(psql_admin "-c \"SELECT 1 FROM pg_database WHERE datname = 'longhand'\"")" != "1" ]; then
    log "creating database longhand"
    psql_admin "-c \"CREATE DATABASE longhand OWNER longhand\"" >&2
fi

# The fleet test runs several workers with a handful of connections each.
max=$(psql_admin "-c 'SHOW max_connections'")
if [ "$max" -lt 200 ]; then
    log "raising max_connections to 200 (restart)"
    psql_admin "-c 'ALTER SYSTEM SET max_connections = 200'" >&2
    pg_ctlcluster "$version" main restart >&2
    for _ in $(seq 1 60); do
        if su postgres -c "psql -qtAc 'SELECT 1'" >/dev/null 2>&1; then break; fi
        sleep 0.5
    done
fi

url=postgres://longhand:longhand@127.0.0.1:5432/longhand
PGPASSWORD=longhand psql -qtA "$url" -c 'SELECT 1' >/dev/null
log "ready: $url"
echo "export LONGHAND_TEST_PG=$url"
