//! The memory bank: what must outlive a session, in its own SQLite file
//! (default `<data dir>/memory.db`, [`DB_FILE`]), searched with FTS5.
//!
//! This module owns that file and nothing else: it never opens the session
//! store, and it knows nothing of grants or events. The loop decides which
//! scopes a session may read and write, puts [`MemoryBank::search`] results
//! into fresh contexts, records each write as an event and calls
//! [`MemoryBank::mark_used`]; the CLI lists, searches, shows and forgets.
//!
//! Decisions, and why:
//! - **Scopes are names, filters are explicit.** An entry belongs to one
//!   scope (`agent:code-audit`, `project:foo`, `user:alice`). Reads take the
//!   list of scopes to look in, and an empty list finds nothing: a session
//!   granted no scope reads nothing, whatever the caller forgot. The CLI
//!   lists every scope with [`MemoryBank::scopes`] when given none.
//! - **A superseding entry must be in the same scope** as the one it
//!   replaces, so a writer granted one scope cannot hide entries of another.
//!   Replaced entries leave search and list but stay readable with
//!   [`MemoryBank::get`]; only the newest of a chain can be superseded.
//! - **Search is words, never FTS5 syntax** ([`query`]): the text comes
//!   from a model. Ranked by bm25 with tags weighing twice the text; the
//!   `porter` stemmer lets `deploys` find `deployment`. A text without a
//!   word finds nothing (use [`MemoryBank::list`] for the newest).
//! - **Forget keeps a tombstone without text**: the row stays with its id,
//!   scope, provenance, links and `used_by`, while text and tags are erased
//!   from the row and the index. Forgetting is how an operator removes a
//!   wrong or sensitive memory, and then the first question is which
//!   sessions it reached: the tombstone answers it, and `show` says
//!   "forgotten" instead of "no such id". To keep the erased words off the
//!   disk too, the connection runs with `secure_delete`, the FTS index is
//!   merged (`optimize`, so no old segment keeps them) and the WAL is
//!   checkpointed. A backup, or a session log that recorded the text, is
//!   beyond this module.
//! - **`used_by` is bounded**: per entry, the [`MAX_USED_BY`] sessions that
//!   used it most recently, each with a count, plus a total `uses`.
//! - **Two processes, one file**: WAL, a busy timeout, and every write in a
//!   `BEGIN IMMEDIATE` transaction (the write lock first, so two writers
//!   never deadlock upgrading a read lock).
//! - **Sync API** behind a `Mutex<Connection>`: every operation is a few
//!   small statements; the async loop calls it from `spawn_blocking`.

mod query;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use longhand_session::now_ms;

pub use query::MAX_TERMS;

/// The bank's file name inside the data directory.
pub const DB_FILE: &str = "memory.db";

/// Longest entry text, in bytes (8 KiB). A memory is a fact or a lesson,
/// put into many contexts; a document belongs in a file or a blob.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;

/// Most tags on one entry.
pub const MAX_TAGS: usize = 16;

/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;

/// Longest scope name (and session id), in characters.
pub const MAX_NAME_CHARS: usize = 128;

/// Sessions remembered per entry in `used_by`, most recent first; older
/// ones are dropped (the total stays in `uses`).
pub const MAX_USED_BY: usize = 64;

/// Most entries one `search` or `list` returns; a larger limit is lowered
/// to it.
pub const MAX_LIMIT: usize = 1000;

/// `PRAGMA application_id` of a memory bank: "LNGM".
const APPLICATION_ID: i32 = 0x4C4E_474D;

/// How long a write waits for another process's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Schema migrations: `MIGRATIONS[i]` takes the schema from version `i` to
/// `i + 1`. Append only.
const MIGRATIONS: &[&str] = &[r#"
    CREATE TABLE memories (
        n              INTEGER PRIMARY KEY,
        id             TEXT NOT NULL UNIQUE,
        scope          TEXT NOT NULL,
        text           TEXT NOT NULL,
        tags           TEXT NOT NULL,   -- space-separated (tags hold no space)
        source_session TEXT,
        source_seq     INTEGER,
        created_ms     INTEGER NOT NULL,
        updated_ms     INTEGER NOT NULL,
        supersedes     TEXT,
        superseded_by  TEXT,
        forgotten_ms   INTEGER,
        uses           INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX memories_by_scope ON memories (scope, n);
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, tags,
        content = 'memories', content_rowid = 'n',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text, tags) VALUES (new.n, new.text, new.tags);
    END;
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, tags)
            VALUES ('delete', old.n, old.text, old.tags);
    END;
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, tags ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, tags)
            VALUES ('delete', old.n, old.text, old.tags);
        INSERT INTO memories_fts (rowid, text, tags) VALUES (new.n, new.text, new.tags);
    END;
    CREATE TABLE memory_uses (
        memory   INTEGER NOT NULL REFERENCES memories (n),
        session  TEXT NOT NULL,
        count    INTEGER NOT NULL,
        last_ms  INTEGER NOT NULL,
        recency  INTEGER NOT NULL,     -- per entry, larger is more recent
        PRIMARY KEY (memory, session)
    ) WITHOUT ROWID;
"#];

/// What went wrong, and who acts on it.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The input breaks a rule (a scope name, an empty or oversized text,
    /// too many tags, a bad supersede). Nothing was written. Report it to
    /// whoever wrote the input — the model as a tool error, the operator as
    /// a usage error; the same input fails again.
    #[error("{what}")]
    Invalid {
        /// What is wrong, in a sentence that says what to do instead.
        what: String,
    },
    /// No entry has this id (including the one a new entry says it
    /// supersedes). Report it like [`MemoryError::Invalid`].
    #[error("no memory has id {id:?}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The file is not a memory bank this version can use (another
    /// application's database, or a newer schema). A person looks.
    #[error("{path} is not a memory bank this version can use: {why}")]
    Unusable {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// SQLite failed: I/O, a full disk, a lock held past the busy timeout,
    /// a damaged file. Abort the operation; a retry helps only if another
    /// process held the lock.
    #[error("memory bank: {context}")]
    Db {
        /// What the bank was doing.
        context: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The bank's directory could not be created.
    #[error("memory bank: {context}")]
    Io {
        /// What the bank was doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, MemoryError>;

fn invalid(what: impl Into<String>) -> MemoryError {
    MemoryError::Invalid { what: what.into() }
}

trait DbContext<T> {
    fn db(self, context: &str) -> Result<T>;
}

impl<T> DbContext<T> for rusqlite::Result<T> {
    fn db(self, context: &str) -> Result<T> {
        self.map_err(|source| MemoryError::Db {
            context: context.to_owned(),
            source,
        })
    }
}

/// Where an entry came from: the session and the seq of its event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySource {
    /// The session id.
    pub session: String,
    /// The seq of the event that wrote it (e.g. the tool call).
    pub seq: u64,
}

/// An entry to write. Defaults: no tags, no source, supersedes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewMemory {
    /// The scope: 1 to 128 characters of `A-Z a-z 0-9 . _ : / -`.
    pub scope: String,
    /// The text: not blank, at most [`MAX_TEXT_BYTES`] bytes.
    pub text: String,
    /// Up to [`MAX_TAGS`] tags, each 1 to [`MAX_TAG_CHARS`] characters of
    /// the scope alphabet; duplicates are dropped.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The session and event that wrote it.
    #[serde(default)]
    pub source: Option<MemorySource>,
    /// The id of an entry of the same scope that this one replaces.
    #[serde(default)]
    pub supersedes: Option<String>,
}

/// One session's use of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// The session id.
    pub session: String,
    /// How many times the entry was put into one of its contexts.
    pub count: u64,
    /// When it last was, in ms since the Unix epoch.
    pub last_ms: u64,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// `m-` and a ULID.
    pub id: String,
    /// The scope it belongs to.
    pub scope: String,
    /// The text; empty once forgotten.
    pub text: String,
    /// The tags; empty once forgotten.
    pub tags: Vec<String>,
    /// The session and event that wrote it, when known.
    pub source: Option<MemorySource>,
    /// Written, in ms since the Unix epoch.
    pub created_ms: u64,
    /// Last changed (superseded, forgotten), in ms since the Unix epoch.
    pub updated_ms: u64,
    /// The entry this one replaced.
    pub supersedes: Option<String>,
    /// The entry that replaced this one; such an entry is hidden from
    /// search and list.
    pub superseded_by: Option<String>,
    /// When it was forgotten; such an entry is a tombstone.
    pub forgotten_ms: Option<u64>,
    /// Times it was put into a context, over all sessions.
    pub uses: u64,
    /// The most recent [`MAX_USED_BY`] sessions that used it, newest first.
    pub used_by: Vec<MemoryUse>,
}

impl Memory {
    /// Whether search and list show it: neither superseded nor forgotten.
    pub fn is_current(&self) -> bool {
        self.superseded_by.is_none() && self.forgotten_ms.is_none()
    }
}

/// Checks a scope name: 1 to [`MAX_NAME_CHARS`] characters of
/// `A-Z a-z 0-9 . _ : / -`.
pub fn validate_scope(scope: &str) -> Result<()> {
    validate_name("scope", scope, MAX_NAME_CHARS)
}

fn validate_name(what: &str, name: &str, max: usize) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-');
    if name.is_empty() || name.len() > max || !name.chars().all(ok_char) {
        return Err(invalid(format!(
            "{what} {:?} must be 1 to {max} characters of A-Z a-z 0-9 . _ : / -",
            cut(name, 80)
        )));
    }
    Ok(())
}

/// At most `max` characters of `text`, for quoting bad input in an error.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Validates `new` and returns its tags, deduplicated, in order.
fn validate(new: &NewMemory) -> Result<Vec<String>> {
    validate_scope(&new.scope)?;
    if new.text.trim().is_empty() {
        return Err(invalid("a memory's text must not be empty"));
    }
    if new.text.len() > MAX_TEXT_BYTES {
        return Err(invalid(format!(
            "a memory's text is {} bytes, over the limit of {MAX_TEXT_BYTES}: \
             keep the fact, and put documents in files",
            new.text.len()
        )));
    }
    let mut tags: Vec<String> = Vec::new();
    for tag in &new.tags {
        validate_name("tag", tag, MAX_TAG_CHARS)?;
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(invalid(format!(
            "a memory has {} tags, over the limit of {MAX_TAGS}",
            tags.len()
        )));
    }
    if let Some(source) = &new.source {
        validate_name("source session", &source.session, MAX_NAME_CHARS)?;
        if i64::try_from(source.seq).is_err() {
            return Err(invalid(format!(
                "source seq {} is out of range",
                source.seq
            )));
        }
    }
    Ok(tags)
}

fn new_id(now_ms: u64) -> String {
    let mut random = [0u8; 16];
    if getrandom::fill(&mut random).is_err() {
        // As SessionId::generate: without OS randomness, a hash of the time,
        // the process and a per-process counter.
        use std::hash::{BuildHasher, RandomState};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let h = RandomState::new().hash_one((now_ms, std::process::id(), n));
        random[..8].copy_from_slice(&h.to_le_bytes());
        random[8..].copy_from_slice(&n.to_le_bytes());
    }
    format!(
        "m-{}",
        ulid::Ulid::from_parts(now_ms, u128::from_le_bytes(random))
    )
}

/// The columns [`read_row`] reads, in its order.
const COLUMNS: &str = "m.n, m.id, m.scope, m.text, m.tags, m.source_session, m.source_seq, \
     m.created_ms, m.updated_ms, m.supersedes, m.superseded_by, m.forgotten_ms, m.uses";

/// A row of [`COLUMNS`]: its `n` and the entry without `used_by`.
fn read_row(row: &Row<'_>) -> rusqlite::Result<(i64, Memory)> {
    let tags: String = row.get(4)?;
    let session: Option<String> = row.get(5)?;
    let seq: Option<u64> = row.get(6)?;
    Ok((
        row.get(0)?,
        Memory {
            id: row.get(1)?,
            scope: row.get(2)?,
            text: row.get(3)?,
            tags: tags.split_whitespace().map(str::to_owned).collect(),
            source: session.map(|session| MemorySource {
                session,
                seq: seq.unwrap_or(0),
            }),
            created_ms: row.get(7)?,
            updated_ms: row.get(8)?,
            supersedes: row.get(9)?,
            superseded_by: row.get(10)?,
            forgotten_ms: row.get(11)?,
            uses: row.get(12)?,
            used_by: Vec::new(),
        },
    ))
}

/// A memory bank on one SQLite file (or in memory). `Send + Sync`; every
/// method blocks for a few statements.
#[derive(Debug)]
pub struct MemoryBank {
    conn: Mutex<Connection>,
}

impl MemoryBank {
    /// Opens (creating it and its directory if needed) the bank at `path`,
    /// e.g. `<data dir>/`[`DB_FILE`]. Another process may have it open.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| MemoryError::Io {
                context: format!("creating {}", dir.display()),
                source,
            })?;
        }
        let context = |what: &str| format!("{}: {what}", path.display());
        let conn = Connection::open(path).db(&context("opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .db(&context("setting busy_timeout"))?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .db(&context("switching to WAL"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(MemoryError::Unusable {
                path: path.display().to_string(),
                why: format!("SQLite refused WAL mode (got {mode})"),
            });
        }
        // A memory is not worth an fsync per write; WAL with NORMAL still
        // keeps the file consistent through a crash.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .db(&context("setting synchronous"))?;
        Self::setup(conn, &path.display().to_string())
    }

    /// A bank that lives as long as this value: for tests and for runs that
    /// must not remember anything.
    pub fn open_in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory().db("opening an in-memory bank")?;
        Self::setup(conn, ":memory:")
    }

    fn setup(mut conn: Connection, path: &str) -> Result<Self> {
        conn.pragma_update(None, "foreign_keys", true)
            .db("enabling foreign keys")?;
        // Freed space is overwritten, so forgotten text leaves the file.
        conn.pragma_update(None, "secure_delete", true)
            .db("enabling secure_delete")?;
        migrate(&mut conn, path)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done write: every
        // write is a transaction, rolled back when dropped.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a new entry and returns it. With `supersedes`, the named entry
    /// (same scope, current) is marked replaced in the same transaction.
    pub fn remember(&self, new: NewMemory) -> Result<Memory> {
        let tags = validate(&new)?;
        let now = now_ms();
        let id = new_id(now);
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("starting a write")?;
        if let Some(old_id) = &new.supersedes {
            let old = tx
                .query_row(
                    "SELECT scope, superseded_by, forgotten_ms FROM memories WHERE id = ?1",
                    [old_id],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<String>>(1)?,
                            r.get::<_, Option<u64>>(2)?,
                        ))
                    },
                )
                .optional()
                .db("reading the superseded entry")?;
            let Some((scope, superseded_by, forgotten)) = old else {
                return Err(MemoryError::NotFound { id: old_id.clone() });
            };
            if scope != new.scope {
                return Err(invalid(format!(
                    "{old_id} is in scope {scope}, not {}: an entry can only supersede \
                     one of its own scope",
                    new.scope
                )));
            }
            if let Some(newer) = superseded_by {
                return Err(invalid(format!(
                    "{old_id} was already superseded by {newer}: supersede that one"
                )));
            }
            if forgotten.is_some() {
                return Err(invalid(format!(
                    "{old_id} was forgotten: write a new entry instead"
                )));
            }
            tx.execute(
                "UPDATE memories SET superseded_by = ?1, updated_ms = ?2 WHERE id = ?3",
                params![id, now, old_id],
            )
            .db("marking the superseded entry")?;
        }
        let (session, seq) = match &new.source {
            Some(s) => (Some(s.session.as_str()), Some(s.seq)),
            None => (None, None),
        };
        tx.execute(
            "INSERT INTO memories (id, scope, text, tags, source_session, source_seq, \
             created_ms, updated_ms, supersedes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)",
            params![
                id,
                new.scope,
                new.text,
                tags.join(" "),
                session,
                seq,
                now,
                new.supersedes
            ],
        )
        .db("writing the entry")?;
        tx.commit().db("committing the entry")?;
        Ok(Memory {
            id,
            scope: new.scope,
            text: new.text,
            tags,
            source: new.source,
            created_ms: now,
            updated_ms: now,
            supersedes: new.supersedes,
            superseded_by: None,
            forgotten_ms: None,
            uses: 0,
            used_by: Vec::new(),
        })
    }

    /// The current entries of `scopes` that match any word of `query`, best
    /// first (bm25), at most `limit` (up to [`MAX_LIMIT`]). Only the first
    /// [`MAX_TERMS`] distinct words count; a query without a word, or an
    /// empty `scopes`, finds nothing. `query` may be anything: it is never
    /// parsed as FTS5 syntax.
    pub fn search(&self, query: &str, scopes: &[String], limit: usize) -> Result<Vec<Memory>> {
        let Some(fts) = query::fts_query(query) else {
            return Ok(Vec::new());
        };
        if scopes.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let conn = self.lock();
        let sql = format!(
            "SELECT {COLUMNS} FROM memories_fts JOIN memories m ON m.n = memories_fts.rowid \
             WHERE memories_fts MATCH ?1 \
               AND m.scope IN (SELECT value FROM json_each(?2)) \
               AND m.superseded_by IS NULL AND m.forgotten_ms IS NULL \
             ORDER BY bm25(memories_fts, 1.0, 2.0), m.n DESC LIMIT ?3"
        );
        let found = query_entries(
            &conn,
            &sql,
            params![fts, scopes_json(scopes), capped(limit)],
        )
        .db("searching")?;
        with_uses(&conn, found)
    }

    /// The current entries of `scopes`, newest first, at most `limit` (up
    /// to [`MAX_LIMIT`]). An empty `scopes` lists nothing.
    pub fn list(&self, scopes: &[String], limit: usize) -> Result<Vec<Memory>> {
        if scopes.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let conn = self.lock();
        let sql = format!(
            "SELECT {COLUMNS} FROM memories m \
             WHERE m.scope IN (SELECT value FROM json_each(?1)) \
               AND m.superseded_by IS NULL AND m.forgotten_ms IS NULL \
             ORDER BY m.n DESC LIMIT ?2"
        );
        let found = query_entries(&conn, &sql, params![scopes_json(scopes), capped(limit)])
            .db("listing")?;
        with_uses(&conn, found)
    }

    /// Every scope that has an entry (current or not), sorted.
    pub fn scopes(&self) -> Result<Vec<String>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT DISTINCT scope FROM memories ORDER BY scope")
            .db("listing scopes")?;
        let rows = stmt.query_map([], |r| r.get(0)).db("listing scopes")?;
        rows.collect::<rusqlite::Result<_>>().db("listing scopes")
    }

    /// The entry `id`, whatever its state (superseded, forgotten), or
    /// `None`.
    pub fn get(&self, id: &str) -> Result<Option<Memory>> {
        let conn = self.lock();
        let sql = format!("SELECT {COLUMNS} FROM memories m WHERE m.id = ?1");
        let found = query_entries(&conn, &sql, [id]).db("reading an entry")?;
        Ok(with_uses(&conn, found)?.pop())
    }

    /// Forgets `id`: erases its text and tags from the row and the search
    /// index, keeping a tombstone (see the module docs). `false` when no
    /// entry has this id or it was already forgotten.
    pub fn forget(&self, id: &str) -> Result<bool> {
        let now = now_ms();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("starting a write")?;
        let changed = tx
            .execute(
                "UPDATE memories SET text = '', tags = '', forgotten_ms = ?1, updated_ms = ?1 \
                 WHERE id = ?2 AND forgotten_ms IS NULL",
                params![now, id],
            )
            .db("forgetting")?;
        if changed == 0 {
            return Ok(false);
        }
        // Merge the index into one segment, so no older segment still holds
        // the erased words (FTS5 records a delete as a new entry until a
        // merge drops both). Cost grows with the bank; forgetting is rare.
        tx.execute(
            "INSERT INTO memories_fts (memories_fts) VALUES ('optimize')",
            [],
        )
        .db("merging the search index")?;
        tx.commit().db("committing the forget")?;
        // Best effort: copy the WAL into the file and truncate it, so the
        // old pages leave the WAL too. A reader in another process can keep
        // it from completing; the next checkpoint then does it.
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        Ok(true)
    }

    /// Records that `session` had the entries `ids` put into a context:
    /// each entry's count for the session goes up by one (an id repeated in
    /// `ids` counts once), its total `uses` too, and only its
    /// [`MAX_USED_BY`] most recent sessions are kept. Unknown ids are
    /// skipped (an entry may be forgotten between search and use). Returns
    /// how many entries were marked.
    pub fn mark_used(&self, ids: &[String], session: &str) -> Result<usize> {
        validate_name("session", session, MAX_NAME_CHARS)?;
        let now = now_ms();
        let mut seen: Vec<&str> = Vec::new();
        for id in ids {
            if !seen.contains(&id.as_str()) {
                seen.push(id);
            }
        }
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("starting a write")?;
        let mut marked = 0;
        for id in seen {
            let n: Option<i64> = tx
                .query_row("SELECT n FROM memories WHERE id = ?1", [id], |r| r.get(0))
                .optional()
                .db("finding a used entry")?;
            let Some(n) = n else { continue };
            tx.execute(
                "INSERT INTO memory_uses (memory, session, count, last_ms, recency) \
                 VALUES (?1, ?2, 1, ?3, \
                   (SELECT coalesce(max(recency), 0) + 1 FROM memory_uses WHERE memory = ?1)) \
                 ON CONFLICT (memory, session) DO UPDATE SET \
                   count = count + 1, last_ms = excluded.last_ms, recency = excluded.recency",
                params![n, session, now],
            )
            .db("recording a use")?;
            tx.execute(
                "DELETE FROM memory_uses WHERE memory = ?1 AND recency <= \
                   (SELECT max(recency) FROM memory_uses WHERE memory = ?1) - ?2",
                params![n, MAX_USED_BY as i64],
            )
            .db("dropping old uses")?;
            tx.execute("UPDATE memories SET uses = uses + 1 WHERE n = ?1", [n])
                .db("counting a use")?;
            marked += 1;
        }
        tx.commit().db("committing uses")?;
        Ok(marked)
    }
}

fn capped(limit: usize) -> i64 {
    // MAX_LIMIT fits in an i64.
    limit.min(MAX_LIMIT) as i64
}

fn scopes_json(scopes: &[String]) -> String {
    serde_json::Value::from(scopes.to_vec()).to_string()
}

fn query_entries(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<(i64, Memory)>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, read_row)?;
    rows.collect()
}

/// Fills `used_by` of each entry.
fn with_uses(conn: &Connection, found: Vec<(i64, Memory)>) -> Result<Vec<Memory>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT session, count, last_ms FROM memory_uses WHERE memory = ?1 \
             ORDER BY recency DESC",
        )
        .db("reading uses")?;
    let mut out = Vec::with_capacity(found.len());
    for (n, mut memory) in found {
        let rows = stmt
            .query_map([n], |r| {
                Ok(MemoryUse {
                    session: r.get(0)?,
                    count: r.get(1)?,
                    last_ms: r.get(2)?,
                })
            })
            .db("reading uses")?;
        memory.used_by = rows.collect::<rusqlite::Result<_>>().db("reading uses")?;
        out.push(memory);
    }
    Ok(out)
}

/// Brings the schema to the newest version, one transaction per step, each
/// re-checking the version under the write lock (another process may be
/// migrating the same file).
fn migrate(conn: &mut Connection, path: &str) -> Result<()> {
    let unusable = |why: String| MemoryError::Unusable {
        path: path.to_owned(),
        why,
    };
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("locking the bank to migrate it")?;
        let app: i32 = tx
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .db("reading application_id")?;
        let version: usize = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .db("reading user_version")?;
        if app != 0 && app != APPLICATION_ID {
            return Err(unusable(format!(
                "it belongs to another application (application_id {app:#x})"
            )));
        }
        if app == 0 && version == 0 {
            let tables: i64 = tx
                .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
                .db("inspecting the schema")?;
            if tables > 0 {
                return Err(unusable("it has tables but no memory bank schema".into()));
            }
        }
        if version > MIGRATIONS.len() {
            return Err(unusable(format!(
                "its schema version {version} is newer than this Longhand's {}",
                MIGRATIONS.len()
            )));
        }
        let Some(step) = MIGRATIONS.get(version) else {
            return Ok(());
        };
        tx.execute_batch(step).db("migrating the schema")?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .db("writing application_id")?;
        tx.pragma_update(None, "user_version", version + 1)
            .db("writing user_version")?;
        tx.commit().db("committing a migration")?;
    }
}

/// The bank's path inside a data directory.
pub fn default_path(data_dir: &Path) -> PathBuf {
    data_dir.join(DB_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(scope: &str, text: &str) -> NewMemory {
        NewMemory {
            scope: scope.into(),
            text: text.into(),
            ..NewMemory::default()
        }
    }

    fn ids(found: &[Memory]) -> Vec<&str> {
        found.iter().map(|m| m.id.as_str()).collect()
    }

    fn scopes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A bank with four entries of `project:x`.
    fn seeded() -> (MemoryBank, Vec<Memory>) {
        let bank = MemoryBank::open_in_memory().unwrap();
        let texts = [
            "The deploy script needs AWS_REGION set before it runs",
            "Tests must run with --offline; the sandbox has no network",
            "The user prefers short commit messages",
            "Release notes live in CHANGELOG.md, newest first",
        ];
        let made = texts
            .iter()
            .map(|t| bank.remember(entry("project:x", t)).unwrap())
            .collect();
        (bank, made)
    }

    #[test]
    fn fts5_is_compiled_in() {
        let conn = Connection::open_in_memory().unwrap();
        let yes: bool = conn
            .query_row("SELECT sqlite_compileoption_used('ENABLE_FTS5')", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(yes);
    }

    #[test]
    fn search_ranks_the_matching_entry_first() {
        let (bank, made) = seeded();
        let x = scopes(&["project:x"]);
        let found = bank.search("how do I deploy?", &x, 10).unwrap();
        assert_eq!(ids(&found), [made[0].id.as_str()]);
        // Stemming: "deploying" finds "deploy"; two matching words beat one.
        let found = bank.search("deploying tests offline", &x, 10).unwrap();
        assert_eq!(ids(&found), [made[1].id.as_str(), made[0].id.as_str()]);
        // Tags are searched, and count.
        let tagged = bank
            .remember(NewMemory {
                tags: vec!["release".into()],
                ..entry("project:x", "Tag releases with a v prefix")
            })
            .unwrap();
        let found = bank.search("release", &x, 10).unwrap();
        assert_eq!(found[0].id, tagged.id);
        assert_eq!(found.len(), 2);
        assert_eq!(bank.search("release", &x, 1).unwrap().len(), 1);
        assert!(bank.search("kubernetes", &x, 10).unwrap().is_empty());
    }

    #[test]
    fn hostile_queries_never_error() {
        let (bank, made) = seeded();
        let x = scopes(&["project:x"]);
        for query in [
            "\"",
            "*",
            "NEAR(",
            "NEAR(deploy script, 2)",
            "col:foo",
            "text:deploy",
            ") OR (",
            "deploy AND",
            "NOT deploy",
            "^deploy",
            "deploy*",
            "'; DROP TABLE memories; --",
            "\0\u{202e}",
            &"(".repeat(10_000),
            &"deploy ".repeat(10_000),
        ] {
            bank.search(query, &x, 10)
                .unwrap_or_else(|e| panic!("{query:.40?}: {e}"));
        }
        // Operators are words: `text:deploy` finds the deploy entry, `NOT
        // deploy` does not exclude it.
        let found = bank.search("text:deploy", &x, 10).unwrap();
        assert_eq!(found[0].id, made[0].id);
        let found = bank.search("NOT deploy", &x, 10).unwrap();
        assert_eq!(found[0].id, made[0].id);
        assert!(bank.search("*", &x, 10).unwrap().is_empty());
        assert_eq!(bank.list(&x, 10).unwrap().len(), 4);
    }

    #[test]
    fn scopes_filter_reads() {
        let bank = MemoryBank::open_in_memory().unwrap();
        let a = bank.remember(entry("user:alice", "likes tabs")).unwrap();
        let b = bank.remember(entry("user:bob", "likes tabs too")).unwrap();
        let alice = scopes(&["user:alice"]);
        assert_eq!(ids(&bank.search("tabs", &alice, 10).unwrap()), [&a.id]);
        assert_eq!(ids(&bank.list(&alice, 10).unwrap()), [&a.id]);
        let both = scopes(&["user:alice", "user:bob"]);
        assert_eq!(bank.search("tabs", &both, 10).unwrap().len(), 2);
        assert_eq!(ids(&bank.list(&both, 10).unwrap()), [&b.id, &a.id]);
        // No scope granted, nothing read.
        assert!(bank.search("tabs", &[], 10).unwrap().is_empty());
        assert!(bank.list(&[], 10).unwrap().is_empty());
        assert_eq!(bank.scopes().unwrap(), both);
    }

    #[test]
    fn supersede_hides_the_old_entry() {
        let bank = MemoryBank::open_in_memory().unwrap();
        let x = scopes(&["project:x"]);
        let old = bank.remember(entry("project:x", "port is 8080")).unwrap();
        let new = bank
            .remember(NewMemory {
                supersedes: Some(old.id.clone()),
                ..entry("project:x", "port is 9090 since the move")
            })
            .unwrap();
        assert_eq!(ids(&bank.search("port", &x, 10).unwrap()), [&new.id]);
        assert_eq!(ids(&bank.list(&x, 10).unwrap()), [&new.id]);
        let shown = bank.get(&old.id).unwrap().unwrap();
        assert_eq!(shown.superseded_by.as_deref(), Some(new.id.as_str()));
        assert_eq!(shown.text, "port is 8080");
        assert!(!shown.is_current());
        assert_eq!(
            bank.get(&new.id).unwrap().unwrap().supersedes,
            Some(old.id.clone())
        );
        // Only the newest of a chain, only within a scope, only what exists.
        let again = bank.remember(NewMemory {
            supersedes: Some(old.id.clone()),
            ..entry("project:x", "port is 7070")
        });
        assert!(
            matches!(again, Err(MemoryError::Invalid { ref what }) if what.contains(&new.id)),
            "{again:?}"
        );
        let other = bank.remember(NewMemory {
            supersedes: Some(new.id.clone()),
            ..entry("project:y", "hidden")
        });
        assert!(
            matches!(other, Err(MemoryError::Invalid { .. })),
            "{other:?}"
        );
        let missing = bank.remember(NewMemory {
            supersedes: Some("m-nope".into()),
            ..entry("project:x", "x")
        });
        assert!(matches!(missing, Err(MemoryError::NotFound { .. })));
        // A refused write changed nothing.
        assert_eq!(ids(&bank.list(&x, 10).unwrap()), [&new.id]);
        assert!(bank.get(&new.id).unwrap().unwrap().is_current());
    }

    /// Whether any block of the FTS index holds `term` (as FTS5 stores a
    /// term: its bytes, prefix-compressed only after the first in a leaf).
    fn index_holds(bank: &MemoryBank, term: &str) -> bool {
        let conn = bank.lock();
        let mut stmt = conn.prepare("SELECT block FROM memories_fts_data").unwrap();
        let blocks: Vec<Vec<u8>> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        blocks
            .iter()
            .any(|b| b.windows(term.len()).any(|w| w == term.as_bytes()))
    }

    #[test]
    fn forget_leaves_a_tombstone_outside_search() {
        let (bank, made) = seeded();
        assert!(index_holds(&bank, "region"));
        let x = scopes(&["project:x"]);
        bank.mark_used(&[made[0].id.clone()], "s-1").unwrap();
        assert!(bank.forget(&made[0].id).unwrap());
        assert!(!bank.forget(&made[0].id).unwrap());
        assert!(!bank.forget("m-unknown").unwrap());
        assert!(bank.search("deploy AWS_REGION", &x, 10).unwrap().is_empty());
        assert_eq!(bank.list(&x, 10).unwrap().len(), 3);
        let tomb = bank.get(&made[0].id).unwrap().unwrap();
        assert!(tomb.forgotten_ms.is_some());
        assert_eq!((tomb.text.as_str(), tomb.tags.len()), ("", 0));
        assert_eq!(tomb.used_by[0].session, "s-1");
        // The words are gone from the index's stored segments, not just
        // cancelled by a delete marker.
        assert!(!index_holds(&bank, "region"));
        assert!(index_holds(&bank, "offlin"));
        // Others are still found.
        assert_eq!(bank.search("offline", &x, 10).unwrap()[0].id, made[1].id);
    }

    #[test]
    fn mark_used_dedupes_counts_and_bounds() {
        let (bank, made) = seeded();
        let (a, b) = (made[0].id.clone(), made[1].id.clone());
        let marked = bank
            .mark_used(&[a.clone(), a.clone(), b.clone(), "m-gone".into()], "s-1")
            .unwrap();
        assert_eq!(marked, 2);
        bank.mark_used(std::slice::from_ref(&a), "s-1").unwrap();
        bank.mark_used(std::slice::from_ref(&a), "s-2").unwrap();
        let used = bank.get(&a).unwrap().unwrap();
        assert_eq!(used.uses, 3);
        let by: Vec<(&str, u64)> = used
            .used_by
            .iter()
            .map(|u| (u.session.as_str(), u.count))
            .collect();
        assert_eq!(by, [("s-2", 1), ("s-1", 2)]);
        assert_eq!(bank.get(&b).unwrap().unwrap().uses, 1);
        for i in 0..MAX_USED_BY + 6 {
            bank.mark_used(std::slice::from_ref(&b), &format!("s-n{i}"))
                .unwrap();
        }
        let used = bank.get(&b).unwrap().unwrap();
        assert_eq!(used.used_by.len(), MAX_USED_BY);
        assert_eq!(used.uses, MAX_USED_BY as u64 + 7);
        assert_eq!(used.used_by[0].session, format!("s-n{}", MAX_USED_BY + 5));
        assert!(used.used_by.iter().all(|u| u.session != "s-1"));
        assert!(bank.mark_used(&[a], "bad session!").is_err());
    }

    #[test]
    fn invalid_entries_are_refused() {
        let bank = MemoryBank::open_in_memory().unwrap();
        let refused = |new: NewMemory| match bank.remember(new) {
            Err(MemoryError::Invalid { what }) => what,
            other => panic!("expected Invalid, got {other:?}"),
        };
        assert!(refused(entry("", "x")).contains("scope"));
        assert!(refused(entry("user alice", "x")).contains("scope"));
        assert!(refused(entry(&"s".repeat(129), "x")).contains("scope"));
        assert!(refused(entry("user:é", "x")).contains("scope"));
        assert!(refused(entry("p", " \n\t")).contains("empty"));
        assert!(refused(entry("p", &"x".repeat(MAX_TEXT_BYTES + 1))).contains("8192"));
        let tags = |tags: Vec<String>| NewMemory {
            tags,
            ..entry("p", "x")
        };
        let many = (0..=MAX_TAGS).map(|i| format!("t{i}")).collect();
        assert!(refused(tags(many)).contains("tags"));
        assert!(refused(tags(vec!["x".repeat(65)])).contains("tag"));
        assert!(refused(tags(vec!["two words".into()])).contains("tag"));
        let source = NewMemory {
            source: Some(MemorySource {
                session: "s-1".into(),
                seq: u64::MAX,
            }),
            ..entry("p", "x")
        };
        assert!(refused(source).contains("seq"));
        assert!(bank.list(&scopes(&["p"]), 10).unwrap().is_empty());
        // At the limits is fine; duplicate tags count once.
        let ok = bank
            .remember(NewMemory {
                tags: ["a", "a"]
                    .into_iter()
                    .map(str::to_owned)
                    .chain((1..MAX_TAGS).map(|i| format!("u{i}")))
                    .collect(),
                source: Some(MemorySource {
                    session: "s-01".into(),
                    seq: 7,
                }),
                ..entry(&"s".repeat(128), &"x".repeat(MAX_TEXT_BYTES))
            })
            .unwrap();
        assert_eq!(ok.tags.len(), MAX_TAGS);
        let read = bank.get(&ok.id).unwrap().unwrap();
        assert_eq!(read, ok);
    }

    #[test]
    fn two_connections_to_one_file_see_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = default_path(&dir.path().join("nested"));
        let one = MemoryBank::open(&path).unwrap();
        let two = MemoryBank::open(&path).unwrap();
        let x = scopes(&["project:x"]);
        let a = one.remember(entry("project:x", "alpha fact")).unwrap();
        assert_eq!(two.get(&a.id).unwrap().unwrap(), a);
        let b = two
            .remember(NewMemory {
                supersedes: Some(a.id.clone()),
                ..entry("project:x", "beta fact")
            })
            .unwrap();
        assert_eq!(ids(&one.search("fact", &x, 10).unwrap()), [&b.id]);
        one.mark_used(std::slice::from_ref(&b.id), "s-1").unwrap();
        assert_eq!(two.get(&b.id).unwrap().unwrap().uses, 1);
        assert!(two.forget(&b.id).unwrap());
        assert!(one.search("fact", &x, 10).unwrap().is_empty());
        // Reopening finds the same schema.
        drop((one, two));
        let again = MemoryBank::open(&path).unwrap();
        assert_eq!(again.scopes().unwrap(), x);
    }

    #[test]
    fn concurrent_writers_on_one_file_all_land() {
        // Two connections (as two processes would have) writing at once:
        // the busy timeout and IMMEDIATE transactions make each wait its
        // turn instead of failing with SQLITE_BUSY.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        MemoryBank::open(&path).unwrap();
        let writers: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|who| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let bank = MemoryBank::open(&path).unwrap();
                    let mut made = Vec::new();
                    for i in 0..100 {
                        let m = bank
                            .remember(entry(&format!("w:{who}"), &format!("fact {i}")))
                            .unwrap();
                        bank.mark_used(std::slice::from_ref(&m.id), "s-1").unwrap();
                        made.push(m.id);
                    }
                    made
                })
            })
            .collect();
        let made: Vec<String> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let bank = MemoryBank::open(&path).unwrap();
        let all = bank.list(&bank.scopes().unwrap(), MAX_LIMIT).unwrap();
        assert_eq!(all.len(), 200);
        assert!(made.iter().all(|id| all.iter().any(|m| &m.id == id)));
        assert!(all.iter().all(|m| m.uses == 1));
    }

    #[test]
    fn a_foreign_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        drop(conn);
        let err = MemoryBank::open(&path).unwrap_err();
        assert!(matches!(err, MemoryError::Unusable { .. }), "{err}");
    }

    #[test]
    fn the_bank_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<MemoryBank>();
    }
}
