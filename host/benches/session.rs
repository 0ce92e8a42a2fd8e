//! Session and brain: what the agent loop and its log cost, each figure next
//! to a baseline measured in the same run. Results and the command that
//! produced them go in `docs/benchmarks.md` ("Session and brain").
//!
//! ```text
//! cargo bench -p longhand-host --bench session
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench session   # < 1 min
//! LONGHAND_BENCH_LANGGRAPH=1 cargo bench -p longhand-host --bench session
//! LONGHAND_BENCH_ONLY=loop,wake,fleet,script cargo bench ...           # pick parts
//! LONGHAND_BENCH_STEPS=1000 LONGHAND_BENCH_MEDIA=tmpfs LONGHAND_BENCH_REPEATS=5 ...
//! LONGHAND_BENCH_SESSIONS=2000 LONGHAND_BENCH_FLEET=spawn,local ...
//! ```
//!
//! Parts:
//! 1. **loop** — the real loop (`freeze`/`bind`, `Runner::start`, `run`) on a
//!    `SqliteStore` in a temporary directory, driven by the real
//!    `ScriptProvider` (zero latency; it answers by `ModelRequest.step`)
//!    whose every turn calls `json__query` (filter `.` on `{"a":1}`). A step
//!    is the time between consecutive model calls (as on the LangGraph
//!    side); the harness overhead is a step minus the tool's own `wall_us`
//!    from its receipt. The store is wrapped to count and time every call,
//!    and its writer's counters (`SqliteStore::write_stats`: commits,
//!    fsyncs) are read after each run; CPU time is split by thread. On disk
//!    and on tmpfs. Baselines: bare SQLite commits on the same media.
//! 2. **wake** — `load_state` (latest snapshot + tail) on logs of 1k, 10k
//!    and 100k events built through the store API with a snapshot every 100
//!    events, exactly as the loop writes them; each repeat opens the store
//!    afresh. Baselines: the 1k figure, and a full replay from seq 1.
//! 3. **fleet** — 10,000 sessions in this process (`tokio::spawn` on the
//!    multi-thread runtime, and one current-thread runtime + `LocalSet` per
//!    core), one `Hands`, one `SqliteStore`, one shared `OpenAiProvider`,
//!    against a mock chat-completions server (a child process running this
//!    binary) that answers after 500 ms: a tool call, then text. Peak RSS
//!    (VmHWM, reset before the run), wall time, throughput, CPU by thread and
//!    machine-wide (the machine is shared). Baselines: the 1 s floor two
//!    model answers impose, the provider alone (two `complete` calls per
//!    task, no loop, no store, no tools), and the same fleet with the store
//!    on tmpfs. `LONGHAND_BENCH_SESSIONS=N` changes the size.
//! 4. **langgraph** (only with `LONGHAND_BENCH_LANGGRAPH=1`, inside part 1) —
//!    after each of our runs, one run of `host/benches/langgraph/run.sh`
//!    (which makes its own venv) with the same step count on the same
//!    medium; the ratio is the median of these back-to-back pairs.
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
use longhand_brain::Frozen;
use longhand_brain::agent::config::AgentConfig;
use longhand_brain::core::state::SessionState;
use longhand_brain::core::state::snapshot;
use longhand_brain::model::script::ScriptProvider;
use longhand_brain::model::{
    HttpConfig, Message, ModelError, ModelProvider, ModelRequest, ModelResponse, OpenAiProvider,
    StopReason, ToolCall, Usage,
};
use longhand_brain::{Runner, SNAPSHOT_EVERY, load_state};
use longhand_hands::{Hands, HandsConfig};
use longhand_session::{
    Appended, BlobRef, Control, ControlKind, Durability, Event, EventRecord, Lease, SessionId,
    SessionStatus, SessionSummary, SqliteStore, Store, StoreError, WakeLog, WriteStats,
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
        let frozen = longhand_brain::freeze(hands, &agent_config()?, base.path(), no_env).await?;
        println!(
            "setup: engine + freeze (compiles json.wasm once) {:.1} s",
            setup.elapsed().as_secs_f64()
        );
        let langgraph = std::env::var("LONGHAND_BENCH_LANGGRAPH").is_ok_and(|v| v == "1");
        if want("loop") {
            loop_part(hands, &frozen, quick, langgraph).await?;
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
        // A snapshot is a root blob plus the history chunks and large
        // fields it refers to (snapshot format 2); each blob counted once.
        snapshot_blob_bytes: q("WITH roots AS (
                 SELECT digest, CAST(bytes AS TEXT) AS j FROM blobs WHERE digest IN
                 (SELECT json_extract(json, '$.state.digest') FROM events WHERE type = 'snapshot')),
               refs AS (
                 SELECT digest FROM roots
                 UNION SELECT json_extract(c.value, '$.digest')
                   FROM roots, json_each(roots.j, '$.history.chunks') AS c
                 UNION SELECT json_extract(f.value, '$.digest')
                   FROM roots, json_each(roots.j, '$.fields') AS f)
               SELECT sum(size) FROM blobs WHERE digest IN refs")?,
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
    /// Appends with `Durability::Soon` (answered at commit).
    append: Tally,
    /// Appends with `Durability::Now` (answered after the fsync).
    append_now: Tally,
    /// Blobs handed to `append_with` (new to the runner; the store skips
    /// those it has).
    blobs_written: AtomicU64,
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
            append_now: Tally::default(),
            blobs_written: AtomicU64::new(0),
            put: Tally::default(),
            get: Tally::default(),
            lease: Tally::default(),
            renew: Tally::default(),
            other: Tally::default(),
        }
    }

    fn total(&self) -> Duration {
        self.append.time()
            + self.append_now.time()
            + self.put.time()
            + self.get.time()
            + self.lease.time()
            + self.renew.time()
            + self.other.time()
    }

    fn appends(&self) -> u64 {
        self.append.calls() + self.append_now.calls()
    }

    fn append_time(&self) -> Duration {
        self.append.time() + self.append_now.time()
    }

    fn stats(&self) -> WriteStats {
        self.inner.write_stats()
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
    async fn append_with(
        &self,
        session: &SessionId,
        lease: &Lease,
        expected_seq: u64,
        events: &[Event],
        blobs: Vec<Vec<u8>>,
        durability: Durability,
    ) -> SResult<Appended> {
        let tally = match durability {
            Durability::Now => &self.append_now,
            Durability::Soon => &self.append,
        };
        self.blobs_written
            .fetch_add(blobs.len() as u64, Ordering::Relaxed);
        timed(
            tally,
            self.inner
                .append_with(session, lease, expected_seq, events, blobs, durability),
        )
        .await
    }
    async fn read(&self, session: &SessionId, from_seq: u64) -> SResult<Vec<EventRecord>> {
        timed(&self.other, self.inner.read(session, from_seq)).await
    }
    async fn latest_snapshot(&self, session: &SessionId) -> SResult<Option<EventRecord>> {
        timed(&self.other, self.inner.latest_snapshot(session)).await
    }
    async fn post_control(
        &self,
        session: &SessionId,
        kind: ControlKind,
        text: Option<String>,
        by: &str,
    ) -> SResult<Control> {
        self.inner.post_control(session, kind, text, by).await
    }
    async fn controls(&self, session: &SessionId, after_id: u64) -> SResult<Vec<Control>> {
        self.inner.controls(session, after_id).await
    }
    async fn settle_control(&self, lease: &Lease, id: u64) -> SResult<()> {
        self.inner.settle_control(lease, id).await
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

/// Turn k calls the tool as `c-k`; after `steps` turns the answer is text.
fn scripted_turn(k: u64, steps: u64) -> ModelResponse {
    let usage = Usage {
        input_tokens: 100,
        output_tokens: 20,
        ..Usage::default()
    };
    if k > steps {
        return ModelResponse {
            text: Some("done".to_owned()),
            tool_calls: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage,
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
        usage,
        ..ModelResponse::default()
    }
}

/// `steps` tool turns and a final text answer.
fn script(steps: u64) -> ScriptProvider {
    ScriptProvider::new((1..=steps + 1).map(|k| scripted_turn(k, steps)).collect())
}

/// The real `ScriptProvider` (answers by `ModelRequest.step`, so a run past
/// the history cap stays exact), with the time of every call noted: a step
/// is the time between consecutive model calls, as on the LangGraph side.
/// Zero latency: it clones a prepared response, ~1 µs.
struct Stamped {
    inner: ScriptProvider,
    calls: Mutex<Vec<Instant>>,
}

#[async_trait]
impl ModelProvider for Stamped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, req: &ModelRequest) -> std::result::Result<ModelResponse, ModelError> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Instant::now());
        }
        self.inner.complete(req).await
    }
}

// ---------------------------------------------------------------------------
// CPU accounting: where a run's CPU time went, by thread name.

/// CPU time this process has used (user + system), all threads.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Machine-wide CPU (all processes, all cores) from `/proc/stat`: `(busy,
/// total)` in clock ticks. On a shared machine the difference over a run
/// says whether the cores were free for us.
fn machine_cpu() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle + iowait
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// User + system CPU of another process (the mock server), from
/// `/proc/<pid>/stat`.
fn child_cpu(pid: u32) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised name; utime and stime are 14 and 15.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // `rest` starts at field 3 (state, not a number, so skipped): utime is
    // the 12th number.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// CPU time of each live thread (ns, from `/proc/self/task/*/schedstat`),
/// summed by thread name: `longhand-store-` is the store's writer and
/// flusher (names cut to 15 bytes), `tokio-runtime-w` the runtime's workers
/// and blocking pool, `session-…` the bench's main thread (where
/// `block_on` runs part 1's loop).
fn thread_cpu() -> BTreeMap<String, Duration> {
    let mut by_name: BTreeMap<String, Duration> = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        let name = match name.trim() {
            n if n.starts_with("session-") => "main (block_on)".to_owned(),
            n => n.to_owned(),
        };
        *by_name.entry(name).or_default() += Duration::from_nanos(ns);
    }
    by_name
}

/// `after - before` per name, ms, largest first, as one line.
fn cpu_split(
    before: &BTreeMap<String, Duration>,
    after: &BTreeMap<String, Duration>,
    per: f64,
) -> String {
    let mut parts: Vec<(String, f64)> = after
        .iter()
        .map(|(k, v)| {
            let b = before.get(k).copied().unwrap_or_default();
            (k.clone(), ms(v.saturating_sub(b)) / per)
        })
        .filter(|(_, v)| *v > 0.0)
        .collect();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    parts
        .iter()
        .map(|(k, v)| format!("{k} {v:.3}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------
// Part 1: harness overhead per step.

#[derive(Default)]
struct Marks {
    tool_wall_us: Vec<u64>,
    first_receipt: Option<Value>,
}

struct LoopRun {
    steps: u64,
    step_us: Vec<f64>,
    tool_us: Vec<f64>,
    overhead_us: Vec<f64>,
    total: Duration,
    cpu: Duration,
    store_cpu: Duration,
    threads: String,
    store_time: Duration,
    appends: u64,
    appends_now: u64,
    append_time: Duration,
    blobs: u64,
    gets: u64,
    stats: WriteStats,
    size: StoreSize,
    receipt: Option<Value>,
}

async fn loop_run(hands: &Hands, frozen: &Frozen, steps: u64, dir: &Path) -> Result<LoopRun> {
    let sqlite = SqliteStore::open(dir).await?;
    let store = Arc::new(Timed::new(sqlite));
    let bound = longhand_brain::bind(hands, frozen.clone(), no_env).await?;
    let provider = Arc::new(Stamped {
        inner: script(steps),
        calls: Mutex::new(Vec::with_capacity(steps as usize + 1)),
    });
    let marks = Arc::new(Mutex::new(Marks::default()));
    let cpu0 = process_cpu();
    let threads0 = thread_cpu();
    let start = Instant::now();
    let mut runner =
        Runner::start(store.clone(), hands, bound, provider.clone(), GOAL, "bench").await?;
    let seen = marks.clone();
    runner.observe(Box::new(move |record: &EventRecord| {
        let Ok(mut m) = seen.lock() else { return };
        if let Event::ToolFinished { receipt, .. } = &record.event {
            m.tool_wall_us
                .push(receipt.get("wall_us").and_then(Value::as_u64).unwrap_or(0));
            if m.first_receipt.is_none() {
                m.first_receipt = Some(receipt.clone());
            }
        }
    }));
    let end = runner.run().await?;
    let total = start.elapsed();
    let cpu = process_cpu() - cpu0;
    let threads1 = thread_cpu();
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
    let calls = std::mem::take(&mut *provider.calls.lock().map_err(|_| anyhow!("poisoned"))?);
    let mut step_us = Vec::new();
    let mut tool_us = Vec::new();
    let mut overhead_us = Vec::new();
    // Call k+1 − call k holds tool call k and everything the loop does
    // around it.
    for (k, pair) in calls.windows(2).enumerate() {
        let step = (pair[1] - pair[0]).as_secs_f64() * 1e6;
        let tool = m.tool_wall_us.get(k).copied().unwrap_or(0) as f64;
        step_us.push(step);
        tool_us.push(tool);
        overhead_us.push(step - tool);
    }
    let store_cpu = threads1
        .get("longhand-store-")
        .copied()
        .unwrap_or_default()
        .saturating_sub(threads0.get("longhand-store-").copied().unwrap_or_default());
    let run = LoopRun {
        steps,
        step_us,
        tool_us,
        overhead_us,
        total,
        cpu,
        store_cpu,
        threads: cpu_split(&threads0, &threads1, steps as f64),
        store_time: store.total(),
        appends: store.appends(),
        appends_now: store.append_now.calls(),
        append_time: store.append_time(),
        blobs: store.blobs_written.load(Ordering::Relaxed),
        gets: store.get.calls(),
        stats: store.stats(),
        size: StoreSize::default(),
        receipt: m.first_receipt,
    };
    drop(store);
    Ok(LoopRun {
        size: measure_store(dir)?,
        ..run
    })
}

/// Bare SQLite on `dir`: median commit of one ~300-byte row with
/// `synchronous=FULL` (one fsync each, what every append cost before the
/// group-committing writer), and with `synchronous=NORMAL` (no fsync: what
/// the writer's commit costs).
fn bare_sqlite(dir: &Path, n: usize) -> Result<(f64, f64)> {
    let conn = rusqlite::Connection::open(dir.join("bare.db"))?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
    conn.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB NOT NULL) STRICT;")?;
    let row = vec![b'x'; 300];
    let commit = |sync: &str, offset: usize| -> Result<f64> {
        conn.execute_batch(&format!("PRAGMA synchronous={sync}"))?;
        let mut times = Vec::new();
        for i in 0..n {
            let start = Instant::now();
            conn.execute(
                "INSERT INTO t (k, v) VALUES (?1, ?2)",
                rusqlite::params![format!("k{}", offset + i), row],
            )?;
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
        Ok(median(&times))
    };
    Ok((commit("FULL", 0)?, commit("NORMAL", n)?))
}

/// One LangGraph run through `run.sh` (one repeat, `steps` steps, its
/// checkpoint db in `dir`); its `SUMMARY` line.
fn langgraph_run(steps: u64, dir: &Path) -> Result<Value> {
    let out = Command::new(langgraph_script())
        .arg(steps.to_string())
        .env("TMPDIR", dir)
        .env("LONGHAND_LANGGRAPH_REPEATS", "1")
        .env("LONGHAND_LANGGRAPH_QUIET", "1")
        .stderr(Stdio::inherit())
        .output()
        .context("running the LangGraph script")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("the LangGraph script failed ({}): {text}", out.status);
    }
    let summary: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .map(serde_json::from_str)
        .transpose()?
        .ok_or_else(|| anyhow!("no SUMMARY line from the LangGraph script: {text}"))?;
    Ok(summary[steps.to_string()].clone())
}

fn langgraph_script() -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "benches", "langgraph", "run.sh"]
        .iter()
        .collect()
}

/// Medians over a part-1 configuration's repeats.
struct LoopSummary {
    medium: &'static str,
    steps: u64,
    step_ms: f64,
    tool_ms: f64,
    overhead_ms: f64,
    store_bytes: u64,
    langgraph: Option<LangGraphSummary>,
}

struct LangGraphSummary {
    step_ms: f64,
    overhead_ms: f64,
    store_bytes: f64,
    /// Median over the repeats of (LangGraph step / our step), each pair
    /// measured back to back.
    ratio: f64,
}

fn fget(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(f64::NAN)
}

async fn loop_part(
    hands: &Hands,
    frozen: &Frozen,
    quick: bool,
    langgraph: bool,
) -> Result<Vec<LoopSummary>> {
    println!("\n## 1. Harness overhead per step (scripted model, json__query `.`)");
    if langgraph {
        println!("## 4. … with LangGraph (SqliteSaver, durability=\"sync\") run back to back");
        let out = Command::new(langgraph_script())
            .arg("--versions")
            .stderr(Stdio::inherit())
            .output()
            .context("setting up the LangGraph venv")?;
        if !out.status.success() {
            bail!("LangGraph setup failed: {}", out.status);
        }
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    let sizes: Vec<u64> = env_list("LONGHAND_BENCH_STEPS")
        .map(|v| v.iter().filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| {
            if quick {
                vec![100, 300]
            } else {
                vec![200, 1000]
            }
        });
    let repeats: usize = std::env::var("LONGHAND_BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 });
    let media_wanted = env_list("LONGHAND_BENCH_MEDIA");
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
        longhand_brain::bind(hands, frozen.clone(), no_env).await?;
        binds.push(ms(t.elapsed()));
    }
    println!("agent::bind (per session): median {:.3} ms", median(&binds));
    let mut hops = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        tokio::task::spawn_blocking(|| ()).await?;
        hops.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "baseline, one tokio spawn_blocking round trip: {:.0} µs",
        median(&hops)
    );
    let (full_disk, normal_disk) = bare_sqlite(disk.path(), 200)?;
    println!(
        "baseline, bare SQLite commit (WAL) on disk: synchronous=FULL {full_disk:.0} µs, \
         NORMAL {normal_disk:.0} µs"
    );
    if let Some(t) = &tmpfs {
        let (f, n) = bare_sqlite(t.path(), 200)?;
        println!("baseline, bare SQLite commit on tmpfs: FULL {f:.0} µs, NORMAL {n:.0} µs");
    }

    // Warm up (page cache, allocator, the instance pool).
    loop_run(hands, frozen, 20, &disk.path().join("warmup")).await?;

    println!(
        "\nper step (ms unless said); lg = LangGraph run right after, same medium and size\n\
         {:<6} {:>5} {:>3} {:>7} {:>7} {:>6} {:>6} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>6}",
        "medium",
        "steps",
        "run",
        "step",
        "p90",
        "tool",
        "ovh",
        "tot/N",
        "cpu/N",
        "st.cpu",
        "store",
        "append",
        "apps",
        "now",
        "blobs",
        "gets",
        "commit",
        "fsync",
        "MB",
        "lg step",
        "lg ovh",
        "ratio"
    );
    let mut summaries = Vec::new();
    let mut media: Vec<(&'static str, &Path)> = vec![("disk", disk.path())];
    if let Some(t) = &tmpfs {
        media.push(("tmpfs", t.path()));
    }
    media.retain(|(m, _)| {
        media_wanted
            .as_ref()
            .is_none_or(|w| w.iter().any(|x| x == m))
    });
    let mut receipt = None;
    for (medium, root) in media {
        for &steps in &sizes {
            let mut runs = Vec::new();
            let mut lgs = Vec::new();
            for r in 0..repeats {
                let dir = root.join(format!("loop-{steps}-{r}"));
                let run = loop_run(hands, frozen, steps, &dir).await?;
                std::fs::remove_dir_all(&dir).ok();
                let lg = if langgraph {
                    let lg_dir = root.join(format!("langgraph-{steps}-{r}"));
                    std::fs::create_dir_all(&lg_dir)?;
                    let v = langgraph_run(steps, &lg_dir)?;
                    std::fs::remove_dir_all(&lg_dir).ok();
                    Some(v)
                } else {
                    None
                };
                let n = run.steps as f64;
                let step = median(&run.step_us) / 1e3;
                let (lg_step, lg_ovh) = lg.as_ref().map_or((f64::NAN, f64::NAN), |v| {
                    (fget(v, "step_ms_median"), fget(v, "overhead_ms_median"))
                });
                println!(
                    "{:<6} {:>5} {:>3} {:>7.3} {:>7.3} {:>6.3} {:>6.3} {:>7.3} {:>7.3} {:>6.3} {:>6.3} {:>6.3} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.3} {:>6.2} {:>7.2} {:>7.2} {:>6.1}",
                    medium,
                    steps,
                    r,
                    step,
                    percentile(&run.step_us, 0.9) / 1e3,
                    median(&run.tool_us) / 1e3,
                    median(&run.overhead_us) / 1e3,
                    ms(run.total) / n,
                    ms(run.cpu) / n,
                    ms(run.store_cpu) / n,
                    ms(run.store_time) / n,
                    ms(run.append_time) / run.appends.max(1) as f64,
                    run.appends as f64 / n,
                    run.appends_now as f64 / n,
                    run.blobs as f64 / n,
                    run.gets as f64 / n,
                    run.stats.commits as f64 / n,
                    run.stats.syncs as f64 / n,
                    mb(run.size.checkpointed),
                    lg_step,
                    lg_ovh,
                    lg_step / step,
                );
                println!("       cpu by thread, ms/step: {}", run.threads);
                receipt = receipt.or(run.receipt.clone());
                runs.push(run);
                lgs.extend(lg);
            }
            let last = runs.last().map(|r| r.size.clone()).unwrap_or_default();
            let of = |f: &dyn Fn(&LoopRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            let step_ms = of(&|r| median(&r.step_us)) / 1e3;
            let s = LoopSummary {
                medium,
                steps,
                step_ms,
                tool_ms: of(&|r| median(&r.tool_us)) / 1e3,
                overhead_ms: of(&|r| median(&r.overhead_us)) / 1e3,
                store_bytes: last.checkpointed,
                langgraph: (!lgs.is_empty()).then(|| {
                    let lg =
                        |key: &str| median(&lgs.iter().map(|v| fget(v, key)).collect::<Vec<_>>());
                    let ratios: Vec<f64> = lgs
                        .iter()
                        .zip(&runs)
                        .map(|(v, r)| fget(v, "step_ms_median") / (median(&r.step_us) / 1e3))
                        .collect();
                    LangGraphSummary {
                        step_ms: lg("step_ms_median"),
                        overhead_ms: lg("overhead_ms_median"),
                        store_bytes: lgs
                            .last()
                            .map_or(f64::NAN, |v| fget(v, "store_bytes_checkpointed")),
                        ratio: median(&ratios),
                    }
                }),
            };
            println!(
                "{medium} {steps} steps: median step {:.3} ms, tool {:.3} ms, overhead {:.3} ms \
                 (target ≤ 0.3 ms: {}); store after run, checkpointed: {:.2} MB (as left {:.2} MB) \
                 = {} events ({:.2} MB JSON) + {} blobs ({:.2} MB, of which {} snapshots {:.2} MB)",
                s.step_ms,
                s.tool_ms,
                s.overhead_ms,
                verdict(s.overhead_ms <= 0.3),
                mb(last.checkpointed),
                mb(last.as_left),
                last.events,
                mb(last.event_json),
                last.blobs,
                mb(last.blob_bytes),
                last.snapshots,
                mb(last.snapshot_blob_bytes),
            );
            if let Some(lg) = &s.langgraph {
                println!(
                    "{medium} {steps} steps vs LangGraph: step {:.3} vs {:.3} ms, {:.1}× faster \
                     (median of paired ratios; target ≥ 10×: {}); overhead {:.3} vs {:.3} ms; \
                     store {:.2} vs {:.2} MB ({:.1}× smaller)",
                    s.step_ms,
                    lg.step_ms,
                    lg.ratio,
                    verdict(lg.ratio >= 10.0),
                    s.overhead_ms,
                    lg.overhead_ms,
                    mb(s.store_bytes),
                    lg.store_bytes / 1e6,
                    lg.store_bytes / s.store_bytes as f64,
                );
            }
            summaries.push(s);
        }
    }
    for pair in summaries.windows(2) {
        let [a, b] = pair else { continue };
        if a.medium == b.medium {
            println!(
                "flatness ({}): overhead at {} steps / at {} steps = {:.2} (1.00 = flat); \
                 store at {} steps {:.2} MB (target ≤ 5 MB: {})",
                a.medium,
                b.steps,
                a.steps,
                b.overhead_ms / a.overhead_ms,
                b.steps,
                mb(b.store_bytes),
                verdict(b.store_bytes <= 5_000_000)
            );
        }
    }
    if let Some(r) = receipt {
        println!("a receipt as logged: {r}");
    }
    Ok(summaries)
}

/// A comma-separated environment variable, if set.
fn env_list(name: &str) -> Option<Vec<String>> {
    let v = std::env::var(name).ok()?;
    Some(v.split(',').map(|s| s.trim().to_owned()).collect())
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// A script longer than the history cap (1024 items, ~512 steps) must play
/// exactly: every tool turn, then the final answer (finding F6, fixed by
/// carrying the step in `ModelRequest`).
async fn script_probe(hands: &Hands, frozen: &Frozen) -> Result<()> {
    println!("\n## ScriptProvider past the history cap");
    let turns = 1200u64;
    let dir = tempfile::tempdir_in(if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    })?;
    let store = Arc::new(SqliteStore::open(dir.path()).await?);
    let mut f = frozen.clone();
    f.limits.max_steps = turns + 50;
    let bound = longhand_brain::bind(hands, f, no_env).await?;
    let mut runner =
        Runner::start(store, hands, bound, Arc::new(script(turns)), GOAL, "bench").await?;
    let end = runner.run().await?;
    let s = runner.state();
    let exact = end.status == SessionStatus::Finished
        && s.tool_calls == turns
        && s.steps == turns + 1
        && end.detail.as_deref() == Some("done");
    println!(
        "ScriptProvider with {turns} tool turns + 1 final: ended {:?} after {} model turns and \
         {} tool calls; history {} items ({} omitted): {}",
        end.status,
        s.steps,
        s.tool_calls,
        s.history.len(),
        s.history_omitted,
        if exact { "exact" } else { "WRONG" }
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
                calls: Some(vec![format!("c-{step}")]),
                cached_input_tokens: 0,
                cost_micros: None,
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
                // As `Runner::flush` does it.
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
    /// `Runner::start`: create, lease, `goal_set` (fsynced).
    start: Duration,
    run: Duration,
}

async fn one_session(
    i: usize,
    hands: &'static Hands,
    store: Arc<Timed>,
    frozen: Arc<Frozen>,
    provider: Arc<dyn ModelProvider>,
    failures: Arc<AtomicU64>,
) -> Result<SessionOutcome> {
    let started = Instant::now();
    let bound = longhand_brain::bind(hands, (*frozen).clone(), no_env).await?;
    let bind = started.elapsed();
    let goal = format!("Session {i}: query the value once.");
    let mut runner = Runner::start(store, hands, bound, provider, &goal, "bench").await?;
    let start = started.elapsed() - bind;
    runner.observe(Box::new(move |record: &EventRecord| {
        if matches!(record.event, Event::ModelFailed { .. }) {
            failures.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let end = runner.run().await?;
    let wall = started.elapsed();
    Ok(SessionOutcome {
        status: end.status,
        steps: runner.state().steps,
        tool_calls: runner.state().tool_calls,
        wall,
        bind,
        start,
        run: wall - bind - start,
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
        tools: longhand_brain::bind(hands, frozen.clone(), no_env)
            .await?
            .tool_defs()
            .to_vec(),
        max_tokens: 4096,
        temperature: None,
        step: 0,
        agent: String::new(),
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
    let cpu0 = process_cpu();
    let machine0 = machine_cpu();
    let server_cpu0 = child_cpu(server.child.id());
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
    let machine1 = machine_cpu();
    println!(
        "baseline, provider alone ({n} tasks × 2 calls): {:.2} s wall, {:.0} calls/s, \
         {base_failed} failed; CPU {:.2} s here + {:.2} s mock server; machine busy {:.0} %",
        base_wall.as_secs_f64(),
        2.0 * n as f64 / base_wall.as_secs_f64(),
        (process_cpu() - cpu0).as_secs_f64(),
        child_cpu(server.child.id())
            .saturating_sub(server_cpu0)
            .as_secs_f64(),
        100.0 * (machine1.0 - machine0.0) as f64 / (machine1.1 - machine0.1).max(1) as f64,
    );

    // Its idle connections would otherwise stay open beside the fleet's.
    drop(baseline);
    let shm = Path::new("/dev/shm");
    let mut roots = vec![("disk", std::env::temp_dir())];
    if shm.is_dir() {
        // Same-run baseline: the same fleet with fsync made free.
        roots.push(("tmpfs", shm.to_path_buf()));
    }
    if let Some(media) = env_list("LONGHAND_BENCH_MEDIA") {
        roots.retain(|(m, _)| media.iter().any(|x| x == m));
    }
    // `LONGHAND_BENCH_FLEET=spawn,local` picks how sessions run (default:
    // both on disk, `spawn` on tmpfs).
    let modes = std::env::var("LONGHAND_BENCH_FLEET").ok();
    let wanted = |mode: FleetMode, label: &str| match &modes {
        Some(list) => list.split(',').any(|m| {
            matches!(
                (m.trim(), mode),
                ("spawn", FleetMode::Spawn) | ("local", FleetMode::Local)
            )
        }),
        None => mode == FleetMode::Spawn || label == "disk",
    };
    for (label, root) in roots {
        for mode in [FleetMode::Spawn, FleetMode::Local] {
            if wanted(mode, label) {
                fleet_run(label, mode, &root, n, hands, frozen, &mut server, base_wall).await?;
            }
        }
    }
    Ok(())
}

/// How the fleet's sessions are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FleetMode {
    /// `tokio::spawn` on the bench's multi-thread runtime.
    Spawn,
    /// One current-thread runtime + `LocalSet` per core, sessions dealt
    /// round-robin (what the bench did while `Runner::run` was not `Send`).
    Local,
}

/// The fleet on one current-thread runtime + `LocalSet` per core.
async fn local_fleet(
    n: usize,
    hands: &'static Hands,
    store: &Arc<Timed>,
    frozen: &Arc<Frozen>,
    provider: &Arc<dyn ModelProvider>,
    failures: &Arc<AtomicU64>,
) -> Result<(Vec<Result<SessionOutcome>>, Duration)> {
    let t0 = Instant::now();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let done = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for w in 0..workers {
        let store = store.clone();
        let frozen = frozen.clone();
        let provider = provider.clone();
        let failures = failures.clone();
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
                        handles.push(tokio::task::spawn_local(one_session(
                            i,
                            hands,
                            store.clone(),
                            frozen.clone(),
                            provider.clone(),
                            failures.clone(),
                        )));
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
    Ok((joined, spawned))
}

#[expect(clippy::too_many_arguments, reason = "a bench part's knobs")]
async fn fleet_run(
    label: &str,
    mode: FleetMode,
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
    let cpu0 = process_cpu();
    let threads0 = thread_cpu();
    let machine0 = machine_cpu();
    let server_cpu0 = child_cpu(server.child.id());
    let metrics = tokio::runtime::Handle::current().metrics();
    let (peak_tasks, task_sampler) = {
        let peak = Arc::new(AtomicU64::new(0));
        let p = peak.clone();
        let m = metrics.clone();
        let handle = tokio::spawn(async move {
            loop {
                p.fetch_max(m.num_alive_tasks() as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        (peak, handle)
    };
    let t0 = Instant::now();
    let (joined, spawned) = match mode {
        FleetMode::Spawn => {
            // `Runner::run` is `Send`: every session is a task on this
            // multi-thread runtime, as a server would run them.
            let mut set = tokio::task::JoinSet::new();
            for i in 0..n {
                let store = store.clone();
                let frozen = frozen.clone();
                let provider = provider.clone();
                let failures = model_failures.clone();
                set.spawn(one_session(i, hands, store, frozen, provider, failures));
            }
            let spawned = t0.elapsed();
            let mut out = Vec::with_capacity(n);
            while let Some(r) = set.join_next().await {
                out.push(r.unwrap_or_else(|e| Err(anyhow!("join: {e}"))));
            }
            (out, spawned)
        }
        FleetMode::Local => {
            local_fleet(n, hands, &store, &frozen, &provider, &model_failures).await?
        }
    };
    let mut outcomes = Vec::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for r in joined {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => *errors.entry(format!("{e:#}")).or_default() += 1,
        }
    }
    let wall = t0.elapsed();
    let cpu = process_cpu() - cpu0;
    let threads1 = thread_cpu();
    let machine1 = machine_cpu();
    let server_cpu = child_cpu(server.child.id()).saturating_sub(server_cpu0);
    let machine_busy = (machine1.0 - machine0.0) as f64 / (machine1.1 - machine0.1).max(1) as f64;
    sampler.abort();
    task_sampler.abort();
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
    let starts: Vec<f64> = outcomes.iter().map(|o| ms(o.start)).collect();
    let runs: Vec<f64> = outcomes.iter().map(|o| o.run.as_secs_f64()).collect();
    let stats = store.stats();
    let appends = store.appends();
    let (now_n, now_t) = (store.append_now.calls(), store.append_now.time());
    let (soon_n, soon_t) = (store.append.calls(), store.append.time());
    let (lease_n, lease_t) = (store.lease.calls(), store.lease.time());
    let (other_n, other_t) = (store.other.calls(), store.other.time());
    let renewals = store.renew.calls();
    let gets = store.get.calls();
    drop(store);
    drop(provider);
    let size = measure_store(dir.path())?;
    println!("### {label}, sessions by {mode:?}");
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
        "wall {:.2} s (target ≤ 10 s: {}; floor 1.00 s: {:.1}×; provider alone {:.2} s: {:.1}×); \
         {:.0} steps/s, {:.0} sessions/s",
        wall.as_secs_f64(),
        verdict(wall <= Duration::from_secs(10) && finished == n),
        wall.as_secs_f64() / (2.0 * MOCK_LATENCY.as_secs_f64()),
        base_wall.as_secs_f64(),
        wall.as_secs_f64() / base_wall.as_secs_f64(),
        steps as f64 / wall.as_secs_f64(),
        finished as f64 / wall.as_secs_f64()
    );
    println!(
        "CPU {:.2} s in {:.2} s wall ({:.0} % of {} cores); per session {:.2} ms; by thread, s: {}",
        cpu.as_secs_f64(),
        wall.as_secs_f64(),
        100.0 * cpu.as_secs_f64()
            / wall.as_secs_f64()
            / std::thread::available_parallelism().map_or(1, |n| n.get()) as f64,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        ms(cpu) / n as f64,
        cpu_split(&threads0, &threads1, 1e3),
    );
    println!(
        "machine (all processes) busy {:.0} % of its cores during the run; mock server CPU {:.2} s; \
         this process + mock = {:.2} s = {:.0} % of {} core-seconds",
        100.0 * machine_busy,
        server_cpu.as_secs_f64(),
        (cpu + server_cpu).as_secs_f64(),
        100.0 * (cpu + server_cpu).as_secs_f64()
            / wall.as_secs_f64()
            / std::thread::available_parallelism().map_or(1, |n| n.get()) as f64,
        (wall.as_secs_f64() * std::thread::available_parallelism().map_or(1, |n| n.get()) as f64)
            .round(),
    );
    println!(
        "per session: wall median {:.2} s, p90 {:.2} s, max {:.2} s; of which bind median {:.2} ms \
         (max {:.0}), start (create + lease + goal, fsynced) median {:.1} ms (p90 {:.0}, max {:.0}), \
         run median {:.2} s (p90 {:.2}); peak tokio tasks alive {}",
        median(&walls),
        percentile(&walls, 0.9),
        percentile(&walls, 1.0),
        median(&binds),
        percentile(&binds, 1.0),
        median(&starts),
        percentile(&starts, 0.9),
        percentile(&starts, 1.0),
        median(&runs),
        percentile(&runs, 0.9),
        peak_tasks.load(Ordering::Relaxed),
    );
    println!(
        "store: {appends} appends: {now_n} Now ({:.1} ms mean incl. queueing), {soon_n} Soon \
         ({:.1} ms mean); {lease_n} acquire/release ({:.1} ms mean); {other_n} create/other \
         ({:.1} ms mean); {gets} get_blob; {renewals} lease renewals; writer: {} requests in {} \
         commits ({:.1} per commit), {} fsyncs; {:.0} MB after ({} events)",
        ms(now_t) / now_n.max(1) as f64,
        ms(soon_t) / soon_n.max(1) as f64,
        ms(lease_t) / lease_n.max(1) as f64,
        ms(other_t) / other_n.max(1) as f64,
        stats.requests,
        stats.commits,
        stats.requests as f64 / stats.commits.max(1) as f64,
        stats.syncs,
        mb(size.checkpointed),
        size.events
    );
    println!(
        "peak RSS (VmHWM{}) {:.0} MB (target ≤ 1024 MiB: {}); RSS before {:.0} MB → {:.1} KB per \
         session; peak open fds {}; mock server: {conns} connections, {requests} requests, \
         {peak_conns} open at once, peak RSS {:.0} MB",
        if reset {
            ", reset before the run"
        } else {
            ", NOT reset: includes earlier parts"
        },
        mb(peak),
        verdict(peak <= 1 << 30),
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
