#!/usr/bin/env bash
# Installs PostgreSQL from Debian's packages, starts the cluster, creates the
# `longhand` role and database the tests use, serves TLS with a test CA's
# certificate, and prints on stdout
#   export LONGHAND_TEST_PG=postgres://longhand:longhand@127.0.0.1:5432/longhand
#   export LONGHAND_TEST_PG_TLS_CA=/var/lib/postgresql/longhand-tls/ca.pem
#   export LONGHAND_TEST_PG_AGENT=postgres://longhand_agent:…@127.0.0.1:5432/longhand
#     (an ordinary role) and LONGHAND_TEST_PG_SUPER (a superuser), for the
#     database-tool tests
#   export LONGHAND_TEST_PG_RESTART_URL=postgres://…:5433/longhand (a second
#     cluster) and LONGHAND_TEST_PG_RESTART (the command that restarts it)
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

# TLS: a CA of our own and a server certificate it signs for 127.0.0.1 and
# localhost, so the tests can connect with sslmode=verify-full. Debian's
# cluster has ssl = on with a snakeoil certificate; ours replaces it, and
# TLS settings take effect on reload (no restart). Plain connections keep
# working (pg_hba's `host` lines accept both).
tls=/var/lib/postgresql/longhand-tls
if [ ! -s "$tls/server.pem" ]; then
    log "making a test CA and server certificate in $tls"
    mkdir -p "$tls"
    cat >"$tls/ca.cnf" <<'CNF'
[req]
distinguished_name = dn
x509_extensions = v3_ca
prompt = no
[dn]
CN = Longhand test CA
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
CNF
    cat >"$tls/server.ext" <<'EXT'
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EXT
    openssl req -x509 -config "$tls/ca.cnf" -newkey rsa:2048 -nodes -days 3650 \
        -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
    openssl req -new -newkey rsa:2048 -nodes -subj /CN=localhost \
        -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
        -CAcreateserial -days 3650 -extfile "$tls/server.ext" -out "$tls/server.pem" 2>/dev/null
    chown -R postgres:postgres "$tls"
    chmod 600 "$tls/server.key" "$tls/ca.key"
    chmod 755 "$tls"
    chmod 644 "$tls/ca.pem"
fi
if [ "$(psql_admin "-c 'SHOW ssl_cert_file'")" != "$tls/server.pem" ]; then
    log "serving TLS with the test certificate"
    psql_admin "-c 'ALTER SYSTEM SET ssl = on'" >&2
    psql_admin "-c \"ALTER SYSTEM SET ssl_cert_file = '$tls/server.pem'\"" >&2
    psql_admin "-c \"ALTER SYSTEM SET ssl_key_file = '$tls/server.key'\"" >&2
    psql_admin "-c 'SELECT pg_reload_conf()'" >/dev/null
    sleep 1
fi

# A second cluster, only for the test that restarts its server while a
# worker runs (restarting the main one would cut every other test's
# connections at the same time). Port 5433, plain TCP.
if ! pg_lsclusters -h | awk '{print $1"/"$2}' | grep -qx "$version/restart"; then
    log "creating cluster $version/restart (port 5433)"
    pg_createcluster "$version" restart -p 5433 >&2
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "restart" {print $4}' | grep -qx online; then
    log "starting cluster $version/restart"
    pg_ctlcluster "$version" restart start >&2
fi
for _ in $(seq 1 60); do
    if su postgres -c "psql -p 5433 -qtAc 'SELECT 1'" >/dev/null 2>&1; then break; fi
    sleep 0.5
done
if [ "$(psql_admin "-p 5433 -c \"SELECT 1 FROM pg_roles WHERE rolname = 'longhand'\"")" != "1" ]; then
    psql_admin "-p 5433 -c \"CREATE ROLE longhand LOGIN PASSWORD 'longhand'\"" >&2
fi
if [ "$(psql_admin "-p 5433 -c \"SELECT 1 FROM pg_database WHERE datname = 'longhand'\"")" != "1" ]; then
    psql_admin "-p 5433 -c \"CREATE DATABASE longhand OWNER longhand\"" >&2
fi
# A shutdown waits for every backend, also one still waiting for a
# client's startup packet, for up to authentication_timeout (60 s by
# default): a worker reconnecting at the moment of the restart can leave
# one, and then `pg_ctl restart` hits its own 60 s limit and fails. Bound
# it well below that.
if [ "$(psql_admin "-p 5433 -c 'SHOW authentication_timeout'")" != "10s" ]; then
    psql_admin "-p 5433 -c \"ALTER SYSTEM SET authentication_timeout = '10s'\"" >&2
    psql_admin "-p 5433 -c 'SELECT pg_reload_conf()'" >/dev/null
fi
restart_url=postgres://longhand:longhand@127.0.0.1:5433/longhand
PGPASSWORD=longhand psql -qtA "$restart_url" -c 'SELECT 1' >/dev/null

# Two more roles for the database-tool tests (tests/all/postgres.rs): an
# ordinary one that may create what it then tries to write (so only the
# read-only transaction stands between a `query` and a write), and a
# superuser, whose login a read-only grant must refuse. Their passwords are
# canaries the tests look for in everything Longhand prints.
agent_pw=pw-canary-7Qz3Lm9Xv2
super_pw=su-canary-4Hk8Rt1Wd6
su postgres -c "psql -v ON_ERROR_STOP=1 -qtA" >&2 <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'longhand_agent') THEN
    CREATE ROLE longhand_agent LOGIN PASSWORD '$agent_pw';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'longhand_super') THEN
    CREATE ROLE longhand_super LOGIN SUPERUSER PASSWORD '$super_pw';
  END IF;
END \$\$;
GRANT CONNECT, CREATE, TEMPORARY ON DATABASE longhand TO longhand_agent;
SQL
agent_url=postgres://longhand_agent:$agent_pw@127.0.0.1:5432/longhand
super_url=postgres://longhand_super:$super_pw@127.0.0.1:5432/longhand
PGPASSWORD=$agent_pw psql -qtA "$agent_url" -c 'SELECT 1' >/dev/null

url=postgres://longhand:longhand@127.0.0.1:5432/longhand
PGPASSWORD=longhand psql -qtA "$url" -c 'SELECT 1' >/dev/null
PGPASSWORD=longhand psql -qtA "$url?sslmode=verify-full&sslrootcert=$tls/ca.pem" -c 'SELECT 1' >/dev/null
log "ready: $url (TLS: sslmode=verify-full&sslrootcert=$tls/ca.pem)"
echo "export LONGHAND_TEST_PG=$url"
echo "export LONGHAND_TEST_PG_TLS_CA=$tls/ca.pem"
echo "export LONGHAND_TEST_PG_AGENT=$agent_url"
echo "export LONGHAND_TEST_PG_SUPER=$super_url"
echo "export LONGHAND_TEST_PG_RESTART_URL=$restart_url"
echo "export LONGHAND_TEST_PG_RESTART='pg_ctlcluster $version restart restart'"
