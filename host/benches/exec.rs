//! Native programs through `exec` (issue 28 §4): what the sandbox and the
//! tool path add to running a program, against the bare spawn of the same
//! program measured in the same run. Results and the command go in
//! `docs/benchmarks.md` ("Running programs: exec").
//!
//! ```text
//! cargo bench -p longhand-host --bench exec
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench exec   # fewer samples
//! ```
//!
//! For each program (`/bin/true`, `cargo --version`):
//! 1. **bare** — `tokio::process::Command` spawn and wait: no sandbox, the
//!    baseline.
//! 2. **confined** — `sandbox::confined::run`: namespaces, the view
//!    (mounts and `pivot_root`), Landlock, rlimits, output capture.
//! 3. **exec run** — `Hands::call` of the built-in `exec` component's
//!    `run`: grants, schema check, a fresh instance, the host's process
//!    checks (program hash by identity, directory pins), then 2.
//!
//! Interleaved rounds (bare, confined, exec, bare, …) so machine noise
//! falls on every row alike; medians and p90 of each, and what exec adds
//! to bare at the median (the issue's target: at most 3 ms for `true`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use longhand_hands::grants::{Access, DirSpec, GrantSpec};
use longhand_hands::sandbox::confined;
use longhand_hands::{Hands, HandsConfig, ToolSource};
use serde_json::json;

struct Program {
    label: &'static str,
    /// A name on PATH or an absolute path.
    program: &'static str,
    args: &'static [&'static str],
}

const PROGRAMS: &[Program] = &[
    Program {
        label: "true",
        program: "/bin/true",
        args: &[],
    },
    Program {
        label: "cargo --version",
        program: "cargo",
        args: &["--version"],
    },
];

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> Result<()> {
    if let Err(why) = confined::available() {
        bail!("confined commands are unavailable here: {why}");
    }
    let rounds = if std::env::var_os("LONGHAND_BENCH_QUICK").is_some() {
        30
    } else {
        200
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
    let exec = runtime.block_on(hands.load(ToolSource::Builtin("exec")))?;
    let path_var = std::env::var("PATH").ok();
    let home = std::env::var("HOME").unwrap_or_default();
    println!("exec: {rounds} interleaved rounds per program, medians (p90) in ms\n");
    println!("| program | bare spawn | confined::run | exec run (tool call) | exec − bare |");
    println!("|---|---|---|---|---|");
    for p in PROGRAMS {
        let grant = GrantSpec {
            dirs: vec![DirSpec {
                host_path: work.path().to_owned(),
                guest_path: "/workspace".into(),
                access: Access::ReadWrite,
                symlinks: false,
            }],
            programs: vec![p.program.to_owned()],
            env: if p.program == "cargo" {
                vec!["HOME".into()]
            } else {
                vec![]
            },
            toolchains: if p.program == "cargo" {
                vec![
                    PathBuf::from(format!("{home}/.cargo/bin")),
                    PathBuf::from(format!("{home}/.rustup")),
                ]
            } else {
                vec![]
            },
            ..GrantSpec::default()
        };
        let grants = match grant.resolve(work.path(), |name| std::env::var(name).ok()) {
            Ok(g) => g,
            Err(e) => {
                println!("| {} | skipped: {e} | | | |", p.label);
                continue;
            }
        };
        let resolved = &grants.programs[0];
        let mut argv = vec![p.program.to_owned()];
        argv.extend(p.args.iter().map(|a| (*a).to_owned()));
        let input = json!({"argv": argv, "cwd": "/workspace"});
        let spec = confined::Spec {
            program: resolved.file.clone(),
            args: p.args.iter().map(|a| (*a).to_owned()).collect(),
            arg0: resolved.arg0(),
            cwd: "/workspace".into(),
            env: grants
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .chain([("PATH".to_owned(), path_var.clone().unwrap_or_default())])
                .collect(),
            stdin: None,
            mounts: vec![longhand_hands::sandbox::view::Mount {
                host: work.path().to_owned(),
                guest: "/workspace".into(),
                writable: true,
            }],
            system: confined::system_paths()
                .into_iter()
                .chain(grants.toolchains.iter().cloned())
                .collect(),
            limits: confined::Limits::default(),
            spill: None,
        };
        let (mut bare, mut boxed, mut tool) = (Vec::new(), Vec::new(), Vec::new());
        runtime.block_on(async {
            // Warm-up, and a check that every way runs the program.
            let out = hands.call(&exec, &grants, "run", &input).await;
            let value = out.result.map_err(|e| anyhow::anyhow!("exec run: {e}"))?;
            if value["exit_code"] != 0 {
                bail!("exec run of {} did not succeed: {value}", p.label);
            }
            let out = confined::run(&spec).await.context("confined::run")?;
            if out.exit_code != Some(0) {
                bail!("confined run of {} did not succeed: {out:?}", p.label);
            }
            for _ in 0..rounds {
                let start = Instant::now();
                let status = tokio::process::Command::new(&resolved.path)
                    .args(p.args)
                    .stdout(std::process::Stdio::null())
                    .status()
                    .await?;
                bare.push(start.elapsed());
                if !status.success() {
                    bail!("bare {} failed", p.label);
                }
                let start = Instant::now();
                let out = confined::run(&spec).await?;
                boxed.push(start.elapsed());
                std::hint::black_box(out);
                let start = Instant::now();
                let out = hands.call(&exec, &grants, "run", &input).await;
                tool.push(start.elapsed());
                std::hint::black_box(out);
            }
            Ok(())
        })?;
        let row = |s: &Vec<Duration>| {
            format!(
                "{:.2} ({:.2})",
                ms(percentile(s.clone(), 0.5)),
                ms(percentile(s.clone(), 0.9))
            )
        };
        let added = ms(percentile(tool.clone(), 0.5)) - ms(percentile(bare.clone(), 0.5));
        println!(
            "| {} | {} | {} | {} | +{added:.2} |",
            p.label,
            row(&bare),
            row(&boxed),
            row(&tool)
        );
    }
    Ok(())
}
