//! The write path of the SQLite store: one writer thread that group-commits
//! every pending write, and one flusher thread that makes commits durable.
//!
//! - **One writer thread owns the write connection**, fed by a channel. It
//!   takes every request waiting (appends of many sessions, blob puts, lease
//!   operations; at most [`MAX_BATCH_REQUESTS`] requests or about
//!   [`MAX_BATCH_BYTES`]), runs them in one `BEGIN IMMEDIATE` transaction,
//!   each inside its own `SAVEPOINT` so a refused request (fenced, stale seq,
//!   too large) is rolled back alone, and commits once. Each caller gets its
//!   own result. SQLite allows one writer per file anyway; one thread that
//!   never waits for an fsync keeps it busy doing useful work.
//! - **Commits are never fsynced by SQLite** (`synchronous=NORMAL` in WAL
//!   mode): a commit writes its frames to the WAL file, i.e. to the OS page
//!   cache, so once `COMMIT` returns the write is visible to every reader
//!   and survives the death of this process. It is not yet on stable
//!   storage.
//! - **The flusher thread fsyncs the WAL file** (`fdatasync` on a descriptor
//!   of its own). An fsync covers every frame written before it started, so
//!   one fsync makes every commit up to then durable, however many sessions
//!   they came from. `Durability::Now` requests are answered only after such
//!   an fsync; `Durability::Soon` requests are answered at commit, and the
//!   flusher syncs within the flush window after the oldest commit not yet
//!   synced. At most one fsync runs at a time; the writer keeps committing
//!   while it runs, and the `Now` requests that arrive meanwhile share the
//!   next one. This is exactly the sync SQLite's own `synchronous=FULL`
//!   does after each commit (`walWriteFrames`: an `xSync` of the WAL file
//!   descriptor), moved off the commit path; SQLite's developers give the
//!   same recipe for making NORMAL-mode commits durable later (flush the
//!   journal file; a PASSIVE checkpoint is not enough).
//! - The WAL file is opened with no locks by SQLite (only the database and
//!   `-shm` files carry locks), so our own descriptor on it cannot drop one
//!   of SQLite's POSIX locks when closed. The WAL file is deleted only when
//!   the last connection closes, and the writer's connection outlives the
//!   flusher.
//! - **A failed fsync poisons the store**: after a failed fsync the kernel
//!   may have dropped the dirty pages and a later fsync may succeed without
//!   writing them, so nothing written since the last good fsync can be
//!   promised. Every later write is refused ([`StoreError::Io`]); the
//!   operator checks the disk and reopens the store.
//!
//! This module owns batching, commit and sync; what each request writes is a
//! closure from `sqlite.rs`.

use std::fs::File;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, TransactionBehavior};
use tokio::sync::oneshot;

use crate::store::{Clock, Durability, Result, StoreError};

/// At most this many requests share one transaction. With 10,000 sessions
/// writing at once a batch of every pending request would hold the first
/// caller for the whole queue; 512 requests take a few ms to apply, so no
/// caller waits for more than a few batches.
pub(super) const MAX_BATCH_REQUESTS: usize = 512;

/// A batch stops taking requests once their payloads (event JSON and blob
/// bytes) reach this many bytes, for the same reason; a single larger
/// request still goes through alone.
pub(super) const MAX_BATCH_BYTES: usize = 8 << 20;

/// What a request's closure sees: the database (for error messages) and the
/// batch's clock reading, shared by every request in the batch.
pub(super) struct WriteCtx<'a> {
    pub path: &'a Path,
    pub now_ms: u64,
}

/// Counters of the write path since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Write requests handled (appends, blob puts, lease operations,
    /// creates), refused ones included.
    pub requests: u64,
    /// Transactions committed; `requests / commits` is the mean batch size.
    pub commits: u64,
    /// Fsyncs of the WAL file by the flusher. SQLite adds its own at each
    /// checkpoint (the WAL before, the database after; about every 4 MB of
    /// WAL), not counted here.
    pub syncs: u64,
    /// The number of the last commit (counting from 1 at open).
    pub committed: u64,
    /// Every commit up to this number is on stable storage.
    pub durable: u64,
}

/// One write request, its result type erased so that a batch can hold
/// appends, blob puts and lease operations together.
pub(super) trait Request: Send {
    fn durability(&self) -> Durability;
    /// Payload size, for [`MAX_BATCH_BYTES`].
    fn bytes(&self) -> usize;
    /// Runs the request inside the batch's transaction (in its savepoint)
    /// and keeps its value until the batch is committed.
    fn apply(&mut self, conn: &Connection, ctx: &WriteCtx<'_>) -> Result<()>;
    /// Sends the outcome to the caller: its value if `outcome` is `Ok`.
    fn finish(self: Box<Self>, outcome: Result<()>);
}

/// A request made of a closure whose value goes back on a oneshot channel.
pub(super) struct Pending<T, F> {
    durability: Durability,
    bytes: usize,
    work: Option<F>,
    value: Option<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Pending<T, F> {
    pub(super) fn new(
        durability: Durability,
        bytes: usize,
        work: F,
    ) -> (Self, oneshot::Receiver<Result<T>>) {
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            durability,
            bytes,
            work: Some(work),
            value: None,
            reply,
        };
        (pending, rx)
    }
}

impl<T, F> Request for Pending<T, F>
where
    T: Send,
    F: FnOnce(&Connection, &WriteCtx<'_>) -> Result<T> + Send,
{
    fn durability(&self) -> Durability {
        self.durability
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    fn apply(&mut self, conn: &Connection, ctx: &WriteCtx<'_>) -> Result<()> {
        let work = self
            .work
            .take()
            .ok_or_else(|| StoreError::Invalid("a write request ran twice".into()))?;
        self.value = Some(work(conn, ctx)?);
        Ok(())
    }

    fn finish(self: Box<Self>, outcome: Result<()>) {
        let Pending { value, reply, .. } = *self;
        let result = outcome.and_then(|()| {
            value.ok_or_else(|| StoreError::Invalid("a write request never ran".into()))
        });
        // The caller may have stopped waiting (its future was dropped); the
        // write stands either way, as a write whose reply was lost would.
        let _ = reply.send(result);
    }
}

type Job = Box<dyn Request>;

/// State shared by the writer, the flusher and the store handles.
struct Shared {
    flush: Mutex<FlushState>,
    wake: Condvar,
    requests: AtomicU64,
    commits: AtomicU64,
    syncs: AtomicU64,
}

#[derive(Default)]
struct FlushState {
    /// Number of the last commit.
    committed: u64,
    /// Every commit up to this one is on stable storage.
    durable: u64,
    /// When the oldest commit after `durable` was made (or earlier).
    oldest_unsynced: Option<Instant>,
    /// `Now` requests waiting for an fsync; all are in commits up to
    /// `committed`.
    waiters: Vec<Job>,
    /// The writer is shutting down: flush what is left, then stop.
    closing: bool,
    /// Set by a failed fsync; every later write is refused with it.
    failed: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, FlushState> {
        // The state stays consistent across a panic: every update is a
        // plain assignment made while the lock is held.
        self.flush.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The handle the store keeps: submit requests, read counters, shut down.
pub(super) struct Writer {
    queue: Mutex<Option<Sender<Job>>>,
    /// Requests queued so far (tests use it to know a request is waiting).
    submitted: AtomicU64,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer on `conn` (open, migrated, in WAL mode) and the
    /// flusher on the database's WAL file.
    pub(super) fn start(
        conn: Connection,
        path: PathBuf,
        clock: Arc<dyn Clock>,
        flush_window: Duration,
    ) -> Result<Self> {
        let wal_path = wal_path(&path);
        let wal = File::open(&wal_path).map_err(|source| StoreError::Io {
            context: format!("opening {} to sync it", wal_path.display()),
            source,
        })?;
        // The WAL file may have just been created: make its directory entry
        // durable too (SQLite would on its first sync of a new file).
        if let Some(dir) = path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|source| StoreError::Io {
                    context: format!("syncing directory {}", dir.display()),
                    source,
                })?;
        }
        let shared = Arc::new(Shared {
            flush: Mutex::new(FlushState::default()),
            wake: Condvar::new(),
            requests: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        });
        let (queue, rx) = std::sync::mpsc::channel();
        let flusher = {
            let shared = Arc::clone(&shared);
            let path = path.clone();
            std::thread::Builder::new()
                .name("longhand-store-flush".into())
                .spawn(move || flush_loop(&shared, &wal, &path, flush_window))
                .map_err(|source| StoreError::Io {
                    context: "starting the session store's flusher thread".into(),
                    source,
                })?
        };
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("longhand-store-write".into())
                .spawn(move || write_loop(conn, &rx, &shared, &path, clock.as_ref(), flusher))
        };
        let thread = match thread {
            Ok(thread) => thread,
            Err(source) => {
                // Let the flusher go.
                shared.lock().closing = true;
                shared.wake.notify_all();
                return Err(StoreError::Io {
                    context: "starting the session store's writer thread".into(),
                    source,
                });
            }
        };
        Ok(Writer {
            queue: Mutex::new(Some(queue)),
            submitted: AtomicU64::new(0),
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a request. Fails only once the writer has stopped.
    pub(super) fn submit(&self, job: Job) -> Result<()> {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        match queue.as_ref().map(|q| q.send(job)) {
            Some(Ok(())) => {
                self.submitted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(writer_gone()),
        }
    }

    #[cfg(test)]
    pub(super) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Relaxed)
    }

    pub(super) fn stats(&self) -> WriteStats {
        let state = self.shared.lock();
        WriteStats {
            requests: self.shared.requests.load(Ordering::Relaxed),
            commits: self.shared.commits.load(Ordering::Relaxed),
            syncs: self.shared.syncs.load(Ordering::Relaxed),
            committed: state.committed,
            durable: state.durable,
        }
    }

    /// Stops taking requests, lets the writer commit what is queued and the
    /// flusher sync it, and waits for both; the writer closes its connection
    /// last.
    pub(super) fn shut_down(&self) {
        drop(
            self.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // A panicked writer has already dropped every request (their
            // callers see `writer_gone`); nothing is left to do about it.
            let _ = thread.join();
        }
    }
}

/// `<db>-wal`, where SQLite keeps the write-ahead log.
fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

pub(super) fn writer_gone() -> StoreError {
    StoreError::Db {
        context: "the session store's writer has stopped (the store is closing)".into(),
        source: "writer stopped".into(),
    }
}

fn write_loop(
    mut conn: Connection,
    rx: &Receiver<Job>,
    shared: &Shared,
    path: &Path,
    clock: &dyn Clock,
    flusher: JoinHandle<()>,
) {
    while let Ok(first) = rx.recv() {
        let mut bytes = first.bytes();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_REQUESTS && bytes < MAX_BATCH_BYTES {
            let Ok(job) = rx.try_recv() else { break };
            bytes = bytes.saturating_add(job.bytes());
            batch.push(job);
        }
        commit_batch(&mut conn, batch, shared, path, clock);
    }
    shared.lock().closing = true;
    shared.wake.notify_all();
    // Let the flusher sync what is left before the connection closes (the
    // last connection to close checkpoints the WAL into the database and
    // deletes it).
    let _ = flusher.join();
    drop(conn);
}

/// Applies `batch` in one transaction, one savepoint per request, commits,
/// and answers (or hands `Now` requests to the flusher).
fn commit_batch(
    conn: &mut Connection,
    mut batch: Vec<Job>,
    shared: &Shared,
    path: &Path,
    clock: &dyn Clock,
) {
    shared
        .requests
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    if let Some(why) = shared.lock().failed.clone() {
        for job in batch {
            job.finish(Err(sync_failed(path, &why)));
        }
        return;
    }
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return fail_all(batch, path, "starting a write transaction", &e),
    };
    // Read the clock once the write lock is held (another process may have
    // kept it for up to the busy timeout), so lease expiry is judged now.
    let ctx = WriteCtx {
        path,
        now_ms: clock.now_ms(),
    };
    let mut outcomes = Vec::with_capacity(batch.len());
    for job in &mut batch {
        match in_savepoint(&tx, |c| job.apply(c, &ctx)) {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => {
                drop(tx);
                return fail_all(batch, path, "isolating a write in a savepoint", &e);
            }
        }
    }
    if let Err(e) = tx.commit() {
        return fail_all(batch, path, "committing a batch of writes", &e);
    }
    shared.commits.fetch_add(1, Ordering::Relaxed);
    let wrote = outcomes.iter().any(Result::is_ok);
    let mut waiting = Vec::new();
    let mut answer = Vec::new();
    for (job, outcome) in batch.into_iter().zip(outcomes) {
        if outcome.is_ok() && job.durability() == Durability::Now {
            waiting.push(job);
        } else {
            answer.push((job, outcome));
        }
    }
    if wrote {
        let mut state = shared.lock();
        state.committed += 1;
        let was_clean = state.oldest_unsynced.is_none();
        if was_clean {
            state.oldest_unsynced = Some(Instant::now());
        }
        let wake = was_clean || !waiting.is_empty();
        state.waiters.extend(waiting);
        drop(state);
        if wake {
            shared.wake.notify_all();
        }
    }
    for (job, outcome) in answer {
        job.finish(outcome);
    }
}

/// Runs `f` inside a savepoint: released if `f` succeeds, rolled back if it
/// fails, so a refused request leaves no trace in the batch. The outer
/// `Err` is the savepoint itself failing, which dooms the whole batch.
fn in_savepoint(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<()>,
) -> rusqlite::Result<Result<()>> {
    conn.prepare_cached("SAVEPOINT request")?.execute([])?;
    // A panic in one request must not take the writer, and with it every
    // other caller, down: it becomes that request's error and is rolled
    // back like any refusal.
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| f(conn))).unwrap_or_else(|_| {
        Err(StoreError::Invalid(
            "a session store write panicked (a bug); it was rolled back".into(),
        ))
    });
    if outcome.is_err() {
        conn.prepare_cached("ROLLBACK TO request")?.execute([])?;
    }
    conn.prepare_cached("RELEASE request")?.execute([])?;
    Ok(outcome)
}

/// Answers every request of a batch that could not be committed; the
/// transaction rolled back, so none of them wrote anything.
fn fail_all(batch: Vec<Job>, path: &Path, context: &str, e: &rusqlite::Error) {
    for job in batch {
        job.finish(Err(batch_error(path, context, e)));
    }
}

/// One caller's copy of an error that failed a whole batch (rusqlite errors
/// are not `Clone`): damage stays [`StoreError::Corrupt`], the rest is
/// [`StoreError::Db`].
fn batch_error(path: &Path, context: &str, e: &rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StoreError::Corrupt {
            seq: None,
            detail: format!(
                "{}: {context}: {e}. The file is damaged: move it aside (keep it for \
                 inspection) and restore it from a backup",
                path.display()
            ),
        },
        _ => StoreError::Db {
            context: format!(
                "{}: {context}: {e}; nothing in this batch was written",
                path.display()
            ),
            source: e.to_string().into(),
        },
    }
}

fn sync_failed(path: &Path, why: &str) -> StoreError {
    StoreError::Io {
        context: format!(
            "{}: an fsync of the write-ahead log failed earlier ({why}); writes made since \
             the last good fsync may not be on disk, so the store takes no more writes. \
             Check the disk, then restart Longhand (reopening the store)",
            path.display()
        ),
        source: std::io::Error::other(why.to_owned()),
    }
}

fn flush_loop(shared: &Shared, wal: &File, path: &Path, window: Duration) {
    let mut state = shared.lock();
    loop {
        let dirty = state.committed > state.durable && state.failed.is_none();
        let due = !state.waiters.is_empty()
            || (dirty && state.closing)
            || (dirty && state.oldest_unsynced.is_some_and(|t| t.elapsed() >= window));
        if !due {
            if state.closing {
                return;
            }
            state = match state.oldest_unsynced.filter(|_| dirty) {
                Some(since) => {
                    let left = window.saturating_sub(since.elapsed());
                    shared
                        .wake
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
            continue;
        }
        let target = state.committed;
        let waiters = std::mem::take(&mut state.waiters);
        let started = Instant::now();
        let failed = state.failed.clone();
        drop(state);
        let result = match failed {
            Some(why) => Err(why),
            None => {
                shared.syncs.fetch_add(1, Ordering::Relaxed);
                wal.sync_data().map_err(|e| e.to_string())
            }
        };
        state = shared.lock();
        match result {
            Ok(()) => {
                state.durable = state.durable.max(target);
                // Commits after `target` were made after this sync started.
                state.oldest_unsynced = (state.committed > target).then_some(started);
                drop(state);
                for job in waiters {
                    job.finish(Ok(()));
                }
            }
            Err(why) => {
                state.failed.get_or_insert(why.clone());
                state.oldest_unsynced = None;
                drop(state);
                for job in waiters {
                    job.finish(Err(sync_failed(path, &why)));
                }
            }
        }
        state = shared.lock();
    }
}
