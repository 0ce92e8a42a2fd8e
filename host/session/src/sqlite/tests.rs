//! Tests of what is SQLite's own: files, migrations, group commit and
//! fsyncs. The [`Store`] contract itself is tested on every backend by
//! `session::conformance`.

use std::future::Future;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use tempfile::TempDir;

use super::*;

/// A clock the test moves by hand.
#[derive(Debug)]
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const TTL: Duration = Duration::from_secs(10);

fn created(agent: &str) -> Event {
    Event::SessionCreated {
        agent_name: agent.into(),
        agent: serde_json::json!({"model": "m", "tools": []}),
        config_digest: "sha256:00".into(),
    }
}

fn goal(g: &str) -> Event {
    Event::GoalSet { goal: g.into() }
}

async fn open(dir: &TempDir) -> (SqliteStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicU64::new(1_700_000_000_000)));
    let store = SqliteStore::open_with_clock(dir.path(), clock.clone())
        .await
        .unwrap();
    (store, clock)
}

/// A store with one session, leased by `w1`.
async fn session(dir: &TempDir) -> (SqliteStore, Arc<ManualClock>, SessionId, Lease) {
    let (store, clock) = open(dir).await;
    let id = store.create("agent", &created("agent")).await.unwrap();
    let lease = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    (store, clock, id, lease)
}

/// A bare connection to the store's file, as another process has.
fn bare(dir: &TempDir) -> Connection {
    Connection::open(dir.path().join(DB_FILE)).unwrap()
}

/// A raw connection for tampering, with the append-only triggers dropped.
fn raw(dir: &TempDir) -> Connection {
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;")
        .unwrap();
    conn
}

#[tokio::test]
async fn a_truncated_database_is_a_clear_error() {
    let dir = TempDir::new().unwrap();
    {
        let (store, _clock, id, lease) = session(&dir).await;
        let big = serde_json::json!({"pad": "x".repeat(3000)});
        for seq in 2..40 {
            let event = Event::Error {
                step: Some(seq),
                message: big.to_string(),
            };
            store.append(&id, &lease, seq, &[event]).await.unwrap();
        }
    } // closing the last connection checkpoints the WAL into the file
    let path = dir.path().join(DB_FILE);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(
        len > 64 * 1024,
        "the database should be several pages: {len}"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();

    let err = match SqliteStore::open(dir.path()).await {
        Err(e) => e,
        Ok(store) => {
            let list = store.list().await;
            let id = list
                .as_ref()
                .ok()
                .and_then(|l| l.first())
                .map(|s| s.id.clone());
            match id {
                Some(id) => store.read(&id, 1).await.unwrap_err(),
                None => list.unwrap_err(),
            }
        }
    };
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    assert!(msg.contains("backup"), "gives advice: {msg}");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join(DB_FILE);
    std::fs::write(
        &path,
        "these are not the pages you are looking for\n".repeat(200),
    )
    .unwrap();
    let err = SqliteStore::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );

    // A real SQLite database of some other application is refused too.
    let other = TempDir::new().unwrap();
    Connection::open(other.path().join(DB_FILE))
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let err = SqliteStore::open(other.path()).await.unwrap_err();
    assert!(err.to_string().contains("another application"), "{err}");
}

#[tokio::test]
async fn a_newer_schema_version_is_refused() {
    let dir = TempDir::new().unwrap();
    drop(open(&dir).await);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let err = SqliteStore::open(dir.path()).await.unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found, supported, .. }
            if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade Longhand"), "{err}");
}

#[tokio::test]
async fn reopening_keeps_everything_and_does_not_migrate_again() {
    let dir = TempDir::new().unwrap();
    let id = {
        let (store, _clock, id, lease) = session(&dir).await;
        store.append(&id, &lease, 2, &[goal("g")]).await.unwrap();
        id
    };
    let (store, _clock) = open(&dir).await;
    assert_eq!(store.read(&id, 1).await.unwrap().len(), 2);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!((version, mode.as_str()), (SCHEMA_VERSION, "wal"));
}

/// A store whose flusher waits an hour before syncing `Soon` writes, so a
/// test sees exactly which writes were fsynced.
async fn open_lazy(dir: &Path) -> SqliteStore {
    let options = SqliteOptions {
        flush_window: Duration::from_secs(3600),
        ..SqliteOptions::default()
    };
    SqliteStore::open_with(dir, options).await.unwrap()
}

/// Polls `cond` until it holds; gives up (failing) after 30 s. Used to wait
/// for another thread, never to assert how fast it is.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn now_appends_are_fsynced_before_they_return_soon_ones_within_the_window() {
    let dir = TempDir::new().unwrap();
    let store = open_lazy(dir.path()).await;
    let a = store.create("agent", &created("agent")).await.unwrap();
    let b = store.create("agent", &created("agent")).await.unwrap();
    let lease_a = store.acquire_lease(&a, "w", TTL).await.unwrap();
    let lease_b = store.acquire_lease(&b, "w", TTL).await.unwrap();
    // create and acquire_lease are durable at once.
    let start = store.write_stats();
    assert_eq!(start.durable, start.committed, "{start:?}");

    // Soon: committed (and visible), not synced.
    let seq = store
        .append_with(
            &a,
            &lease_a,
            2,
            &[goal("soon")],
            Vec::new(),
            Durability::Soon,
        )
        .await
        .unwrap()
        .last_seq;
    assert_eq!(seq, 2);
    let soon = store.write_stats();
    assert_eq!(soon.committed, start.committed + 1, "{soon:?}");
    assert_eq!(
        (soon.durable, soon.syncs),
        (start.durable, start.syncs),
        "a Soon append must not wait for an fsync: {soon:?}"
    );
    assert_eq!(store.read(&a, 2).await.unwrap()[0].event, goal("soon"));

    // A heartbeat and a blob put are Soon too: no fsync.
    let renewed = store.renew(&lease_b, TTL).await.unwrap();
    store.put_blob(b"blob".to_vec()).await.unwrap();
    let soon = store.write_stats();
    assert_eq!(soon.committed, start.committed + 3, "{soon:?}");
    assert_eq!(
        (soon.durable, soon.syncs),
        (start.durable, start.syncs),
        "{soon:?}"
    );

    // Now, in another session: one fsync, which covers the Soon writes too.
    let lease_b = renewed;
    store.append(&b, &lease_b, 2, &[goal("now")]).await.unwrap();
    let now = store.write_stats();
    assert_eq!(now.committed, start.committed + 4, "{now:?}");
    assert_eq!(
        now.durable, now.committed,
        "Now returned before its fsync: {now:?}"
    );
    assert_eq!(now.syncs, start.syncs + 1, "{now:?}");

    // With a short window a Soon append becomes durable without any help.
    drop(store);
    let options = SqliteOptions {
        flush_window: Duration::from_millis(10),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(dir.path(), options).await.unwrap();
    let lease_a = store.acquire_lease(&a, "w", TTL).await.unwrap();
    store
        .append_with(
            &a,
            &lease_a,
            3,
            &[goal("later")],
            Vec::new(),
            Durability::Soon,
        )
        .await
        .unwrap();
    let committed = store.write_stats().committed;
    eventually("the flusher syncs the Soon append", || {
        store.write_stats().durable >= committed
    })
    .await;
}

/// Holds SQLite's write lock from another connection, so the writer blocks
/// on its first batch and every request sent meanwhile queues up for the
/// next one.
async fn with_writer_blocked<T>(
    dir: &TempDir,
    store: &SqliteStore,
    first: impl Future<Output = T> + Send + 'static,
    queue: impl FnOnce() -> Vec<tokio::task::JoinHandle<Result<u64>>>,
    queued: u64,
) -> (T, Vec<Result<u64>>)
where
    T: Send + 'static,
{
    let blocker = Connection::open(dir.path().join(DB_FILE)).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let before = store.inner.writer.submitted();
    // `requests` counts what the writer has taken into a batch: once it
    // grows, the first request is in a batch of its own, blocked.
    let taken = store.write_stats().requests;
    let first = tokio::spawn(first);
    eventually("the writer takes the first request", || {
        store.write_stats().requests > taken && store.inner.writer.submitted() > before
    })
    .await;
    let handles = queue();
    eventually("the other requests are queued", || {
        store.inner.writer.submitted() >= before + 1 + queued
    })
    .await;
    blocker.execute_batch("COMMIT").unwrap();
    let first = first.await.unwrap();
    let mut results = Vec::new();
    for h in handles {
        results.push(h.await.unwrap());
    }
    (first, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_in_a_batch_does_not_affect_the_others() {
    let dir = TempDir::new().unwrap();
    let store = open_lazy(dir.path()).await;
    let mut sessions = Vec::new();
    for _ in 0..4 {
        let id = store.create("agent", &created("agent")).await.unwrap();
        let lease = store.acquire_lease(&id, "w1", TTL).await.unwrap();
        sessions.push((id, lease));
    }
    // Session 1's lease passes to w2: w1's lease is fenced from now on.
    let taken = store
        .take_over(&sessions[1].0, "w1", "w2", TTL)
        .await
        .unwrap();
    // Session 3 has an event row past its end, written behind the store's
    // back, so an append of two events there fails on the second insert,
    // after the first insert and its blob were written: only the savepoint
    // can undo them.
    raw(&dir)
        .execute(
            "INSERT INTO events (session_id, seq, at_ms, type, json, checksum)
             VALUES (?1, 3, 0, 'goal_set', '{}', x'00')",
            [sessions[3].0.as_str()],
        )
        .unwrap();
    let stats = store.write_stats();

    let warm = {
        let store = store.clone();
        async move { store.put_blob(b"first batch".to_vec()).await }
    };
    let submit = |i: usize, lease: Lease, seq: u64, events: Vec<Event>, blob: &[u8]| {
        let (store, id, blob) = (store.clone(), sessions[i].0.clone(), blob.to_vec());
        tokio::spawn(async move {
            store
                .append_with(&id, &lease, seq, &events, vec![blob], Durability::Now)
                .await
                .map(|a| a.last_seq)
        })
    };
    let (first, results) = with_writer_blocked(
        &dir,
        &store,
        warm,
        || {
            vec![
                submit(0, sessions[0].1.clone(), 2, vec![goal("ok 0")], b"blob 0"),
                submit(1, sessions[1].1.clone(), 2, vec![goal("fenced")], b"blob 1"),
                submit(2, sessions[2].1.clone(), 9, vec![goal("stale")], b"blob 2"),
                submit(
                    3,
                    sessions[3].1.clone(),
                    2,
                    vec![goal("x"), goal("y")],
                    b"blob 3",
                ),
                submit(2, sessions[2].1.clone(), 2, vec![goal("ok 2")], b"blob 4"),
            ]
        },
        5,
    )
    .await;
    first.unwrap();
    assert_eq!(results[0].as_ref().ok(), Some(&2), "{:?}", results[0]);
    assert!(
        matches!(results[1], Err(StoreError::Fenced { .. })),
        "{:?}",
        results[1]
    );
    assert!(
        matches!(
            results[2],
            // The tasks reach the queue in any order: "ok 2" may be first.
            Err(StoreError::SeqConflict { expected: 9, .. })
        ),
        "{:?}",
        results[2]
    );
    assert!(
        matches!(results[3], Err(StoreError::Db { .. })),
        "{:?}",
        results[3]
    );
    assert_eq!(results[4].as_ref().ok(), Some(&2), "{:?}", results[4]);
    // Two transactions: the first request alone, then the five together.
    let after = store.write_stats();
    assert_eq!(after.commits - stats.commits, 2, "{after:?}");
    assert_eq!(after.requests - stats.requests, 6, "{after:?}");

    // The accepted appends wrote their events and blobs; the refused ones
    // wrote nothing, blobs included.
    assert_eq!(
        store.read(&sessions[0].0, 2).await.unwrap()[0].event,
        goal("ok 0")
    );
    assert_eq!(
        store.read(&sessions[2].0, 2).await.unwrap()[0].event,
        goal("ok 2")
    );
    for blob in [&b"blob 0"[..], b"blob 4"] {
        assert_eq!(store.get_blob(&BlobRef::of(blob)).await.unwrap(), blob);
    }
    for blob in [&b"blob 1"[..], b"blob 2", b"blob 3"] {
        assert!(matches!(
            store.get_blob(&BlobRef::of(blob)).await,
            Err(StoreError::NotFound { .. })
        ));
    }
    for (i, last) in [(1, 1), (3, 1)] {
        assert_eq!(store.summary(&sessions[i].0).await.unwrap().last_seq, last);
    }
    let seq2: i64 = bare(&dir)
        .query_row(
            "SELECT count(*) FROM events WHERE session_id = ?1 AND seq = 2",
            [sessions[3].0.as_str()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(seq2, 0, "the savepoint undid the first insert");
    // The new holder of session 1 appends as usual.
    assert_eq!(
        store
            .append(&sessions[1].0, &taken, 2, &[goal("w2")])
            .await
            .unwrap(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sessions_appending_at_once_share_commits_and_chains_verify() {
    let dir = TempDir::new().unwrap();
    let store = SqliteStore::open(dir.path()).await.unwrap();
    const SESSIONS: usize = 200;
    const APPENDS: u64 = 10;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let id = store.create("agent", &created("agent")).await.unwrap();
        let lease = store.acquire_lease(&id, "w", TTL).await.unwrap();
        sessions.push((id, lease));
    }
    let before = store.write_stats();
    let tasks: Vec<_> = sessions
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, (id, lease))| {
            let store = store.clone();
            tokio::spawn(async move {
                for k in 0..APPENDS {
                    let durability = if k % 3 == 2 {
                        Durability::Now
                    } else {
                        Durability::Soon
                    };
                    let blob = format!("session {i} append {k}").into_bytes();
                    let events = [goal(&format!("{i}/{k}")), goal("shared")];
                    let last = store
                        .append_with(&id, &lease, 2 + 2 * k, &events, vec![blob], durability)
                        .await?
                        .last_seq;
                    assert_eq!(last, 3 + 2 * k);
                    if k % 4 == 0 {
                        store.renew(&lease, TTL).await?;
                    }
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let after = store.write_stats();
    let requests = after.requests - before.requests;
    let commits = after.commits - before.commits;
    assert_eq!(
        requests,
        (SESSIONS as u64) * (APPENDS + APPENDS.div_ceil(4))
    );
    assert!(
        commits < requests,
        "no batching: {commits} commits for {requests} requests"
    );
    assert!(after.syncs - before.syncs < requests, "{after:?}");

    // Every log verifies from seq 1, with its events in order.
    for (i, (id, _)) in sessions.iter().enumerate() {
        let records = store.read(id, 1).await.unwrap();
        assert_eq!(records.len() as u64, 1 + 2 * APPENDS);
        for k in 0..APPENDS {
            assert_eq!(
                records[(1 + 2 * k) as usize].event,
                goal(&format!("{i}/{k}"))
            );
        }
        let blob = format!("session {i} append {}", APPENDS - 1).into_bytes();
        assert_eq!(store.get_blob(&BlobRef::of(&blob)).await.unwrap(), blob);
    }
}

/// The provided `append_with` (for backends without their own) gives the
/// same result as SQLite's.
#[tokio::test]
async fn the_provided_append_with_writes_blobs_then_events() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    // The provided implementation (other backends) gives the same result.
    #[derive(Debug)]
    struct Plain(SqliteStore);
    #[async_trait]
    impl Store for Plain {
        async fn create(&self, a: &str, c: &Event) -> Result<SessionId> {
            self.0.create(a, c).await
        }
        async fn list(&self) -> Result<Vec<SessionSummary>> {
            self.0.list().await
        }
        async fn summary(&self, s: &SessionId) -> Result<SessionSummary> {
            self.0.summary(s).await
        }
        async fn acquire_lease(&self, s: &SessionId, o: &str, t: Duration) -> Result<Lease> {
            self.0.acquire_lease(s, o, t).await
        }
        async fn renew(&self, l: &Lease, t: Duration) -> Result<Lease> {
            self.0.renew(l, t).await
        }
        async fn take_over(&self, s: &SessionId, d: &str, o: &str, t: Duration) -> Result<Lease> {
            self.0.take_over(s, d, o, t).await
        }
        async fn release(&self, l: &Lease) -> Result<()> {
            self.0.release(l).await
        }
        async fn append(&self, s: &SessionId, l: &Lease, n: u64, e: &[Event]) -> Result<u64> {
            self.0.append(s, l, n, e).await
        }
        async fn read(&self, s: &SessionId, f: u64) -> Result<Vec<EventRecord>> {
            self.0.read(s, f).await
        }
        async fn latest_snapshot(&self, s: &SessionId) -> Result<Option<EventRecord>> {
            self.0.latest_snapshot(s).await
        }
        async fn post_control(
            &self,
            s: &SessionId,
            k: ControlKind,
            t: Option<String>,
            b: &str,
        ) -> Result<Control> {
            self.0.post_control(s, k, t, b).await
        }
        async fn controls(&self, s: &SessionId, a: u64) -> Result<Vec<Control>> {
            self.0.controls(s, a).await
        }
        async fn settle_control(&self, l: &Lease, i: u64) -> Result<()> {
            self.0.settle_control(l, i).await
        }
        async fn put_blob(&self, b: Vec<u8>) -> Result<BlobRef> {
            self.0.put_blob(b).await
        }
        async fn get_blob(&self, b: &BlobRef) -> Result<Vec<u8>> {
            self.0.get_blob(b).await
        }
    }
    let plain: Arc<dyn Store> = Arc::new(Plain(store.clone()));
    let last = plain
        .append_with(
            &id,
            &lease,
            2,
            &[goal("plain")],
            vec![b"p".to_vec()],
            Durability::Soon,
        )
        .await
        .unwrap()
        .last_seq;
    assert_eq!(last, 2);
    assert_eq!(store.get_blob(&BlobRef::of(b"p")).await.unwrap(), b"p");
    assert_eq!(store.read(&id, 2).await.unwrap()[0].event, goal("plain"));
}

#[tokio::test]
async fn soon_appends_are_visible_to_every_reader_at_once() {
    let dir = TempDir::new().unwrap();
    let store = open_lazy(dir.path()).await;
    let id = store.create("agent", &created("agent")).await.unwrap();
    let lease = store.acquire_lease(&id, "w", TTL).await.unwrap();
    let other = open_lazy(dir.path()).await;
    for seq in 2..6 {
        store
            .append_with(
                &id,
                &lease,
                seq,
                &[goal("g")],
                vec![seq.to_be_bytes().to_vec()],
                Durability::Soon,
            )
            .await
            .unwrap();
        // This store's readers, another store on the file, a bare
        // connection: all see it, though nothing was fsynced.
        assert_eq!(store.read(&id, 1).await.unwrap().len() as u64, seq);
        assert_eq!(other.summary(&id).await.unwrap().last_seq, seq);
        let last: u64 = bare(&dir)
            .query_row("SELECT last_seq FROM sessions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(last, seq);
        let blob = BlobRef::of(&seq.to_be_bytes());
        assert!(other.get_blob(&blob).await.is_ok());
    }
    let stats = store.write_stats();
    assert!(stats.durable < stats.committed, "{stats:?}");
}

/// Set in the child process of [`soon_appends_survive_a_process_crash`]: the
/// store directory.
const CRASH_CHILD_ENV: &str = "LONGHAND_STORE_CRASH_CHILD";

/// The child: appends with `Soon`, says so, and waits to be killed.
#[tokio::test]
#[ignore = "a helper: soon_appends_survive_a_process_crash runs it as a child process"]
async fn crash_child() {
    let Some(dir) = std::env::var_os(CRASH_CHILD_ENV) else {
        return;
    };
    let store = open_lazy(Path::new(&dir)).await;
    let id = store.create("agent", &created("agent")).await.unwrap();
    let lease = store.acquire_lease(&id, "child", TTL).await.unwrap();
    let mut last = 1;
    for k in 0..20u64 {
        last = store
            .append_with(
                &id,
                &lease,
                last + 1,
                &[goal(&format!("step {k}")), goal("done")],
                vec![format!("blob {k}").into_bytes()],
                Durability::Soon,
            )
            .await
            .unwrap()
            .last_seq;
    }
    let stats = store.write_stats();
    println!("ready {id} {last} {} {}", stats.durable, stats.committed);
    std::io::stdout().flush().unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    panic!("the parent did not kill this process");
}

/// `Soon` appends survive a kill -9 right after they returned, though they
/// were never fsynced: they are in the WAL, in the kernel's page cache.
#[test]
fn soon_appends_survive_a_process_crash() {
    use std::io::BufRead;
    let dir = TempDir::new().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sqlite::tests::crash_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ready = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        // libtest prints `test … ... ` without a newline before it.
        if let Some(at) = line.find("ready ") {
            ready = Some(line[at + "ready ".len()..].to_owned());
            break;
        }
    }
    // SIGKILL: no destructor, no final flush.
    child.kill().unwrap();
    child.wait().unwrap();
    let ready = ready.expect("the child never reported its appends");
    let fields: Vec<&str> = ready.split(' ').collect();
    let id: SessionId = fields[0].parse().unwrap();
    let last: u64 = fields[1].parse().unwrap();
    let (durable, committed): (u64, u64) = (fields[2].parse().unwrap(), fields[3].parse().unwrap());
    assert_eq!(last, 41);
    assert!(
        durable < committed,
        "the Soon appends were synced after all: {ready}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let records = store.read(&id, 1).await.unwrap();
        assert_eq!(records.len() as u64, last, "every Soon append survived");
        assert_eq!(records[39].event, goal("step 19"));
        assert_eq!(
            store.get_blob(&BlobRef::of(b"blob 19")).await.unwrap(),
            b"blob 19"
        );
    });
}

#[tokio::test]
async fn a_request_that_panics_fails_alone_and_the_writer_goes_on() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    let err = store
        .write(Durability::Now, 0, |conn, ctx| -> Result<()> {
            conn.execute(
                "INSERT INTO blobs (digest, size, bytes) VALUES ('sha256:x', 0, x'')",
                [],
            )
            .db(ctx.path, "test")?;
            panic!("a bug in a request");
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Invalid(m) if m.contains("panicked")),
        "{err:?}"
    );
    let rows: i64 = bare(&dir)
        .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0, "its write was rolled back");
    assert_eq!(
        store
            .append(&id, &lease, 2, &[goal("after")])
            .await
            .unwrap(),
        2
    );
}

/// The schema lets nothing but `handled_ms` of a control change, and no
/// control go (the settling rules themselves are in the conformance suite).
#[tokio::test]
async fn the_schema_lets_a_control_only_be_settled() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, _lease) = session(&dir).await;
    store
        .post_control(&id, ControlKind::Pause, None, "cli@h-1")
        .await
        .unwrap();
    // The schema lets nothing but handled_ms change, and nothing go.
    let conn = bare(&dir);
    assert!(conn.execute("DELETE FROM controls", []).is_err());
    assert!(
        conn.execute("UPDATE controls SET text = 'forged'", [])
            .is_err()
    );
}

#[tokio::test]
async fn a_post_is_fsynced_before_it_returns() {
    let dir = TempDir::new().unwrap();
    let (_store, _clock, id, _lease) = session(&dir).await;
    drop(_store);
    let store = open_lazy(dir.path()).await;
    store
        .post_control(&id, ControlKind::Pause, None, "me")
        .await
        .unwrap();
    let stats = store.write_stats();
    assert_eq!(stats.durable, stats.committed, "{stats:?}");
    assert!(stats.syncs >= 1, "{stats:?}");
}

/// A database written before the inbox (schema 1) is migrated in place:
/// its sessions stay and take controls.
#[tokio::test]
async fn a_schema_1_database_gains_an_inbox_and_keeps_its_sessions() {
    let dir = TempDir::new().unwrap();
    let id = {
        let (store, _clock, id, lease) = session(&dir).await;
        store.append(&id, &lease, 2, &[goal("g")]).await.unwrap();
        id
    };
    // Undo migrations 2 and 3, as a database of an older release looks.
    let conn = bare(&dir);
    conn.execute_batch(
        "DROP TABLE controls;
         ALTER TABLE leases DROP COLUMN holder_host;
         ALTER TABLE leases DROP COLUMN holder_pid;
         ALTER TABLE leases DROP COLUMN holder_started;
         ALTER TABLE leases DROP COLUMN holder_machine;
         ALTER TABLE leases DROP COLUMN renewed_ms;
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    let (store, _clock) = open(&dir).await;
    assert_eq!(store.read(&id, 1).await.unwrap().len(), 2);
    let posted = store
        .post_control(&id, ControlKind::Send, Some("hello".into()), "me")
        .await
        .unwrap();
    assert_eq!(posted.id, 1);
    let version: u32 = bare(&dir)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}
