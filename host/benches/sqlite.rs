//! The built-in `sqlite` tool (issue 30 §1): a point query through the
//! tool against the same query from the host's own SQLite, measured in the
//! same run on the same file.
//!
//! ```text
//! cargo bench -p longhand-host --bench sqlite
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench sqlite   # fewer samples
//! ```
//!
//! A 100 000-row table with an integer primary key; each sample looks up
//! one row by key (a different key each round):
//! 1. **host rusqlite, open + query** — open the file read-only, prepare,
//!    step, close: what one tool call does, natively; the baseline.
//! 2. **host rusqlite, query only** — on a connection kept open, for scale.
//! 3. **`Hands::call`** — the built-in component's `query`, in process:
//!    grants, schema check, a fresh instance, SQLite in wasm opening the
//!    file through WASI.
//! 4. **`longhand tool call sqlite query`** — the whole process, compile
//!    cache warm.
//!
//! Rounds interleave 1-3 so machine noise falls on every row alike;
//! medians and p90, and each row's ratio to row 1 at the median.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use longhand_hands::grants::{Access, DirSpec, GrantSpec};
use longhand_hands::{Hands, HandsConfig, ToolSource};
use serde_json::json;

const LONGHAND: &str = env!("CARGO_BIN_EXE_longhand");
const ROWS: i64 = 100_000;
const SQL: &str = "SELECT id, name, amount FROM items WHERE id = ?1";

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn make_db(path: &Path) -> Result<()> {
    let c = rusqlite::Connection::open(path)?;
    c.execute_batch(
        "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, amount REAL NOT NULL);
         WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 100000)
         INSERT INTO items SELECT i, 'item ' || i, i * 0.25 FROM r;",
    )?;
    Ok(())
}

fn host_query(c: &rusqlite::Connection, id: i64) -> Result<String> {
    Ok(c.query_row(SQL, [id], |r| r.get(1))?)
}

fn main() -> Result<()> {
    let rounds = if std::env::var_os("LONGHAND_BENCH_QUICK").is_some() {
        30
    } else {
        200
    };
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    std::fs::create_dir(&data)?;
    let file = data.join("bench.db");
    make_db(&file)?;
    let size = std::fs::metadata(&file)?.len();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let hands = Hands::new(HandsConfig {
        cache_dir: Some(work.path().join("cache")),
        ..HandsConfig::default()
    })?;
    let sqlite = runtime.block_on(hands.load(ToolSource::Builtin("sqlite")))?;
    let grants = GrantSpec {
        dirs: vec![DirSpec {
            host_path: data.clone(),
            guest_path: "/data".into(),
            access: Access::ReadOnly,
            symlinks: false,
        }],
        ..GrantSpec::default()
    }
    .resolve(work.path(), |_| None)?;
    let input = |id: i64| json!({"db": "/data/bench.db", "sql": SQL, "params": [id]});

    let kept =
        rusqlite::Connection::open_with_flags(&file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let (mut opened, mut warm, mut tool) = (Vec::new(), Vec::new(), Vec::new());
    runtime.block_on(async {
        // Warm-up, and a check that both ways find the same row.
        let out = hands.call(&sqlite, &grants, "query", &input(7)).await;
        let value = out
            .result
            .map_err(|e| anyhow::anyhow!("sqlite query: {e}"))?;
        if value["rows"] != json!([[7, "item 7", 1.75]]) {
            bail!("the tool found {value}");
        }
        for round in 0..rounds {
            let id = 1 + (round as i64 * 7919) % ROWS;
            let start = Instant::now();
            let c = rusqlite::Connection::open_with_flags(
                &file,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )?;
            let name = host_query(&c, id)?;
            drop(c);
            opened.push(start.elapsed());
            std::hint::black_box(name);

            let start = Instant::now();
            let name = host_query(&kept, id)?;
            warm.push(start.elapsed());
            std::hint::black_box(name);

            let start = Instant::now();
            let out = hands.call(&sqlite, &grants, "query", &input(id)).await;
            tool.push(start.elapsed());
            if out.result.is_err() {
                bail!("sqlite query of {id} failed: {:?}", out.result);
            }
        }
        Ok(())
    })?;

    // The whole process, fewer samples (each is a process start).
    let home = work.path().join("home");
    std::fs::create_dir(&home)?;
    let grant = format!("{}:/data:ro", data.display());
    let once = |id: i64| -> Result<Duration> {
        let input = input(id).to_string();
        let start = Instant::now();
        let out = Command::new(LONGHAND)
            .args([
                "tool", "call", "sqlite", "query", "--dir", &grant, "--input", &input,
            ])
            .env_clear()
            .env("LONGHAND_HOME", &home)
            .stdin(Stdio::null())
            .output()
            .context("run longhand tool call")?;
        let took = start.elapsed();
        if !out.status.success() {
            bail!(
                "longhand tool call failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(took)
    };
    // The first run compiles into the cache.
    once(1)?;
    let process = (0..rounds / 5)
        .map(|i| once(1 + i as i64 * 101))
        .collect::<Result<Vec<_>>>()?;

    let base = ms(percentile(opened.clone(), 0.5));
    println!(
        "sqlite: point query on a {ROWS}-row table ({:.1} MiB), {rounds} interleaved rounds \
         ({} process runs); medians (p90) in ms\n",
        size as f64 / 1048576.0,
        process.len()
    );
    println!("| path | median (p90) | × host open + query |");
    println!("|---|---|---|");
    for (label, s) in [
        ("host rusqlite, open + query + close", &opened),
        ("host rusqlite, query on an open connection", &warm),
        ("sqlite tool, Hands::call (in process)", &tool),
        ("sqlite tool, `longhand tool call` (process)", &process),
    ] {
        let median = ms(percentile(s.clone(), 0.5));
        println!(
            "| {label} | {median:.3} ({:.3}) | {:.1} |",
            ms(percentile(s.clone(), 0.9)),
            median / base
        );
    }
    Ok(())
}
