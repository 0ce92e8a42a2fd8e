//! Opening a database file and fencing the engine in: the open mode, the
//! authorizer, the limits, the clock, and the one mapping from SQLite's
//! errors to what the model can act on.
//!
//! Every refusal here is the engine's, never a keyword filter on the SQL
//! text: the authorizer sees each action a statement would take as SQLite
//! compiles it (including those of views and triggers), and
//! `sqlite3_stmt_readonly` says whether a compiled statement can write.
//!
//! What stays outside: the file system. The file comes through a `dirs`
//! grant, and WASI's preopens confine every file SQLite opens (the
//! database, its `-journal`, the lock directory) to the granted
//! directories; a read-only grant refuses every write whatever SQLite
//! tries.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhand_sdk::{IoResultExt, ToolError};
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::{Connection, OpenFlags, config::DbConfig};

/// How long a call may run when the input names no `timeout`. Below the
/// host's default wall-clock limit (30 s): a statement stopped here comes
/// back as a message the model can act on, one stopped by the host is a
/// trap and, for `execute`, leaves the lock directory behind (see
/// [`clear_stale_lock`]). The host's fuel limit (20e9 units by default,
/// about a second and a half of SQLite's own work) often ends a CPU-bound
/// statement sooner; that is the host's limit, reported as one.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// SQLite's heap, at most: a sort or a hash that wants more fails with
/// "out of memory" (a message) before the component's linear memory (256
/// MiB by default) runs out (a trap).
const HEAP_LIMIT: i64 = 160 << 20;

/// Virtual-machine instructions between two looks at the clock.
const PROGRESS_EVERY: i32 = 1_000;

/// How long `execute` waits for another call's write lock to go.
const BUSY_WAIT: Duration = Duration::from_secs(5);

/// A write lock directory this old was left by a call that was stopped;
/// see [`clear_stale_lock`].
const STALE_LOCK: Duration = Duration::from_secs(60);

/// PRAGMAs a statement may use, all reading the database and nothing
/// outside it, in their reading form only (no `= value`).
const READ_PRAGMAS: &[&str] = &[
    "application_id",
    "auto_vacuum",
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "encoding",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "journal_mode",
    "module_list",
    "page_count",
    "page_size",
    "pragma_list",
    "schema_version",
    "table_list",
    "user_version",
];

/// PRAGMAs that read about one table or index (their argument names it,
/// e.g. `PRAGMA table_info(orders)`), or check the file.
const INTROSPECTION_PRAGMAS: &[&str] = &[
    "foreign_key_check",
    "foreign_key_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "quick_check",
    "table_info",
    "table_xinfo",
];

/// Which of the three tools opens the file: it decides the open mode and
/// what the authorizer lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `query` and `schema`: read-only, never creates the file.
    Read,
    /// `execute`: read-write, creates the file when it is missing.
    Write,
}

/// The call's deadline, shared with the progress handler. It can be
/// brought forward (counting the rows left out gets less time than the
/// statement itself).
#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
    /// Milliseconds after `start` when the engine is interrupted.
    deadline_ms: AtomicU64,
    /// The limit the call was given, for messages.
    pub(crate) limit: Duration,
}

impl Clock {
    pub(crate) fn new(limit: Duration) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            deadline_ms: AtomicU64::new(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX)),
            limit,
        })
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.elapsed_ms() >= self.deadline_ms.load(Ordering::Relaxed)
    }

    /// Interrupt the engine `within` from now at the latest.
    pub(crate) fn shorten(&self, within: Duration) {
        let at = self
            .elapsed_ms()
            .saturating_add(u64::try_from(within.as_millis()).unwrap_or(u64::MAX));
        self.deadline_ms.fetch_min(at, Ordering::Relaxed);
    }

    /// Time left before the deadline.
    pub(crate) fn left(&self) -> Duration {
        Duration::from_millis(
            self.deadline_ms
                .load(Ordering::Relaxed)
                .saturating_sub(self.elapsed_ms()),
        )
    }
}

/// An open database, fenced in, and what is needed to explain its errors.
pub(crate) struct Db {
    pub(crate) conn: Connection,
    pub(crate) path: String,
    pub(crate) mode: Mode,
    pub(crate) clock: Arc<Clock>,
    /// Why the authorizer last refused an action, for the message.
    denied: Arc<Mutex<Option<String>>>,
}

/// Check that `db` is a guest path SQLite will take as a file name.
fn check_path(db: &str) -> Result<(), ToolError> {
    // An absolute path cannot be read as a `file:` URI (this SQLite is
    // built to read them) nor as `:memory:`.
    if !db.starts_with('/') {
        return Err(ToolError::invalid_input(format!(
            "`db` {db:?} must be an absolute guest path, e.g. \"/data/app.db\""
        )));
    }
    if db.contains('\0') {
        return Err(ToolError::invalid_input("`db` contains a NUL character"));
    }
    Ok(())
}

impl Db {
    /// Open `path` for `mode`, with the fence up and the clock running.
    pub(crate) fn open(path: &str, mode: Mode, limit: Duration) -> Result<Self, ToolError> {
        check_path(path)?;
        let vfs;
        let flags;
        match mode {
            Mode::Read => {
                // A missing file is not-found (SQLite would say "unable to
                // open"); a path outside the grants is simply not there.
                let meta = std::fs::metadata(path).for_resource(path)?;
                if meta.is_dir() {
                    return Err(ToolError::invalid_input(format!(
                        "{path} is a directory; `db` names a SQLite file"
                    )));
                }
                flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                // Readers take no lock: a read-only grant has nowhere to
                // make one, and a reader never writes, so it cannot damage
                // the file. A reader racing a writer's commit may see an
                // error; it is told to try again.
                vfs = "unix-none";
            }
            Mode::Write => {
                // Open (or create) the file ourselves first: the file
                // system's refusal names the path and the reason, where
                // SQLite would fall back to read-only or say "unable to
                // open". An empty file is an empty database.
                if let Err(e) = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                {
                    return Err(write_refused(path, &e));
                }
                clear_stale_lock(path);
                flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                // WASI has no fcntl locks: writers exclude each other with
                // a lock directory (`<db>.lock`) beside the file, made and
                // removed by SQLite for the length of a write.
                vfs = "unix-dotfile";
            }
        }
        let conn = Connection::open_with_flags_and_vfs(path, flags, vfs)
            .map_err(|e| plain_error(path, mode, &e))?;
        let clock = Clock::new(limit);
        let mut db = Self {
            conn,
            path: path.to_owned(),
            mode,
            clock,
            denied: Arc::new(Mutex::new(None)),
        };
        db.fence().map_err(|e| db.error(e))?;
        if mode == Mode::Write && db.conn.is_readonly("main").unwrap_or(true) {
            return Err(read_only_grant(path));
        }
        Ok(db)
    }

    /// Everything set before the model's statement is compiled.
    fn fence(&mut self) -> rusqlite::Result<()> {
        // SAFETY: a process-wide setting with no pointer involved; the
        // component runs one call at a time.
        unsafe {
            rusqlite::ffi::sqlite3_hard_heap_limit64(HEAP_LIMIT);
        }
        let c = &mut self.conn;
        // No database but the one file: ATTACH (and VACUUM, which attaches
        // its scratch copy) fails in the engine whatever the authorizer.
        c.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
        // Defensive: no writable_schema, no shadow-table writes, nothing
        // that can corrupt the file on purpose.
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA, false)?;
        // The file's own views and triggers may call only functions
        // marked innocuous: a hostile database cannot make a query do
        // what its text does not say.
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_ATTACH_CREATE, false)?;
        c.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_ATTACH_WRITE, false)?;
        // Temporary tables, indexes and sorts in memory: no file outside
        // the grant, and none a read-only grant would refuse. Set before
        // the authorizer, which refuses setting PRAGMAs.
        c.pragma_update(None, "temp_store", "memory")?;
        if self.mode == Mode::Read {
            c.pragma_update(None, "query_only", true)?;
        } else {
            c.busy_timeout(BUSY_WAIT.min(self.clock.left()))?;
        }
        let clock = Arc::clone(&self.clock);
        c.progress_handler(PROGRESS_EVERY, Some(move || clock.expired()))?;
        let denied = Arc::clone(&self.denied);
        c.authorizer(Some(move |ctx: AuthContext<'_>| match judge(&ctx) {
            Ok(()) => Authorization::Allow,
            Err(why) => {
                if let Ok(mut d) = denied.lock() {
                    *d = Some(why);
                }
                Authorization::Deny
            }
        }))?;
        Ok(())
    }

    /// Why the authorizer refused the last action it refused.
    fn denial(&self) -> Option<String> {
        self.denied.lock().ok().and_then(|mut d| d.take())
    }

    /// The model's view of an error the engine returned for this database.
    pub(crate) fn error(&self, e: rusqlite::Error) -> ToolError {
        use rusqlite::ErrorCode as C;
        // The authorizer refused something while the statement compiled
        // (SQLite reports a refused function as a plain error, the rest as
        // SQLITE_AUTH): its reason is the one to give.
        if let Some(why) = self.denial() {
            return ToolError::invalid_input(format!("{why} ({e})"));
        }
        if let Some(code) = e.sqlite_error_code() {
            match code {
                C::AuthorizationForStatementDenied => {
                    return ToolError::invalid_input(format!("the statement is not allowed ({e})"));
                }
                C::OperationInterrupted => {
                    return ToolError::failed(format!(
                        "the statement hit the time limit ({:?}) and was stopped: narrow it \
                         (a WHERE clause, a LIMIT, an index) or ask for a longer `timeout`",
                        self.clock.limit
                    ));
                }
                _ => {}
            }
        }
        plain_error(&self.path, self.mode, &e)
    }
}

/// What the authorizer decides for one action: `Err` carries the reason
/// the model reads.
fn judge(ctx: &AuthContext<'_>) -> Result<(), String> {
    match ctx.action {
        AuthAction::Attach { filename } => Err(format!(
            "ATTACH (here of {filename:?}) is not allowed: each call reaches one database, \
             the one named by `db`; VACUUM, which attaches a scratch copy, is refused too"
        )),
        AuthAction::Detach { .. } => Err("DETACH is not allowed".to_owned()),
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => judge_pragma(pragma_name, pragma_value),
        AuthAction::Function { function_name }
            if function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Err("load_extension() is not allowed: no code is loaded into the engine".to_owned())
        }
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => Err(
            "transaction statements are not needed: each call runs one statement in its own \
             transaction, committed when it succeeds"
                .to_owned(),
        ),
        // Everything else that writes is refused in `query` by the engine
        // itself (`sqlite3_stmt_readonly`, a read-only open); in `execute`
        // writing is the point.
        _ => Ok(()),
    }
}

fn judge_pragma(name: &str, value: Option<&str>) -> Result<(), String> {
    let name = name.to_ascii_lowercase();
    if INTROSPECTION_PRAGMAS.contains(&name.as_str()) {
        return Ok(());
    }
    if READ_PRAGMAS.contains(&name.as_str()) {
        return match value {
            None => Ok(()),
            Some(v) => Err(format!(
                "PRAGMA {name} = {v} is not allowed: PRAGMAs may only be read here \
                 (`PRAGMA {name}`)"
            )),
        };
    }
    Err(format!(
        "PRAGMA {name} is not allowed: only PRAGMAs that read the database are ({})",
        READ_PRAGMAS
            .iter()
            .chain(INTROSPECTION_PRAGMAS)
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Remove `<path>.lock` when no live call can hold it.
///
/// A call holds the lock directory only while it writes, and no statement
/// here runs past [`DEFAULT_TIMEOUT`] (plus [`BUSY_WAIT`] waiting for it);
/// SQLite touches the directory when the lock changes. One older than
/// [`STALE_LOCK`] was left by a call the host stopped in the middle of a
/// write (its time, fuel or memory limit): SQLite cannot tell, and would
/// answer "locked" forever. With it gone, the next open rolls the
/// interrupted write back from its journal.
fn clear_stale_lock(path: &str) {
    let lock = format!("{path}.lock");
    let Ok(meta) = std::fs::metadata(&lock) else {
        return;
    };
    let stale = meta
        .modified()
        .ok()
        .and_then(|at| at.elapsed().ok())
        .is_some_and(|age| age > STALE_LOCK);
    if meta.is_dir() && stale {
        // Another call may clear it at the same moment: either way it
        // is gone.
        let _ = std::fs::remove_dir(&lock);
    }
}

/// The file's header says WAL (bytes 18 and 19 are the read and write
/// format versions: 2 for WAL).
fn in_wal_mode(path: &str) -> bool {
    use std::io::Read as _;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| header.starts_with(b"SQLite format 3\0") && header[18] == 2)
}

/// `execute` was refused the file by the file system.
fn write_refused(path: &str, e: &std::io::Error) -> ToolError {
    use std::io::ErrorKind as K;
    let readable = Path::new(path).is_file();
    match e.kind() {
        K::PermissionDenied | K::ReadOnlyFilesystem if readable => read_only_grant(path),
        _ => ToolError::from_io(path, e),
    }
}

fn read_only_grant(path: &str) -> ToolError {
    ToolError::access_denied(
        path,
        "its directory is granted read-only: `execute` needs the directory granted read-write \
         (reading it with `query` works as it is)",
    )
}

/// An engine error with no authorizer or clock behind it.
pub(crate) fn plain_error(path: &str, mode: Mode, e: &rusqlite::Error) -> ToolError {
    use rusqlite::ErrorCode as C;
    match e {
        rusqlite::Error::MultipleStatement => {
            return ToolError::invalid_input(
                "one statement per call: `sql` holds more than one; send them one call at a time",
            );
        }
        rusqlite::Error::SqlInputError { msg, offset, .. } => {
            return ToolError::invalid_input(format!("{msg} (at byte {offset} of `sql`)"));
        }
        _ => {}
    }
    let Some(code) = e.sqlite_error_code() else {
        return ToolError::failed(format!("{path}: {e}"));
    };
    match code {
        C::DatabaseBusy | C::DatabaseLocked => ToolError::failed(format!(
            "{path} is locked: another call is writing it; try again shortly. (A lock left by \
             a call stopped in the middle of a write is cleared a minute after it was taken.) \
             ({e})"
        )),
        C::ReadOnly if mode == Mode::Write => read_only_grant(path),
        C::ReadOnly => ToolError::failed(format!(
            "{path} needs recovering from an interrupted write (a hot journal), which a read \
             cannot do: run any `execute` on it, or try again when the writer is done ({e})"
        )),
        C::PermissionDenied => ToolError::access_denied(
            path,
            format!("the engine was refused access ({e}); the directory may be granted read-only"),
        ),
        C::CannotOpen if in_wal_mode(path) => ToolError::invalid_input(format!(
            "{path} is in WAL mode (journal_mode=wal), which needs shared memory that this \
             sandboxed SQLite does not have: convert it outside the tool with `PRAGMA \
             journal_mode=DELETE` ({e})"
        )),
        C::CannotOpen if Path::new(path).exists() => {
            ToolError::failed(format!("SQLite cannot open {path} ({e})"))
        }
        C::CannotOpen => ToolError::not_found(format!("{path} ({e})")),
        C::NotADatabase => {
            ToolError::invalid_input(format!("{path} is not a SQLite database ({e})"))
        }
        C::DatabaseCorrupt => ToolError::failed(format!(
            "{path} is damaged, or was being written while it was read; try again ({e})"
        )),
        C::OutOfMemory => ToolError::failed(format!(
            "the statement needed more memory than a call has: narrow it ({e})"
        )),
        C::DiskFull => ToolError::failed(format!(
            "{path}: no space left, or the call's write limit was reached ({e})"
        )),
        C::SystemIoFailure => ToolError::failed(format!("{path}: I/O error ({e})")),
        C::OperationInterrupted => ToolError::failed(format!("the statement was stopped ({e})")),
        // Syntax, no such table or column, constraints, too big, a
        // type mismatch, a bad parameter: fixed by a different input.
        _ => ToolError::invalid_input(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reading_pragmas_pass() {
        assert!(judge_pragma("table_info", Some("t")).is_ok());
        assert!(judge_pragma("USER_VERSION", None).is_ok());
        assert!(judge_pragma("user_version", Some("7")).is_err());
        assert!(judge_pragma("journal_mode", Some("off")).is_err());
        assert!(judge_pragma("writable_schema", Some("1")).is_err());
        assert!(judge_pragma("writable_schema", None).is_err());
    }

    #[test]
    fn a_relative_or_uri_path_is_refused() {
        for bad in ["app.db", "file:/data/app.db?mode=rwc", ":memory:", ""] {
            assert!(
                matches!(check_path(bad), Err(ToolError::InvalidInput(_))),
                "{bad}"
            );
        }
        assert!(check_path("/data/app.db").is_ok());
    }
}
