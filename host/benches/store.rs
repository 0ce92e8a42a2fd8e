//! The session store's write path: appends per second and fsyncs per append
//! through `SqliteStore` (one writer thread, group commit, durability per
//! append), next to bare SQLite measured in the same run. Results and the
//! command go in `docs/benchmarks.md` ("Store write path").
//!
//! ```text
//! cargo bench -p longhand-host --bench store
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench store   # smaller, ~30 s
//! ```
//!
//! Parts, each on disk (the system temp dir) and on tmpfs (`/dev/shm`):
//! 1. **sync methods** — bare SQLite (WAL, one ~300-byte row per commit):
//!    a `synchronous=FULL` commit; a `NORMAL` commit alone; a `NORMAL`
//!    commit followed by `fdatasync`, by `fsync` of the WAL file on a
//!    descriptor of our own, or by `PRAGMA wal_checkpoint(PASSIVE)`. This
//!    is how the flusher's way of syncing was chosen. (The WAL-header
//!    fsync that the commit after a completed checkpoint pays is left out
//!    of every row: one unmeasured commit follows each round.)
//! 2. **appends** — 1, 100 and 10,000 sessions, each a task appending
//!    one at a time (`append_with`: two small events and one new 1 KiB
//!    blob), all `Soon` or all `Now`; appends per second, commits and WAL
//!    fsyncs per append, median and p99 latency of an append.
//! 3. **heartbeat** — 10,000 sessions each renewing its lease once, all at
//!    the same moment (the worst case of a TTL/3 heartbeat): wall time,
//!    commits and fsyncs.
//!
//! The machine is shared and noisy (2 cores): compare medians, not means.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use longhand_session::{Durability, Event, Lease, SessionId, SqliteStore, Store, WriteStats};
use rusqlite::{Connection, params};

const TTL: Duration = Duration::from_secs(60);

fn main() -> Result<()> {
    let quick = std::env::var("LONGHAND_BENCH_QUICK").is_ok_and(|v| v == "1");
    let scale: usize = if quick { 10 } else { 1 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "# longhand store write-path bench ({}), {} cores",
        if quick { "quick" } else { "full" },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for (place, base) in [("disk", std::env::temp_dir()), ("tmpfs", "/dev/shm".into())] {
        println!("\n## {place} ({})", base.display());
        sync_methods(&base, 2000 / scale)?;
        println!();
        println!(
            "| sessions | durability | appends | wall | appends/s | commits/append | WAL fsyncs/append | latency median | p99 |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for (sessions, each) in [(1, 2000 / scale), (100, 50 / scale), (10_000, 5)] {
            for durability in [Durability::Soon, Durability::Now] {
                let dir = tempfile::tempdir_in(&base)?;
                rt.block_on(appends(
                    dir.path(),
                    sessions,
                    each.max(1) as u64,
                    durability,
                ))?;
            }
        }
        let dir = tempfile::tempdir_in(&base)?;
        rt.block_on(heartbeat(dir.path(), 10_000 / scale))?;
    }
    Ok(())
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

/// Part 1: what one commit costs with each way of making it durable.
fn sync_methods(base: &Path, n: usize) -> Result<()> {
    let dir = tempfile::tempdir_in(base)?;
    let path = dir.path().join("bare.db");
    let conn = Connection::open(&path)?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
    conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL) STRICT;")?;
    let wal = std::fs::File::open(dir.path().join("bare.db-wal")).context("opening the WAL")?;
    let row = vec![b'x'; 300];
    let mut key = 0i64;
    let mut insert = |conn: &Connection| -> Result<()> {
        key += 1;
        conn.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", params![key, row])?;
        Ok(())
    };
    type Method<'a> = (
        &'a str,
        &'a str,
        Box<dyn Fn(&Connection) -> Result<()> + 'a>,
    );
    let methods: Vec<Method<'_>> = vec![
        (
            "FULL commit (SQLite syncs the WAL)",
            "FULL",
            Box::new(|_| Ok(())),
        ),
        ("NORMAL commit, no sync", "NORMAL", Box::new(|_| Ok(()))),
        (
            "NORMAL commit + fdatasync(WAL) (the flusher)",
            "NORMAL",
            Box::new(|_| Ok(wal.sync_data()?)),
        ),
        (
            "NORMAL commit + fsync(WAL)",
            "NORMAL",
            Box::new(|_| Ok(wal.sync_all()?)),
        ),
        (
            "NORMAL commit + wal_checkpoint(PASSIVE)",
            "NORMAL",
            Box::new(|c| {
                c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
                Ok(())
            }),
        ),
    ];
    // Round robin, one commit of each method per round, so the disk's
    // slow drifts hit every method alike.
    let mut times = vec![Vec::with_capacity(n); methods.len()];
    for _ in 0..n {
        for ((_, sync, after), times) in methods.iter().zip(&mut times) {
            conn.pragma_update(None, "synchronous", sync)?;
            let start = Instant::now();
            insert(&conn)?;
            after(&conn)?;
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
        // After a complete checkpoint the next commit restarts the WAL and
        // syncs its header: an extra fsync that belongs to the checkpoint,
        // not to the method measured next. Pay it here, unmeasured.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        insert(&conn)?;
    }
    println!("| bare SQLite, one ~300-byte row per commit | median | p90 | commits/s |");
    println!("|---|---|---|---|");
    for ((name, _, _), times) in methods.iter().zip(&mut times) {
        let med = percentile(times, 0.5);
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.0} |",
            med,
            percentile(times, 0.9),
            1e6 / med
        );
    }
    Ok(())
}

fn goal(text: String) -> Event {
    Event::GoalSet { goal: text }
}

async fn setup(dir: &Path, sessions: usize) -> Result<(SqliteStore, Vec<(SessionId, Lease)>)> {
    let store = SqliteStore::open(dir).await?;
    let created = Event::SessionCreated {
        agent_name: "bench".into(),
        agent: serde_json::json!({"model": "m"}),
        config_digest: "sha256:00".into(),
    };
    // Set up concurrently too: 10,000 sessions one by one would be 20,000
    // fsynced round trips.
    let tasks: Vec<_> = (0..sessions)
        .map(|_| {
            let (store, created) = (store.clone(), created.clone());
            tokio::spawn(async move {
                let id = store.create("bench", &created).await?;
                let lease = store.acquire_lease(&id, "bench", TTL).await?;
                anyhow::Ok((id, lease))
            })
        })
        .collect();
    let mut out = Vec::with_capacity(sessions);
    for t in tasks {
        out.push(t.await??);
    }
    Ok((store, out))
}

fn delta(a: WriteStats, b: WriteStats) -> (u64, u64, u64) {
    (
        b.requests - a.requests,
        b.commits - a.commits,
        b.syncs - a.syncs,
    )
}

/// Part 2: `sessions` tasks, each appending `each` times one after another.
async fn appends(dir: &Path, sessions: usize, each: u64, durability: Durability) -> Result<()> {
    let (store, leases) = setup(dir, sessions).await?;
    let before = store.write_stats();
    let start = Instant::now();
    let tasks: Vec<_> = leases
        .into_iter()
        .enumerate()
        .map(|(i, (id, lease))| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(each as usize);
                for k in 0..each {
                    // A unique 1 KiB blob (a model response, a tool result).
                    let mut blob = format!("session {i} append {k} ").into_bytes();
                    blob.resize(1024, b'.');
                    let events = [
                        goal(format!("session {i}, append {k}: a tool call")),
                        goal(format!("session {i}, append {k}: its result")),
                    ];
                    let t = Instant::now();
                    store
                        .append_with(&id, &lease, 2 + 2 * k, &events, vec![blob], durability)
                        .await?;
                    latencies.push(t.elapsed().as_secs_f64() * 1e3);
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    let wall = start.elapsed();
    let (requests, commits, syncs) = delta(before, store.write_stats());
    let n = latencies.len() as f64;
    println!(
        "| {sessions} | {durability:?} | {} | {:.2} s | {:.0} | {:.3} | {:.3} | {:.2} ms | {:.2} ms |",
        latencies.len(),
        wall.as_secs_f64(),
        n / wall.as_secs_f64(),
        commits as f64 / requests as f64,
        syncs as f64 / n,
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
    );
    std::io::stdout().flush()?;
    Ok(())
}

/// Part 3: every session renews its lease at the same moment.
async fn heartbeat(dir: &Path, sessions: usize) -> Result<()> {
    let (store, leases) = setup(dir, sessions).await?;
    let store = Arc::new(store);
    let before = store.write_stats();
    let start = Instant::now();
    let tasks: Vec<_> = leases
        .into_iter()
        .map(|(_, lease)| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.renew(&lease, TTL).await })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let wall = start.elapsed();
    let (requests, commits, syncs) = delta(before, store.write_stats());
    println!(
        "\nheartbeat: {sessions} renewals at once in {:.1} ms ({:.1} µs per renewal), {commits} commits, {syncs} WAL fsyncs, {requests} requests",
        wall.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e6 / sessions as f64,
    );
    Ok(())
}
