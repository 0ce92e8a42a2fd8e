//! Session and brain: what the agent loop and its log cost, each figure next
//! to a baseline measured in the same run. Results and the command that
//! produced them go in `docs/benchmarks.md` ("Session and brain").
//!
//! ```text
//! cargo bench -p longhand-host --bench session
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench session   # < 1 min
//! LONGHAND_BENCH_LANGGRAPH=1 cargo bench -p longhand-host --bench session
//! LONGHAND_BENCH_ONLY=loop,wake,fleet,script cargo bench ...           # pick parts
//! ```
//!
//! Parts:
//! 1. **loop** — the real loop (`freeze`/`bind`, `Runner::start`, `run`) on a
//!    `SqliteStore` in a temporary directory (WAL, `synchronous=FULL`),
//!    driven by a zero-latency scripted model whose every turn calls
//!    `json__query` (filter `.` on `{"a":1}`). Per step: the time between
//!    consecutive `model_responded` events, the tool's own `wall_us` from its
//!    receipt, and the difference (the harness overhead). The store is
//!    wrapped to count and time every call, so the overhead splits into
//!    "in the store" and "the rest". Baselines: a bare SQLite commit and a
//!    bare no-op upsert on the same disk; the same loop on tmpfs (where
//!    fsync is free).
//! 2. **wake** — `load_state` (latest snapshot + tail) on logs of 1k, 10k
//!    and 100k events built through the store API with a snapshot every 100
//!    events, exactly as the loop writes them; each repeat opens the store
//!    afresh. Baselines: the 1k figure, and a full replay from seq 1.
//! 3. **fleet** — 10,000 sessions as tokio tasks in this process, one
//!    `Hands`, one `SqliteStore`, one shared `OpenAiProvider`, against a
//!    mock chat-completions server (a child process running this binary)
//!    that answers after 500 ms: a tool call, then text. Peak RSS (VmHWM,
//!    reset before the run), wall time, throughput. Baselines: the 1 s
//!    floor two model answers impose, the provider alone (two `complete`
//!    calls per task, no loop, no store, no tools), and the same fleet with
//!    the store on tmpfs. `LONGHAND_BENCH_SESSIONS=N` changes the size.
//! 4. **langgraph** (only with `LONGHAND_BENCH_LANGGRAPH=1`) — runs
//!    `host/benches/langgraph/run.sh` (which makes its own venv) with the
//!    same step counts and prints our per-step time and store size against
//!    it.
//!
//! The machine is shared and noisy (2 cores): compare medians, not means.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use async_trait::async_trait;
use longhand_host::brain::agent::{self, Frozen, Runner, SNAPSHOT_EVERY, load_state};
use longhand_host::brain::config::AgentConfig;
use longhand_host::brain::model::{
    HttpConfig, Message, ModelError, ModelProvider, ModelRequest, ModelResponse, OpenAiProvider,
    StopReason, ToolCall, Usage,
};
use longhand_host::brain::script::ScriptProvider;
use longhand_host::brain::state::SessionState;
use longhand_host::hands::{Hands, HandsConfig};
use longhand_host::session::{
    BlobRef, Event, EventRecord, Lease, SessionId, SessionStatus, SessionSummary, SqliteStore,
    Store, StoreError, WakeLog,
};
use serde_json::{Value, json};

/// Set in the child process that plays the model server.
const MOCK_ENV: &str = "LONGHAND_BENCH_MOCK_SERVER";
/// How long the mock model thinks before each answer.
const MOCK_LATENCY: Duration = Duration::from_millis(500);
/// The tool every scripted turn calls, and its input.
const TOOL: &str = "json__query";
const TOOL_ARGS: &str = r#"{"filter":".","input":{"a":1}}"#;
const GOAL: &str = "Query the value, again and again.";

fn main() -> Result<()> {
    if std::env::var_os(MOCK_ENV).is_some() {
        return mock::serve();
    }
    let quick = std::env::var("LONGHAND_BENCH_QUICK").is_ok_and(|v| v == "1");
    let only = std::env::var("LONGHAND_BENCH_ONLY").ok();
    let want = |part: &str| match &only {
        Some(list) => list.split(',').any(|p| p.trim() == part),
        None => part != "script",
    };
    let nofile = raise_nofile();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        println!(
            "# longhand session bench ({}), {} cores, RLIMIT_NOFILE {nofile}, tmp {}",
            if quick { "quick" } else { "full" },
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            std::env::temp_dir().display()
        );
        let setup = Instant::now();
        let hands: &'static Hands = Box::leak(Box::new(Hands::new(HandsConfig::default())?));
        let base = tempfile::tempdir()?;
        let frozen = agent::freeze(hands, &agent_config()?, base.path(), no_env).await?;
        println!(
            "setup: engine + freeze (compiles json.wasm once) {:.1} s",
            setup.elapsed().as_secs_f64()
        );
        let mut ours = None;
        if want("loop") {
            ours = Some(loop_part(hands, &frozen, quick).await?);
        }
        if want("script") {
            script_probe(hands, &frozen).await?;
        }
        if want("wake") {
            wake_part(&frozen, quick).await?;
        }
        if want("fleet") {
            fleet_part(hands, &frozen, quick).await?;
        }
        if std::env::var("LONGHAND_BENCH_LANGGRAPH").is_ok_and(|v| v == "1") {
            langgraph_part(ours.as_ref(), quick)?;
        }
        Ok(())
    })
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// The agent every part runs: one tool, limits out of the way (the script
/// decides when to stop).
fn agent_config() -> Result<AgentConfig> {
    let text = r#"
        name = "bench"
        instructions = "Query the value with json__query until told to stop."
        [model]
        provider = "openai"
        model = "mock"
        stream = false
        [limits]
        max_steps = 1000000000
        max_tool_calls = 1000000000
        max_wall_secs = 1000000000
        max_input_tokens = 1000000000000
        max_output_tokens = 1000000000000
        [[tools]]
        component = "json"
        only = ["query"]
    "#;
    Ok(toml::from_str(text)?)
}

// ---------------------------------------------------------------------------
// Small statistics and system helpers.

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 * p) as usize).min(s.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// A field of `/proc/<pid>/status` in bytes (`VmHWM`, `VmRSS`).
fn proc_status_bytes(pid: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so a part's peak is its own.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Raise RLIMIT_NOFILE as far as allowed (root may go to `fs.nr_open`):
/// the fleet part holds 10k sockets here and 10k in the mock server.
fn raise_nofile() -> u64 {
    let ceiling: libc::rlim_t = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20);
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur);
        let want = libc::rlimit {
            rlim_cur: ceiling.max(cur.rlim_cur),
            rlim_max: ceiling.max(cur.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            let soft = libc::rlimit {
                rlim_cur: cur.rlim_max,
                rlim_max: cur.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur);
    }
    cur.rlim_cur
}

/// db + wal of a store directory.
fn store_bytes(dir: &Path) -> u64 {
    ["longhand.db", "longhand.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

/// What a store directory holds, after a checkpoint this bench runs itself
/// (the store exposes none).
#[derive(Debug, Default, Clone)]
struct StoreSize {
    as_left: u64,
    checkpointed: u64,
    event_json: u64,
    events: u64,
    blob_bytes: u64,
    blobs: u64,
    snapshot_blob_bytes: u64,
    snapshots: u64,
}

fn measure_store(dir: &Path) -> Result<StoreSize> {
    let as_left = store_bytes(dir);
    let conn = rusqlite::Connection::open(dir.join("longhand.db"))?;
    let q = |sql: &str| -> Result<u64> {
        Ok(conn
            .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))?
            .unwrap_or(0) as u64)
    };
    let size = StoreSize {
        as_left,
        checkpointed: 0,
        event_json: q("SELECT sum(length(json)) FROM events")?,
        events: q("SELECT count(*) FROM events")?,
        blob_bytes: q("SELECT sum(size) FROM blobs")?,
        blobs: q("SELECT count(*) FROM blobs")?,
        snapshot_blob_bytes: q("SELECT sum(size) FROM blobs WHERE digest IN
               (SELECT json_extract(json, '$.state.digest') FROM events WHERE type = 'snapshot')")?,
        snapshots: q("SELECT count(*) FROM events WHERE type = 'snapshot'")?,
    };
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    drop(conn);
    Ok(StoreSize {
        checkpointed: store_bytes(dir),
        ..size
    })
}

// ---------------------------------------------------------------------------
// A store wrapper that counts and times every call.

#[derive(Debug, Default)]
struct Tally {
    calls: AtomicU64,
    nanos: AtomicU64,
}

impl Tally {
    fn add(&self, d: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
    fn time(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

/// `SqliteStore` with a stopwatch on each method. Only the bench's view:
/// the loop sees an ordinary `Arc<dyn Store>`.
#[derive(Debug)]
struct Timed {
    inner: SqliteStore,
    append: Tally,
    put: Tally,
    get: Tally,
    lease: Tally,
    renew: Tally,
    other: Tally,
}

impl Timed {
    fn new(inner: SqliteStore) -> Self {
        Self {
            inner,
            append: Tally::default(),
            put: Tally::default(),
            get: Tally::default(),
            lease: Tally::default(),
            renew: Tally::default(),
            other: Tally::default(),
        }
    }

    fn total(&self) -> Duration {
        self.append.time()
            + self.put.time()
            + self.get.time()
            + self.lease.time()
            + self.renew.time()
            + self.other.time()
    }
}

async fn timed<T>(tally: &Tally, f: impl Future<Output = T>) -> T {
    let start = Instant::now();
    let out = f.await;
    tally.add(start.elapsed());
    out
}

type SResult<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl Store for Timed {
    async fn create(&self, agent_name: &str, created: &Event) -> SResult<SessionId> {
        timed(&self.other, self.inner.create(agent_name, created)).await
    }
    async fn list(&self) -> SResult<Vec<SessionSummary>> {
        timed(&self.other, self.inner.list()).await
    }
    async fn summary(&self, session: &SessionId) -> SResult<SessionSummary> {
        timed(&self.other, self.inner.summary(session)).await
    }
    async fn acquire_lease(
        &self,
        session: &SessionId,
        owner: &str,
        ttl: Duration,
    ) -> SResult<Lease> {
        timed(&self.lease, self.inner.acquire_lease(session, owner, ttl)).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> SResult<Lease> {
        timed(&self.renew, self.inner.renew(lease, ttl)).await
    }
    async fn take_over(
        &self,
        session: &SessionId,
        dead_owner: &str,
        owner: &str,
        ttl: Duration,
    ) -> SResult<Lease> {
        timed(
            &self.lease,
            self.inner.take_over(session, dead_owner, owner, ttl),
        )
        .await
    }
    async fn release(&self, lease: &Lease) -> SResult<()> {
        timed(&self.lease, self.inner.release(lease)).await
    }
    async fn append(
        &self,
        session: &SessionId,
        lease: &Lease,
        expected_seq: u64,
        events: &[Event],
    ) -> SResult<u64> {
        timed(
            &self.append,
            self.inner.append(session, lease, expected_seq, events),
        )
        .await
    }
    async fn read(&self, session: &SessionId, from_seq: u64) -> SResult<Vec<EventRecord>> {
        timed(&self.other, self.inner.read(session, from_seq)).await
    }
    async fn latest_snapshot(&self, session: &SessionId) -> SResult<Option<EventRecord>> {
        timed(&self.other, self.inner.latest_snapshot(session)).await
    }
    async fn put_blob(&self, bytes: Vec<u8>) -> SResult<BlobRef> {
        timed(&self.put, self.inner.put_blob(bytes)).await
    }
    async fn get_blob(&self, blob: &BlobRef) -> SResult<Vec<u8>> {
        timed(&self.get, self.inner.get_blob(blob)).await
    }
    async fn wake_log(&self, session: &SessionId) -> SResult<WakeLog> {
        timed(&self.other, self.inner.wake_log(session)).await
    }
}

// ---------------------------------------------------------------------------
// The scripted model of parts 1 and 2.

/// Turn k (k = the call id of the last tool result + 1) calls the tool as
/// `c-k`; after `steps` turns it answers with text. Stateless like
/// `ScriptProvider`, but it reads the turn from the last result instead of
/// counting assistant messages, which stop growing once the history is
/// trimmed (see `script_probe`).
struct Scripted {
    steps: u64,
}

fn scripted_turn(k: u64, steps: u64) -> ModelResponse {
    if k > steps {
        return ModelResponse {
            text: Some("done".to_owned()),
            tool_calls: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
                ..Usage::default()
            },
            ..ModelResponse::default()
        };
    }
    ModelResponse {
        text: None,
        tool_calls: vec![ToolCall {
            id: format!("c-{k}"),
            name: TOOL.to_owned(),
            arguments: TOOL_ARGS.to_owned(),
        }],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            ..Usage::default()
        },
        ..ModelResponse::default()
    }
}

#[async_trait]
impl ModelProvider for Scripted {
    fn name(&self) -> &str {
        "script"
    }
    fn model(&self) -> &str {
        "script"
    }
    async fn complete(&self, req: &ModelRequest) -> std::result::Result<ModelResponse, ModelError> {
        let done = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::ToolResult { call_id, .. } => call_id.strip_prefix("c-")?.parse().ok(),
                _ => None,
            })
            .unwrap_or(0);
        Ok(scripted_turn(done + 1, self.steps))
    }
}

// ---------------------------------------------------------------------------
// Part 1: harness overhead per step.

#[derive(Default)]
struct Marks {
    responded: Vec<Instant>,
    tool_wall_us: Vec<u64>,
    first_receipt: Option<Value>,
}

struct LoopRun {
    steps: u64,
    step_us: Vec<f64>,
    tool_us: Vec<f64>,
    overhead_us: Vec<f64>,
    total: Duration,
    store_time: Duration,
    appends: u64,
    puts: u64,
    put_time: Duration,
    gets: u64,
    append_time: Duration,
    size: StoreSize,
    receipt: Option<Value>,
}

async fn loop_run(hands: &Hands, frozen: &Frozen, steps: u64, dir: &Path) -> Result<LoopRun> {
    let sqlite = SqliteStore::open(dir).await?;
    let store = Arc::new(Timed::new(sqlite));
    let bound = agent::bind(hands, frozen.clone(), no_env).await?;
    let provider = Arc::new(Scripted { steps });
    let marks = Arc::new(Mutex::new(Marks::default()));
    let start = Instant::now();
    let mut runner = Runner::start(store.clone(), hands, bound, provider, GOAL, "bench").await?;
    let seen = marks.clone();
    runner.observe(Box::new(move |record: &EventRecord, _: &SessionState| {
        let now = Instant::now();
        let Ok(mut m) = seen.lock() else { return };
        match &record.event {
            Event::ModelResponded { .. } => m.responded.push(now),
            Event::ToolFinished { receipt, .. } => {
                m.tool_wall_us
                    .push(receipt.get("wall_us").and_then(Value::as_u64).unwrap_or(0));
                if m.first_receipt.is_none() {
                    m.first_receipt = Some(receipt.clone());
                }
            }
            _ => {}
        }
    }));
    let end = runner.run().await?;
    let total = start.elapsed();
    if end.status != SessionStatus::Finished || runner.state().tool_calls != steps {
        bail!(
            "the {steps}-step run ended {:?} after {} tool calls: {:?}",
            end.status,
            runner.state().tool_calls,
            end.detail
        );
    }
    drop(runner);
    let m = std::mem::take(&mut *marks.lock().map_err(|_| anyhow!("poisoned"))?);
    let mut step_us = Vec::new();
    let mut tool_us = Vec::new();
    let mut overhead_us = Vec::new();
    for (k, pair) in m.responded.windows(2).enumerate() {
        let step = (pair[1] - pair[0]).as_secs_f64() * 1e6;
        let tool = m.tool_wall_us.get(k).copied().unwrap_or(0) as f64;
        step_us.push(step);
        tool_us.push(tool);
        overhead_us.push(step - tool);
    }
    let run = LoopRun {
        steps,
        step_us,
        tool_us,
        overhead_us,
        total,
        store_time: store.total(),
        appends: store.append.calls(),
        append_time: store.append.time(),
        puts: store.put.calls(),
        put_time: store.put.time(),
        gets: store.get.calls(),
        size: StoreSize::default(),
        receipt: m.first_receipt,
    };
    drop(store);
    Ok(LoopRun {
        size: measure_store(dir)?,
        ..run
    })
}

/// Bare SQLite on `dir` with the store's settings: median commit of one
/// ~300-byte row, and of an `INSERT … ON CONFLICT DO NOTHING` that changes
/// nothing (what a repeated `put_blob` is).
fn bare_sqlite(dir: &Path, n: usize) -> Result<(f64, f64)> {
    let conn = rusqlite::Connection::open(dir.join("bare.db"))?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB NOT NULL) STRICT;",
    )?;
    let row = vec![b'x'; 300];
    let mut commit = Vec::new();
    for i in 0..n {
        let start = Instant::now();
        conn.execute(
            "INSERT INTO t (k, v) VALUES (?1, ?2)",
            rusqlite::params![format!("k{i}"), row],
        )?;
        commit.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let mut noop = Vec::new();
    for _ in 0..n {
        let start = Instant::now();
        conn.execute(
            "INSERT INTO t (k, v) VALUES ('k0', ?1) ON CONFLICT (k) DO NOTHING",
            [&row],
        )?;
        noop.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok((median(&commit), median(&noop)))
}

/// Medians over a part-1 configuration's repeats.
struct LoopSummary {
    steps: u64,
    step_ms: f64,
    overhead_ms: f64,
    store_bytes: u64,
}

async fn loop_part(hands: &Hands, frozen: &Frozen, quick: bool) -> Result<Vec<LoopSummary>> {
    println!("\n## 1. Harness overhead per step (scripted model, json__query `.`)");
    let sizes: &[u64] = if quick { &[100, 300] } else { &[200, 1000] };
    let repeats = if quick { 1 } else { 3 };
    let disk = tempfile::tempdir()?;
    let shm = Path::new("/dev/shm");
    let tmpfs = if shm.is_dir() {
        Some(tempfile::tempdir_in(shm)?)
    } else {
        None
    };

    let mut binds = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        agent::bind(hands, frozen.clone(), no_env).await?;
        binds.push(ms(t.elapsed()));
    }
    println!(
        "agent::bind (per session; re-hashes the 2 MB component): median {:.2} ms",
        median(&binds)
    );

    let mut hops = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        tokio::task::spawn_blocking(|| ()).await?;
        hops.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "baseline, one tokio spawn_blocking round trip (every store call makes one): {:.0} µs",
        median(&hops)
    );
    let (commit_disk, noop_disk) = bare_sqlite(disk.path(), 200)?;
    println!(
        "baseline, bare SQLite (WAL, synchronous=FULL) on disk: commit {commit_disk:.0} µs, \
         no-op upsert {noop_disk:.0} µs"
    );
    if let Some(t) = &tmpfs {
        let (c, n) = bare_sqlite(t.path(), 200)?;
        println!("baseline, bare SQLite on tmpfs: commit {c:.0} µs, no-op upsert {n:.0} µs");
    }

    // Warm up (page cache, allocator, the instance pool).
    loop_run(hands, frozen, 20, &disk.path().join("warmup")).await?;

    println!(
        "\n{:<6} {:>6} {:>4} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>7} {:>9} {:>9}",
        "medium",
        "steps",
        "run",
        "step ms",
        "p90 ms",
        "tool ms",
        "ovh ms",
        "total/N",
        "store/N",
        "append",
        "apps/N",
        "puts/N",
        "gets/N",
        "store MB",
        "ckpt MB"
    );
    let mut summaries = Vec::new();
    let mut media: Vec<(&str, &Path)> = vec![("disk", disk.path())];
    if let Some(t) = &tmpfs {
        media.push(("tmpfs", t.path()));
    }
    let mut receipt = None;
    for (medium, root) in media {
        for &steps in sizes {
            let mut runs = Vec::new();
            for r in 0..repeats {
                let dir = root.join(format!("loop-{steps}-{r}"));
                let run = loop_run(hands, frozen, steps, &dir).await?;
                let n = run.steps as f64;
                println!(
                    "{:<6} {:>6} {:>4} {:>9.3} {:>8.3} {:>8.3} {:>9.3} {:>9.3} {:>8.3} {:>8.3} {:>7.2} {:>7.2} {:>7.2} {:>9.2} {:>9.2}",
                    medium,
                    steps,
                    r,
                    median(&run.step_us) / 1e3,
                    percentile(&run.step_us, 0.9) / 1e3,
                    median(&run.tool_us) / 1e3,
                    median(&run.overhead_us) / 1e3,
                    ms(run.total) / n,
                    ms(run.store_time) / n,
                    ms(run.append_time) / run.appends.max(1) as f64,
                    run.appends as f64 / n,
                    run.puts as f64 / n,
                    run.gets as f64 / n,
                    mb(run.size.as_left),
                    mb(run.size.checkpointed),
                );
                receipt = receipt.or(run.receipt.clone());
                runs.push(run);
                std::fs::remove_dir_all(&dir).ok();
            }
            let last = runs.last().map(|r| r.size.clone()).unwrap_or_default();
            let s = LoopSummary {
                steps,
                step_ms: median(&runs.iter().map(|r| median(&r.step_us)).collect::<Vec<_>>()) / 1e3,
                overhead_ms: median(
                    &runs
                        .iter()
                        .map(|r| median(&r.overhead_us))
                        .collect::<Vec<_>>(),
                ) / 1e3,
                store_bytes: last.checkpointed,
            };
            let puts_ms = median(
                &runs
                    .iter()
                    .map(|r| ms(r.put_time) / r.puts.max(1) as f64)
                    .collect::<Vec<_>>(),
            );
            println!(
                "{medium} {steps} steps: median step {:.3} ms, overhead {:.3} ms (target ≤ 1 ms: {}); \
                 mean put_blob {puts_ms:.3} ms; store after run: {:.2} MB as left, {:.2} MB \
                 checkpointed = {} events ({:.2} MB JSON) + {} blobs ({:.2} MB, of which {} \
                 snapshots {:.2} MB)",
                s.step_ms,
                s.overhead_ms,
                if s.overhead_ms <= 1.0 {
                    "met"
                } else {
                    "MISSED"
                },
                mb(last.as_left),
                mb(last.checkpointed),
                last.events,
                mb(last.event_json),
                last.blobs,
                mb(last.blob_bytes),
                last.snapshots,
                mb(last.snapshot_blob_bytes),
            );
            if medium == "disk" {
                summaries.push(s);
            }
        }
    }
    if let [a, b] = summaries.as_slice() {
        println!(
            "flatness (disk): overhead at {} steps / at {} steps = {:.2} (1.00 = flat); \
             store at {} steps {:.2} MB (target ≤ 10 MB: {})",
            b.steps,
            a.steps,
            b.overhead_ms / a.overhead_ms,
            b.steps,
            mb(b.store_bytes),
            if b.store_bytes <= 10_000_000 {
                "met"
            } else {
                "MISSED"
            }
        );
        println!(
            "against bare SQLite on the same disk: step overhead = {:.1} bare commits",
            a.overhead_ms * 1e3 / commit_disk
        );
    }
    if let Some(r) = receipt {
        println!("a receipt as logged: {r}");
    }
    Ok(summaries)
}

/// `ScriptProvider` counts assistant messages to find its turn; once the
/// history is trimmed (1024 items or the token budget) that count stops
/// growing. Run it past that point and report what happened.
async fn script_probe(hands: &Hands, frozen: &Frozen) -> Result<()> {
    println!("\n## ScriptProvider past the history cap");
    let turns = 600u64;
    let mut responses: Vec<ModelResponse> = (1..=turns).map(|k| scripted_turn(k, turns)).collect();
    responses.push(scripted_turn(turns + 1, turns));
    let dir = tempfile::tempdir_in(if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    })?;
    let store = Arc::new(SqliteStore::open(dir.path()).await?);
    let mut f = frozen.clone();
    f.limits.max_steps = turns + 50;
    let bound = agent::bind(hands, f, no_env).await?;
    let provider = Arc::new(ScriptProvider::new(responses));
    let mut runner = Runner::start(store, hands, bound, provider, GOAL, "bench").await?;
    let end = runner.run().await?;
    let s = runner.state();
    println!(
        "ScriptProvider with {turns} tool turns + 1 final: ended {:?} after {} model turns and \
         {} tool calls; history {} items ({} omitted); detail {:?}",
        end.status,
        s.steps,
        s.tool_calls,
        s.history.len(),
        s.history_omitted,
        end.detail
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Part 2: wake time.

/// Builds a session of about `target` events through the store API, as the
/// loop would have written it (a snapshot after every `SNAPSHOT_EVERY`
/// events, holding the folded state). Returns the session and its last seq.
async fn build_log(
    store: &SqliteStore,
    frozen: &Frozen,
    receipt: &Value,
    target: u64,
) -> Result<(SessionId, u64)> {
    let agent_json = serde_json::to_value(frozen)?;
    let created = Event::SessionCreated {
        agent_name: frozen.name.clone(),
        agent: agent_json,
        config_digest: "sha256:bench".to_owned(),
    };
    let id = store.create(&frozen.name, &created).await?;
    let lease = store
        .acquire_lease(&id, "bench", Duration::from_secs(3600))
        .await?;
    let mut state = SessionState::fold(&store.read(&id, 1).await?);
    let input = store.put_blob(TOOL_ARGS.as_bytes().to_vec()).await?;
    let result = store
        .put_blob(br#"{"results":[{"a":1}],"truncated":false}"#.to_vec())
        .await?;
    let digest = frozen
        .tools
        .first()
        .map(|t| t.digest.clone())
        .unwrap_or_default();
    let mut pending: Vec<Event> = vec![Event::GoalSet {
        goal: GOAL.to_owned(),
    }];
    let mut first_pending = state.last_seq + 1;
    let apply = |state: &mut SessionState, event: &Event| {
        let seq = state.last_seq + 1;
        state.apply(&EventRecord {
            seq,
            at_ms: 0,
            event: event.clone(),
        });
    };
    apply(&mut state, &pending[0]);
    let mut step = 0u64;
    while state.last_seq < target {
        step += 1;
        let manifest = store
            .put_blob(
                serde_json::to_vec(&json!({
                    "step": step, "history_through_seq": state.last_seq,
                    "history_items": state.history.len(), "request_digest": format!("sha256:{step:064x}"),
                }))?,
            )
            .await?;
        let response = store
            .put_blob(serde_json::to_vec(&scripted_turn(step, u64::MAX))?)
            .await?;
        let events = [
            Event::ModelRequested {
                step,
                role: "worker".to_owned(),
                provider: "openai".to_owned(),
                model: "mock".to_owned(),
                request: manifest,
                attempt: 1,
            },
            Event::ModelResponded {
                step,
                response,
                input_tokens: 100,
                output_tokens: 20,
                latency_ms: 500,
                stop_reason: "tool_use".to_owned(),
            },
            Event::ToolStarted {
                step,
                call_id: format!("c-{step}"),
                component: "json".to_owned(),
                component_digest: digest.clone(),
                tool: "query".to_owned(),
                effect: "read-only".to_owned(),
                input: input.clone(),
            },
            Event::ToolFinished {
                step,
                call_id: format!("c-{step}"),
                ok: true,
                result: result.clone(),
                receipt: receipt.clone(),
            },
        ];
        for event in events {
            apply(&mut state, &event);
            pending.push(event);
            if state.since_snapshot >= SNAPSHOT_EVERY {
                store
                    .append(&id, &lease, first_pending, &std::mem::take(&mut pending))
                    .await?;
                // As `Runner::snapshot` does it.
                let blob = store.put_blob(serde_json::to_vec(&state)?).await?;
                let through_seq = state.last_seq;
                let snap = Event::Snapshot {
                    state: blob,
                    through_seq,
                };
                store
                    .append(&id, &lease, through_seq + 1, std::slice::from_ref(&snap))
                    .await?;
                apply(&mut state, &snap);
                first_pending = state.last_seq + 1;
            }
        }
    }
    if !pending.is_empty() {
        store.append(&id, &lease, first_pending, &pending).await?;
    }
    store.release(&lease).await?;
    Ok((id, state.last_seq))
}

async fn wake_part(frozen: &Frozen, quick: bool) -> Result<()> {
    println!("\n## 2. Wake time: load_state (latest snapshot + tail), fresh store each repeat");
    let sizes: &[u64] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    // Built on tmpfs (fsync-free, so building 100k events takes seconds),
    // then checkpointed and copied to disk, where it is woken.
    let build_root = tempfile::tempdir_in(if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    })?;
    let disk = tempfile::tempdir()?;
    let receipt = json!({
        "component_digest": frozen.tools.first().map(|t| t.digest.clone()).unwrap_or_default(),
        "tool": "query", "wall_us": 400, "fuel_used": 120000, "peak_memory_bytes": 1179648,
        "input_bytes": 31, "output_bytes": 38,
        "stdout": {"text": "", "dropped_bytes": 0}, "stderr": {"text": "", "dropped_bytes": 0},
        "used": [], "denied": [], "limits_hit": [], "logs": [], "logs_dropped": 0,
        "progress": null, "http_bytes_in": 0
    });
    println!(
        "{:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>8}",
        "events",
        "build s",
        "open ms",
        "wake ms",
        "p90 ms",
        "vs 1k",
        "replay ms",
        "replay/wk",
        "snap KB",
        "db MB"
    );
    let mut first = None;
    let mut results = Vec::new();
    for &target in sizes {
        let bdir = build_root.path().join(format!("w{target}"));
        let t = Instant::now();
        let store = SqliteStore::open(&bdir).await?;
        let (id, last_seq) = build_log(&store, frozen, &receipt, target).await?;
        drop(store);
        let build_s = t.elapsed().as_secs_f64();
        {
            let conn = rusqlite::Connection::open(bdir.join("longhand.db"))?;
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        let ddir = disk.path().join(format!("w{target}"));
        std::fs::create_dir_all(&ddir)?;
        std::fs::copy(bdir.join("longhand.db"), ddir.join("longhand.db"))?;
        std::fs::remove_dir_all(&bdir).ok();

        let repeats = if quick { 7 } else { 21 };
        let mut open = Vec::new();
        let mut wake = Vec::new();
        let mut woken = None;
        for _ in 0..repeats {
            let t = Instant::now();
            let store = SqliteStore::open(&ddir).await?;
            open.push(ms(t.elapsed()));
            let t = Instant::now();
            let state = load_state(&store, &id).await?;
            wake.push(ms(t.elapsed()));
            woken = Some(state);
        }
        let store = SqliteStore::open(&ddir).await?;
        let snap_bytes = match store.latest_snapshot(&id).await? {
            Some(EventRecord {
                event: Event::Snapshot { state, .. },
                ..
            }) => state.bytes,
            _ => 0,
        };
        let replays = if quick || target >= 100_000 { 3 } else { 5 };
        let mut replay = Vec::new();
        let mut full = None;
        for _ in 0..replays {
            let store = SqliteStore::open(&ddir).await?;
            let t = Instant::now();
            let records = store.read(&id, 1).await?;
            let state = SessionState::fold(&records);
            replay.push(ms(t.elapsed()));
            full = Some(state);
        }
        if woken != full {
            println!("  !! load_state and a full replay disagree at {last_seq} events");
        }
        let w = median(&wake);
        let base = *first.get_or_insert(w);
        println!(
            "{:>8} {:>8.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>10.1} {:>9.1} {:>9.1} {:>8.1}",
            last_seq,
            build_s,
            median(&open),
            w,
            percentile(&wake, 0.9),
            w / base,
            median(&replay),
            median(&replay) / w,
            snap_bytes as f64 / 1e3,
            mb(store_bytes(&ddir)),
        );
        results.push((last_seq, w));
    }
    if let (Some(&(n, w)), Some(&(_, w1))) = (results.last(), results.first()) {
        println!(
            "wake at {n} events: {w:.2} ms (target ≤ 50 ms: {}), {:.2}× the 1k figure (target ≤ 2×: {})",
            if w <= 50.0 { "met" } else { "MISSED" },
            w / w1,
            if w / w1 <= 2.0 { "met" } else { "MISSED" }
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Part 3: many concurrent sessions against a mock model server.

/// The mock server child: this binary with `MOCK_ENV` set.
struct MockServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    port: u16,
}

impl MockServer {
    fn start() -> Result<Self> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .env(MOCK_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the mock model server")?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| anyhow!("mock server said {line:?}"))?;
        Ok(Self {
            child,
            stdin,
            stdout,
            port,
        })
    }

    /// `(connections accepted, requests answered, peak open connections)`.
    fn stats(&mut self) -> Result<(u64, u64, u64)> {
        writeln!(self.stdin, "stats")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let nums: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.split('=').nth(1)?.parse().ok())
            .collect();
        match nums.as_slice() {
            [a, b, c] => Ok((*a, *b, *c)),
            _ => bail!("mock server stats: {line:?}"),
        }
    }

    /// Zero the counters (peak: to the connections open now).
    fn reset(&mut self) -> Result<()> {
        writeln!(self.stdin, "reset")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(())
    }

    fn peak_rss(&self) -> u64 {
        proc_status_bytes(&self.child.id().to_string(), "VmHWM")
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        // Closing stdin ends it; kill in case it is stuck.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openai(port: u16) -> Result<OpenAiProvider> {
    let mut cfg = HttpConfig::new("mock");
    cfg.base_url = format!("http://127.0.0.1:{port}/v1");
    cfg.stream = false;
    Ok(OpenAiProvider::new(cfg)?)
}

/// Samples open fds while a part runs.
fn fd_sampler() -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let peak = Arc::new(AtomicU64::new(0));
    let p = peak.clone();
    let handle = tokio::spawn(async move {
        loop {
            p.fetch_max(open_fds() as u64, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (peak, handle)
}

struct SessionOutcome {
    status: SessionStatus,
    steps: u64,
    tool_calls: u64,
    wall: Duration,
    bind: Duration,
}

async fn one_session(
    i: usize,
    hands: &'static Hands,
    store: Arc<Timed>,
    frozen: &Frozen,
    provider: Arc<dyn ModelProvider>,
    failures: Arc<AtomicU64>,
) -> Result<SessionOutcome> {
    let started = Instant::now();
    let bound = agent::bind(hands, frozen.clone(), no_env).await?;
    let bind = started.elapsed();
    let goal = format!("Session {i}: query the value once.");
    let mut runner = Runner::start(store, hands, bound, provider, &goal, "bench").await?;
    runner.observe(Box::new(move |record: &EventRecord, _: &SessionState| {
        if matches!(record.event, Event::ModelFailed { .. }) {
            failures.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let end = runner.run().await?;
    Ok(SessionOutcome {
        status: end.status,
        steps: runner.state().steps,
        tool_calls: runner.state().tool_calls,
        wall: started.elapsed(),
        bind,
    })
}

async fn fleet_part(hands: &'static Hands, frozen: &Frozen, quick: bool) -> Result<()> {
    let n: usize = std::env::var("LONGHAND_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 500 } else { 10_000 });
    println!(
        "\n## 3. {n} concurrent sessions, one process, one Hands/SqliteStore/OpenAiProvider, \
         mock model answering after {} ms",
        MOCK_LATENCY.as_millis()
    );
    let mut server = MockServer::start()?;

    // What a provider per session would cost: each OpenAiProvider builds its
    // own reqwest client (connection pool, rustls config, root store).
    {
        let k = 200;
        let before = proc_status_bytes("self", "VmRSS");
        let t = Instant::now();
        let many: Vec<OpenAiProvider> =
            (0..k).map(|_| openai(server.port)).collect::<Result<_>>()?;
        let each = ms(t.elapsed()) / k as f64;
        let after = proc_status_bytes("self", "VmRSS");
        println!(
            "OpenAiProvider::new: {each:.3} ms and {:.1} KB RSS each ({k} built); each has its own \
             reqwest client and pool, so one provider per session means one pool per session",
            (after.saturating_sub(before)) as f64 / 1e3 / k as f64
        );
        drop(many);
    }

    let baseline: Arc<dyn ModelProvider> = Arc::new(openai(server.port)?);

    // Baseline: the provider alone, two calls per task, no loop/store/tools.
    let request = ModelRequest {
        system: frozen.instructions.clone(),
        messages: vec![Message::User {
            text: GOAL.to_owned(),
        }],
        tools: agent::bind(hands, frozen.clone(), no_env)
            .await?
            .tool_defs()
            .to_vec(),
        max_tokens: 4096,
        temperature: None,
        step: 0,
    };
    let mut followup = request.clone();
    followup.messages.push(Message::Assistant {
        text: None,
        tool_calls: vec![ToolCall {
            id: "call_1".into(),
            name: TOOL.into(),
            arguments: TOOL_ARGS.into(),
        }],
        reasoning: vec![],
    });
    followup.messages.push(Message::ToolResult {
        call_id: "call_1".into(),
        content: r#"{"results":[{"a":1}],"truncated":false}"#.into(),
        is_error: false,
    });
    let (base_wall, base_failed) = {
        let request = Arc::new((request, followup));
        let t = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let p = baseline.clone();
            let r = request.clone();
            set.spawn(
                async move { p.complete(&r.0).await.is_ok() && p.complete(&r.1).await.is_ok() },
            );
        }
        let mut failed = 0;
        while let Some(ok) = set.join_next().await {
            if !matches!(ok, Ok(true)) {
                failed += 1;
            }
        }
        (t.elapsed(), failed)
    };
    println!(
        "baseline, provider alone ({n} tasks × 2 calls): {:.2} s wall, {:.0} calls/s, {base_failed} failed",
        base_wall.as_secs_f64(),
        2.0 * n as f64 / base_wall.as_secs_f64()
    );

    // Its idle connections would otherwise stay open beside the fleet's.
    drop(baseline);
    let shm = Path::new("/dev/shm");
    let mut roots = vec![("disk", std::env::temp_dir())];
    if shm.is_dir() {
        // Same-run baseline: the same fleet with fsync made free.
        roots.push(("tmpfs", shm.to_path_buf()));
    }
    for (label, root) in roots {
        fleet_run(label, &root, n, hands, frozen, &mut server, base_wall).await?;
    }
    Ok(())
}

async fn fleet_run(
    label: &str,
    root: &Path,
    n: usize,
    hands: &'static Hands,
    frozen: &Frozen,
    server: &mut MockServer,
    base_wall: Duration,
) -> Result<()> {
    // A fresh provider (and pool) for the sessions.
    let provider: Arc<dyn ModelProvider> = Arc::new(openai(server.port)?);
    let dir = tempfile::tempdir_in(root)?;
    server.reset()?;
    let store = Arc::new(Timed::new(SqliteStore::open(dir.path()).await?));
    let frozen = Arc::new(frozen.clone());
    let model_failures = Arc::new(AtomicU64::new(0));
    // Give memory freed by earlier parts back to the OS, so the peak below
    // is this part's own.
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
    let rss_before = proc_status_bytes("self", "VmRSS");
    let reset = reset_peak_rss();
    let (peak_fds, sampler) = fd_sampler();
    // `Runner::run`'s future is not `Send` (see `Observer`), so sessions
    // cannot go to `tokio::spawn`: one current-thread runtime with a
    // `LocalSet` per core, sessions dealt round-robin.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let done = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut threads = Vec::new();
    for w in 0..workers {
        let store = store.clone();
        let frozen = frozen.clone();
        let provider = provider.clone();
        let failures = model_failures.clone();
        let done = done.clone();
        threads.push(std::thread::spawn(
            move || -> Vec<Result<SessionOutcome>> {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return vec![Err(e.into())],
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let mut handles = Vec::new();
                    for i in (w..n).step_by(workers) {
                        let store = store.clone();
                        let frozen = frozen.clone();
                        let provider = provider.clone();
                        let failures = failures.clone();
                        handles.push(tokio::task::spawn_local(async move {
                            one_session(i, hands, store, &frozen, provider, failures).await
                        }));
                    }
                    let mut out = Vec::new();
                    for h in handles {
                        out.push(h.await.unwrap_or_else(|e| Err(anyhow!("join: {e}"))));
                    }
                    // Keep driving this runtime until every worker is done:
                    // the shared pool's connections opened here run as tasks
                    // here, and the other workers' sessions may use them.
                    done.fetch_add(1, Ordering::SeqCst);
                    while done.load(Ordering::SeqCst) < workers as u64 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    out
                })
            },
        ));
    }
    let spawned = t0.elapsed();
    let joined = tokio::task::spawn_blocking(move || {
        threads
            .into_iter()
            .flat_map(|t| {
                t.join()
                    .unwrap_or_else(|_| vec![Err(anyhow!("worker panicked"))])
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut outcomes = Vec::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for r in joined {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => *errors.entry(format!("{e:#}")).or_default() += 1,
        }
    }
    let wall = t0.elapsed();
    sampler.abort();
    let peak = proc_status_bytes("self", "VmHWM");
    let (conns, requests, peak_conns) = server.stats()?;
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for o in &outcomes {
        *by_status.entry(o.status.to_string()).or_default() += 1;
    }
    let finished = by_status.get("finished").copied().unwrap_or(0);
    let steps: u64 = outcomes.iter().map(|o| o.steps).sum();
    let tools: u64 = outcomes.iter().map(|o| o.tool_calls).sum();
    let walls: Vec<f64> = outcomes.iter().map(|o| o.wall.as_secs_f64()).collect();
    let binds: Vec<f64> = outcomes.iter().map(|o| ms(o.bind)).collect();
    let size = measure_store(dir.path())?;
    println!("### store on {label}");
    println!("spawned {n} tasks in {:.2} s", spawned.as_secs_f64());
    println!(
        "sessions: {by_status:?}, errors: {}; {steps} model turns, {tools} tool calls, {} model failures",
        errors.values().sum::<usize>(),
        model_failures.load(Ordering::Relaxed)
    );
    for (e, k) in errors.iter().take(5) {
        println!("  error ×{k}: {e}");
    }
    println!(
        "wall {:.2} s (floor 1.00 s: {:.1}×; provider alone {:.2} s: {:.1}×); {:.0} steps/s, {:.0} sessions/s",
        wall.as_secs_f64(),
        wall.as_secs_f64() / (2.0 * MOCK_LATENCY.as_secs_f64()),
        base_wall.as_secs_f64(),
        wall.as_secs_f64() / base_wall.as_secs_f64(),
        steps as f64 / wall.as_secs_f64(),
        finished as f64 / wall.as_secs_f64()
    );
    println!(
        "per session: wall median {:.2} s, p90 {:.2} s, max {:.2} s; bind median {:.2} ms",
        median(&walls),
        percentile(&walls, 0.9),
        percentile(&walls, 1.0),
        median(&binds)
    );
    println!(
        "store: {} appends ({:.2} ms mean incl. queueing), {} put_blob ({:.2} ms mean), {} get_blob, \
         {} acquire/release, {} lease renewals (sessions queued > LEASE_TTL/2); {:.0} MB after ({} events)",
        store.append.calls(),
        ms(store.append.time()) / store.append.calls().max(1) as f64,
        store.put.calls(),
        ms(store.put.time()) / store.put.calls().max(1) as f64,
        store.get.calls(),
        store.lease.calls(),
        store.renew.calls(),
        mb(size.checkpointed),
        size.events
    );
    println!(
        "peak RSS (VmHWM{}) {:.0} MB (target ≤ 2048 MB: {}); RSS before {:.0} MB → {:.1} KB per \
         session; peak open fds {}; mock server: {conns} connections, {requests} requests, \
         {peak_conns} open at once, peak RSS {:.0} MB",
        if reset {
            ", reset before the run"
        } else {
            ", NOT reset: includes earlier parts"
        },
        mb(peak),
        if peak <= 2 << 30 { "met" } else { "MISSED" },
        mb(rss_before),
        (peak.saturating_sub(rss_before)) as f64 / 1e3 / n as f64,
        peak_fds.load(Ordering::Relaxed),
        mb(server.peak_rss()),
    );
    Ok(())
}

/// The mock chat-completions server: HTTP/1.1 with keep-alive, answers every
/// POST after `MOCK_LATENCY` — a tool call when the request has no tool
/// result yet, text after. Talks to the parent over stdin/stdout.
mod mock {
    use std::io::{BufRead, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use anyhow::Result;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpSocket, TcpStream};

    #[derive(Default)]
    struct Stats {
        conns: AtomicU64,
        requests: AtomicU64,
        open: AtomicU64,
        peak_open: AtomicU64,
    }

    pub fn serve() -> Result<()> {
        super::raise_nofile();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let socket = TcpSocket::new_v4()?;
            socket.set_reuseaddr(true)?;
            socket.bind("127.0.0.1:0".parse()?)?;
            // Capped by net.core.somaxconn.
            let listener = socket.listen(65_535)?;
            let port = listener.local_addr()?.port();
            let stats = Arc::new(Stats::default());
            let s = stats.clone();
            std::thread::spawn(move || {
                println!("PORT {port}");
                let _ = std::io::stdout().flush();
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    if line.trim() == "reset" {
                        s.conns.store(0, Ordering::Relaxed);
                        s.requests.store(0, Ordering::Relaxed);
                        s.peak_open
                            .store(s.open.load(Ordering::Relaxed), Ordering::Relaxed);
                        println!("OK");
                        let _ = std::io::stdout().flush();
                    }
                    if line.trim() == "stats" {
                        println!(
                            "STATS conns={} requests={} peak_open={}",
                            s.conns.load(Ordering::Relaxed),
                            s.requests.load(Ordering::Relaxed),
                            s.peak_open.load(Ordering::Relaxed)
                        );
                        let _ = std::io::stdout().flush();
                    }
                }
                std::process::exit(0);
            });
            let bodies = Arc::new((tool_call_body(), final_body()));
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let stats = stats.clone();
                let bodies = bodies.clone();
                stats.conns.fetch_add(1, Ordering::Relaxed);
                let open = stats.open.fetch_add(1, Ordering::Relaxed) + 1;
                stats.peak_open.fetch_max(open, Ordering::Relaxed);
                tokio::spawn(async move {
                    let _ = connection(stream, &stats, &bodies).await;
                    stats.open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        })
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

    async fn connection(
        mut stream: TcpStream,
        stats: &Stats,
        bodies: &(String, String),
    ) -> Result<()> {
        let mut buf: Vec<u8> = Vec::with_capacity(4096);
        loop {
            let head_end = loop {
                if let Some(i) = find(&buf, b"\r\n\r\n") {
                    break i + 4;
                }
                if stream.read_buf(&mut buf).await? == 0 {
                    return Ok(());
                }
            };
            let len = content_length(&buf[..head_end]);
            while buf.len() < head_end + len {
                if stream.read_buf(&mut buf).await? == 0 {
                    return Ok(());
                }
            }
            let answered = find(&buf[head_end..head_end + len], br#""role":"tool""#).is_some();
            buf.drain(..head_end + len);
            tokio::time::sleep(super::MOCK_LATENCY).await;
            let body = if answered { &bodies.1 } else { &bodies.0 };
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).await?;
            stats.requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn tool_call_body() -> String {
        serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "model": "mock",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": super::TOOL, "arguments": super::TOOL_ARGS}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        })
        .to_string()
    }

    fn final_body() -> String {
        serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "model": "mock",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "The value is {\"a\":1}."}}],
            "usage": {"prompt_tokens": 150, "completion_tokens": 10, "total_tokens": 160}
        })
        .to_string()
    }
}

// ---------------------------------------------------------------------------
// Part 4: LangGraph, through its own script.

fn langgraph_part(ours: Option<&Vec<LoopSummary>>, quick: bool) -> Result<()> {
    println!("\n## 4. LangGraph (SqliteSaver, durability=\"sync\"), same scripted agent");
    let script: PathBuf = [env!("CARGO_MANIFEST_DIR"), "benches", "langgraph", "run.sh"]
        .iter()
        .collect();
    let sizes: Vec<String> = match ours {
        Some(v) => v.iter().map(|s| s.steps.to_string()).collect(),
        None if quick => vec!["100".into(), "300".into()],
        None => vec!["200".into(), "1000".into()],
    };
    let out = Command::new(&script)
        .args(&sizes)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines().filter(|l| !l.starts_with("SUMMARY ")) {
        println!("{line}");
    }
    if !out.status.success() {
        bail!("{} failed: {}", script.display(), out.status);
    }
    let summary: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .map(serde_json::from_str)
        .transpose()?
        .ok_or_else(|| anyhow!("no SUMMARY line from the LangGraph script"))?;
    let Some(ours) = ours else { return Ok(()) };
    for s in ours {
        let lg = &summary[s.steps.to_string()];
        let lg_step = lg["step_ms_median"].as_f64().unwrap_or(f64::NAN);
        let lg_ovh = lg["overhead_ms_median"].as_f64().unwrap_or(f64::NAN);
        let lg_bytes = lg["store_bytes_checkpointed"].as_f64().unwrap_or(f64::NAN);
        println!(
            "{} steps: per step longhand {:.3} ms vs langgraph {lg_step:.3} ms ({:.1}× faster); \
             overhead {:.3} vs {lg_ovh:.3} ms ({:.1}×); store {:.2} MB vs {:.2} MB ({:.1}× smaller)",
            s.steps,
            s.step_ms,
            lg_step / s.step_ms,
            s.overhead_ms,
            lg_ovh / s.overhead_ms,
            mb(s.store_bytes),
            lg_bytes / 1e6,
            lg_bytes / s.store_bytes as f64
        );
    }
    Ok(())
}
