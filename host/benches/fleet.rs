//! The fleet on both backends: what `longhand worker` processes get through
//! against a slow model, and how long waking a very long session takes.
//! Results and the command that produced them go in `docs/benchmarks.md`
//! ("Fleet: SQLite and PostgreSQL").
//!
//! ```text
//! eval "$(.ci/setup-postgres.sh)"              # LONGHAND_TEST_PG; without it SQLite only
//! cargo bench -p longhand-host --bench fleet
//! LONGHAND_BENCH_ONLY=fleet|wake ...           # one part
//! LONGHAND_BENCH_BACKENDS=sqlite|postgres ...   # one backend
//! LONGHAND_BENCH_SESSIONS=60 LONGHAND_BENCH_CONCURRENCY=16 ...   # part 1 size
//! LONGHAND_BENCH_WAKE=1000,100000,1000000 LONGHAND_BENCH_PG_WAKE_MAX=1000000 ...  # part 2 sizes
//! ```
//!
//! 1. **fleet** — for each backend and 1, 2, 3 workers: `N` sessions are
//!    detached with `longhand run --detach` (not timed), then that many
//!    `longhand worker --until-idle` processes run them all. Each session's
//!    model (a mock chat-completions server in this process, on 127.0.0.1,
//!    answering after 500 ms) asks for one `fs__write` call, then answers
//!    with text: two steps, one write effect. Printed: wall time from the
//!    workers' start to the last one's exit, sessions/s, steps/s (model
//!    answers served / wall), and the floor a perfect fleet would reach
//!    (`workers × concurrency` sessions per second, each needing 1 s of
//!    model time).
//! 2. **wake** — logs of 1k … 1M events (`goal_set` events, a snapshot
//!    every `SNAPSHOT_EVERY` events as the loop writes them) built through
//!    the store API, then `load_state` (latest snapshot + tail, verified)
//!    timed 21 times on an open store; median and p90 per size, and the
//!    ratio to the smallest size (flat means ≈ 1).
//!
//! The machine is shared and noisy (2 cores): compare medians and ratios.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use longhand_brain::core::state::SessionState;
use longhand_brain::core::state::snapshot;
use longhand_brain::{SNAPSHOT_EVERY, load_state};
use longhand_session::{
    Durability, Event, EventRecord, PostgresStore, SessionId, SessionStatus, SqliteStore, Store,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_longhand");
const MOCK_LATENCY: Duration = Duration::from_millis(500);

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn wanted(part: &str) -> bool {
    std::env::var("LONGHAND_BENCH_ONLY").map_or(true, |v| v.split(',').any(|p| p == part))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn p90(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// A fresh store of one backend: SQLite in a new directory on tmpfs, or a
/// new PostgreSQL schema (dropped with `drop_schema`).
struct Fresh {
    /// SQLite: the `LONGHAND_HOME`.
    home: tempfile::TempDir,
    /// PostgreSQL: the store URL (with its schema) and the schema.
    pg: Option<(String, String)>,
}

impl Fresh {
    async fn new(backend: Backend, pg_url: Option<&str>, cache: &Path) -> Result<Self> {
        let home = tempfile::Builder::new()
            .prefix("longhand-fleet-bench")
            .tempdir_in(if Path::new("/dev/shm").is_dir() {
                Path::new("/dev/shm")
            } else {
                Path::new("/tmp")
            })?;
        std::os::unix::fs::symlink(cache, home.path().join("cache"))?;
        let pg = match (backend, pg_url) {
            (Backend::Postgres, Some(url)) => {
                let schema = format!(
                    "lh_bench_{}",
                    SessionId::generate(0).as_str()[2..].to_lowercase()
                );
                admin(url, &format!("CREATE SCHEMA {schema}")).await?;
                let sep = if url.contains('?') { '&' } else { '?' };
                Some((
                    format!("{url}{sep}options=-c%20search_path%3D{schema}"),
                    schema,
                ))
            }
            (Backend::Postgres, None) => bail!("no LONGHAND_TEST_PG"),
            _ => None,
        };
        Ok(Self { home, pg })
    }

    async fn store(&self) -> Result<Arc<dyn Store>> {
        Ok(match &self.pg {
            Some((url, _)) => Arc::new(PostgresStore::connect(url).await?),
            None => Arc::new(SqliteStore::open(self.home.path()).await?),
        })
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env_clear()
            .env("LONGHAND_HOME", self.home.path())
            .stdin(Stdio::null());
        if let Some((url, _)) = &self.pg {
            cmd.env("LONGHAND_STORE", url);
        }
        cmd
    }

    async fn drop_schema(&self, pg_url: Option<&str>) -> Result<()> {
        if std::env::var_os("LONGHAND_BENCH_KEEP").is_some() {
            println!("kept schema {:?}", self.pg.as_ref().map(|p| &p.1));
            return Ok(());
        }
        if let (Some((_, schema)), Some(url)) = (&self.pg, pg_url) {
            admin(url, &format!("DROP SCHEMA {schema} CASCADE")).await?;
        }
        Ok(())
    }
}

async fn admin(url: &str, sql: &str) -> Result<()> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let task = tokio::spawn(conn);
    client.batch_execute(sql).await?;
    drop(client);
    let _ = task.await;
    Ok(())
}

// ---------------------------------------------------------------- part 1

/// The mock model: a tool call first, text once the request carries the
/// tool's result; every answer after [`MOCK_LATENCY`].
async fn mock_server(answered: Arc<AtomicU64>) -> Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answered = answered.clone();
            tokio::spawn(async move {
                let mut buf: Vec<u8> = Vec::with_capacity(8192);
                loop {
                    let head_end = loop {
                        if let Some(i) = find(&buf, b"\r\n\r\n") {
                            break i + 4;
                        }
                        if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                            return;
                        }
                    };
                    let len = content_length(&buf[..head_end]);
                    while buf.len() < head_end + len {
                        if stream.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    let has_result =
                        find(&buf[head_end..head_end + len], br#""role":"tool""#).is_some();
                    buf.drain(..head_end + len);
                    tokio::time::sleep(MOCK_LATENCY).await;
                    let body = if has_result {
                        final_body()
                    } else {
                        tool_body()
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    Ok(port)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

fn tool_body() -> String {
    let args = json!({"path": "/w/out.txt", "content": "written by the bench"}).to_string();
    json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "model": "mock",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "fs__write", "arguments": args}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
    .to_string()
}

fn final_body() -> String {
    json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "model": "mock",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Written."}}],
        "usage": {"prompt_tokens": 150, "completion_tokens": 10, "total_tokens": 160}
    })
    .to_string()
}

fn agent_dir(port: u16) -> Result<tempfile::TempDir> {
    let dir = tempfile::TempDir::new()?;
    std::fs::create_dir_all(dir.path().join("work"))?;
    std::fs::write(
        dir.path().join("agent.toml"),
        format!(
            r#"name = "fleet-bench"
instructions = "Write the file, then say so."
goal = "Write /w/out.txt."

[model]
provider = "openai"
model = "mock"
base_url = "http://127.0.0.1:{port}/v1"
stream = false

[limits]
max_steps = 10

[[tools]]
component = "fs"
only = ["write"]
dirs = ["work:/w:rw"]
"#
        ),
    )?;
    Ok(dir)
}

fn run_ok(mut cmd: Command, what: &str) -> Result<String> {
    let out = cmd.output().with_context(|| format!("starting {what}"))?;
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

struct FleetRun {
    wall: Duration,
    finished: usize,
    steps: u64,
}

#[expect(
    clippy::too_many_arguments,
    reason = "one bench run's knobs, called from one place"
)]
async fn fleet_run(
    backend: Backend,
    pg_url: Option<&str>,
    cache: &Path,
    agent: &Path,
    answered: &AtomicU64,
    sessions: usize,
    workers: usize,
    concurrency: usize,
) -> Result<FleetRun> {
    let fresh = Fresh::new(backend, pg_url, cache).await?;
    let agent = agent.to_str().ok_or_else(|| anyhow!("agent path"))?;
    for chunk in (0..sessions).collect::<Vec<_>>().chunks(4) {
        let children: Vec<_> = chunk
            .iter()
            .map(|_| {
                let mut cmd = fresh.cmd(&["run", agent, "--detach", "--json"]);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                cmd.spawn()
            })
            .collect::<std::io::Result<_>>()?;
        for child in children {
            let out = child.wait_with_output()?;
            if !out.status.success() {
                bail!("run --detach: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
    let before = answered.load(Ordering::Relaxed);
    let concurrency = concurrency.to_string();
    let mut args = vec!["worker", "--until-idle", "--concurrency", &concurrency];
    let url;
    if let Some((u, _)) = &fresh.pg {
        url = u.clone();
        args.extend(["--store", &url]);
    }
    let start = Instant::now();
    let mut procs = Vec::new();
    for _ in 0..workers {
        let mut cmd = fresh.cmd(&args);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        procs.push(cmd.spawn()?);
    }
    // A worker started after the others claimed every session finds none
    // and leaves early; the run is over when the last one exits.
    let waits = procs
        .into_iter()
        .map(|mut p| tokio::task::spawn_blocking(move || p.wait()));
    for w in waits {
        w.await??;
    }
    let wall = start.elapsed();
    let steps = answered.load(Ordering::Relaxed) - before;
    let store = fresh.store().await?;
    let finished = store
        .list()
        .await?
        .iter()
        .filter(|s| s.status == SessionStatus::Finished)
        .count();
    drop(store);
    fresh.drop_schema(pg_url).await?;
    Ok(FleetRun {
        wall,
        finished,
        steps,
    })
}

async fn fleet_part(pg_url: Option<&str>, backends: &[Backend], cache: &Path) -> Result<()> {
    let sessions = env_num("LONGHAND_BENCH_SESSIONS", 60) as usize;
    let concurrency = env_num("LONGHAND_BENCH_CONCURRENCY", 16) as usize;
    println!(
        "\n## 1. Fleet: {sessions} sessions (2 model answers of 500 ms + 1 fs__write each), \
         `longhand worker --concurrency {concurrency}` processes"
    );
    let answered = Arc::new(AtomicU64::new(0));
    let port = mock_server(answered.clone()).await?;
    let agent = agent_dir(port)?;
    println!("| backend | workers | wall | sessions/s | steps/s | floor (sessions/s) | finished |");
    println!("|---|---|---|---|---|---|---|");
    for &backend in backends {
        for workers in 1..=env_num("LONGHAND_BENCH_MAX_WORKERS", 3) as usize {
            let r = fleet_run(
                backend,
                pg_url,
                cache,
                agent.path(),
                &answered,
                sessions,
                workers,
                concurrency,
            )
            .await?;
            let secs = r.wall.as_secs_f64();
            // Each session needs 1 s of model time; a perfect fleet runs
            // workers × concurrency at once.
            let floor = (workers * concurrency).min(sessions) as f64;
            println!(
                "| {backend:?} | {workers} | {secs:.2} s | {:.1} | {:.1} | {floor:.0} | {}/{sessions} |",
                sessions as f64 / secs,
                r.steps as f64 / secs,
                r.finished
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- part 2

/// Builds a log of `target` events: `goal_set`s, a snapshot every
/// `SNAPSHOT_EVERY` events with its blobs, as `Runner::flush` writes them.
async fn build_log(store: &dyn Store, target: u64) -> Result<SessionId> {
    let created = Event::SessionCreated {
        agent_name: "wake".to_owned(),
        agent: json!({"name": "wake"}),
        config_digest: "sha256:bench".to_owned(),
    };
    let id = store.create("wake", &created).await?;
    let lease = store
        .acquire_lease(&id, "bench", Duration::from_secs(3600))
        .await?;
    let mut state = SessionState::fold(&store.read(&id, 1).await?);
    let mut pending = Vec::new();
    let mut first_pending = state.last_seq + 1;
    let mut n = 0u64;
    while state.last_seq < target {
        n += 1;
        let event = Event::GoalSet {
            goal: format!("goal {n}"),
        };
        state.apply(&EventRecord {
            seq: state.last_seq + 1,
            at_ms: 0,
            event: event.clone(),
        });
        pending.push(event);
        if state.since_snapshot >= SNAPSHOT_EVERY {
            store
                .append(&id, &lease, first_pending, &std::mem::take(&mut pending))
                .await?;
            let encoded = snapshot::encode(&state);
            let through_seq = state.last_seq;
            let snap = Event::Snapshot {
                state: encoded.root,
                through_seq,
            };
            store
                .append_with(
                    &id,
                    &lease,
                    through_seq + 1,
                    std::slice::from_ref(&snap),
                    encoded.blobs,
                    Durability::Soon,
                )
                .await?;
            state.apply(&EventRecord {
                seq: through_seq + 1,
                at_ms: 0,
                event: snap,
            });
            first_pending = state.last_seq + 1;
        }
    }
    if !pending.is_empty() {
        store.append(&id, &lease, first_pending, &pending).await?;
    }
    store.release(&lease).await?;
    Ok(id)
}

async fn wake_part(pg_url: Option<&str>, backends: &[Backend], cache: &Path) -> Result<()> {
    let sizes: Vec<u64> = std::env::var("LONGHAND_BENCH_WAKE")
        .unwrap_or_else(|_| "1000,100000,1000000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let pg_max = env_num("LONGHAND_BENCH_PG_WAKE_MAX", u64::MAX);
    println!(
        "\n## 2. Wake time: load_state (latest snapshot + tail, verified) on an open store, 21 repeats"
    );
    println!("| backend | events | build | wake median | wake p90 | median / smallest |");
    println!("|---|---|---|---|---|---|");
    for &backend in backends {
        let fresh = Fresh::new(backend, pg_url, cache).await?;
        let store = fresh.store().await?;
        let mut base = None;
        for &size in &sizes {
            if backend == Backend::Postgres && size > pg_max {
                println!("| {backend:?} | {size} | skipped (LONGHAND_BENCH_PG_WAKE_MAX) | | | |");
                continue;
            }
            let built = Instant::now();
            let id = build_log(store.as_ref(), size).await?;
            let build = built.elapsed();
            // One untimed wake warms the connection and caches.
            let state = load_state(store.as_ref(), &id).await?;
            if state.last_seq < size {
                bail!("load_state saw {} of {size} events", state.last_seq);
            }
            let mut times = Vec::new();
            for _ in 0..21 {
                let t = Instant::now();
                let state = load_state(store.as_ref(), &id).await?;
                times.push(t.elapsed().as_secs_f64() * 1000.0);
                std::hint::black_box(state);
            }
            let med = median(&mut times);
            let p = p90(&mut times);
            let base = *base.get_or_insert(med);
            println!(
                "| {backend:?} | {size} | {:.1} s | {med:.2} ms | {p:.2} ms | {:.2} |",
                build.as_secs_f64(),
                med / base
            );
        }
        drop(store);
        fresh.drop_schema(pg_url).await?;
    }
    Ok(())
}

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; anything else (`cargo test
    // --benches`) only checks that this builds and starts.
    if !std::env::args().any(|a| a == "--bench") {
        println!("fleet bench: pass --bench (cargo bench) to run it");
        return Ok(());
    }
    let pg_url = std::env::var("LONGHAND_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty());
    let only = std::env::var("LONGHAND_BENCH_BACKENDS").unwrap_or_default();
    let pick = |name: &str| only.is_empty() || only.split(',').any(|b| b == name);
    let mut backends = Vec::new();
    if pick("sqlite") {
        backends.push(Backend::Sqlite);
    }
    match &pg_url {
        Some(_) if pick("postgres") => backends.push(Backend::Postgres),
        Some(_) => {}
        None => println!("PostgreSQL skipped: set LONGHAND_TEST_PG (see .ci/setup-postgres.sh)"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        // One compile cache for every home, warmed once.
        let cache = tempfile::TempDir::new()?;
        let warm = tempfile::TempDir::new()?;
        std::os::unix::fs::symlink(cache.path(), warm.path().join("cache"))?;
        let mut cmd = Command::new(BIN);
        cmd.args(["tool", "describe", "fs"])
            .env_clear()
            .env("LONGHAND_HOME", warm.path())
            .stdout(Stdio::null());
        run_ok(cmd, "warming the compile cache")?;
        println!(
            "# Fleet bench ({} build of longhand)",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
        );
        if wanted("fleet") {
            fleet_part(pg_url.as_deref(), &backends, cache.path()).await?;
        }
        if wanted("wake") {
            wake_part(pg_url.as_deref(), &backends, cache.path()).await?;
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(())
}
