//! The embedded default backend: one SQLite file, `<dir>/longhand.db`.
//!
//! Decisions, and why:
//! - **WAL, one writer thread, group commit** (`sqlite/writer.rs`): every write
//!   (appends of all sessions, blob puts, lease operations) goes through one
//!   thread that owns the write connection and commits whatever is pending
//!   in one transaction, each request in its own savepoint so a refused one
//!   never undoes the others. SQLite allows one writer per file anyway;
//!   batching turns N commits into one.
//! - **Durability by request** ([`Durability`]): commits run with
//!   `synchronous=NORMAL`, so in WAL mode a commit writes the WAL (the OS
//!   page cache) and does not fsync: a `Soon` write is visible to every
//!   reader and survives a process crash when it returns. A flusher thread
//!   fsyncs the WAL file — at once for `Now` writes, which are answered only
//!   after it, and within the flush window (default
//!   [`DEFAULT_FLUSH_WINDOW`]) for `Soon` writes. One fsync covers every
//!   commit before it, of every session.
//! - **Reads on their own connections**, a small pool used from
//!   `spawn_blocking`, each read in one read transaction (one consistent
//!   snapshot); WAL lets them run beside the writer, never queued behind it.
//!   At most [`MAX_READERS`] exist at once (more reads wait their turn) and
//!   [`MAX_IDLE_READERS`] stay open between reads: SQLite cannot close a
//!   reader's database descriptor while the writer holds its lock on the
//!   file (POSIX locks belong to the process, so closing any descriptor of
//!   the file would drop the writer's), and parks it for reuse instead —
//!   so every connection a burst opened would keep a descriptor, its
//!   thread and page cache until the process ends. Bounded, a burst of any
//!   size costs at most `MAX_READERS` of each.
//! - **`BEGIN IMMEDIATE`** for every write transaction: the write lock is
//!   taken before the lease and seq are checked, so two processes on one
//!   file can never both pass the checks (no lock-upgrade deadlocks either);
//!   `busy_timeout` makes the loser wait instead of failing.
//! - **Checksum chain** (`contract.rs`, shared with PostgreSQL): each event
//!   row stores `sha256(prev_checksum || seq || at_ms || json)`, seeded per
//!   session, and the session row stores the head. A damaged or edited row,
//!   a gap, or a lost tail is reported as [`StoreError::Corrupt`] naming the
//!   seq. SQLite's own journal already makes a torn transaction roll back
//!   whole; the chain is for damage beneath SQLite and for hands that edit
//!   the file. The lease and seq rules come from there too: this module
//!   reads and writes rows, `contract` decides.
//! - **Append-only in the schema too**: triggers abort any `UPDATE` or
//!   `DELETE` on `events`.
//! - **The control inbox** is a table any process writes without a lease
//!   (`post_control`), through the same writer as everything else (so the
//!   id is `max + 1` under the write lock: concurrent posters, even from
//!   other processes, get distinct ids) and durable at once
//!   ([`Durability::Now`]).
//! - **Migrations by `PRAGMA user_version`**: `MIGRATIONS` is the list;
//!   a database newer than the list is refused ([`StoreError::TooNew`]), a
//!   SQLite file of another application (its `application_id`) is refused.
//!
//! This module owns the SQL and nothing else: no event semantics beyond
//! "`session_created` is seq 1" and the lifecycle status.

mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use super::contract::{self, Encoded, LeaseRow, Verifier, corrupt, hash_blobs, ttl_ms};
use super::event::{BlobRef, Event, EventRecord, SessionStatus};
use super::holder::{self, Process};
use super::inbox::{Control, ControlKind};
use super::store::{
    Appended, Clock, Durability, Lease, Result, SessionId, SessionSummary, Store, StoreError,
    SystemClock,
};
use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
pub use writer::WriteStats;
use writer::{Pending, WriteCtx, Writer};

/// The database's file name inside the store directory.
pub const DB_FILE: &str = "longhand.db";

/// `PRAGMA application_id` of a Longhand database: "LNGH".
const APPLICATION_ID: i32 = 0x4C4E_4748;

/// How long a writer waits for another process's write lock before
/// [`StoreError::Db`]. Appends are tiny, so this only runs out when something
/// holds the file locked.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Schema migrations: `MIGRATIONS[i]` takes the schema from version `i` to
/// `i + 1`. Append only; never edit a released entry.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, their events, blobs, leases.
    r#"
    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        agent_name  TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        updated_ms  INTEGER NOT NULL,
        last_seq    INTEGER NOT NULL,
        head        BLOB NOT NULL,      -- checksum of event last_seq
        status      TEXT NOT NULL       -- from the last lifecycle event
    ) STRICT;

    CREATE TABLE events (
        session_id  TEXT NOT NULL REFERENCES sessions (id),
        seq         INTEGER NOT NULL,
        at_ms       INTEGER NOT NULL,
        type        TEXT NOT NULL,      -- the JSON's "type", for lookups
        json        TEXT NOT NULL,
        checksum    BLOB NOT NULL,      -- sha256(prev || seq || at_ms || json)
        PRIMARY KEY (session_id, seq)
    ) STRICT;
    CREATE INDEX events_by_type ON events (session_id, type, seq);
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'session events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'session events are append-only'); END;

    CREATE TABLE blobs (
        digest      TEXT PRIMARY KEY,   -- sha256:<hex>
        size        INTEGER NOT NULL,
        bytes       BLOB NOT NULL
    ) STRICT;

    CREATE TABLE leases (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (id),
        owner       TEXT,               -- NULL once released
        token       INTEGER NOT NULL,   -- fencing token, only grows
        expires_ms  INTEGER NOT NULL
    ) STRICT;
    "#,
    // 2: the control inbox (`session::inbox`). Written by any process,
    // never by lease; rows are never deleted, so ids are never reused, and
    // only `handled_ms` may change.
    r#"
    CREATE TABLE controls (
        session_id  TEXT NOT NULL REFERENCES sessions (id),
        id          INTEGER NOT NULL,   -- per session, from 1
        kind        TEXT NOT NULL,      -- ControlKind::as_str
        text        TEXT,
        posted_ms   INTEGER NOT NULL,
        posted_by   TEXT NOT NULL,
        handled_ms  INTEGER,            -- NULL while pending
        PRIMARY KEY (session_id, id)
    ) STRICT;
    CREATE TRIGGER controls_no_delete BEFORE DELETE ON controls
        BEGIN SELECT RAISE(ABORT, 'controls are never deleted'); END;
    CREATE TRIGGER controls_only_settle
        BEFORE UPDATE OF session_id, id, kind, text, posted_ms, posted_by ON controls
        BEGIN SELECT RAISE(ABORT, 'a control is only ever settled'); END;
    "#,
    // 3: the lease holder's process (`session::holder`), so a worker on the
    // same machine can tell a dead holder and take over at once. Rows
    // written before have NULLs here and expire by time only.
    r#"
    ALTER TABLE leases ADD COLUMN holder_host TEXT;
    ALTER TABLE leases ADD COLUMN holder_pid INTEGER;
    ALTER TABLE leases ADD COLUMN holder_started INTEGER;
    ALTER TABLE leases ADD COLUMN holder_machine TEXT;
    ALTER TABLE leases ADD COLUMN renewed_ms INTEGER;
    "#,
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// How long a `Soon` write may stay off stable storage by default: 100 ms.
pub const DEFAULT_FLUSH_WINDOW: Duration = Duration::from_millis(100);

/// At most this many idle read connections are kept; more are opened when
/// more reads run at once (up to [`MAX_READERS`]), and closed after.
const MAX_IDLE_READERS: usize = 2;

/// At most this many read connections are open at once; a read that finds
/// none free waits for one (first come, first served). Reads are short
/// (one indexed query each), so eight keep two cores busy with room to
/// spare, and a burst of requests queues instead of opening a connection,
/// a thread and a page cache each.
const MAX_READERS: usize = 8;

/// The writer connection's page cache, KiB (default 4 MiB): the bound on
/// what of the database the writer holds in memory, whatever the log's
/// length (see `open_blocking`).
const WRITER_CACHE_KIB: i64 = 4096;

/// How a [`SqliteStore`] is opened. `Default`: the system clock and
/// [`DEFAULT_FLUSH_WINDOW`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Where lease expiry reads the time. Default: [`SystemClock`].
    pub clock: Arc<dyn Clock>,
    /// The longest a [`Durability::Soon`] write stays off stable storage
    /// after its commit, give or take one fsync. Default: 100 ms.
    pub flush_window: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            clock: Arc::new(SystemClock),
            flush_window: DEFAULT_FLUSH_WINDOW,
        }
    }
}

/// The SQLite session store. Cheap to clone; clones share the writer and
/// the read connections. Dropping the last clone waits for queued writes
/// to commit and for the flusher's last fsync, so a clean shutdown loses
/// nothing.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Writer,
    /// The process this handle's leases are recorded for: this one
    /// ([`Process::current`]); tests play another.
    process: RwLock<Option<Process>>,
    /// Idle read connections.
    readers: Mutex<Vec<Connection>>,
    /// One permit per read connection that may be open ([`MAX_READERS`]).
    reader_slots: Arc<tokio::sync::Semaphore>,
    /// The clock the writer stamps with, for judging leases on reads.
    clock: Arc<dyn Clock>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Readers first, so that the writer's connection is the last one
        // and closing it checkpoints the WAL into the database file.
        self.readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.writer.shut_down();
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) `<dir>/longhand.db`, creating `dir` too,
    /// and migrates it to [`SCHEMA_VERSION`], with the default
    /// [`SqliteOptions`].
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, SqliteOptions::default()).await
    }

    /// [`SqliteStore::open`] with another clock (tests, simulations).
    pub async fn open_with_clock(dir: impl AsRef<Path>, clock: Arc<dyn Clock>) -> Result<Self> {
        let options = SqliteOptions {
            clock,
            ..SqliteOptions::default()
        };
        Self::open_with(dir, options).await
    }

    /// [`SqliteStore::open`] with explicit options.
    pub async fn open_with(dir: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        let SqliteOptions {
            clock,
            flush_window,
        } = options;
        let writer_clock = clock.clone();
        let (writer, path) = tokio::task::spawn_blocking(move || {
            let (conn, path) = open_blocking(&dir)?;
            let writer = Writer::start(conn, path.clone(), clock.clone(), flush_window)?;
            Ok::<_, StoreError>((writer, path))
        })
        .await
        .map_err(join_error)??;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                writer,
                process: RwLock::new(Process::current()),
                readers: Mutex::new(Vec::new()),
                reader_slots: Arc::new(tokio::sync::Semaphore::new(MAX_READERS)),
                clock: writer_clock,
            }),
        })
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

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Counters of the write path (requests, commits, fsyncs) since the
    /// store was opened.
    pub fn write_stats(&self) -> WriteStats {
        self.inner.writer.stats()
    }

    /// Queues `work` for the writer, to run inside a batch transaction, and
    /// waits for its result: at commit for [`Durability::Soon`], after the
    /// fsync that covers the commit for [`Durability::Now`]. `bytes` is the
    /// payload size, which bounds batches.
    async fn write<T, F>(&self, durability: Durability, bytes: usize, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &WriteCtx<'_>) -> Result<T> + Send + 'static,
    {
        let (pending, reply) = Pending::new(durability, bytes, work);
        self.inner.writer.submit(Box::new(pending))?;
        reply.await.map_err(|_| writer::writer_gone())?
    }

    /// Runs `f` in one read transaction on a read connection, on the
    /// blocking pool.
    async fn read_with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Path) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        // Held by the blocking task, not by this future: a caller that
        // goes away mid-read does not free the slot while its connection
        // is still in use.
        let slot = Arc::clone(&inner.reader_slots)
            .acquire_owned()
            .await
            .map_err(|e| StoreError::Db {
                context: "waiting for a read connection".into(),
                source: Box::new(e),
            })?;
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let p = inner.path.as_path();
            let idle = inner
                .readers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let mut conn = match idle {
                Some(conn) => conn,
                None => open_reader(p)?,
            };
            let result = {
                let tx = conn.transaction().db(p, "starting a read")?;
                // Dropping the transaction rolls it back: a read wrote
                // nothing and only its snapshot ends.
                f(&tx, p)
            };
            if result.is_ok() {
                let mut idle = inner.readers.lock().unwrap_or_else(PoisonError::into_inner);
                if idle.len() < MAX_IDLE_READERS {
                    idle.push(conn);
                }
            }
            result
        })
        .await
        .map_err(join_error)?
    }

    /// Grant `owner` the lease of `session`: renewed in place when `owner`
    /// holds it already, taken when it is free or expired, or — with
    /// `dead_owner` — taken from that holder even though it has not expired
    /// (the caller proved it dead). A new holder always gets a greater token.
    /// Durable before it returns: a worker acts on its lease at once.
    async fn grant_lease(
        &self,
        session: &SessionId,
        owner: &str,
        dead_owner: Option<&str>,
        ttl: Duration,
    ) -> Result<Lease> {
        let ttl = ttl_ms(ttl)?;
        let session = session.clone();
        let owner = owner.to_owned();
        let dead_owner = dead_owner.map(str::to_owned);
        let me = self.process();
        self.write(Durability::Now, 0, move |conn, ctx| {
            let p = ctx.path;
            session_row(conn, p, session.as_str())?;
            let now = ctx.now_ms;
            let expires_ms = now.saturating_add(ttl);
            let row = lease_row(conn, p, session.as_str())?;
            // Judged inside the write transaction: the row cannot change
            // between the look at /proc and the grant.
            let liveness =
                holder::liveness(row.as_ref().and_then(|r| r.holder.as_ref()), me.as_ref());
            let granted =
                contract::grant_token(row.as_ref(), &owner, dead_owner.as_deref(), &liveness, now)?;
            let (host, pid, started, machine) = match &me {
                Some(m) => (
                    Some(m.host.as_str()),
                    Some(m.pid),
                    Some(m.started),
                    Some(m.machine.as_str()),
                ),
                None => (None, None, None, None),
            };
            conn.prepare_cached(
                "INSERT INTO leases (session_id, owner, token, expires_ms,
                     holder_host, holder_pid, holder_started, holder_machine, renewed_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (session_id) DO UPDATE
                 SET owner = excluded.owner, token = excluded.token,
                     expires_ms = excluded.expires_ms, holder_host = excluded.holder_host,
                     holder_pid = excluded.holder_pid,
                     holder_started = excluded.holder_started,
                     holder_machine = excluded.holder_machine,
                     renewed_ms = excluded.renewed_ms",
            )
            .and_then(|mut s| {
                s.execute(params![
                    session.as_str(),
                    owner,
                    granted.token,
                    expires_ms,
                    host,
                    pid,
                    started,
                    machine,
                    now
                ])
            })
            .db(p, "writing the lease")?;
            Ok(Lease {
                session,
                owner,
                token: granted.token,
                expires_ms,
                taken_from: granted.taken_from,
            })
        })
        .await
    }
}

fn join_error(e: tokio::task::JoinError) -> StoreError {
    StoreError::Db {
        context: "session store task failed".into(),
        source: Box::new(e),
    }
}

/// Maps a SQLite error: damage and foreign files become
/// [`StoreError::Corrupt`] with advice, the rest [`StoreError::Db`].
fn db_error(path: &Path, context: &str, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
            seq: None,
            detail: format!(
                "{}: {context}: {e}. The file is damaged or is not a Longhand database: \
                 move it aside (keep it for inspection) and restore it from a backup, \
                 or point Longhand at another directory",
                path.display()
            ),
        },
        _ => StoreError::Db {
            context: format!("{}: {context}: {e}", path.display()),
            source: Box::new(e),
        },
    }
}

/// Shorthand: attach path and context to a rusqlite result.
trait DbContext<T> {
    fn db(self, path: &Path, context: &str) -> Result<T>;
}

impl<T> DbContext<T> for rusqlite::Result<T> {
    fn db(self, path: &Path, context: &str) -> Result<T> {
        self.map_err(|e| db_error(path, context, e))
    }
}

fn open_blocking(dir: &Path) -> Result<(Connection, PathBuf)> {
    std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
        context: format!("creating session store directory {}", dir.display()),
        source,
    })?;
    let path = dir.join(DB_FILE);
    let p = path.as_path();
    let mut conn = Connection::open(p).db(p, "opening the session database")?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .db(p, "setting busy_timeout")?;
    // The first statement that reads the file: a foreign or truncated file
    // fails here, as Corrupt.
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .db(p, "switching to WAL")?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Db {
            context: format!("{}: SQLite refused WAL mode (got {mode})", p.display()),
            source: "journal_mode".into(),
        });
    }
    // No fsync at commit: the writer's flusher syncs the WAL (see `writer`).
    // In WAL mode NORMAL still syncs around checkpoints, so the file stays
    // consistent whatever crashes.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .db(p, "setting synchronous=NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)
        .db(p, "enabling foreign keys")?;
    // The writer's working set with many sessions (their rows, the index
    // pages appends touch) outgrows SQLite's default 2 MB page cache; a miss
    // costs a read from the OS cache on the writer thread, which every
    // write waits for. But the cache also keeps every page an append
    // *wrote* until it is full, and an append-only log writes new pages
    // every step: at 32 MiB (before issue 26) a long run's RSS grew with
    // its log — 4.5 KB a step — until 32 MiB of the database sat in it.
    // [`WRITER_CACHE_KIB`]: what appends re-touch (the tail of each
    // session's rows and indexes) fits; a page missed is one read from
    // the OS cache.
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)
        .db(p, "setting cache_size")?;
    // Each request's SAVEPOINT keeps the pages it changes in a statement
    // journal so a refusal can roll back alone. That journal spills to a
    // temporary file past 64 KiB, i.e. after a few requests of a batch, and
    // then every request pays write syscalls for it; in memory it is a
    // memcpy, and it only ever holds one request's pages.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .db(p, "setting temp_store")?;
    // Every statement a write runs stays prepared (about 15 of them).
    conn.set_prepared_statement_cache_capacity(32);
    migrate(&mut conn, p)?;
    Ok((conn, path))
}

/// A read connection: same file, no writes (`query_only`), the same busy
/// timeout (a reader waits only while another process recovers the WAL).
fn open_reader(p: &Path) -> Result<Connection> {
    let conn = Connection::open(p).db(p, "opening a read connection")?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .db(p, "setting busy_timeout")?;
    conn.pragma_update(None, "query_only", true)
        .db(p, "making a read connection query-only")?;
    Ok(conn)
}

/// Brings the schema to [`SCHEMA_VERSION`], one transaction per step, each
/// re-checking the version under the write lock (another process may be
/// migrating the same file).
fn migrate(conn: &mut Connection, p: &Path) -> Result<()> {
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db(p, "locking the database to migrate it")?;
        let app: i32 = tx
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .db(p, "application_id")?;
        let version: u32 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .db(p, "user_version")?;
        if app != 0 && app != APPLICATION_ID {
            return Err(not_ours(p, &format!("its application_id is {app:#x}")));
        }
        if app == 0 && version == 0 {
            let tables: i64 = tx
                .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
                .db(p, "inspecting the schema")?;
            if tables > 0 {
                return Err(not_ours(p, "it has tables but no Longhand schema version"));
            }
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: p.display().to_string(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let Some(step) = MIGRATIONS.get(version as usize) else {
            return Ok(());
        };
        tx.execute_batch(step).db(
            p,
            &format!("migrating the schema to version {}", version + 1),
        )?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .db(p, "application_id")?;
        tx.pragma_update(None, "user_version", version + 1)
            .db(p, "user_version")?;
        tx.commit().db(p, "committing a migration")?;
    }
}

fn not_ours(p: &Path, why: &str) -> StoreError {
    StoreError::Corrupt {
        seq: None,
        detail: format!(
            "{} is a SQLite database of another application ({why}); \
             point Longhand at another directory",
            p.display()
        ),
    }
}

fn session_row(tx: &Connection, p: &Path, session: &str) -> Result<(u64, Vec<u8>)> {
    tx.prepare_cached("SELECT last_seq, head FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.query_row([session], |r| Ok((r.get(0)?, r.get(1)?))))
        .optional()
        .db(p, "reading the session")?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("session {session}"),
        })
}

/// The session's lease row, if any.
fn lease_row(tx: &Connection, p: &Path, session: &str) -> Result<Option<LeaseRow>> {
    tx.prepare_cached(
        "SELECT owner, token, expires_ms, holder_host, holder_pid, holder_started,
             holder_machine, renewed_ms
         FROM leases WHERE session_id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([session], |r| {
            let holder = match (r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?) {
                (Some(host), Some(pid), Some(started), Some(machine)) => Some(Process {
                    host,
                    pid,
                    started,
                    machine,
                }),
                _ => None,
            };
            Ok(LeaseRow {
                owner: r.get(0)?,
                token: r.get(1)?,
                expires_ms: r.get(2)?,
                holder,
                renewed_ms: r.get(7)?,
            })
        })
    })
    .optional()
    .db(p, "reading the lease")
}

/// Reads and verifies events `from..=to` (to the end when `to` is `None`,
/// then also checking the log reaches `last_seq` and its head).
fn read_verified(
    conn: &Connection,
    p: &Path,
    session: &str,
    from: u64,
    to: Option<u64>,
) -> Result<Vec<EventRecord>> {
    let (last_seq, head) = session_row(conn, p, session)?;
    let before = |seq: u64| {
        conn.query_row(
            "SELECT checksum FROM events WHERE session_id = ?1 AND seq = ?2",
            params![session, seq],
            |r| r.get::<_, Vec<u8>>(0),
        )
        .optional()
        .db(p, "reading the event before the range")
    };
    let prev = match from.max(1) {
        1 => None,
        from => before(from - 1)?,
    };
    let Some(mut verifier) = Verifier::new(session, from, to, last_seq, head, |_| prev)? else {
        return Ok(Vec::new());
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, at_ms, type, json, checksum FROM events
             WHERE session_id = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
        )
        .db(p, "preparing the read")?;
    let mut rows = stmt
        .query(params![session, verifier.from(), verifier.to()])
        .db(p, "reading events")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().db(p, "reading events")? {
        let seq: u64 = row.get(0).db(p, "reading an event's seq")?;
        let at_ms: u64 = row.get(1).map_err(|_| corrupt(session, seq, "bad at_ms"))?;
        let kind: String = row.get(2).map_err(|_| corrupt(session, seq, "bad type"))?;
        let json = row
            .get_ref(3)
            .and_then(|v| Ok(v.as_bytes()?))
            .map_err(|_| corrupt(session, seq, "json is not text"))?;
        let checksum = row
            .get_ref(4)
            .and_then(|v| Ok(v.as_bytes()?))
            .map_err(|_| corrupt(session, seq, "checksum is not a blob"))?;
        out.push(verifier.next(seq, at_ms, &kind, json, checksum)?);
    }
    verifier.finish()?;
    Ok(out)
}

/// Stores `bytes` under `blob` unless a blob with that digest is there
/// already (then the bytes are not even handed to SQLite).
fn insert_blob(conn: &Connection, p: &Path, blob: &BlobRef, bytes: &[u8]) -> Result<()> {
    let present = conn
        .prepare_cached("SELECT 1 FROM blobs WHERE digest = ?1")
        .and_then(|mut s| s.exists([&blob.digest]))
        .db(p, "looking a blob up")?;
    if !present {
        conn.prepare_cached("INSERT INTO blobs (digest, size, bytes) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![blob.digest, blob.bytes, bytes]))
            .db(p, "storing a blob")?;
    }
    Ok(())
}

/// The body of an append, inside the writer's savepoint: check lease and
/// seq, then write the blobs, the events and the session row. A refusal
/// returns before anything is written (and the savepoint would undo it
/// anyway).
fn append_rows(
    conn: &Connection,
    ctx: &WriteCtx<'_>,
    lease: &Lease,
    expected_seq: u64,
    encoded: &[Encoded],
    blobs: &[(BlobRef, Vec<u8>)],
) -> Result<Appended> {
    let p = ctx.path;
    let sid = lease.session.as_str();
    let (last_seq, head) = session_row(conn, p, sid)?;
    check_lease(conn, p, lease)?;
    contract::check_seq(expected_seq, last_seq)?;
    for (blob, bytes) in blobs {
        insert_blob(conn, p, blob, bytes)?;
    }
    if encoded.is_empty() {
        return Ok(Appended { last_seq, at_ms: 0 });
    }
    let now = ctx.now_ms;
    let advance = contract::chain(last_seq, &head, now, encoded);
    {
        let mut insert = conn
            .prepare_cached(
                "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .db(p, "appending events")?;
        for row in &advance.rows {
            insert
                .execute(params![sid, row.seq, now, row.kind, row.json, row.checksum])
                .db(p, "appending an event")?;
        }
    }
    conn.prepare_cached(
        "UPDATE sessions SET last_seq = ?2, head = ?3, updated_ms = ?4,
                             status = coalesce(?5, status)
         WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            sid,
            advance.last_seq,
            advance.head,
            now,
            advance.status.map(SessionStatus::as_str)
        ])
    })
    .db(p, "advancing the session")?;
    Ok(Appended {
        last_seq: advance.last_seq,
        at_ms: now,
    })
}

#[async_trait]
impl Store for SqliteStore {
    async fn create(&self, agent_name: &str, created: &Event) -> Result<SessionId> {
        let enc = contract::encode_created(agent_name, created)?;
        let agent_name = agent_name.to_owned();
        // Durable at once: the caller reports the id, and someone may wait
        // on it.
        self.write(Durability::Now, enc.json.len(), move |conn, ctx| {
            let p = ctx.path;
            let now = ctx.now_ms;
            let id = SessionId::generate(now);
            let checksum = contract::link(&contract::genesis(id.as_str()), 1, now, enc.json.as_bytes());
            conn.prepare_cached(
                "INSERT INTO sessions (id, agent_name, created_ms, updated_ms, last_seq, head, status)
                 VALUES (?1, ?2, ?3, ?3, 1, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![id.as_str(), agent_name, now, checksum, SessionStatus::Created.as_str()])
            })
            .db(p, "creating a session")?;
            conn.prepare_cached(
                "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
                 VALUES (?1, 1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| s.execute(params![id.as_str(), now, enc.kind, enc.json, checksum]))
            .db(p, "writing session_created")?;
            Ok(id)
        })
        .await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.read_with(|conn, p| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, agent_name, created_ms, updated_ms, last_seq, status
                     FROM sessions ORDER BY id",
                )
                .db(p, "listing sessions")?;
            let rows = stmt
                .query_map([], summary_from_row)
                .db(p, "listing sessions")?;
            let mut out = Vec::new();
            for row in rows {
                out.push(check_summary(p, row.db(p, "listing sessions")?)?);
            }
            Ok(out)
        })
        .await
    }

    /// Every running session, orphans first ([`contract::claim_order`]);
    /// the lease sorts out who runs which.
    async fn claim_runnable(
        &self,
        _owner: &str,
        _ttl: Duration,
        _limit: usize,
        skip: &[SessionId],
    ) -> Result<Vec<SessionId>> {
        let skip: std::collections::HashSet<String> =
            skip.iter().map(|s| s.as_str().to_owned()).collect();
        let me = self.process();
        let now = self.inner.clock.now_ms();
        let rows = self
            .read_with(move |conn, p| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT s.id, s.updated_ms, l.owner, l.expires_ms, l.holder_host,
                             l.holder_pid, l.holder_started, l.holder_machine
                         FROM sessions s LEFT JOIN leases l ON l.session_id = s.id
                         WHERE s.status = 'running'",
                    )
                    .db(p, "listing runnable sessions")?;
                let rows = stmt
                    .query_map([], |r| {
                        let holder = match (r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?) {
                            (Some(host), Some(pid), Some(started), Some(machine)) => {
                                Some(Process {
                                    host,
                                    pid,
                                    started,
                                    machine,
                                })
                            }
                            _ => None,
                        };
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, u64>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, Option<u64>>(3)?,
                            holder,
                        ))
                    })
                    .db(p, "listing runnable sessions")?;
                let mut out = Vec::new();
                for row in rows {
                    out.push(row.db(p, "listing runnable sessions")?);
                }
                Ok(out)
            })
            .await?;
        let mut runnable = Vec::new();
        for (id, updated_ms, owner, expires_ms, holder) in rows {
            if skip.contains(&id) {
                continue;
            }
            let id = id.parse::<SessionId>().map_err(|_| StoreError::Corrupt {
                seq: None,
                detail: format!(
                    "{}: a session row names an id that is not one",
                    self.inner.path.display()
                ),
            })?;
            let orphaned = owner.is_some()
                && (expires_ms.is_some_and(|e| e <= now)
                    || holder::liveness(holder.as_ref(), me.as_ref()).is_dead());
            runnable.push((contract::claim_order(orphaned, updated_ms), id));
        }
        runnable.sort_by_key(|a| a.0);
        Ok(runnable.into_iter().map(|(_, id)| id).collect())
    }

    async fn summary(&self, session: &SessionId) -> Result<SessionSummary> {
        let session = session.clone();
        self.read_with(move |conn, p| {
            let row = conn
                .query_row(
                    "SELECT id, agent_name, created_ms, updated_ms, last_seq, status
                     FROM sessions WHERE id = ?1",
                    [session.as_str()],
                    summary_from_row,
                )
                .optional()
                .db(p, "reading a session")?
                .ok_or_else(|| StoreError::NotFound {
                    what: format!("session {session}"),
                })?;
            check_summary(p, row)
        })
        .await
    }

    async fn acquire_lease(
        &self,
        session: &SessionId,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        self.grant_lease(session, owner, None, ttl).await
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

    /// A heartbeat: one savepoint and two single-row statements in whatever
    /// batch is being committed, not fsynced (`Soon`). A renewal lost to a
    /// machine crash costs nothing: every worker on this machine died with
    /// it, and any `Now` write after the renewal made it durable anyway.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl = ttl_ms(ttl)?;
        let lease = lease.clone();
        self.write(Durability::Soon, 0, move |conn, ctx| {
            let p = ctx.path;
            check_lease(conn, p, &lease)?;
            let expires_ms = ctx.now_ms.saturating_add(ttl);
            conn.prepare_cached(
                "UPDATE leases SET expires_ms = ?2, renewed_ms = ?3 WHERE session_id = ?1",
            )
            .and_then(|mut s| s.execute(params![lease.session.as_str(), expires_ms, ctx.now_ms]))
            .db(p, "renewing a lease")?;
            Ok(Lease {
                expires_ms,
                taken_from: None,
                ..lease
            })
        })
        .await
    }

    /// `Soon`: a release lost to a machine crash only makes the next worker
    /// wait for the lease to expire (or take it over), as after any crash.
    async fn release(&self, lease: &Lease) -> Result<()> {
        let lease = lease.clone();
        self.write(Durability::Soon, 0, move |conn, ctx| {
            // Keep the row and its token: the next holder's token must
            // still be greater.
            conn.prepare_cached(
                "UPDATE leases SET owner = NULL, expires_ms = 0
                 WHERE session_id = ?1 AND token = ?2 AND owner = ?3",
            )
            .and_then(|mut s| s.execute(params![lease.session.as_str(), lease.token, lease.owner]))
            .db(ctx.path, "releasing a lease")?;
            Ok(())
        })
        .await
    }

    /// One savepoint in the writer's batch holds the blobs and the events,
    /// so a refused append writes no blob either.
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
        let bytes = encoded.iter().map(|e| e.json.len()).sum::<usize>()
            + blobs.iter().map(|(_, b)| b.len()).sum::<usize>();
        let lease = lease.clone();
        self.write(durability, bytes, move |conn, ctx| {
            append_rows(conn, ctx, &lease, expected_seq, &encoded, &blobs)
        })
        .await
    }

    async fn read(&self, session: &SessionId, from_seq: u64) -> Result<Vec<EventRecord>> {
        let session = session.clone();
        self.read_with(move |conn, p| read_verified(conn, p, session.as_str(), from_seq, None))
            .await
    }

    async fn latest_snapshot(&self, session: &SessionId) -> Result<Option<EventRecord>> {
        let session = session.clone();
        self.read_with(move |conn, p| {
            let sid = session.as_str();
            session_row(conn, p, sid)?;
            let seq: Option<u64> = conn
                .query_row(
                    "SELECT seq FROM events WHERE session_id = ?1 AND type = 'snapshot'
                     ORDER BY seq DESC LIMIT 1",
                    [sid],
                    |r| r.get(0),
                )
                .optional()
                .db(p, "finding the latest snapshot")?;
            let Some(seq) = seq else { return Ok(None) };
            let record = read_verified(conn, p, sid, seq, Some(seq))?
                .pop()
                .ok_or_else(|| corrupt(sid, seq, "missing"))?;
            Ok(Some(record))
        })
        .await
    }

    /// `Soon`: a blob matters only through an event that refers to it, and
    /// is committed before that event, so it is durable whenever the event
    /// is.
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef> {
        let Some((blob, bytes)) = hash_blobs(vec![bytes]).await?.pop() else {
            return Err(StoreError::Invalid("no blob to store".into()));
        };
        self.write(Durability::Soon, bytes.len(), move |conn, ctx| {
            insert_blob(conn, ctx.path, &blob, &bytes)?;
            Ok(blob)
        })
        .await
    }

    /// `Now`: whoever posts tells a person it was posted.
    async fn post_control(
        &self,
        session: &SessionId,
        kind: ControlKind,
        text: Option<String>,
        by: &str,
    ) -> Result<Control> {
        contract::check_control_text(text.as_deref())?;
        let session = session.clone();
        let by = by.to_owned();
        let bytes = text.as_ref().map_or(0, String::len);
        self.write(Durability::Now, bytes, move |conn, ctx| {
            let p = ctx.path;
            let sid = session.as_str();
            session_row(conn, p, sid)?;
            // Under the batch's write lock (`BEGIN IMMEDIATE`), so no other
            // poster, in this process or another, reads the same max.
            let id: u64 = conn
                .prepare_cached(
                    "SELECT coalesce(max(id), 0) + 1 FROM controls WHERE session_id = ?1",
                )
                .and_then(|mut s| s.query_row([sid], |r| r.get(0)))
                .db(p, "numbering a control")?;
            conn.prepare_cached(
                "INSERT INTO controls (session_id, id, kind, text, posted_ms, posted_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| s.execute(params![sid, id, kind.as_str(), text, ctx.now_ms, by]))
            .db(p, "posting a control")?;
            Ok(Control {
                id,
                kind,
                text,
                posted_ms: ctx.now_ms,
                by,
                handled_ms: None,
            })
        })
        .await
    }

    async fn controls(&self, session: &SessionId, after_id: u64) -> Result<Vec<Control>> {
        let session = session.clone();
        self.read_with(move |conn, p| {
            let sid = session.as_str();
            session_row(conn, p, sid)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, kind, text, posted_ms, posted_by, handled_ms FROM controls
                     WHERE session_id = ?1 AND id > ?2 ORDER BY id",
                )
                .db(p, "reading controls")?;
            let mut rows = stmt
                .query(params![sid, after_id])
                .db(p, "reading controls")?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().db(p, "reading controls")? {
                out.push(control_from_row(sid, row)?);
            }
            Ok(out)
        })
        .await
    }

    /// `Soon`: the log, not this mark, says what was applied (see the
    /// trait), so a mark lost to a machine crash costs nothing.
    async fn settle_control(&self, lease: &Lease, id: u64) -> Result<()> {
        let lease = lease.clone();
        self.write(Durability::Soon, 0, move |conn, ctx| {
            let p = ctx.path;
            let sid = lease.session.as_str();
            session_row(conn, p, sid)?;
            check_lease(conn, p, &lease)?;
            let changed = conn
                .prepare_cached(
                    "UPDATE controls SET handled_ms = coalesce(handled_ms, ?3)
                     WHERE session_id = ?1 AND id = ?2",
                )
                .and_then(|mut s| s.execute(params![sid, id, ctx.now_ms]))
                .db(p, "settling a control")?;
            if changed == 0 {
                return Err(StoreError::NotFound {
                    what: format!("control {id} of session {sid}"),
                });
            }
            Ok(())
        })
        .await
    }

    async fn forget_snapshot_blobs(&self, lease: &Lease, blobs: &[BlobRef]) -> Result<u64> {
        for blob in blobs {
            contract::check_blob_ref(blob)?;
        }
        if blobs.is_empty() {
            return Ok(0);
        }
        let lease = lease.clone();
        let digests: Vec<String> = blobs.iter().map(|b| b.digest.clone()).collect();
        self.write(Durability::Soon, 0, move |conn, ctx| {
            let p = ctx.path;
            session_row(conn, p, lease.session.as_str())?;
            check_lease(conn, p, &lease)?;
            let mut deleted = 0;
            let mut stmt = conn
                .prepare_cached("DELETE FROM blobs WHERE digest = ?1")
                .db(p, "forgetting snapshot blobs")?;
            for digest in &digests {
                deleted += stmt.execute([digest]).db(p, "forgetting snapshot blobs")? as u64;
            }
            Ok(deleted)
        })
        .await
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        contract::check_blob_ref(blob)?;
        let wanted = blob.clone();
        self.read_with(move |conn, p| {
            let bytes: Vec<u8> = conn
                .query_row(
                    "SELECT bytes FROM blobs WHERE digest = ?1",
                    [&wanted.digest],
                    |r| r.get(0),
                )
                .optional()
                .db(p, "reading a blob")?
                .ok_or_else(|| StoreError::NotFound {
                    what: format!("blob {}", wanted.digest),
                })?;
            contract::verify_blob(&p.display().to_string(), &wanted, &bytes)?;
            Ok(bytes)
        })
        .await
    }
}

/// `Control` from a `controls` row: `id, kind, text, posted_ms, posted_by,
/// handled_ms`.
fn control_from_row(session: &str, r: &rusqlite::Row<'_>) -> Result<Control> {
    let bad = |what: &str| StoreError::Corrupt {
        seq: None,
        detail: format!("session {session}: a control row has {what}"),
    };
    let id: u64 = r.get(0).map_err(|_| bad("a bad id"))?;
    let kind: String = r.get(1).map_err(|_| bad("a bad kind"))?;
    let kind = ControlKind::parse(&kind).ok_or_else(|| {
        bad(&format!(
            "the unknown kind {kind:?} (written by a newer Longhand?)"
        ))
    })?;
    Ok(Control {
        id,
        kind,
        text: r.get(2).map_err(|_| bad("a bad text"))?,
        posted_ms: r.get(3).map_err(|_| bad("a bad posted_ms"))?,
        by: r.get(4).map_err(|_| bad("a bad posted_by"))?,
        handled_ms: r.get(5).map_err(|_| bad("a bad handled_ms"))?,
    })
}

fn check_lease(tx: &Connection, p: &Path, lease: &Lease) -> Result<()> {
    contract::check_lease(lease_row(tx, p, lease.session.as_str())?.as_ref(), lease)
}

type SummaryRow = (String, String, u64, u64, u64, String);

fn summary_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SummaryRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn check_summary(p: &Path, row: SummaryRow) -> Result<SessionSummary> {
    let (id, agent_name, created_ms, updated_ms, last_seq, status) = row;
    let bad = |what: String| StoreError::Corrupt {
        seq: None,
        detail: format!("{}: session row {id:?}: {what}", p.display()),
    };
    let status =
        SessionStatus::parse(&status).ok_or_else(|| bad(format!("unknown status {status:?}")))?;
    let parsed = id
        .parse::<SessionId>()
        .map_err(|_| bad("not a session id".into()))?;
    Ok(SessionSummary {
        id: parsed,
        agent_name,
        created_ms,
        updated_ms,
        last_seq,
        status,
    })
}

#[cfg(test)]
mod tests;
