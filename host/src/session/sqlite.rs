//! The embedded default backend: one SQLite file, `<dir>/longhand.db`.
//!
//! Decisions, and why:
//! - **WAL with `synchronous=FULL`**: a commit is fsynced before `append`
//!   returns, because the loop relies on an event being durable before it
//!   acts on it (`tool_started` before the tool runs). WAL lets readers (the
//!   CLI's `list`, a web page) run beside the writer.
//! - **`BEGIN IMMEDIATE`** for every write: the write lock is taken before
//!   the lease and seq are checked, so two processes on one file can never
//!   both pass the checks (no lock-upgrade deadlocks either); `busy_timeout`
//!   makes the loser wait instead of failing.
//! - **One connection per store, behind a mutex, used from
//!   `spawn_blocking`**: SQLite serialises writers anyway, and a single
//!   connection keeps the code obviously correct. Several processes (or
//!   several `SqliteStore`s) may open the same file.
//! - **Checksum chain**: each event row stores
//!   `sha256(prev_checksum || seq || at_ms || json)`, seeded per session, and
//!   the session row stores the head. A damaged or edited row, a gap, or a
//!   lost tail is reported as [`StoreError::Corrupt`] naming the seq. SQLite's
//!   own journal already makes a torn transaction roll back whole; the chain
//!   is for damage beneath SQLite and for hands that edit the file. It is not
//!   a signature: someone who can rewrite the file can rewrite the chain.
//! - **Append-only in the schema too**: triggers abort any `UPDATE` or
//!   `DELETE` on `events`.
//! - **Migrations by `PRAGMA user_version`**: [`MIGRATIONS`] is the list;
//!   a database newer than the list is refused ([`StoreError::TooNew`]), a
//!   SQLite file of another application (its `application_id`) is refused.
//!
//! This module owns the SQL and nothing else: no event semantics beyond
//! "`session_created` is seq 1" and the lifecycle status.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};

use super::event::{BlobRef, Event, EventRecord, MAX_EVENT_JSON, SessionStatus};
use super::store::{
    Clock, Lease, Result, SessionId, SessionSummary, Store, StoreError, SystemClock,
};

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
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The SQLite session store. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Grant `owner` the lease of `session`: renewed in place when `owner`
    /// holds it already, taken when it is free or expired, or — with
    /// `dead_owner` — taken from that holder even though it has not expired
    /// (the caller proved it dead). A new holder always gets a greater token.
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
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .db(p, "taking a lease")?;
            session_row(&tx, p, session.as_str())?;
            let now = inner.clock.now_ms();
            let expires_ms = now.saturating_add(ttl);
            let token = match lease_row(&tx, p, session.as_str())? {
                Some((Some(holder), token, exp)) if exp > now && holder == owner => token,
                Some((Some(holder), token, exp))
                    if exp > now && dead_owner.as_deref() == Some(holder.as_str()) =>
                {
                    token + 1
                }
                Some((Some(holder), _, exp)) if exp > now => {
                    return Err(StoreError::LeaseHeld { owner: holder, expires_ms: exp });
                }
                Some((_, token, _)) => token + 1,
                None => 1,
            };
            tx.execute(
                "INSERT INTO leases (session_id, owner, token, expires_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session_id) DO UPDATE
                 SET owner = excluded.owner, token = excluded.token, expires_ms = excluded.expires_ms",
                params![session.as_str(), owner, token, expires_ms],
            )
            .db(p, "writing the lease")?;
            tx.commit().db(p, "committing the lease")?;
            Ok(Lease { session, owner, token, expires_ms })
        })
        .await
    }

    /// Opens (creating if needed) `<dir>/longhand.db`, creating `dir` too,
    /// and migrates it to [`SCHEMA_VERSION`]. Leases expire by the system
    /// clock.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with_clock(dir, Arc::new(SystemClock)).await
    }

    /// [`SqliteStore::open`] with another clock (tests, simulations).
    pub async fn open_with_clock(dir: impl AsRef<Path>, clock: Arc<dyn Clock>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        let (conn, path) = tokio::task::spawn_blocking(move || open_blocking(&dir))
            .await
            .map_err(join_error)??;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                conn: Mutex::new(conn),
                clock,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Inner) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves no transaction open
            // (rusqlite rolls back on drop), so the connection is usable.
            let mut conn = inner.conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut conn, &inner)
        })
        .await
        .map_err(join_error)?
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
    conn.pragma_update(None, "synchronous", "FULL")
        .db(p, "setting synchronous=FULL")?;
    conn.pragma_update(None, "foreign_keys", true)
        .db(p, "enabling foreign keys")?;
    migrate(&mut conn, p)?;
    Ok((conn, path))
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

/// The checksum every session's chain starts from, so rows cannot be moved
/// between sessions unnoticed.
fn genesis(session: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"longhand/session/v1\0")
        .chain_update(session)
        .finalize()
        .into()
}

fn link(prev: &[u8], seq: u64, at_ms: u64, json: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update(prev)
        .chain_update(seq.to_be_bytes())
        .chain_update(at_ms.to_be_bytes())
        .chain_update(json)
        .finalize()
        .into()
}

fn corrupt(session: &str, seq: u64, what: &str) -> StoreError {
    StoreError::Corrupt {
        seq: Some(seq),
        detail: format!(
            "session {session}, event {seq}: {what}; events before it verified. \
             Restore the database from a backup, or inspect it before going on"
        ),
    }
}

/// An event serialised for storage, prepared before taking the lock.
struct Encoded {
    kind: &'static str,
    json: String,
    status: Option<SessionStatus>,
}

fn encode(event: &Event) -> Result<Encoded> {
    let json = serde_json::to_string(event).map_err(|e| {
        StoreError::Invalid(format!("{} event does not serialise: {e}", event.kind()))
    })?;
    if json.len() > MAX_EVENT_JSON {
        return Err(StoreError::Invalid(format!(
            "{} event is {} bytes of JSON, over the {MAX_EVENT_JSON}-byte limit; \
             put large payloads in blobs",
            event.kind(),
            json.len()
        )));
    }
    Ok(Encoded {
        kind: event.kind(),
        json,
        status: event.status_after(),
    })
}

fn session_row(tx: &Connection, p: &Path, session: &str) -> Result<(u64, Vec<u8>)> {
    tx.query_row(
        "SELECT last_seq, head FROM sessions WHERE id = ?1",
        [session],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .db(p, "reading the session")?
    .ok_or_else(|| StoreError::NotFound {
        what: format!("session {session}"),
    })
}

/// `(owner, token, expires_ms)` of the session's lease row, if any.
fn lease_row(
    tx: &Connection,
    p: &Path,
    session: &str,
) -> Result<Option<(Option<String>, u64, u64)>> {
    tx.query_row(
        "SELECT owner, token, expires_ms FROM leases WHERE session_id = ?1",
        [session],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .optional()
    .db(p, "reading the lease")
}

fn ttl_ms(ttl: Duration) -> Result<u64> {
    match u64::try_from(ttl.as_millis()) {
        Ok(0) => Err(StoreError::Invalid(
            "a lease TTL must be at least 1 ms".into(),
        )),
        Ok(ms) => Ok(ms),
        Err(_) => Err(StoreError::Invalid("lease TTL too large".into())),
    }
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
    let from = from.max(1);
    let (last_seq, head) = session_row(conn, p, session)?;
    let to_seq = to.unwrap_or(last_seq).min(last_seq);
    if from > to_seq {
        return Ok(Vec::new());
    }
    let mut prev: Vec<u8> = if from == 1 {
        genesis(session).to_vec()
    } else {
        conn.query_row(
            "SELECT checksum FROM events WHERE session_id = ?1 AND seq = ?2",
            params![session, from - 1],
            |r| r.get(0),
        )
        .optional()
        .db(p, "reading the event before the range")?
        .ok_or_else(|| corrupt(session, from - 1, "missing"))?
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, at_ms, type, json, checksum FROM events
             WHERE session_id = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
        )
        .db(p, "preparing the read")?;
    let mut rows = stmt
        .query(params![session, from, to_seq])
        .db(p, "reading events")?;
    let mut out = Vec::new();
    let mut want = from;
    while let Some(row) = rows.next().db(p, "reading events")? {
        let seq: u64 = row.get(0).db(p, "reading an event's seq")?;
        if seq != want {
            return Err(corrupt(session, want, "missing (the log has a gap)"));
        }
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
        if link(&prev, seq, at_ms, json).as_slice() != checksum {
            return Err(corrupt(
                session,
                seq,
                "checksum mismatch (the row was damaged or edited)",
            ));
        }
        let event: Event = serde_json::from_slice(json).map_err(|e| {
            corrupt(
                session,
                seq,
                &format!("json does not decode ({e}; written by a newer Longhand?)"),
            )
        })?;
        if event.kind() != kind {
            return Err(corrupt(
                session,
                seq,
                &format!("type column {kind:?} disagrees with the json"),
            ));
        }
        if (seq == 1) != matches!(event, Event::SessionCreated { .. }) {
            return Err(corrupt(
                session,
                seq,
                "session_created must be exactly event 1",
            ));
        }
        prev = checksum.to_vec();
        out.push(EventRecord { seq, at_ms, event });
        want = seq + 1;
    }
    if want <= to_seq {
        return Err(corrupt(
            session,
            want,
            &format!("missing (the session records {last_seq} events; the log was cut short)"),
        ));
    }
    if to.is_none() && prev != head {
        return Err(corrupt(
            session,
            last_seq,
            "does not match the session's head checksum",
        ));
    }
    Ok(out)
}

#[async_trait]
impl Store for SqliteStore {
    async fn create(&self, agent_name: &str, created: &Event) -> Result<SessionId> {
        match created {
            Event::SessionCreated {
                agent_name: named, ..
            } if named == agent_name => {}
            Event::SessionCreated {
                agent_name: named, ..
            } => {
                return Err(StoreError::Invalid(format!(
                    "session_created names agent {named:?}, not {agent_name:?}"
                )));
            }
            other => {
                return Err(StoreError::Invalid(format!(
                    "a session starts with session_created, not {}",
                    other.kind()
                )));
            }
        }
        let enc = encode(created)?;
        let agent_name = agent_name.to_owned();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
            let now = inner.clock.now_ms();
            let id = SessionId::generate(now);
            let checksum = link(&genesis(id.as_str()), 1, now, enc.json.as_bytes());
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .db(p, "creating a session")?;
            tx.execute(
                "INSERT INTO sessions (id, agent_name, created_ms, updated_ms, last_seq, head, status)
                 VALUES (?1, ?2, ?3, ?3, 1, ?4, ?5)",
                params![id.as_str(), agent_name, now, checksum, SessionStatus::Created.as_str()],
            )
            .db(p, "creating a session")?;
            tx.execute(
                "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
                 VALUES (?1, 1, ?2, ?3, ?4, ?5)",
                params![id.as_str(), now, enc.kind, enc.json, checksum],
            )
            .db(p, "writing session_created")?;
            tx.commit().db(p, "committing a new session")?;
            Ok(id)
        })
        .await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.with_conn(|conn, inner| {
            let p = inner.path.as_path();
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

    async fn summary(&self, session: &SessionId) -> Result<SessionSummary> {
        let session = session.clone();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
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

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl = ttl_ms(ttl)?;
        let lease = lease.clone();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .db(p, "renewing a lease")?;
            check_lease(&tx, p, &lease)?;
            let expires_ms = inner.clock.now_ms().saturating_add(ttl);
            tx.execute(
                "UPDATE leases SET expires_ms = ?2 WHERE session_id = ?1",
                params![lease.session.as_str(), expires_ms],
            )
            .db(p, "renewing a lease")?;
            tx.commit().db(p, "committing the lease")?;
            Ok(Lease {
                expires_ms,
                ..lease
            })
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<()> {
        let lease = lease.clone();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
            // Keep the row and its token: the next holder's token must
            // still be greater.
            conn.execute(
                "UPDATE leases SET owner = NULL, expires_ms = 0
                 WHERE session_id = ?1 AND token = ?2 AND owner = ?3",
                params![lease.session.as_str(), lease.token, lease.owner],
            )
            .db(p, "releasing a lease")?;
            Ok(())
        })
        .await
    }

    async fn append(
        &self,
        session: &SessionId,
        lease: &Lease,
        expected_seq: u64,
        events: &[Event],
    ) -> Result<u64> {
        if lease.session != *session {
            return Err(StoreError::Invalid(format!(
                "lease is for session {}, not {session}",
                lease.session
            )));
        }
        let mut encoded = Vec::with_capacity(events.len());
        for event in events {
            if matches!(event, Event::SessionCreated { .. }) {
                return Err(StoreError::Invalid(
                    "session_created is written by create, never appended".into(),
                ));
            }
            encoded.push(encode(event)?);
        }
        let lease = lease.clone();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
            let sid = lease.session.as_str();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .db(p, "appending events")?;
            let (last_seq, head) = session_row(&tx, p, sid)?;
            check_lease(&tx, p, &lease)?;
            if expected_seq != last_seq + 1 {
                return Err(StoreError::SeqConflict {
                    expected: expected_seq,
                    actual: last_seq + 1,
                });
            }
            if encoded.is_empty() {
                return Ok(last_seq);
            }
            let now = inner.clock.now_ms();
            let mut prev = head;
            let mut seq = last_seq;
            let mut status = None;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .db(p, "appending events")?;
                for enc in &encoded {
                    seq += 1;
                    let checksum = link(&prev, seq, now, enc.json.as_bytes());
                    insert
                        .execute(params![sid, seq, now, enc.kind, enc.json, checksum])
                        .db(p, "appending an event")?;
                    prev = checksum.to_vec();
                    status = enc.status.or(status);
                }
            }
            tx.execute(
                "UPDATE sessions SET last_seq = ?2, head = ?3, updated_ms = ?4,
                                     status = coalesce(?5, status)
                 WHERE id = ?1",
                params![sid, seq, prev, now, status.map(SessionStatus::as_str)],
            )
            .db(p, "advancing the session")?;
            // With WAL and synchronous=FULL the commit is fsynced: durable
            // when this returns.
            tx.commit().db(p, "committing events")?;
            Ok(seq)
        })
        .await
    }

    async fn read(&self, session: &SessionId, from_seq: u64) -> Result<Vec<EventRecord>> {
        let session = session.clone();
        self.with_conn(move |conn, inner| {
            read_verified(conn, &inner.path, session.as_str(), from_seq, None)
        })
        .await
    }

    async fn latest_snapshot(&self, session: &SessionId) -> Result<Option<EventRecord>> {
        let session = session.clone();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
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

    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef> {
        self.with_conn(move |conn, inner| {
            let blob = BlobRef::of(&bytes);
            conn.execute(
                "INSERT INTO blobs (digest, size, bytes) VALUES (?1, ?2, ?3)
                 ON CONFLICT (digest) DO NOTHING",
                params![blob.digest, blob.bytes, bytes],
            )
            .db(&inner.path, "storing a blob")?;
            Ok(blob)
        })
        .await
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>> {
        if !blob.is_well_formed() {
            return Err(StoreError::Invalid(format!(
                "{:?} is not a sha256 digest",
                blob.digest
            )));
        }
        let wanted = blob.clone();
        self.with_conn(move |conn, inner| {
            let p = inner.path.as_path();
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
            if BlobRef::of(&bytes) != wanted {
                return Err(StoreError::Corrupt {
                    seq: None,
                    detail: format!(
                        "{}: blob {} does not match its digest and length; \
                         restore the database from a backup",
                        p.display(),
                        wanted
                    ),
                });
            }
            Ok(bytes)
        })
        .await
    }
}

/// Fails with [`StoreError::Fenced`] unless `lease` is the session's current
/// lease (same token, not released).
fn check_lease(tx: &Connection, p: &Path, lease: &Lease) -> Result<()> {
    match lease_row(tx, p, lease.session.as_str())? {
        Some((Some(owner), token, _)) if token == lease.token && owner == lease.owner => Ok(()),
        Some((Some(_), token, _)) => Err(StoreError::Fenced {
            token: lease.token,
            current: Some(token),
        }),
        _ => Err(StoreError::Fenced {
            token: lease.token,
            current: None,
        }),
    }
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
