//! Databases through the tool host (issue 30 §3): a point query through
//! the built-in `postgres` tool against the same query from a plain client
//! in the same run. Results and the command go in `docs/benchmarks.md`
//! ("Databases").
//!
//! ```text
//! eval "$(bash .ci/setup-postgres.sh)"
//! cargo bench -p longhand-host --bench databases
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench databases   # fewer samples
//! ```
//!
//! 1. **plain client** — `tokio-postgres` on one open connection, the
//!    statement prepared once: the floor any client pays.
//! 2. **tool call** — `Hands::call` of `postgres`'s `query`: the input
//!    checked against its schema, a fresh component instance, the host's
//!    `longhand:tool/sql` (a pooled connection, `BEGIN READ ONLY`, the
//!    timeout, prepare, a portal, `ROLLBACK`; `DISCARD ALL` off the call's
//!    path), the rows turned into JSON.
//!
//! Interleaved rounds so machine noise falls on both alike; medians and
//! p90, and the ratio of the medians.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use longhand_hands::grants::GrantSpec;
use longhand_hands::{Hands, HandsConfig, ToolSource};
use serde_json::json;

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> Result<()> {
    let Ok(url) = std::env::var("LONGHAND_TEST_PG") else {
        bail!("set LONGHAND_TEST_PG (eval \"$(bash .ci/setup-postgres.sh)\")");
    };
    let rounds = if std::env::var_os("LONGHAND_BENCH_QUICK").is_some() {
        100
    } else {
        1000
    };
    let work = tempfile::tempdir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let hands = Hands::new(HandsConfig {
        cache_dir: Some(work.path().join("cache")),
        ..HandsConfig::default()
    })?;
    let postgres = runtime.block_on(hands.load(ToolSource::Builtin("postgres")))?;
    let grants = GrantSpec {
        databases: vec!["bench=LONGHAND_TEST_PG,allow=127.0.0.1,allow=localhost".into()],
        ..GrantSpec::default()
    }
    .resolve(work.path(), |name| std::env::var(name).ok())?;

    let (plain, tool) = runtime.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .context("connect to LONGHAND_TEST_PG")?;
        tokio::spawn(conn);
        client
            .batch_execute(
                "CREATE SCHEMA IF NOT EXISTS bench; \
                 CREATE TABLE IF NOT EXISTS bench.point (id int PRIMARY KEY, name text); \
                 INSERT INTO bench.point SELECT g, 'row ' || g FROM generate_series(1, 10000) g \
                 ON CONFLICT DO NOTHING",
            )
            .await?;
        let sql = "select id, name from bench.point where id = $1";
        let prepared = client.prepare(sql).await?;
        // Warm-up, and a check that both ways read the same row.
        let row = client.query_one(&prepared, &[&42i32]).await?;
        let name: String = row.get(1);
        let input = json!({"database": "bench", "sql": sql, "params": [42]});
        let out = hands.call(&postgres, &grants, "query", &input).await;
        let value = out.result.map_err(|e| anyhow::anyhow!("tool query: {e}"))?;
        if value["rows"] != json!([[42, name]]) {
            bail!("the tool read {value}, the client {name}");
        }
        let (mut plain, mut tool) = (Vec::new(), Vec::new());
        for i in 0..rounds {
            let id: i32 = i * 7919 % 10000 + 1;
            let start = Instant::now();
            let row = client.query_one(&prepared, &[&id]).await?;
            plain.push(start.elapsed());
            std::hint::black_box(row);
            let input = json!({"database": "bench", "sql": sql, "params": [id]});
            let start = Instant::now();
            let out = hands.call(&postgres, &grants, "query", &input).await;
            tool.push(start.elapsed());
            if out.result.is_err() {
                bail!("tool query {i} failed: {:?}", out.result);
            }
        }
        anyhow::Ok((plain, tool))
    })?;
    let row = |s: &Vec<Duration>| {
        format!(
            "{:.3} ({:.3})",
            ms(percentile(s.clone(), 0.5)),
            ms(percentile(s.clone(), 0.9))
        )
    };
    let ratio = ms(percentile(tool.clone(), 0.5)) / ms(percentile(plain.clone(), 0.5));
    println!("databases: {rounds} interleaved point queries, medians (p90) in ms\n");
    println!("| engine | plain client | tool call | tool / plain |");
    println!("|---|---|---|---|");
    println!(
        "| PostgreSQL (loopback) | {} | {} | {ratio:.1}× |",
        row(&plain),
        row(&tool)
    );
    Ok(())
}
