//! The PostgreSQL backend: one database shared by many workers on many
//! machines. Selected with `LONGHAND_STORE=postgres://…` (the CLI) or
//! `longhand worker --store postgres://…`; SQLite stays the default.
//!
//! Decisions, and why:
//! - **Same contract, same rules, same chain**: the lease and seq decisions
//!   and the checksum chain are `contract.rs`, shared with SQLite; this
//!   module owns the SQL and the connections. The conformance suite runs
//!   against both.
//! - **A transaction per call, the session row locked first**
//!   (`SELECT … FOR UPDATE`) by every call that changes a session (append,
//!   lease operations, posting or settling a control), so the lease token
//!   and `last_seq` are checked and bumped under one lock, whatever machine
//!   the other writer is on. Reads run in `REPEATABLE READ` read-only
//!   transactions: one consistent snapshot, so a log and its head agree.
//! - **The database's clock**: lease expiry compares against `now()` (the
//!   transaction's start) read in the same statement that locks the session
//!   row, never the worker's clock, so workers with skewed clocks agree.
//! - **Claims with `FOR UPDATE SKIP LOCKED`** ([`Store::claim_runnable`]):
//!   a worker picks running sessions whose lease is free or expired and
//!   leases them in the same statement; rows another worker is claiming
//!   are skipped rather than waited for, so workers never queue on each
//!   other and never get the same session.
//! - **`LISTEN`/`NOTIFY`**: every change to a session (create, append,
//!   release, a posted control) notifies channel `longhand` with the session
//!   id, delivered at commit; [`Store::wait_for_change`] waits on one
//!   listening connection per store, opened on first use.
//! - **Durability**: `Durability::Now` commits with the server's
//!   `synchronous_commit` (on by default: the WAL is flushed before the
//!   commit returns); `Durability::Soon` sets `synchronous_commit = off` for
//!   its transaction: visible at once, survives our crash, and reaches disk
//!   within the server's `wal_writer_delay` (200 ms by default).
//! - **Blobs in the database** (`bytea`, content-addressed): a second
//!   storage system for a fleet to share is worse than a large table.
//! - **Connections**: a small pool per store handle (at most
//!   [`MAX_CONNECTIONS`]), statements prepared once per connection.
//! - **TLS through rustls** ([`tls`]): `sslmode` (`disable`, `prefer`,
//!   `require`, `verify-ca`, `verify-full`) and `sslrootcert` in the URL, as
//!   libpq reads them. Without `sslmode` the connection is plain TCP, as it
//!   was before TLS existed here.
//!
//! This module must not interpret events beyond what `contract` does.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_postgres::{AsyncMessage, Client, Config, IsolationLevel, Statement};

pub mod tls;

impl From<tls::SettingsError> for StoreError {
    fn from(error: tls::SettingsError) -> Self {
        StoreError::Invalid(error.0)
    }
}

use super::contract::{self, LeaseRow, Verifier, corrupt, hash_blobs, ttl_ms};
use super::event::{BlobRef, Event, EventRecord, SessionStatus};
use super::holder::{self, Process};
use super::inbox::{Control, ControlKind};
use super::store::{
    Appended, Durability, Lease, Result, SessionId, SessionSummary, Store, StoreError,
};

/// At most this many connections per store handle; callers beyond wait for
/// one. A worker running N sessions needs about N (each session's loop and
/// heartbeat take turns).
pub const MAX_CONNECTIONS: usize = 16;

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 8;

/// Subscribes to the `NOTIFY` channel every change is announced on
/// (`pg_notify('longhand', <session id>)` in the writing transaction).
const LISTEN: &str = "LISTEN longhand";

/// `pg_advisory_xact_lock` key serialising migrations: "LNGH".
const MIGRATION_LOCK: i64 = 0x4C4E_4748;

/// Schema migrations: `MIGRATIONS[i]` takes the schema from version `i` to
/// `i + 1`. Append only; never edit a released entry. Every table has the
/// columns of its SQLite twin, plus `sessions.priority` (the agent's
/// `--priority`, copied from `session_created` so claims can order by it).
const MIGRATIONS: &[&str] = &[
    r#"
    CREATE TABLE sessions (
        id          text PRIMARY KEY,
        agent_name  text NOT NULL,
        created_ms  int8 NOT NULL,
        updated_ms  int8 NOT NULL,
        last_seq    int8 NOT NULL,
        head        bytea NOT NULL,     -- checksum of event last_seq
        status      text NOT NULL,      -- from the last lifecycle event
        priority    int8 NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_running ON sessions (priority DESC, updated_ms)
        WHERE status = 'running';

    CREATE TABLE events (
        session_id  text NOT NULL REFERENCES sessions (id),
        seq         int8 NOT NULL,
        at_ms       int8 NOT NULL,
        type        text NOT NULL,
        json        text NOT NULL,      -- exactly the bytes the checksum covers
        checksum    bytea NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX events_by_type ON events (session_id, type, seq);
    CREATE FUNCTION longhand_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'session events are append-only'; END $$;
    CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION longhand_append_only();

    CREATE TABLE blobs (
        digest      text PRIMARY KEY,   -- sha256:<hex>
        size        int8 NOT NULL,
        bytes       bytea NOT NULL
    );

    CREATE TABLE leases (
        session_id  text PRIMARY KEY REFERENCES sessions (id),
        owner       text,               -- NULL once released
        token       int8 NOT NULL,      -- fencing token, only grows
        expires_ms  int8 NOT NULL       -- by the database's clock
    );

    CREATE TABLE controls (
        session_id  text NOT NULL REFERENCES sessions (id),
        id          int8 NOT NULL,
        kind        text NOT NULL,
        text        text,
        posted_ms   int8 NOT NULL,
        posted_by   text NOT NULL,
        handled_ms  int8,
        PRIMARY KEY (session_id, id)
    );
    "#,
    // 2: the lease holder's process (`session::holder`), so a worker on the
    // holder's machine can tell it dead and take over at once. Rows written
    // before have NULLs here and expire by time only.
    r#"
    ALTER TABLE leases
        ADD COLUMN holder_host text,
        ADD COLUMN holder_pid int8,
        ADD COLUMN holder_started int8,
        ADD COLUMN holder_machine text,
        ADD COLUMN renewed_ms int8;
    CREATE INDEX leases_by_machine ON leases (holder_machine) WHERE owner IS NOT NULL;
    "#,
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Now, unix ms, by the database's clock (the transaction's start), plus the
/// test skew (`$1`, 0 outside tests).
const NOW_MS: &str = "(extract(epoch FROM now()) * 1000)::int8 + $1";

/// The PostgreSQL session store. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    /// Every connection's TLS (none under `sslmode=disable`).
    tls: tls::MakeRustls,
    /// The URL's `sslmode`, for messages.
    ssl_mode: tls::SslMode,
    /// What error messages call the database: host and name, never the
    /// password.
    name: String,
    idle: Mutex<Vec<Conn>>,
    slots: Arc<Semaphore>,
    /// Added to the database's clock: lets the conformance suite expire
    /// leases without waiting. Always 0 outside tests.
    skew_ms: AtomicU64,
    /// Bumped by the listener on every notification.
    changes: watch::Sender<u64>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The process this handle's leases are recorded for: this one
    /// ([`Process::current`]); tests play another.
    process: RwLock<Option<Process>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.inner.name)
            .finish_non_exhaustive()
    }
}

/// One connection and the statements prepared on it.
struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

/// A connection on loan from the pool; back to it when dropped.
struct Pooled {
    conn: Option<Conn>,
    inner: Arc<Inner>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && !conn.client.is_closed()
        {
            let mut idle = self
                .inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
    }
}

impl Pooled {
    fn conn(&mut self) -> Result<&mut Conn> {
        self.conn
            .as_mut()
            .ok_or_else(|| StoreError::Invalid("a pooled connection was used after release".into()))
    }

    /// The statements for `sql`, prepared on this connection once.
    async fn prepare<const N: usize>(&mut self, sql: [&'static str; N]) -> Result<[Statement; N]> {
        let name = self.inner.name.clone();
        let conn = self.conn()?;
        let mut out = Vec::with_capacity(N);
        for text in sql {
            let statement = match conn.statements.get(text) {
                Some(s) => s.clone(),
                None => {
                    let s = conn
                        .client
                        .prepare(text)
                        .await
                        .map_err(|e| db_error(&name, "preparing a statement", e))?;
                    conn.statements.insert(text, s.clone());
                    s
                }
            };
            out.push(statement);
        }
        out.try_into()
            .map_err(|_| StoreError::Invalid("statement count mismatch".into()))
    }
}

/// Maps a driver error: the session store's words, the server's reason.
fn db_error(name: &str, context: &str, e: tokio_postgres::Error) -> StoreError {
    let detail = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        // The driver's text names the kind only ("error performing TLS
        // handshake"); the cause says what happened.
        None => match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    };
    StoreError::Db {
        context: format!("{name}: {context}: {detail}"),
        source: Box::new(e),
    }
}

/// Shorthand: attach the database and context to a driver result.
trait DbContext<T> {
    fn db(self, name: &str, context: &str) -> Result<T>;
}

impl<T> DbContext<T> for std::result::Result<T, tokio_postgres::Error> {
    fn db(self, name: &str, context: &str) -> Result<T> {
        self.map_err(|e| db_error(name, context, e))
    }
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`,
    /// the libpq URL form) and migrates the schema to [`SCHEMA_VERSION`].
    /// The tables live in the connection's `search_path` (normally
    /// `public`); `?options=-c%20search_path%3Dname` in the URL picks
    /// another schema.
    ///
    /// TLS follows the URL's `sslmode` and `sslrootcert` ([`tls`]); without
    /// them the connection is plain TCP.
    pub async fn connect(url: &str) -> Result<Self> {
        let (rest, settings) = tls::split_url(url)?;
        let config: Config = rest.parse().map_err(|e| {
            StoreError::Invalid(format!(
                "the store URL is not a PostgreSQL URL ({e}); expected \
                 postgres://user:password@host:port/database"
            ))
        })?;
        Self::connect_tls(config, &settings).await
    }

    /// [`PostgresStore::connect`] with a parsed configuration, plain TCP.
    pub async fn connect_config(config: Config) -> Result<Self> {
        let plain = tls::TlsSettings {
            mode: tls::SslMode::Disable,
            root: None,
        };
        Self::connect_tls(config, &plain).await
    }

    /// [`PostgresStore::connect`] with a parsed configuration and TLS
    /// settings.
    pub async fn connect_tls(mut config: Config, settings: &tls::TlsSettings) -> Result<Self> {
        let tls = tls::connector(&mut config, settings)?;
        if config.get_application_name().is_none() {
            config.application_name("longhand");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".to_owned(),
        };
        let name = format!(
            "postgres://{host}/{}",
            config.get_dbname().unwrap_or_default()
        );
        let store = PostgresStore {
            inner: Arc::new(Inner {
                config,
                tls,
                ssl_mode: settings.mode,
                name,
                idle: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
                skew_ms: AtomicU64::new(0),
                changes: watch::channel(0).0,
                listener: Mutex::new(None),
                process: RwLock::new(Process::current()),
            }),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// What the store is, for messages: host and database, no password.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Moves this handle's view of the database clock forward (tests of
    /// lease expiry).
    #[cfg(test)]
    pub(crate) fn advance_clock(&self, ms: u64) {
        self.inner.skew_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// The process leases are granted to through this handle.
    fn process(&self) -> Option<Process> {
        self.inner
            .process
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes this handle act for `process` (tests of a dead or distant
    /// holder).
    #[cfg(test)]
    pub(crate) fn act_as(&self, process: Option<Process>) {
        *self
            .inner
            .process
            .write()
            .unwrap_or_else(PoisonError::into_inner) = process;
    }

    fn skew(&self) -> i64 {
        i(self.inner.skew_ms.load(Ordering::Relaxed))
    }

    async fn open_conn(&self) -> Result<Conn> {
        let (client, connection) = self
            .inner
            .config
            .connect(self.inner.tls.clone())
            .await
            .map_err(|e| self.connect_error(e))?;
        tokio::spawn(async move {
            // Ends when the client is dropped or the server goes away; the
            // client then reports the error on its next use.
            let _ = connection.await;
        });
        Ok(Conn {
            client,
            statements: HashMap::new(),
        })
    }

    /// A failed connection in words: a plain server under a mode that
    /// requires TLS is named as such (the driver only says the server
    /// "does not support TLS").
    fn connect_error(&self, e: tokio_postgres::Error) -> StoreError {
        let name = &self.inner.name;
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        if self.inner.ssl_mode.requires_tls()
            && cause.is_some_and(|c| c.contains("does not support TLS"))
        {
            return StoreError::Db {
                context: format!(
                    "{name}: connecting: the server does not accept TLS, and the store URL \
                     requires it (sslmode={}): enable ssl on the server, or check that the \
                     URL names the right one",
                    self.inner.ssl_mode.as_str()
                ),
                source: Box::new(e),
            };
        }
        db_error(name, "connecting", e)
    }

    async fn conn(&self) -> Result<Pooled> {
        let slot = Arc::clone(&self.inner.slots)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Invalid("the connection pool is closed".into()))?;
        let idle = loop {
            let next = self
                .inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match next {
                Some(c) if c.client.is_closed() => continue,
                other => break other,
            }
        };
        let conn = match idle {
            Some(c) => c,
            None => self.open_conn().await?,
        };
        Ok(Pooled {
            conn: Some(conn),
            inner: Arc::clone(&self.inner),
            _slot: slot,
        })
    }

    async fn migrate(&self) -> Result<()> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let conn = pooled.conn()?;
        let tx = conn
            .client
            .transaction()
            .await
            .db(&name, "starting a migration")?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .db(&name, "locking the schema to migrate it")?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS longhand_schema (version int4 NOT NULL)")
            .await
            .db(&name, "creating the schema version table")?;
        let version: Option<i32> = tx
            .query_opt("SELECT version FROM longhand_schema", &[])
            .await
            .db(&name, "reading the schema version")?
            .map(|r| r.get(0));
        let found = u32::try_from(version.unwrap_or(0)).unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: name,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for (step, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.batch_execute(sql).await.db(
                &name,
                &format!("migrating the schema to version {}", step + 1),
            )?;
        }
        let now = i32::try_from(SCHEMA_VERSION).unwrap_or(i32::MAX);
        match version {
            None => tx
                .execute("INSERT INTO longhand_schema (version) VALUES ($1)", &[&now])
                .await
                .db(&name, "recording the schema version")?,
            Some(_) => tx
                .execute("UPDATE longhand_schema SET version = $1", &[&now])
                .await
                .db(&name, "recording the schema version")?,
        };
        tx.commit().await.db(&name, "committing a migration")?;
        Ok(())
    }

    /// Starts the listening connection unless it runs already. It
    /// reconnects after a second when the connection drops, and bumps the
    /// change counter then too (something may have changed unseen).
    fn listen(&self) {
        let mut listener = self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if listener.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        // The task holds the configuration, not the store: dropping the
        // last store handle aborts it.
        let config = self.inner.config.clone();
        let tls = self.inner.tls.clone();
        let changes = self.inner.changes.clone();
        *listener = Some(tokio::spawn(async move {
            loop {
                if let Ok((client, mut connection)) = config.connect(tls.clone()).await {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    let listen = client.batch_execute(LISTEN);
                    tokio::pin!(listen);
                    let mut listening = false;
                    loop {
                        tokio::select! {
                            done = &mut listen, if !listening => {
                                if done.is_err() { break; }
                                listening = true;
                                changes.send_modify(|n| *n += 1);
                            }
                            message = messages.next() => match message {
                                Some(Ok(AsyncMessage::Notification(_))) => {
                                    changes.send_modify(|n| *n += 1);
                                }
                                Some(Ok(_)) => {}
                                Some(Err(_)) | None => break,
                            }
                        }
                    }
                }
                changes.send_modify(|n| *n += 1);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }

    /// Lease operations: grant `owner` the lease, renewing, taking a free
    /// or expired one, or taking it from `dead_owner`.
    async fn grant_lease(
        &self,
        session: &SessionId,
        owner: &str,
        dead_owner: Option<&str>,
        ttl: Duration,
    ) -> Result<Lease> {
        let ttl = ttl_ms(ttl)?;
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [lock, read_lease, write_lease] = pooled
            .prepare([LOCK_SESSION, READ_LEASE, WRITE_LEASE])
            .await?;
        let sid = session.as_str();
        let Locked { tx, now, .. } =
            begin_locked(pooled.conn()?, &name, sid, self.skew(), &lock, None).await?;
        let row = lease_row(&tx, &read_lease, &name, sid).await?;
        // Judged while the session row is locked: no other lease write
        // can come between the look at /proc and the grant.
        let me = self.process();
        let liveness = holder::liveness(row.as_ref().and_then(|r| r.holder.as_ref()), me.as_ref());
        let granted = contract::grant_token(row.as_ref(), owner, dead_owner, &liveness, now)?;
        let expires_ms = now.saturating_add(ttl);
        let (host, pid, started, machine) = holder_columns(me.as_ref());
        tx.execute(
            &write_lease,
            &[
                &sid,
                &owner,
                &i(granted.token),
                &i(expires_ms),
                &host,
                &pid,
                &started,
                &machine,
                &i(now),
            ],
        )
        .await
        .db(&name, "writing the lease")?;
        tx.commit().await.db(&name, "committing the lease")?;
        Ok(Lease {
            session: session.clone(),
            owner: owner.to_owned(),
            token: granted.token,
            expires_ms,
            taken_from: granted.taken_from,
        })
    }

    /// Starts a read-only transaction on one snapshot.
    async fn read_tx<'c>(
        name: &str,
        conn: &'c mut Conn,
    ) -> Result<tokio_postgres::Transaction<'c>> {
        conn.client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .db(name, "starting a read")
    }
}

const LOCK_SESSION: &str = "SELECT last_seq, head, (extract(epoch FROM now()) * 1000)::int8 + $2
     FROM sessions WHERE id = $1 FOR UPDATE";
const READ_LEASE: &str = "SELECT owner, token, expires_ms, holder_host, holder_pid,
         holder_started, holder_machine, renewed_ms
     FROM leases WHERE session_id = $1";
const WRITE_LEASE: &str = "INSERT INTO leases (session_id, owner, token, expires_ms,
         holder_host, holder_pid, holder_started, holder_machine, renewed_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (session_id) DO UPDATE
     SET owner = excluded.owner, token = excluded.token, expires_ms = excluded.expires_ms,
         holder_host = excluded.holder_host, holder_pid = excluded.holder_pid,
         holder_started = excluded.holder_started, holder_machine = excluded.holder_machine,
         renewed_ms = excluded.renewed_ms";

/// The lease columns naming the holder's process (all NULL without one).
fn holder_columns(me: Option<&Process>) -> (Option<&str>, Option<i64>, Option<i64>, Option<&str>) {
    match me {
        Some(m) => (
            Some(m.host.as_str()),
            Some(i64::from(m.pid)),
            Some(i(m.started)),
            Some(m.machine.as_str()),
        ),
        None => (None, None, None, None),
    }
}

/// A lease row's holder process, when all its columns are there.
fn holder_of(r: &tokio_postgres::Row, first: usize) -> Option<Process> {
    let host: Option<String> = r.get(first);
    let pid: Option<i64> = r.get(first + 1);
    let started: Option<i64> = r.get(first + 2);
    let machine: Option<String> = r.get(first + 3);
    Some(Process {
        host: host?,
        pid: u32::try_from(pid?).ok()?,
        started: u(started?),
        machine: machine?,
    })
}
const SESSION_ROW: &str = "SELECT last_seq, head FROM sessions WHERE id = $1";
const INSERT_BLOB: &str = "INSERT INTO blobs (digest, size, bytes) VALUES ($1, $2, $3)
     ON CONFLICT (digest) DO NOTHING";
const INSERT_EVENTS: &str = "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
     SELECT $1, seq, $2, type, json, checksum
     FROM unnest($3::int8[], $4::text[], $5::text[], $6::bytea[]) AS e (seq, type, json, checksum)";
const ADVANCE: &str = "UPDATE sessions SET last_seq = $2, head = $3, updated_ms = $4,
         status = coalesce($5, status)
     WHERE id = $1
     RETURNING pg_notify('longhand', id)::text";
const SUMMARY: &str =
    "SELECT id, agent_name, created_ms, updated_ms, last_seq, status FROM sessions";

/// A write transaction on one session, past the prologue every write
/// shares ([`begin_locked`]).
struct Locked<'c> {
    tx: tokio_postgres::Transaction<'c>,
    last_seq: u64,
    head: Vec<u8>,
    /// The database's now (with the store's skew), the time of the write.
    now: u64,
}

/// The prologue of every write to a session: start a transaction, lock the
/// session row (its `last_seq`, `head` and the database's now) and, given
/// `READ_LEASE` prepared and a lease, check that lease while the row is
/// locked, so that no other lease write comes between the check and the
/// write.
async fn begin_locked<'c>(
    conn: &'c mut Conn,
    name: &str,
    sid: &str,
    skew: i64,
    lock: &Statement,
    lease: Option<(&Statement, &Lease)>,
) -> Result<Locked<'c>> {
    let tx = conn
        .client
        .transaction()
        .await
        .db(name, "starting a transaction")?;
    let (last_seq, head, now) = lock_session(&tx, lock, name, sid, skew).await?;
    if let Some((read_lease, lease)) = lease {
        contract::check_lease(lease_row(&tx, read_lease, name, sid).await?.as_ref(), lease)?;
    }
    Ok(Locked {
        tx,
        last_seq,
        head,
        now,
    })
}

/// Locks the session row; its `(last_seq, head)` and the database's now.
async fn lock_session(
    tx: &tokio_postgres::Transaction<'_>,
    lock: &Statement,
    name: &str,
    sid: &str,
    skew: i64,
) -> Result<(u64, Vec<u8>, u64)> {
    let row = tx
        .query_opt(lock, &[&sid, &skew])
        .await
        .db(name, "locking the session")?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("session {sid}"),
        })?;
    Ok((u(row.get(0)), row.get(1), u(row.get(2))))
}

async fn lease_row(
    tx: &tokio_postgres::Transaction<'_>,
    read: &Statement,
    name: &str,
    sid: &str,
) -> Result<Option<LeaseRow>> {
    Ok(tx
        .query_opt(read, &[&sid])
        .await
        .db(name, "reading the lease")?
        .map(|r| LeaseRow {
            owner: r.get(0),
            token: u(r.get(1)),
            expires_ms: u(r.get(2)),
            holder: holder_of(&r, 3),
            renewed_ms: r.get::<_, Option<i64>>(7).map(u),
        }))
}

fn summary_from_row(name: &str, r: &tokio_postgres::Row) -> Result<SessionSummary> {
    let id: String = r.get(0);
    let status: String = r.get(5);
    let bad = |what: String| StoreError::Corrupt {
        seq: None,
        detail: format!("{name}: session row {id:?}: {what}"),
    };
    let status =
        SessionStatus::parse(&status).ok_or_else(|| bad(format!("unknown status {status:?}")))?;
    let parsed = id
        .parse::<SessionId>()
        .map_err(|_| bad("not a session id".into()))?;
    Ok(SessionSummary {
        id: parsed,
        agent_name: r.get(1),
        created_ms: u(r.get(2)),
        updated_ms: u(r.get(3)),
        last_seq: u(r.get(4)),
        status,
    })
}

/// The session's `last_seq` and `head`, and the checksum of event `$2`
/// (the one before a read's range; none for 0), in one round trip.
const READ_HEAD: &str = "SELECT s.last_seq, s.head,
        (SELECT checksum FROM events e WHERE e.session_id = s.id AND e.seq = $2)
     FROM sessions s WHERE s.id = $1";
const READ_EVENTS: &str = "SELECT seq, at_ms, type, json, checksum FROM events
     WHERE session_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq";

/// Reads and verifies `from..=to` of `sid` in `tx` (see the SQLite twin),
/// with `[READ_HEAD, READ_EVENTS]` prepared: two round trips.
async fn read_verified(
    tx: &tokio_postgres::Transaction<'_>,
    [head_st, events_st]: &[Statement; 2],
    name: &str,
    sid: &str,
    from: u64,
    to: Option<u64>,
) -> Result<Vec<EventRecord>> {
    let before = from.max(1) - 1;
    let row = tx
        .query_opt(head_st, &[&sid, &i(before)])
        .await
        .db(name, "reading the session")?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("session {sid}"),
        })?;
    let (last_seq, head): (u64, Vec<u8>) = (u(row.get(0)), row.get(1));
    let prev: Option<Vec<u8>> = row.get(2);
    let Some(mut verifier) = Verifier::new(sid, from, to, last_seq, head, |_| prev)? else {
        return Ok(Vec::new());
    };
    let rows = tx
        .query(events_st, &[&sid, &i(verifier.from()), &i(verifier.to())])
        .await
        .db(name, "reading events")?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let seq = u(row.get(0));
        let at_ms = u(row.get(1));
        let kind: &str = row.get(2);
        let json: &str = row.get(3);
        let checksum: &[u8] = row.get(4);
        out.push(verifier.next(seq, at_ms, kind, json.as_bytes(), checksum)?);
    }
    verifier.finish()?;
    Ok(out)
}

fn control_from_row(sid: &str, r: &tokio_postgres::Row) -> Result<Control> {
    let kind: String = r.get(1);
    let kind = ControlKind::parse(&kind).ok_or_else(|| StoreError::Corrupt {
        seq: None,
        detail: format!(
            "session {sid}: a control row has the unknown kind {kind:?} \
             (written by a newer Longhand?)"
        ),
    })?;
    Ok(Control {
        id: u(r.get(0)),
        kind,
        text: r.get(2),
        posted_ms: u(r.get(3)),
        by: r.get(4),
        handled_ms: r.get::<_, Option<i64>>(5).map(u),
    })
}

#[async_trait]
impl Store for PostgresStore {
    async fn create(&self, agent_name: &str, created: &Event) -> Result<SessionId> {
        let enc = contract::encode_created(agent_name, created)?;
        let priority = match created {
            Event::SessionCreated { agent, .. } => agent
                .get("priority")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0),
            _ => 0,
        };
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let conn = pooled.conn()?;
        let tx = conn
            .client
            .transaction()
            .await
            .db(&name, "starting a transaction")?;
        let now = u(tx
            .query_one(&format!("SELECT {NOW_MS}"), &[&self.skew()])
            .await
            .db(&name, "reading the clock")?
            .get(0));
        let id = SessionId::generate(now);
        let checksum = contract::link(&contract::genesis(id.as_str()), 1, now, enc.json.as_bytes());
        tx.execute(
            "INSERT INTO sessions (id, agent_name, created_ms, updated_ms, last_seq, head, status, priority)
             VALUES ($1, $2, $3, $3, 1, $4, $5, $6)",
            &[&id.as_str(), &agent_name, &i(now), &checksum.as_slice(), &SessionStatus::Created.as_str(), &priority],
        )
        .await
        .db(&name, "creating a session")?;
        tx.execute(
            "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
             VALUES ($1, 1, $2, $3, $4, $5)",
            &[
                &id.as_str(),
                &i(now),
                &enc.kind,
                &enc.json,
                &checksum.as_slice(),
            ],
        )
        .await
        .db(&name, "writing session_created")?;
        tx.execute("SELECT pg_notify('longhand', $1)", &[&id.as_str()])
            .await
            .db(&name, "notifying")?;
        tx.commit().await.db(&name, "committing a new session")?;
        Ok(id)
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let rows = pooled
            .conn()?
            .client
            .query(&format!("{SUMMARY} ORDER BY id"), &[])
            .await
            .db(&name, "listing sessions")?;
        rows.iter().map(|r| summary_from_row(&name, r)).collect()
    }

    async fn summary(&self, session: &SessionId) -> Result<SessionSummary> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let row = pooled
            .conn()?
            .client
            .query_opt(&format!("{SUMMARY} WHERE id = $1"), &[&session.as_str()])
            .await
            .db(&name, "reading a session")?
            .ok_or_else(|| StoreError::NotFound {
                what: format!("session {session}"),
            })?;
        summary_from_row(&name, &row)
    }

    async fn acquire_lease(
        &self,
        session: &SessionId,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        self.grant_lease(session, owner, None, ttl).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl = ttl_ms(ttl)?;
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [lock, read_lease] = pooled.prepare([LOCK_SESSION, READ_LEASE]).await?;
        let sid = lease.session.as_str();
        let Locked { tx, now, .. } = begin_locked(
            pooled.conn()?,
            &name,
            sid,
            self.skew(),
            &lock,
            Some((&read_lease, lease)),
        )
        .await?;
        let expires_ms = now.saturating_add(ttl);
        tx.execute(
            "UPDATE leases SET expires_ms = $2, renewed_ms = $3 WHERE session_id = $1",
            &[&sid, &i(expires_ms), &i(now)],
        )
        .await
        .db(&name, "renewing a lease")?;
        // A heartbeat lost to a server crash costs nothing (see SQLite's).
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await
            .db(&name, "relaxing the commit")?;
        tx.commit().await.db(&name, "committing a renewal")?;
        Ok(Lease {
            expires_ms,
            taken_from: None,
            ..lease.clone()
        })
    }

    async fn take_over(
        &self,
        session: &SessionId,
        dead_owner: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        self.grant_lease(session, owner, Some(dead_owner), ttl)
            .await
    }

    async fn release(&self, lease: &Lease) -> Result<()> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let conn = pooled.conn()?;
        // One statement, so no explicit lock: the row lock it takes orders
        // it with every other lease write. Keeps the row and its token.
        conn.client
            .query(
                "UPDATE leases SET owner = NULL, expires_ms = 0
                 WHERE session_id = $1 AND token = $2 AND owner = $3
                 RETURNING pg_notify('longhand', session_id)::text",
                &[&lease.session.as_str(), &i(lease.token), &lease.owner],
            )
            .await
            .db(&name, "releasing a lease")?;
        Ok(())
    }

    /// One transaction holds the blobs and the events, so a refused append
    /// writes no blob either.
    async fn append_with(
        &self,
        session: &SessionId,
        lease: &Lease,
        expected_seq: u64,
        events: &[Event],
        blobs: Vec<Vec<u8>>,
        durability: Durability,
    ) -> Result<Appended> {
        let encoded = contract::encode_appended(session, lease, events)?;
        let blobs = hash_blobs(blobs).await?;
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [lock, read_lease, insert_blob, insert_events, advance] = pooled
            .prepare([
                LOCK_SESSION,
                READ_LEASE,
                INSERT_BLOB,
                INSERT_EVENTS,
                ADVANCE,
            ])
            .await?;
        let sid = session.as_str();
        let Locked {
            tx,
            last_seq,
            head,
            now,
        } = begin_locked(
            pooled.conn()?,
            &name,
            sid,
            self.skew(),
            &lock,
            Some((&read_lease, lease)),
        )
        .await?;
        contract::check_seq(expected_seq, last_seq)?;
        for (blob, bytes) in &blobs {
            tx.execute(&insert_blob, &[&blob.digest, &i(blob.bytes), bytes])
                .await
                .db(&name, "storing a blob")?;
        }
        if encoded.is_empty() {
            tx.commit().await.db(&name, "committing blobs")?;
            return Ok(Appended { last_seq, at_ms: 0 });
        }
        let chained = contract::chain(last_seq, &head, now, &encoded);
        let seqs: Vec<i64> = chained.rows.iter().map(|r| i(r.seq)).collect();
        let kinds: Vec<&str> = chained.rows.iter().map(|r| r.kind).collect();
        let jsons: Vec<&str> = chained.rows.iter().map(|r| r.json).collect();
        let sums: Vec<&[u8]> = chained.rows.iter().map(|r| r.checksum.as_slice()).collect();
        tx.execute(
            &insert_events,
            &[&sid, &i(now), &seqs, &kinds, &jsons, &sums],
        )
        .await
        .db(&name, "appending events")?;
        tx.query(
            &advance,
            &[
                &sid,
                &i(chained.last_seq),
                &chained.head,
                &i(now),
                &chained.status.map(SessionStatus::as_str),
            ],
        )
        .await
        .db(&name, "advancing the session")?;
        if durability == Durability::Soon {
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .await
                .db(&name, "relaxing the commit")?;
        }
        tx.commit().await.db(&name, "committing an append")?;
        Ok(Appended {
            last_seq: chained.last_seq,
            at_ms: now,
        })
    }

    async fn read(&self, session: &SessionId, from_seq: u64) -> Result<Vec<EventRecord>> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let statements = pooled.prepare([READ_HEAD, READ_EVENTS]).await?;
        let tx = Self::read_tx(&name, pooled.conn()?).await?;
        read_verified(&tx, &statements, &name, session.as_str(), from_seq, None).await
    }

    async fn latest_snapshot(&self, session: &SessionId) -> Result<Option<EventRecord>> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [latest, head_st, events_st] = pooled
            .prepare([
                "SELECT s.id, (SELECT max(seq) FROM events
                               WHERE session_id = s.id AND type = 'snapshot')
                 FROM sessions s WHERE s.id = $1",
                READ_HEAD,
                READ_EVENTS,
            ])
            .await?;
        let tx = Self::read_tx(&name, pooled.conn()?).await?;
        let sid = session.as_str();
        let found = tx
            .query_opt(&latest, &[&sid])
            .await
            .db(&name, "finding the latest snapshot")?
            .ok_or_else(|| StoreError::NotFound {
                what: format!("session {sid}"),
            })?;
        let Some(seq) = found.get::<_, Option<i64>>(1).map(u) else {
            return Ok(None);
        };
        let record = read_verified(&tx, &[head_st, events_st], &name, sid, seq, Some(seq))
            .await?
            .pop()
            .ok_or_else(|| corrupt(sid, seq, "missing"))?;
        Ok(Some(record))
    }

    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef> {
        let Some((blob, bytes)) = hash_blobs(vec![bytes]).await?.pop() else {
            return Err(StoreError::Invalid("no blob to store".into()));
        };
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [insert] = pooled.prepare([INSERT_BLOB]).await?;
        pooled
            .conn()?
            .client
            .execute(&insert, &[&blob.digest, &i(blob.bytes), &bytes])
            .await
            .db(&name, "storing a blob")?;
        Ok(blob)
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        contract::check_blob_ref(blob)?;
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [get] = pooled
            .prepare(["SELECT bytes FROM blobs WHERE digest = $1"])
            .await?;
        let bytes: Vec<u8> = pooled
            .conn()?
            .client
            .query_opt(&get, &[&blob.digest])
            .await
            .db(&name, "reading a blob")?
            .ok_or_else(|| StoreError::NotFound {
                what: format!("blob {}", blob.digest),
            })?
            .get(0);
        contract::verify_blob(&name, blob, &bytes)?;
        Ok(bytes)
    }

    async fn post_control(
        &self,
        session: &SessionId,
        kind: ControlKind,
        text: Option<String>,
        by: &str,
    ) -> Result<Control> {
        contract::check_control_text(text.as_deref())?;
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [lock] = pooled.prepare([LOCK_SESSION]).await?;
        let sid = session.as_str();
        // The session row's lock orders posters: no two read the same max.
        let Locked { tx, now, .. } =
            begin_locked(pooled.conn()?, &name, sid, self.skew(), &lock, None).await?;
        let id: i64 = tx
            .query_one(
                "INSERT INTO controls (session_id, id, kind, text, posted_ms, posted_by)
                 SELECT $1, coalesce(max(id), 0) + 1, $2, $3, $4, $5
                 FROM controls WHERE session_id = $1
                 RETURNING id, pg_notify('longhand', session_id)::text",
                &[&sid, &kind.as_str(), &text, &i(now), &by],
            )
            .await
            .db(&name, "posting a control")?
            .get(0);
        tx.commit().await.db(&name, "committing a control")?;
        Ok(Control {
            id: u(id),
            kind,
            text,
            posted_ms: now,
            by: by.to_owned(),
            handled_ms: None,
        })
    }

    async fn controls(&self, session: &SessionId, after_id: u64) -> Result<Vec<Control>> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let tx = Self::read_tx(&name, pooled.conn()?).await?;
        let sid = session.as_str();
        tx.query_opt(SESSION_ROW, &[&sid])
            .await
            .db(&name, "reading the session")?
            .ok_or_else(|| StoreError::NotFound {
                what: format!("session {sid}"),
            })?;
        let rows = tx
            .query(
                "SELECT id, kind, text, posted_ms, posted_by, handled_ms FROM controls
                 WHERE session_id = $1 AND id > $2 ORDER BY id",
                &[&sid, &i(after_id)],
            )
            .await
            .db(&name, "reading controls")?;
        rows.iter().map(|r| control_from_row(sid, r)).collect()
    }

    async fn forget_snapshot_blobs(&self, lease: &Lease, blobs: &[BlobRef]) -> Result<u64> {
        for blob in blobs {
            contract::check_blob_ref(blob)?;
        }
        if blobs.is_empty() {
            return Ok(0);
        }
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [lock, read_lease] = pooled.prepare([LOCK_SESSION, READ_LEASE]).await?;
        let sid = lease.session.as_str();
        let Locked { tx, .. } = begin_locked(
            pooled.conn()?,
            &name,
            sid,
            self.skew(),
            &lock,
            Some((&read_lease, lease)),
        )
        .await?;
        let digests: Vec<&str> = blobs.iter().map(|b| b.digest.as_str()).collect();
        let deleted = tx
            .execute(
                "DELETE FROM blobs WHERE digest = ANY ($1::text[])",
                &[&digests],
            )
            .await
            .db(&name, "forgetting snapshot blobs")?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await
            .db(&name, "relaxing the commit")?;
        tx.commit()
            .await
            .db(&name, "committing forgotten snapshot blobs")?;
        Ok(deleted)
    }

    async fn settle_control(&self, lease: &Lease, id: u64) -> Result<()> {
        let name = self.inner.name.clone();
        let mut pooled = self.conn().await?;
        let [lock, read_lease] = pooled.prepare([LOCK_SESSION, READ_LEASE]).await?;
        let sid = lease.session.as_str();
        let Locked { tx, now, .. } = begin_locked(
            pooled.conn()?,
            &name,
            sid,
            self.skew(),
            &lock,
            Some((&read_lease, lease)),
        )
        .await?;
        let changed = tx
            .execute(
                "UPDATE controls SET handled_ms = coalesce(handled_ms, $3)
                 WHERE session_id = $1 AND id = $2",
                &[&sid, &i(id), &i(now)],
            )
            .await
            .db(&name, "settling a control")?;
        if changed == 0 {
            return Err(StoreError::NotFound {
                what: format!("control {id} of session {sid}"),
            });
        }
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await
            .db(&name, "relaxing the commit")?;
        tx.commit().await.db(&name, "committing a settle")?;
        Ok(())
    }

    /// Claims with `FOR UPDATE SKIP LOCKED`: running sessions with no live
    /// lease, highest priority then longest waiting, leased to `owner` in
    /// the same statement. A live lease held by `owner` itself counts as
    /// free: `owner` does not run the session (it would be in `skip`), so
    /// the lease is a leftover — a run that stopped when the database went
    /// away and could not release it.
    ///
    /// Why the lease is checked again in `ON CONFLICT … WHERE`: the
    /// `SELECT` judged the lease row as of the statement's snapshot, and a
    /// worker may have taken the lease since (every lease write locks the
    /// session row first, so it has committed once we hold that row). The
    /// conflict clause sees the latest lease row, leaves a live lease alone,
    /// and a session whose lease was not granted is not returned.
    async fn claim_runnable(
        &self,
        owner: &str,
        ttl: Duration,
        limit: usize,
        skip: &[SessionId],
    ) -> Result<Vec<SessionId>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let ttl = ttl_ms(ttl)?;
        let name = self.inner.name.clone();
        let skip: Vec<&str> = skip.iter().map(SessionId::as_str).collect();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let me = self.process();
        let (host, pid, started, machine) = holder_columns(me.as_ref());
        let mut pooled = self.conn().await?;
        let [held_here] = pooled
            .prepare([
                // Live leases held by processes of this machine: the
                // candidates for taking over at once. Bounded: they are
                // the sessions of this machine's workers, a handful each.
                r#"
                SELECT l.session_id, l.holder_host, l.holder_pid, l.holder_started,
                       l.holder_machine
                FROM leases l JOIN sessions s ON s.id = l.session_id
                WHERE s.status = 'running' AND l.owner IS NOT NULL AND l.owner <> $2
                  AND l.holder_machine = $1
                  AND l.expires_ms > (extract(epoch FROM now()) * 1000)::int8 + $4
                  AND NOT (s.id = ANY ($3::text[]))
                ORDER BY s.priority DESC, s.updated_ms
                LIMIT 256"#,
            ])
            .await?;
        let parse = |id: String| {
            id.parse::<SessionId>().map_err(|_| StoreError::Corrupt {
                seq: None,
                detail: format!("{name}: a lease row names a session id that is not one"),
            })
        };
        let room = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut claimed = Vec::new();
        // First the sessions whose holder died on this machine (a worker
        // killed and restarted): they were running, so they go before any
        // session never started (`contract::claim_order`), whatever the
        // claim below would fill the room with. Judged here, where their
        // pids mean something, and taken through `grant_lease`, which
        // judges again under the row lock so that a holder that is alive
        // after all keeps its lease.
        if let Some(me) = &me {
            let held = pooled
                .conn()?
                .client
                .query(&held_here, &[&me.machine, &owner, &skip, &self.skew()])
                .await
                .db(&name, "looking for leases of dead local workers")?;
            drop(pooled);
            for row in held {
                if claimed.len() >= room {
                    return Ok(claimed);
                }
                let dead = holder_of(&row, 1).is_some_and(|h| h.liveness(Some(me)).is_dead());
                if !dead {
                    continue;
                }
                let id = parse(row.get::<_, String>(0))?;
                match self
                    .grant_lease(&id, owner, None, Duration::from_millis(ttl))
                    .await
                {
                    Ok(_) => claimed.push(id),
                    Err(StoreError::LeaseHeld { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            pooled = self.conn().await?;
        }
        if claimed.len() >= room {
            return Ok(claimed);
        }
        let [claim] = pooled
            .prepare([r#"
                WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::int8 + $5 AS now_ms),
                picked AS (
                    SELECT s.id FROM sessions s
                    LEFT JOIN leases l ON l.session_id = s.id
                    CROSS JOIN clock
                    WHERE s.status = 'running'
                      AND (l.owner IS NULL OR l.expires_ms <= clock.now_ms OR l.owner = $1)
                      AND NOT (s.id = ANY ($3::text[]))
                    -- Orphans (a lease still naming a holder, expired) first
                    -- within a priority: `contract::claim_order`.
                    ORDER BY s.priority DESC, (l.owner IS NULL), s.updated_ms
                    LIMIT $4
                    FOR UPDATE OF s SKIP LOCKED
                )
                INSERT INTO leases AS l (session_id, owner, token, expires_ms,
                    holder_host, holder_pid, holder_started, holder_machine, renewed_ms)
                SELECT picked.id, $1, 1, clock.now_ms + $2, $6::text, $7::int8, $8::int8, $9::text,
                    clock.now_ms
                FROM picked CROSS JOIN clock
                ON CONFLICT (session_id) DO UPDATE
                SET owner = excluded.owner, token = l.token + 1, expires_ms = excluded.expires_ms,
                    holder_host = excluded.holder_host, holder_pid = excluded.holder_pid,
                    holder_started = excluded.holder_started,
                    holder_machine = excluded.holder_machine, renewed_ms = excluded.renewed_ms
                WHERE l.owner IS NULL OR l.expires_ms <= (SELECT now_ms FROM clock)
                    OR l.owner = excluded.owner
                RETURNING l.session_id"#])
            .await?;
        let left = i64::try_from(room - claimed.len()).unwrap_or(i64::MAX);
        let skip: Vec<&str> = skip
            .iter()
            .copied()
            .chain(claimed.iter().map(SessionId::as_str))
            .collect();
        let rows = pooled
            .conn()?
            .client
            .query(
                &claim,
                &[
                    &owner,
                    &i(ttl),
                    &skip,
                    &left,
                    &self.skew(),
                    &host,
                    &pid,
                    &started,
                    &machine,
                ],
            )
            .await
            .db(&name, "claiming runnable sessions")?;
        drop(pooled);
        for row in &rows {
            claimed.push(parse(row.get::<_, String>(0))?);
        }
        Ok(claimed)
    }

    async fn wait_for_change(&self, timeout: Duration) -> Result<bool> {
        self.listen();
        let mut changes = self.inner.changes.subscribe();
        changes.borrow_and_update();
        Ok(tokio::time::timeout(timeout, changes.changed())
            .await
            .is_ok_and(|r| r.is_ok()))
    }
}
