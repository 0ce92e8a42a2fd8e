//! Tool calls per language (issue 18): what one call of the same tool costs
//! when it is written in Rust, Python or JavaScript, against the built-in
//! Rust tool measured in the same run. Results and the command that
//! produced them go in `docs/benchmarks.md` ("Tool calls per language").
//!
//! ```text
//! eval "$(bash .ci/setup-componentize.sh)"     # Python and JS toolchains, else skipped
//! cargo bench -p longhand-host --bench tool_langs
//! LONGHAND_BENCH_QUICK=1 cargo bench -p longhand-host --bench tool_langs   # fewer samples
//! LONGHAND_BENCH_REBUILD=1 ...                 # rebuild the tool projects
//! ```
//!
//! Per language, the template's `greet` tool (`longhand tool new` →
//! `longhand tool build`, with the toolchain the template pins):
//! 1. **call** — `Hands::call` on a warm compiled component: grants,
//!    schema check, a fresh pooled instance, the call, the receipt. The
//!    median of many, after a warm-up.
//! 2. **why** — the same component on bare wasmtime with the same engine
//!    settings (pooling, fuel, epochs) and no Longhand around it:
//!    `instantiate` (a fresh store and instance: memory image, start
//!    functions), the first `call` on that instance (which pays any guest
//!    initialisation done lazily), and a second `call` on the same
//!    instance (the call alone, which Longhand never does: every call gets
//!    a fresh instance).
//! 3. **process** — `longhand tool call COMPONENT greet` as a whole process
//!    (the bench-profile binary), compile cache warm: process start,
//!    engine, cache load, one call, exit.
//!
//! The baseline is the built-in `json` tool (`query` with filter `.`),
//! Rust compiled into the binary. A language whose toolchain is absent
//! (`LONGHAND_PY_VENV`, `LONGHAND_JS_MODULES`, as `.ci/setup-componentize.sh`
//! prints them) is printed as skipped. The machine is shared and noisy
//! (2 cores): compare medians, not means.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use longhand_hands::{Grants, Hands, HandsConfig, ToolSource, builtin, dev};
use serde_json::{Value, json};
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable, Val};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

const LONGHAND: &str = env!("CARGO_BIN_EXE_longhand");

/// One row: a way to write the `greet` tool.
struct Lang {
    label: &'static str,
    /// `tool new --lang`; `None` for the built-in baseline.
    lang: Option<&'static str>,
    engine: Option<&'static str>,
    /// The issue's targets: per call, and per whole process (ms).
    target_call_ms: f64,
    target_process_ms: f64,
}

const LANGS: &[Lang] = &[
    Lang {
        label: "Rust, built-in json",
        lang: None,
        engine: None,
        target_call_ms: 0.3,
        target_process_ms: 15.0,
    },
    Lang {
        label: "Rust, tool new",
        lang: Some("rust"),
        engine: None,
        target_call_ms: 0.3,
        target_process_ms: 15.0,
    },
    Lang {
        label: "JS, QuickJS",
        lang: Some("js"),
        engine: Some("quickjs"),
        target_call_ms: 0.5,
        target_process_ms: 15.0,
    },
    Lang {
        label: "JS, SpiderMonkey",
        lang: Some("js"),
        engine: Some("spidermonkey"),
        target_call_ms: 1.5,
        target_process_ms: 50.0,
    },
    Lang {
        label: "Python",
        lang: Some("python"),
        engine: None,
        target_call_ms: 2.0,
        target_process_ms: 50.0,
    },
];

/// A component to measure: where it is, which tool, what input.
struct Subject {
    source: Source,
    tool: &'static str,
    input: Value,
}

enum Source {
    Builtin(&'static str),
    File(PathBuf),
}

impl Subject {
    fn bytes(&self) -> Result<Vec<u8>> {
        match &self.source {
            Source::Builtin(name) => Ok(builtin::builtin(name)
                .context("no such built-in")?
                .wasm()
                .to_vec()),
            Source::File(p) => std::fs::read(p).with_context(|| format!("read {}", p.display())),
        }
    }

    /// How `longhand tool call` names it.
    fn arg(&self) -> String {
        match &self.source {
            Source::Builtin(name) => (*name).to_owned(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Where the tool projects, their build output and the bench's home live
/// between runs (so a rerun does not rebuild).
fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tool-langs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Why a language is skipped, if its toolchain is absent.
fn missing(lang: &Lang) -> Option<String> {
    let js = std::env::var_os("LONGHAND_JS_MODULES").map(PathBuf::from);
    match (lang.lang, lang.engine) {
        (Some("python"), _) => {
            let venv = std::env::var_os("LONGHAND_PY_VENV").map(PathBuf::from);
            match venv {
                Some(v) if v.join("bin/componentize-py").is_file() => None,
                _ => Some("no componentize-py (LONGHAND_PY_VENV)".to_owned()),
            }
        }
        (Some("js"), Some(engine)) => {
            let package = if engine == "quickjs" {
                "componentize-qjs"
            } else {
                "@bytecodealliance/componentize-js"
            };
            match js {
                Some(m)
                    if m.join(package).join("package.json").is_file()
                        && m.join("esbuild/package.json").is_file() =>
                {
                    None
                }
                _ => Some(format!("no {package} (LONGHAND_JS_MODULES)")),
            }
        }
        _ => None,
    }
}

/// `longhand tool new` + `tool build` for `lang`, or the last build.
fn build(lang: &Lang) -> Result<Subject> {
    let Some(which) = lang.lang else {
        return Ok(Subject {
            source: Source::Builtin("json"),
            tool: "query",
            input: json!({"filter": ".", "input": {"a": 1}}),
        });
    };
    let name = format!("greet-{}", lang.engine.unwrap_or(which));
    let projects = work_dir().join("projects");
    let project = projects.join(&name);
    let report = project.join(".bench-build.json");
    let rebuild = std::env::var("LONGHAND_BENCH_REBUILD").is_ok_and(|v| v == "1");
    if rebuild && project.exists() {
        std::fs::remove_dir_all(&project)?;
    }
    if !project.exists() {
        std::fs::create_dir_all(&projects)?;
        let sdk = repo().join("sdk");
        let mut cmd = Command::new(LONGHAND);
        cmd.args(["tool", "new", &name, "--lang", which, "--sdk"])
            .arg(&sdk)
            .current_dir(&projects);
        if let Some(engine) = lang.engine {
            cmd.args(["--engine", engine]);
        }
        run(&mut cmd, "tool new")?;
        let link = match which {
            "python" => std::env::var_os("LONGHAND_PY_VENV").map(|v| (".venv", v)),
            "js" => std::env::var_os("LONGHAND_JS_MODULES").map(|m| ("node_modules", m)),
            _ => None,
        };
        if let Some((at, to)) = link {
            std::os::unix::fs::symlink(to, project.join(at))?;
        }
    }
    let built: Value = match std::fs::read_to_string(&report) {
        Ok(text) if !rebuild => serde_json::from_str(&text)?,
        _ => {
            eprintln!("building {name} (longhand tool build)…");
            let out = Command::new(LONGHAND)
                .args(["tool", "build", "--json"])
                .current_dir(&project)
                .env("CARGO_TARGET_DIR", work_dir().join("rust-target"))
                .env("CARGO_NET_OFFLINE", "true")
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()
                .context("run longhand tool build")?;
            if !out.status.success() {
                bail!("longhand tool build failed for {name}");
            }
            let text = String::from_utf8(out.stdout)?;
            let line = text.lines().last().context("tool build printed nothing")?;
            std::fs::write(&report, line)?;
            serde_json::from_str(line)?
        }
    };
    let component = PathBuf::from(built["component"].as_str().context("no component")?);
    if !component.is_file() {
        std::fs::remove_file(&report).ok();
        bail!("{} is gone; run again", component.display());
    }
    Ok(Subject {
        source: Source::File(component),
        tool: "greet",
        input: json!({"name": "Ada"}),
    })
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("run {what}"))?;
    if !status.success() {
        bail!("{what} failed: {status}");
    }
    Ok(())
}

/// Median of `Hands::call` on a warm component, and its size.
async fn hands_call(hands: &Hands, s: &Subject, n: usize) -> Result<(Duration, u64)> {
    let bytes = s.bytes()?;
    let label = "bench";
    let tool = match &s.source {
        Source::Builtin(name) => hands.load(ToolSource::Builtin(name)).await?,
        Source::File(_) => {
            hands
                .load(ToolSource::Bytes {
                    label,
                    bytes: &bytes,
                })
                .await?
        }
    };
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
    Ok((median(samples), bytes.len() as u64))
}

/// Store data of a bare-wasmtime instance: WASI with nothing granted.
struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    hooks: dev::NoNetwork,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Bare {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// The engine settings of `Hands` that matter to instantiation and calls:
/// pooling (with its per-component limits), fuel, epochs, Cranelift speed.
fn bare_engine() -> Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(4)
        .total_core_instances(4 * 64)
        .total_memories(4 * 4)
        .total_tables(4 * 8)
        .total_stacks(4)
        .max_memory_size(4 << 30)
        .max_memories_per_component(4)
        .max_core_instances_per_component(64)
        .max_tables_per_component(8)
        .linear_memory_keep_resident(64 << 10)
        .table_keep_resident(16 << 10);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    Ok(Engine::new(&config)?)
}

fn bare_store(engine: &Engine) -> Result<Store<Bare>> {
    let mut store = Store::new(
        engine,
        Bare {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            hooks: dev::NoNetwork,
        },
    );
    store.set_fuel(u64::MAX / 2)?;
    store.set_epoch_deadline(u64::MAX / 2);
    Ok(store)
}

/// Compile (or take from this bench's own cache) and link `s` on bare
/// wasmtime; `longhand:tool/host` calls do nothing.
fn bare_pre(engine: &Engine, s: &Subject) -> Result<InstancePre<Bare>> {
    let bytes = s.bytes()?;
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let cache = work_dir().join("bare-cache");
    std::fs::create_dir_all(&cache)?;
    let file = cache.join(format!("{digest}.cwasm"));
    // SAFETY: the file was written by `Component::serialize` of this
    // bench, for an engine of the same settings; a mismatch is refused
    // by wasmtime and the component compiled afresh.
    let cached = file
        .is_file()
        .then(|| unsafe { Component::deserialize_file(engine, &file) }.ok())
        .flatten();
    let component = match cached {
        Some(c) => c,
        None => {
            eprintln!("compiling {} for bare wasmtime…", s.arg());
            let c = Component::new(engine, &bytes)?;
            std::fs::write(&file, c.serialize()?)?;
            c
        }
    };
    let mut linker: Linker<Bare> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    // `longhand:tool/host` does nothing here; `types` holds only types.
    // (Stubbing every unknown import instead would give `wasi:io/poll` at a
    // newer patch version a resource type of its own.)
    let mut host = linker.instance("longhand:tool/host@0.1.0")?;
    host.func_new("log", |_, _, _, _| Ok(()))?;
    host.func_new("progress", |_, _, _, _| Ok(()))?;
    linker.instance("longhand:tool/types@0.1.0")?;
    Ok(linker.instantiate_pre(&component)?)
}

/// Medians of: instantiate, first call, second call on the same instance.
async fn bare_phases(
    engine: &Engine,
    pre: &InstancePre<Bare>,
    s: &Subject,
    n: usize,
) -> Result<[Duration; 3]> {
    let input = s.input.to_string();
    let args = [Val::String(s.tool.into()), Val::String(input)];
    let mut phases: [Vec<Duration>; 3] = Default::default();
    for i in 0..n + n / 10 {
        let mut store = bare_store(engine)?;
        let t0 = Instant::now();
        let instance = pre.instantiate_async(&mut store).await?;
        let t1 = Instant::now();
        let tools = instance
            .get_export_index(&mut store, None, "longhand:tool/tools@0.1.0")
            .context("no longhand:tool/tools export")?;
        let call = instance
            .get_export_index(&mut store, Some(&tools), "call")
            .context("no call export")?;
        let func = instance
            .get_func(&mut store, call)
            .context("call is not a function")?;
        let mut out = [Val::Bool(false)];
        let t2 = Instant::now();
        func.call_async(&mut store, &args, &mut out).await?;
        let t3 = Instant::now();
        func.call_async(&mut store, &args, &mut out).await?;
        let t4 = Instant::now();
        if !matches!(&out[0], Val::Result(Ok(_))) {
            bail!("the bare call failed: {:?}", out[0]);
        }
        if i >= n / 10 {
            phases[0].push(t1 - t0);
            phases[1].push(t3 - t2);
            phases[2].push(t4 - t3);
        }
    }
    Ok(phases.map(median))
}

/// Median wall time of `longhand tool call` as a process, cache warm.
fn process_call(home: &Path, s: &Subject, n: usize) -> Result<Duration> {
    let input = s.input.to_string();
    let once = || -> Result<Duration> {
        let start = Instant::now();
        let out = Command::new(LONGHAND)
            .args(["tool", "call", &s.arg(), s.tool, "--input", &input])
            .env_clear()
            .env("LONGHAND_HOME", home)
            .stdin(Stdio::null())
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
    // The first run compiles into the cache; the next warms the page cache.
    once()?;
    once()?;
    let samples = (0..n).map(|_| once()).collect::<Result<Vec<_>>>()?;
    Ok(median(samples))
}

struct Row {
    label: &'static str,
    size: u64,
    call: Duration,
    phases: Option<[Duration; 3]>,
    process: Duration,
    lang: &'static Lang,
}

fn main() -> Result<()> {
    let quick = std::env::var("LONGHAND_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (n_call, n_bare, n_proc) = if quick {
        (300, 100, 15)
    } else {
        (3000, 500, 60)
    };
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
    let engine = bare_engine()?;

    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for lang in LANGS {
        if let Some(why) = missing(lang) {
            skipped.push((lang.label, why));
            continue;
        }
        let subject = match build(lang) {
            Ok(s) => s,
            Err(e) => {
                skipped.push((lang.label, format!("build failed: {e:#}")));
                continue;
            }
        };
        eprintln!("measuring {}…", lang.label);
        let measured = runtime.block_on(async {
            let (call, size) = hands_call(&hands, &subject, n_call).await?;
            let phases = match bare_pre(&engine, &subject) {
                Ok(pre) => match bare_phases(&engine, &pre, &subject, n_bare).await {
                    Ok(p) => Some(p),
                    Err(e) => {
                        eprintln!("  bare wasmtime call: {e:#}");
                        None
                    }
                },
                Err(e) => {
                    eprintln!("  bare wasmtime: {e:#}");
                    None
                }
            };
            anyhow::Ok((call, size, phases))
        });
        let (call, size, phases) = match measured {
            Ok(m) => m,
            Err(e) => {
                skipped.push((lang.label, format!("{e:#}")));
                continue;
            }
        };
        let process = process_call(&home, &subject, n_proc)?;
        rows.push(Row {
            label: lang.label,
            size,
            call,
            phases,
            process,
            lang,
        });
    }

    let Some(base) = rows.iter().find(|r| r.lang.lang.is_none()) else {
        bail!("the built-in baseline did not run");
    };
    let (base_call, base_process) = (base.call, base.process);
    println!(
        "\nTool calls per language: medians ({} Hands calls, {} bare instances, {} processes \
         each); ratios against the built-in Rust tool in this run.\n",
        n_call, n_bare, n_proc
    );
    println!(
        "| language | component | Hands call (ms) | × built-in | target | instantiate | 1st call | \
         2nd call | process (ms) | × built-in | target |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let [inst, first, second] = r
            .phases
            .map(|p| p.map(|d| format!("{:.3}", ms(d))))
            .unwrap_or_else(|| ["n/a".to_owned(), "n/a".to_owned(), "n/a".to_owned()]);
        let met = |v: f64, t: f64| if v <= t { "≤" } else { "**>**" };
        println!(
            "| {} | {:.1} MB | {:.3} | {:.1} | {} {} | {inst} | {first} | {second} | {:.1} | {:.2} | {} {} |",
            r.label,
            r.size as f64 / 1e6,
            ms(r.call),
            ms(r.call) / ms(base_call),
            met(ms(r.call), r.lang.target_call_ms),
            r.lang.target_call_ms,
            ms(r.process),
            ms(r.process) / ms(base_process),
            met(ms(r.process), r.lang.target_process_ms),
            r.lang.target_process_ms,
        );
    }
    for (label, why) in &skipped {
        println!("| {label} | skipped: {why} | | | | | | | | | |");
    }
    println!(
        "\ninstantiate / 1st call / 2nd call: bare wasmtime, same engine settings, ms. The 2nd \
         call reuses the instance (Longhand never does); 1st − 2nd is lazy guest init."
    );
    Ok(())
}
