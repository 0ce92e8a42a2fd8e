//! Tool-call cost, measured against the alternatives in one run.
//!
//! Run with `cargo bench -p longhand-tests --bench hands` (after `cargo build
//! --release` if you want the end-to-end CLI figure). Prints medians and
//! ratios; the machine is shared and noisy, so only medians are compared.
//! `LONGHAND_BENCH_ONLY=busy` runs only the busy-neighbours part,
//! `LONGHAND_BENCH_ONLY=builtins` only the built-in tool calls.
//!
//! Measured, each in a fresh instance per call where wasm is involved:
//! - `longhand` host path: `Hands::call` (grant set-up, schema check, fresh
//!   pooled instance, call, receipt) on the `noop` fixture (returns `{}`
//!   without parsing), and on the probe's `echo` (parses JSON, logs);
//! - bare wasmtime: the same `noop` component, pooled `InstancePre`, fresh
//!   store and instance per call, dynamic call, no grants/schema/receipt;
//! - spawn + wait of `/bin/true`; `python3 -c pass`;
//! - a JSON-RPC round trip to a long-lived Python stdio child (what an MCP
//!   stdio server costs per call);
//! - `longhand tool call` end to end with a warm compile cache (process start
//!   included), when `target/release/longhand` exists;
//! - cold compile time of each built-in tool;
//! - trivial calls to each built-in (`json` queries, `fs stat`, a refused
//!   `http get`): µs and fuel per call, and with
//!   `LONGHAND_BENCH_JSON_BEFORE=<json.wasm>` the same queries on an older
//!   `json` build in the same run;
//! - busy neighbours: 50 sequential `noop` calls on a task of the runtime,
//!   alone and then while two probe `spin` calls run on the same `Hands`
//!   (p50 and p99 of each and their ratios, per round and over all rounds,
//!   with the machine's TLB shootdowns during each phase).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use longhand_hands::{
    Access, DirGrant, Grants, Hands, HandsConfig, Limits, LoadedTool, ToolSource, builtin,
};
use serde_json::json;

#[allow(
    dead_code,
    reason = "the bench uses one fixture; the tests use them all"
)]
mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn p90(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() * 9 / 10]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn time_n(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect()
}

async fn time_n_async<F: Future<Output = ()>>(n: usize, mut f: impl FnMut() -> F) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        f().await;
        out.push(start.elapsed());
    }
    out
}

/// The baseline: wasmtime alone, configured like the host (pooling, fuel,
/// epochs), with WASI linked and our `host` interface stubbed.
mod bare {
    use wasmtime::component::{Component, InstancePre, Linker, ResourceTable, Val};
    use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
    use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

    pub struct State {
        ctx: WasiCtx,
        table: ResourceTable,
        http: wasmtime_wasi_http::WasiHttpCtx,
        hooks: longhand_hands::dev::NoNetwork,
    }

    impl WasiView for State {
        fn ctx(&mut self) -> WasiCtxView<'_> {
            WasiCtxView {
                ctx: &mut self.ctx,
                table: &mut self.table,
            }
        }
    }

    impl wasmtime_wasi_http::WasiHttpView for State {
        fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
            wasmtime_wasi_http::WasiHttpCtxView {
                hooks: &mut self.hooks,
                table: &mut self.table,
                ctx: &mut self.http,
            }
        }
    }

    pub struct Bare {
        engine: Engine,
        pre: InstancePre<State>,
    }

    impl Bare {
        pub fn new(wasm: &[u8]) -> wasmtime::Result<Self> {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(16)
                .total_core_instances(256)
                .total_memories(64)
                .total_tables(128)
                .total_stacks(16)
                .max_memories_per_component(4)
                .max_core_instances_per_component(16)
                .max_tables_per_component(8);
            let mut config = Config::new();
            config
                .consume_fuel(true)
                .epoch_interruption(true)
                .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
            let engine = Engine::new(&config)?;
            let component = Component::new(&engine, wasm)?;
            let mut linker = Linker::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
            // Our own interfaces, as no-ops: `types` has no functions, and
            // `host` log/progress do nothing here.
            linker.instance("longhand:tool/types@0.1.0")?;
            let mut host = linker.instance("longhand:tool/host@0.1.0")?;
            host.func_new("log", |_, _, _, _| Ok(()))?;
            host.func_new("progress", |_, _, _, _| Ok(()))?;
            let pre = linker.instantiate_pre(&component)?;
            Ok(Self { engine, pre })
        }

        pub async fn call(&self, name: &str, input: &str) -> wasmtime::Result<()> {
            let mut store = Store::new(
                &self.engine,
                State {
                    ctx: WasiCtx::builder().build(),
                    table: ResourceTable::new(),
                    http: wasmtime_wasi_http::WasiHttpCtx::new(),
                    hooks: longhand_hands::dev::NoNetwork,
                },
            );
            store.set_fuel(u64::MAX / 2)?;
            store.set_epoch_deadline(u64::MAX / 2);
            let instance = self.pre.instantiate_async(&mut store).await?;
            let iface = instance
                .get_export_index(&mut store, None, "longhand:tool/tools@0.1.0")
                .ok_or_else(|| wasmtime::Error::msg("no tools export"))?;
            let func_index = instance
                .get_export_index(&mut store, Some(&iface), "call")
                .ok_or_else(|| wasmtime::Error::msg("no call export"))?;
            let func = instance
                .get_func(&mut store, func_index)
                .ok_or_else(|| wasmtime::Error::msg("call is not a function"))?;
            let mut results = [Val::Bool(false)];
            func.call_async(
                &mut store,
                &[Val::String(name.into()), Val::String(input.into())],
                &mut results,
            )
            .await?;
            Ok(())
        }
    }
}

const PY_SERVER: &str = r#"
import sys, json
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"value": req["params"]["value"]}}) + "\n")
    sys.stdout.flush()
"#;

fn longhand_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("LONGHAND_BIN") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    // target/release/deps/hands-xxxx -> target/release/longhand
    let candidate = exe.parent()?.parent()?.join("longhand");
    candidate.is_file().then_some(candidate)
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let quick = std::env::var_os("LONGHAND_BENCH_QUICK").is_some();
    let scale = |n: usize| if quick { (n / 10).max(5) } else { n };
    // Rounds of the busy-neighbours part: 50 calls each way per round.
    let rounds = if quick { 2 } else { 10 };
    let wasm = std::fs::read(fixtures::NOOP)?;
    let probe_wasm = std::fs::read(fixtures::PROBE)?;
    let input = json!({"value": 1});
    let input_text = input.to_string();

    println!(
        "# longhand tool-call benchmark ({} mode)",
        if quick { "quick" } else { "full" }
    );
    println!("{:<52} {:>12} {:>12}", "case", "median", "p90");
    let row = |name: &str, samples: &[Duration]| {
        let m = median(samples.to_vec());
        println!(
            "{:<52} {:>10.1}µs {:>10.1}µs",
            name,
            us(m),
            us(p90(samples.to_vec()))
        );
        m
    };

    // Longhand host path.
    let hands = Arc::new(Hands::new(HandsConfig::default())?);
    let tool = hands
        .load(ToolSource::Bytes {
            label: "noop",
            bytes: &wasm,
        })
        .await?;
    let probe = hands
        .load(ToolSource::Bytes {
            label: "probe",
            bytes: &probe_wasm,
        })
        .await?;
    let grants = Grants::default();
    for _ in 0..200 {
        let out = hands.call(&tool, &grants, "noop", &input).await;
        anyhow::ensure!(out.result.is_ok(), "noop failed: {:?}", out.result);
        let out = hands.call(&probe, &grants, "echo", &input).await;
        anyhow::ensure!(out.result.is_ok(), "echo failed: {:?}", out.result);
    }
    let only = std::env::var("LONGHAND_BENCH_ONLY").unwrap_or_default();
    if only == "busy" {
        busy_neighbours(&hands, &tool, &probe, rounds)
            .await?
            .print();
        return Ok(());
    }
    if only == "builtins" {
        return builtin_calls(&hands, scale(2000)).await;
    }
    let host = time_n_async(scale(5000), || async {
        let _ = hands.call(&tool, &grants, "noop", &input).await;
    })
    .await;
    let host_m = row("longhand Hands::call, noop (whole host path)", &host);
    let echo = time_n_async(scale(5000), || async {
        let _ = hands.call(&probe, &grants, "echo", &input).await;
    })
    .await;
    row("longhand Hands::call, probe echo (serde_json+log)", &echo);

    builtin_calls(&hands, scale(2000)).await?;

    // Bare wasmtime.
    let bare = bare::Bare::new(&wasm)?;
    for _ in 0..200 {
        bare.call("noop", &input_text).await?;
    }
    let bare_samples = time_n_async(scale(5000), || async {
        let _ = bare.call("noop", &input_text).await;
    })
    .await;
    let bare_m = row(
        "bare wasmtime, noop (pooled, fresh instance)",
        &bare_samples,
    );

    // Process spawns.
    let spawn_true = time_n(scale(300), || {
        let _ = Command::new("/bin/true").status();
    });
    let true_m = row("spawn + wait /bin/true", &spawn_true);
    let py = time_n(scale(40), || {
        let _ = Command::new("python3").args(["-c", "pass"]).status();
    });
    let py_m = row("spawn + wait python3 -c pass", &py);

    // Warm stdio JSON-RPC child.
    let mut child = Command::new("python3")
        .args(["-u", "-c", PY_SERVER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
    let mut stdout = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?,
    );
    let mut id = 0u64;
    let mut line = String::new();
    let mut rpc = || -> anyhow::Result<()> {
        id += 1;
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"value":1}}}}"#
        )?;
        stdin.flush()?;
        line.clear();
        stdout.read_line(&mut line)?;
        anyhow::ensure!(line.contains("\"result\""), "bad reply {line}");
        Ok(())
    };
    for _ in 0..200 {
        rpc()?;
    }
    let mut rpc_samples = Vec::new();
    for _ in 0..scale(5000) {
        let start = Instant::now();
        rpc()?;
        rpc_samples.push(start.elapsed());
    }
    let rpc_m = row(
        "JSON-RPC round trip, warm python3 stdio child",
        &rpc_samples,
    );
    let _ = child.kill();
    let _ = child.wait();

    // CLI end to end.
    let cli_m = match longhand_binary() {
        Some(bin) => {
            let cache = tempfile::tempdir()?;
            let run_cli = || {
                let status = Command::new(&bin)
                    .args([
                        "tool",
                        "call",
                        "json",
                        "query",
                        "--input",
                        r#"{"filter":".a","input":{"a":1}}"#,
                    ])
                    .env("LONGHAND_HOME", cache.path())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                assert!(
                    status.is_ok_and(|s| s.success()),
                    "longhand tool call failed"
                );
            };
            run_cli(); // warms the compile cache
            let samples = time_n(scale(50), run_cli);
            Some(row(
                "`longhand tool call json query` end to end, warm cache",
                &samples,
            ))
        }
        None => {
            println!(
                "(skipped CLI end to end: build target/release/longhand first, or set LONGHAND_BIN)"
            );
            None
        }
    };

    // Cold compile of each built-in.
    println!();
    println!(
        "{:<52} {:>12}",
        "cold compile + describe (no cache)", "time"
    );
    for b in builtin::BUILTINS {
        let fresh = Hands::new(HandsConfig::default())?;
        let start = Instant::now();
        fresh.load(ToolSource::Builtin(b.name)).await?;
        println!(
            "{:<52} {:>10.1}ms   ({} KiB)",
            format!("builtin `{}`", b.name),
            start.elapsed().as_secs_f64() * 1e3,
            b.wasm().len() / 1024
        );
    }

    let neighbours = busy_neighbours(&hands, &tool, &probe, rounds).await?;

    println!();
    println!("ratios (medians):");
    println!(
        "  host path / bare wasmtime            {:>8.2}x  (host overhead {:+.1}µs)",
        us(host_m) / us(bare_m),
        us(host_m) - us(bare_m)
    );
    println!(
        "  spawn /bin/true / host path          {:>8.1}x  (target >= 20x)",
        us(true_m) / us(host_m)
    );
    println!(
        "  spawn python3 / host path            {:>8.1}x",
        us(py_m) / us(host_m)
    );
    println!(
        "  warm stdio JSON-RPC / host path      {:>8.2}x  (target >= 2x)",
        us(rpc_m) / us(host_m)
    );
    println!(
        "  host path median                     {:>8.1}µs (target <= 30µs)",
        us(host_m)
    );
    if let Some(cli) = cli_m {
        println!(
            "  CLI end to end median                {:>8.2}ms (target <= 15ms)",
            us(cli) / 1e3
        );
    }
    neighbours.print();
    Ok(())
}

/// One trivial built-in call the bench repeats.
struct BuiltinCase {
    label: String,
    tool: Arc<LoadedTool>,
    grants: Grants,
    name: &'static str,
    input: serde_json::Value,
    /// Whether the call succeeds (the `http` case is refused by design).
    succeeds: bool,
}

/// Trivial calls to the built-in tools through `Hands::call`, each in a
/// fresh instance: µs per call (median, p90) and fuel per call (median; a
/// guest's fuel varies only with its input). With
/// `LONGHAND_BENCH_JSON_BEFORE=<json.wasm>` (an older build of `tools/json`)
/// the `json` cases run on it too, in the same run, for a before/after.
async fn builtin_calls(hands: &Hands, n: usize) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    std::fs::write(scratch.path().join("a.txt"), "a")?;
    let json_tools = {
        let mut tools = vec![("", hands.load(ToolSource::Builtin("json")).await?)];
        if let Some(path) = std::env::var_os("LONGHAND_BENCH_JSON_BEFORE") {
            let bytes = std::fs::read(&path)?;
            let label = "json-before";
            let before = hands
                .load(ToolSource::Bytes {
                    label,
                    bytes: &bytes,
                })
                .await?;
            tools.push((" [before]", before));
        }
        tools
    };
    let items = json!([{"name": "a", "n": 1}, {"name": "b", "n": 5}]);
    let queries = [
        (".", json!({"a": 1})),
        ("map(select(.n > 2) | .name)", items),
        (
            r#"to_entries | map("\(.key)") | join(",")"#,
            json!({"a": 1, "b": 2}),
        ),
    ];
    let mut cases = Vec::new();
    for (suffix, tool) in &json_tools {
        for (filter, input) in &queries {
            cases.push(BuiltinCase {
                label: format!("json query `{filter}`{suffix}"),
                tool: tool.clone(),
                grants: Grants::default(),
                name: "query",
                input: json!({"filter": filter, "input": input}),
                succeeds: true,
            });
        }
    }
    cases.push(BuiltinCase {
        label: "fs stat `a.txt`".to_owned(),
        tool: hands.load(ToolSource::Builtin("fs")).await?,
        grants: Grants {
            dirs: vec![DirGrant::new(
                scratch.path(),
                "/workspace",
                Access::ReadOnly,
            )?],
            ..Grants::default()
        },
        name: "stat",
        input: json!({"path": "a.txt"}),
        succeeds: true,
    });
    cases.push(BuiltinCase {
        label: "http get, no host granted (refused)".to_owned(),
        tool: hands.load(ToolSource::Builtin("http")).await?,
        grants: Grants::default(),
        name: "get",
        input: json!({"url": "http://127.0.0.1:9/"}),
        succeeds: false,
    });

    println!();
    println!(
        "{:<52} {:>12} {:>12} {:>12}",
        "built-in tool, trivial call (Hands::call)", "median", "p90", "fuel"
    );
    for case in &cases {
        let call = || hands.call(&case.tool, &case.grants, case.name, &case.input);
        for _ in 0..20 {
            let out = call().await;
            anyhow::ensure!(
                out.result.is_ok() == case.succeeds,
                "{}: unexpected {:?}",
                case.label,
                out.result
            );
        }
        let mut fuel = Vec::with_capacity(n);
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            let out = call().await;
            samples.push(start.elapsed());
            fuel.push(out.receipt.fuel_used);
        }
        fuel.sort_unstable();
        println!(
            "{:<52} {:>10.1}µs {:>10.1}µs {:>12}",
            case.label,
            us(median(samples.clone())),
            us(p90(samples)),
            fuel[fuel.len() / 2]
        );
    }
    // The same trivial query on bare wasmtime (fresh pooled instance, no
    // grants, schema or receipt): what the instance itself costs.
    let json_wasm = builtin::builtin("json")
        .ok_or_else(|| anyhow::anyhow!("no json built-in"))?
        .wasm();
    let bare = bare::Bare::new(json_wasm)?;
    let input = json!({"filter": ".", "input": {"a": 1}}).to_string();
    for _ in 0..20 {
        bare.call("query", &input).await?;
    }
    let samples = time_n_async(n, || async {
        let _ = bare.call("query", &input).await;
    })
    .await;
    println!(
        "{:<52} {:>10.1}µs {:>10.1}µs",
        "bare wasmtime, json query `.`",
        us(median(samples.clone())),
        us(p90(samples))
    );
    Ok(())
}

/// Nearest-rank percentile `p` (0-100) of `samples`.
fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// System-wide TLB shootdown interrupts so far (Linux `/proc/interrupts`),
/// or `None` where the kernel does not report them. A trivial call that
/// unmaps memory (the instance pool resetting a linear memory) must
/// interrupt every other core running a thread of this process: a spinning
/// guest on its own thread makes that cost visible.
fn tlb_shootdowns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("TLB:"))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .map_while(|n| n.parse::<u64>().ok())
            .sum(),
    )
}

/// One round of the busy-neighbours measurement.
struct Round {
    quiet: Vec<Duration>,
    busy: Vec<Duration>,
    /// TLB shootdowns (whole machine) during each 50-call phase.
    quiet_tlb: Option<u64>,
    busy_tlb: Option<u64>,
    /// From starting the spinners until both had moved to their own threads.
    moved_after: Duration,
    /// From aborting the spinners until no offloaded call was left.
    gone_after: Duration,
}

/// Trivial calls alone and beside spinning calls, measured in one run.
struct Neighbours {
    rounds: Vec<Round>,
}

impl Neighbours {
    fn print(&self) {
        let p = |s: &[Duration], q| us(percentile(s, q));
        let tlb = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
        println!();
        println!(
            "busy neighbours: 50 sequential `noop` calls on a runtime task, alone then beside 2 spinning `spin` calls; {} rounds",
            self.rounds.len()
        );
        println!(
            "{:<6} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>9} {:>8} {:>8}",
            "round",
            "alone p50",
            "p99",
            "beside p50",
            "p99",
            "x p50",
            "x p99",
            "TLB a/b",
            "moved",
            "gone"
        );
        for (i, r) in self.rounds.iter().enumerate() {
            println!(
                "{:<6} {:>8.1}µs {:>8.1}µs {:>8.1}µs {:>8.1}µs {:>6.2}x {:>6.2}x {:>9} {:>6.1}ms {:>6.1}ms",
                i + 1,
                p(&r.quiet, 50),
                p(&r.quiet, 99),
                p(&r.busy, 50),
                p(&r.busy, 99),
                p(&r.busy, 50) / p(&r.quiet, 50),
                p(&r.busy, 99) / p(&r.quiet, 99),
                format!("{}/{}", tlb(r.quiet_tlb), tlb(r.busy_tlb)),
                r.moved_after.as_secs_f64() * 1e3,
                r.gone_after.as_secs_f64() * 1e3,
            );
        }
        let all = |f: fn(&Round) -> &Vec<Duration>| -> Vec<Duration> {
            self.rounds
                .iter()
                .flat_map(|r| f(r).iter().copied())
                .collect()
        };
        let (quiet, busy) = (all(|r| &r.quiet), all(|r| &r.busy));
        println!(
            "all rounds: alone p50 {:.1}µs p99 {:.1}µs; beside spinners p50 {:.1}µs p99 {:.1}µs",
            p(&quiet, 50),
            p(&quiet, 99),
            p(&busy, 50),
            p(&busy, 99)
        );
        println!(
            "  beside spinners / alone: p50 {:.2}x, p99 {:.2}x  (target <= 2x each)",
            p(&busy, 50) / p(&quiet, 50),
            p(&busy, 99) / p(&quiet, 99),
        );
    }
}

/// 50 `noop` calls in sequence on a task of the runtime (where a session's
/// calls run), timed one by one; with the TLB shootdowns meanwhile.
async fn trivial_calls(
    hands: &Arc<Hands>,
    noop: &Arc<LoadedTool>,
) -> anyhow::Result<(Vec<Duration>, Option<u64>)> {
    let (hands, noop) = (hands.clone(), noop.clone());
    tokio::spawn(async move {
        let input = json!({"value": 1});
        let grants = Grants::default();
        let mut samples = Vec::with_capacity(50);
        let before = tlb_shootdowns();
        for _ in 0..50 {
            let start = Instant::now();
            let out = hands.call(&noop, &grants, "noop", &input).await;
            samples.push(start.elapsed());
            anyhow::ensure!(out.result.is_ok(), "noop failed: {:?}", out.result);
        }
        let during = tlb_shootdowns()
            .zip(before)
            .map(|(a, b)| a.saturating_sub(b));
        Ok((samples, during))
    })
    .await?
}

/// Rounds of: the trivial calls alone, then while two probe `spin` calls
/// (20 s timeout, fuel enough to outlast it) run on the same `Hands` and
/// runtime; the spinners are aborted after each round and must leave
/// nothing running.
async fn busy_neighbours(
    hands: &Arc<Hands>,
    noop: &Arc<LoadedTool>,
    probe: &Arc<LoadedTool>,
    rounds: usize,
) -> anyhow::Result<Neighbours> {
    let spin = Grants {
        limits: Limits {
            timeout: Duration::from_secs(20),
            fuel: u64::MAX / 2,
            ..Limits::default()
        },
        ..Grants::default()
    };
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (quiet, quiet_tlb) = trivial_calls(hands, noop).await?;

        let started = Instant::now();
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let (hands, probe, spin) = (hands.clone(), probe.clone(), spin.clone());
                tokio::spawn(async move { hands.call(&probe, &spin, "spin", &json!({})).await })
            })
            .collect();
        // Each spinner holds its worker for about a tick before it moves;
        // the measurement is of the steady state after that.
        while hands.offloaded_calls() < 2 {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(5),
                "the spinners did not move to threads of their own"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let moved_after = started.elapsed();
        let (busy, busy_tlb) = trivial_calls(hands, noop).await?;
        anyhow::ensure!(
            hands.offloaded_calls() == 2,
            "a spinner ended during the measurement"
        );

        let aborted = Instant::now();
        for spinner in &spinners {
            spinner.abort();
        }
        for spinner in spinners {
            let _ = spinner.await;
        }
        while hands.offloaded_calls() > 0 {
            anyhow::ensure!(
                aborted.elapsed() < Duration::from_secs(5),
                "aborted spinners still running"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        out.push(Round {
            quiet,
            busy,
            quiet_tlb,
            busy_tlb,
            moved_after,
            gone_after: aborted.elapsed(),
        });
    }
    Ok(Neighbours { rounds: out })
}
