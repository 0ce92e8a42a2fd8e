//! The `python` and `js` tools (issue 28): what a warm call of a trivial
//! snippet costs, in process and as a whole `longhand tool call`, against
//! the built-in `json` tool measured in the same run. Results and the
//! command that produced them go in `docs/benchmarks.md` ("The python and
//! js tools").
//!
//! ```text
//! eval "$(bash .ci/setup-componentize.sh)"     # the toolchains; a tool without one is skipped
//! cargo bench -p longhand-host --bench interpreters
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench interpreters   # fewer samples
//! ```
//!
//! Each tool is installed once (`longhand tool install python|js`, built
//! from the sources in the binary) into a home under Cargo's target
//! directory, kept between runs. Then, per tool:
//! 1. **warm call** — `Hands::call` of `run` with `print(1)` /
//!    `console.log(1)` on the loaded, compiled component: grants, schema
//!    check, a fresh pooled instance (the interpreter as componentize-py's
//!    or componentize-qjs's build-time snapshot left it), the call, the
//!    receipt. Load once, call many; the median after a warm-up.
//! 2. **process** — `longhand tool call NAME run --input …` by its
//!    installed name as a whole process, compile cache warm: process start,
//!    engine, loading the installed component, one call, exit.
//!
//! The machine is shared and noisy (2 cores): compare medians.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use longhand_hands::{Grants, Hands, HandsConfig, ToolSource};
use serde_json::{Value, json};

const LONGHAND: &str = env!("CARGO_BIN_EXE_longhand");

/// One row of the table.
struct Subject {
    label: &'static str,
    /// A built-in, or a tool `tool install` builds.
    component: &'static str,
    tool: &'static str,
    input: Value,
    /// The toolchain variable `tool install` reads; `None` for the baseline.
    toolchain: Option<&'static str>,
    /// The issue's target for a warm call (ms), if it sets one.
    target_ms: Option<f64>,
}

fn subjects() -> Vec<Subject> {
    vec![
        Subject {
            label: "built-in json (baseline)",
            component: "json",
            tool: "query",
            input: json!({"filter": ".", "input": {"a": 1}}),
            toolchain: None,
            target_ms: None,
        },
        Subject {
            label: "python, print(1)",
            component: "python",
            tool: "run",
            input: json!({"code": "print(1)"}),
            toolchain: Some("LONGHAND_PY_VENV"),
            target_ms: Some(5.0),
        },
        Subject {
            label: "python, statistics.mean (pre-imported)",
            component: "python",
            tool: "run",
            input: json!({"code": "import statistics\nstatistics.mean([1, 2, 3])"}),
            toolchain: Some("LONGHAND_PY_VENV"),
            target_ms: None,
        },
        Subject {
            label: "js, console.log(1)",
            component: "js",
            tool: "run",
            input: json!({"code": "console.log(1)"}),
            toolchain: Some("LONGHAND_JS_MODULES"),
            target_ms: Some(0.5),
        },
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The bench's home and compile cache, kept between runs.
fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("interpreters")
}

/// `longhand <args>` against `home`, with only what the toolchains need.
fn longhand(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(LONGHAND);
    cmd.args(args)
        .env_clear()
        .env("LONGHAND_HOME", home)
        .stdin(Stdio::null());
    for keep in ["PATH", "HOME", "LONGHAND_PY_VENV", "LONGHAND_JS_MODULES"] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    cmd
}

/// The installed component's path (`tool install NAME` first if it is not
/// installed), from `tool list --json`.
fn installed(home: &Path, name: &str) -> Result<PathBuf> {
    let find = || -> Result<Option<PathBuf>> {
        let out = longhand(home, &["tool", "list", "--json"]).output()?;
        let text = String::from_utf8(out.stdout)?;
        for line in text.lines() {
            let v: Value = serde_json::from_str(line)?;
            if v["name"] == name
                && let Some(source) = v["source"].as_str()
            {
                return Ok(Some(PathBuf::from(source)));
            }
        }
        Ok(None)
    };
    if let Some(path) = find()?.filter(|p| p.is_file()) {
        return Ok(path);
    }
    eprintln!("installing {name} (longhand tool install {name})…");
    let status = longhand(home, &["tool", "install", name])
        .stdout(Stdio::null())
        .status()
        .context("run longhand tool install")?;
    if !status.success() {
        bail!("longhand tool install {name} failed");
    }
    find()?.context("installed, but `tool list` does not show it")
}

/// Median of `Hands::call` on a loaded component.
async fn warm_call(
    hands: &Hands,
    source: ToolSource<'_>,
    s: &Subject,
    n: usize,
) -> Result<Duration> {
    let tool = hands.load(source).await?;
    let grants = Grants::default();
    let check = hands.call(&tool, &grants, s.tool, &s.input).await;
    if let Err(e) = &check.result {
        bail!("the call fails: {e}");
    }
    for _ in 0..n / 10 {
        hands.call(&tool, &grants, s.tool, &s.input).await;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let out = hands.call(&tool, &grants, s.tool, &s.input).await;
        samples.push(start.elapsed());
        std::hint::black_box(out);
    }
    Ok(median(samples))
}

/// Median wall time of `longhand tool call NAME` as a process, cache warm.
fn process_call(home: &Path, s: &Subject, n: usize) -> Result<Duration> {
    let input = s.input.to_string();
    let once = || -> Result<Duration> {
        let start = Instant::now();
        let out = longhand(
            home,
            &["tool", "call", s.component, s.tool, "--input", &input],
        )
        .output()?;
        let took = start.elapsed();
        if !out.status.success() {
            bail!(
                "longhand tool call failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(took)
    };
    // The first run may compile into the cache; the next warms the page cache.
    once()?;
    once()?;
    let samples = (0..n).map(|_| once()).collect::<Result<Vec<_>>>()?;
    Ok(median(samples))
}

fn main() -> Result<()> {
    let quick = std::env::var("LONGHAND_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (n_call, n_proc) = if quick { (300, 10) } else { (2000, 40) };
    let work = work_dir();
    let home = work.join("home");
    std::fs::create_dir_all(&home)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let hands = Hands::new(HandsConfig {
        cache_dir: Some(work.join("hands-cache")),
        ..HandsConfig::default()
    })?;

    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for s in subjects() {
        if let Some(var) = s.toolchain
            && std::env::var_os(var).is_none_or(|v| v.is_empty())
        {
            skipped.push((s.label, format!("{var} is not set")));
            continue;
        }
        let path = match s.toolchain {
            Some(_) => match installed(&home, s.component) {
                Ok(path) => Some(path),
                Err(e) => {
                    skipped.push((s.label, format!("{e:#}")));
                    continue;
                }
            },
            None => None,
        };
        eprintln!("measuring {}…", s.label);
        let source = match &path {
            Some(path) => ToolSource::File(path),
            None => ToolSource::Builtin(s.component),
        };
        let call = runtime.block_on(warm_call(&hands, source, &s, n_call))?;
        let process = process_call(&home, &s, n_proc)?;
        rows.push((s, call, process));
    }
    let Some((_, base_call, base_process)) = rows.iter().find(|r| r.0.toolchain.is_none()) else {
        bail!("the built-in baseline did not run");
    };
    let (base_call, base_process) = (*base_call, *base_process);
    println!(
        "\nThe python and js tools: medians ({n_call} warm Hands calls, {n_proc} processes each); \
         ratios against the built-in json tool in this run.\n"
    );
    println!(
        "| subject | warm call (ms) | × json | target | process (ms) | × json |\n\
         |---|---:|---:|---:|---:|---:|"
    );
    for (s, call, process) in &rows {
        println!(
            "| {} | {:.3} | {:.1} | {} | {:.1} | {:.2} |",
            s.label,
            ms(*call),
            call.as_secs_f64() / base_call.as_secs_f64(),
            s.target_ms.map_or("—".to_owned(), |t| format!("≤ {t}")),
            ms(*process),
            process.as_secs_f64() / base_process.as_secs_f64(),
        );
    }
    for (label, why) in skipped {
        println!("| {label} | skipped: {why} | | | | |");
    }
    Ok(())
}
