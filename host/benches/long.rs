//! Long runs: does a session's memory and store stay flat as it runs for
//! days? Peak RSS and store size of one unplanned session at 1k, 10k and
//! 100k steps, each figure against the 1k run of the same invocation.
//! Results and the command that produced them go in `docs/benchmarks.md`
//! ("Long runs: memory and store per step").
//!
//! ```text
//! cargo bench -p longhand-host --bench long                       # 1k, 10k, 100k
//! LONGHAND_BENCH_STEPS=1000,10000 cargo bench -p longhand-host --bench long
//! cargo bench -p longhand-host --bench long -- --steps 1000,5000  # the same, as a flag
//! ```
//!
//! Each step count runs in a child process of its own (this binary again),
//! so each peak (VmHWM) is that run's alone: the real loop (`freeze`,
//! `bind`, `Runner::start`, `run`) on a `SqliteStore` in a temporary
//! directory, every turn a `json__query` call, answered by a model that
//! makes each answer from the request's step number — nothing the size of
//! the run is held outside the loop (a `ScriptProvider` of 100k turns would
//! hold them all). The child prints one JSON line; the parent prints the
//! table and the ratios:
//! - peak RSS (VmHWM) and RSS at the end;
//! - the store: database + WAL as left, and after a checkpoint; bytes per
//!   step; events, snapshots kept, blobs.
//!
//! Target (issue 26): peak RSS flat within 10 % from 1k to 100k steps; the
//! store growing by what the log itself needs (its events), not by a
//! snapshot per 100 events.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use longhand_brain::Runner;
use longhand_brain::agent::config::AgentConfig;
use longhand_brain::model::{
    ModelError, ModelProvider, ModelRequest, ModelResponse, StopReason, ToolCall, Usage,
};
use longhand_hands::{Hands, HandsConfig};
use longhand_session::{SessionStatus, SqliteStore};
use serde_json::{Value, json};

/// Set (to the step count) in the child process that runs one session.
const CHILD_ENV: &str = "LONGHAND_BENCH_LONG_CHILD";
const TOOL: &str = "json__query";
const TOOL_ARGS: &str = r#"{"filter":".","input":{"a":1}}"#;
const GOAL: &str = "Query the value, again and again.";

fn main() -> Result<()> {
    if let Ok(steps) = std::env::var(CHILD_ENV) {
        return child(steps.parse().context("step count")?);
    }
    let steps = step_counts()?;
    println!(
        "# longhand long-run bench: {} cores, steps {steps:?}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let exe = std::env::current_exe()?;
    let mut rows: Vec<Value> = Vec::new();
    for n in steps {
        let out = std::process::Command::new(&exe)
            .env(CHILD_ENV, n.to_string())
            .stderr(std::process::Stdio::inherit())
            .output()
            .with_context(|| format!("run the {n}-step child"))?;
        if !out.status.success() {
            bail!("the {n}-step child failed: {}", out.status);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let row: Value = serde_json::from_str(text.lines().last().unwrap_or_default())
            .with_context(|| format!("the {n}-step child printed {text:?}"))?;
        rows.push(row);
    }
    let base = rows.first().cloned().unwrap_or_default();
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let mb = |b: f64| b / 1e6;
    println!(
        "\n| steps | wall | peak RSS | vs first | RSS at end | store (as left) | store (checkpoint + VACUUM) | bytes/step | events | snapshots kept | blobs |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.0} s | {:.1} MB | {:.2}× | {:.1} MB | {:.1} MB | {:.1} MB | {:.0} | {} | {} | {} |",
            r["steps"],
            f(r, "wall_s"),
            mb(f(r, "peak_rss")),
            f(r, "peak_rss") / f(&base, "peak_rss").max(1.0),
            mb(f(r, "rss_end")),
            mb(f(r, "store_as_left")),
            mb(f(r, "store_checkpointed")),
            f(r, "store_checkpointed") / f(r, "steps").max(1.0),
            r["events"],
            r["snapshots"],
            r["blobs"],
        );
    }
    Ok(())
}

/// `--steps 1000,10000` or `LONGHAND_BENCH_STEPS`, else 1k, 10k, 100k.
fn step_counts() -> Result<Vec<u64>> {
    let args: Vec<String> = std::env::args().collect();
    let flag = args
        .iter()
        .position(|a| a == "--steps")
        .and_then(|i| args.get(i + 1).cloned());
    let list = flag
        .or_else(|| std::env::var("LONGHAND_BENCH_STEPS").ok())
        .unwrap_or_else(|| "1000,10000,100000".to_owned());
    list.split(',')
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .with_context(|| format!("step count `{s}`"))
        })
        .collect()
}

/// One session of `steps` tool turns and a final answer; prints its
/// figures as one JSON line.
fn child(steps: u64) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let hands: &'static Hands = Box::leak(Box::new(Hands::new(HandsConfig::default())?));
        let base = tempfile::tempdir()?;
        let frozen = longhand_brain::freeze(hands, &agent_config()?, base.path(), |_| None).await?;
        let dir = tempfile::tempdir()?;
        let store = Arc::new(SqliteStore::open(dir.path()).await?);
        let bound = longhand_brain::bind(hands, frozen, |_| None).await?;
        let start = Instant::now();
        let mut runner = Runner::start(
            store.clone(),
            hands,
            bound,
            Arc::new(Generated { steps }),
            GOAL,
            "bench",
        )
        .await?;
        let end = runner.run().await?;
        let wall = start.elapsed();
        if end.status != SessionStatus::Finished || runner.state().tool_calls != steps {
            bail!(
                "the {steps}-step run ended {:?} after {} tool calls: {:?}",
                end.status,
                runner.state().tool_calls,
                end.detail
            );
        }
        let peak_rss = status_bytes("VmHWM");
        let rss_end = status_bytes("VmRSS");
        drop(runner);
        drop(store);
        let size = store_size(dir.path())?;
        // LONGHAND_BENCH_KEEP=1: leave the store for a look (path on stderr).
        if std::env::var("LONGHAND_BENCH_KEEP").is_ok_and(|v| v == "1") {
            eprintln!("kept the store in {}", dir.keep().display());
        }
        println!(
            "{}",
            json!({
                "steps": steps,
                "wall_s": wall.as_secs_f64(),
                "peak_rss": peak_rss,
                "rss_end": rss_end,
                "store_as_left": size.0,
                "store_checkpointed": size.1,
                "events": size.2,
                "snapshots": size.3,
                "blobs": size.4,
            })
        );
        Ok(())
    })
}

/// The agent: one tool, limits out of the way (the model decides when to
/// stop), the default context budget.
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

/// Answers turn k with a `json__query` call while k ≤ `steps`, then with
/// text: made from the request's step, so it holds nothing per turn.
struct Generated {
    steps: u64,
}

#[async_trait]
impl ModelProvider for Generated {
    fn name(&self) -> &str {
        "script"
    }
    fn model(&self) -> &str {
        "script"
    }
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 20,
            ..Usage::default()
        };
        let k = req.step;
        Ok(if k > self.steps {
            ModelResponse {
                text: Some("done".to_owned()),
                tool_calls: Vec::new(),
                stop_reason: StopReason::EndTurn,
                usage,
                ..ModelResponse::default()
            }
        } else {
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
        })
    }
}

/// A field of `/proc/self/status` in bytes.
fn status_bytes(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// (db + WAL as left, after a checkpoint and VACUUM, events, snapshots
/// whose root blob is still stored, blobs).
fn store_size(dir: &Path) -> Result<(u64, u64, u64, u64, u64)> {
    let bytes = || -> u64 {
        ["longhand.db", "longhand.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
            .map(|m| m.len())
            .sum()
    };
    let as_left = bytes();
    let conn = rusqlite::Connection::open(dir.join("longhand.db"))?;
    let q = |sql: &str| -> Result<u64> {
        Ok(conn
            .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))?
            .unwrap_or(0) as u64)
    };
    let events = q("SELECT count(*) FROM events")?;
    let snapshots = q("SELECT count(*) FROM blobs WHERE digest IN
         (SELECT json_extract(json, '$.state.digest') FROM events WHERE type = 'snapshot')")?;
    let blobs = q("SELECT count(*) FROM blobs")?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    conn.execute_batch("VACUUM")?;
    drop(conn);
    Ok((as_left, bytes(), events, snapshots, blobs))
}
