//! Edge and laptop: what the `longhand` binary costs on a small machine,
//! each figure next to a baseline measured in the same run. Results and the
//! commands that produced them go in `docs/benchmarks.md` ("Edge and
//! laptop").
//!
//! ```text
//! cargo build --release --bin longhand
//! cargo bench -p longhand-host --bench edge
//! LONGHAND_EDGE_BIN=PATH            # the binary to measure (default: target/release/longhand)
//! LONGHAND_EDGE_MINIMAL=PATH        # a --no-default-features build, for its size
//! LONGHAND_BENCH_QUICK=1            # fewer repeats (< 1 min)
//! ```
//!
//! Parts:
//! 1. **size** — the binary's bytes against the targets (25 MiB with every
//!    feature, 15 MiB for the minimal build).
//! 2. **start-up** — whole processes, interleaved round by round: `/bin/true`
//!    (the baseline), `longhand --version`, and `longhand tool call json
//!    query` of a trivial filter with a warm compile cache. Medians, the
//!    ratio to `/bin/true`, and the call's peak RSS (`ru_maxrss`).
//! 3. **memory** — an idle `longhand worker` on an empty store (RSS after
//!    it settles, and CPU time over a few seconds); the same worker with
//!    1,000 paused sessions in the store; one running session (the offline
//!    code-audit example, peak RSS); and the instance pool's address-space
//!    reservation and resident cost for 1 to 64 call slots (the worker's
//!    `--concurrency` does not size the pool: every process has 4 slots).
//! 4. **pulley** — one call of `json query`, in process, on native code
//!    from Cranelift and on wasmtime's Pulley interpreter (what 32-bit ARM
//!    runs): medians and the ratio.
//!
//! The machine is shared and noisy: medians and ratios, not means.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use longhand_hands::{Grants, Hands, HandsConfig, ToolSource};
use longhand_session::{SqliteStore, Store};
use serde_json::json;

fn main() -> Result<()> {
    let quick = std::env::var("LONGHAND_BENCH_QUICK").is_ok_and(|v| v == "1");
    let bin = match std::env::var_os("LONGHAND_EDGE_BIN") {
        Some(p) => PathBuf::from(p),
        None => default_bin()?,
    };
    if !bin.is_file() {
        bail!(
            "{} is missing: run `cargo build --release --bin longhand` first, or set LONGHAND_EDGE_BIN",
            bin.display()
        );
    }
    let work = tempfile::TempDir::new()?;
    println!("binary: {}", bin.display());
    size_part(&bin)?;
    startup_part(&bin, work.path(), if quick { 15 } else { 60 })?;
    memory_part(&bin, work.path(), quick)?;
    pulley_part(work.path(), if quick { 200 } else { 2000 })?;
    Ok(())
}

/// `target/release/longhand`, beside this bench's own directory
/// (`target/release/deps/edge-…`).
fn default_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let release = exe
        .parent()
        .and_then(Path::parent)
        .context("the bench binary has no target directory above it")?;
    Ok(release.join("longhand"))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

// ---------------------------------------------------------------- size

fn size_part(bin: &Path) -> Result<()> {
    println!("\n## 1. size");
    let full = std::fs::metadata(bin)?.len();
    println!(
        "every feature:   {:6.1} MiB ({full} bytes); target <= 25 MiB: {}",
        mib(full),
        verdict(mib(full) <= 25.0)
    );
    match std::env::var_os("LONGHAND_EDGE_MINIMAL") {
        Some(p) => {
            let minimal = std::fs::metadata(&p)
                .with_context(|| format!("LONGHAND_EDGE_MINIMAL={}", Path::new(&p).display()))?
                .len();
            println!(
                "minimal build:   {:6.1} MiB ({minimal} bytes); target <= 15 MiB: {}; {:.2}x of every feature",
                mib(minimal),
                verdict(mib(minimal) <= 15.0),
                minimal as f64 / full as f64
            );
        }
        None => println!("minimal build:   not measured (set LONGHAND_EDGE_MINIMAL=PATH)"),
    }
    Ok(())
}

// ---------------------------------------------------------------- processes

/// A finished child: wall time from spawn to reaped, peak RSS, exit code.
struct Ran {
    wall: Duration,
    max_rss: u64,
    code: i32,
}

/// Run `cmd` to its end, reaping it with `wait4` for its resource usage.
fn run(cmd: &mut Command) -> Result<Ran> {
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("spawning {cmd:?}"))?;
    let (status, usage) = wait4(child.id() as i32)?;
    Ok(Ran {
        wall: started.elapsed(),
        max_rss: usage.ru_maxrss as u64 * 1024,
        code: if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        },
    })
}

fn wait4(pid: i32) -> Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: a zeroed `rusage` is a valid value of it; `wait4` fills it
    // and `status` for our own child `pid`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        bail!("wait4({pid}): {}", std::io::Error::last_os_error());
    }
    Ok((status, usage))
}

fn longhand(bin: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("LONGHAND_HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

const QUERY: &str = r#"{"filter": ".a", "input": {"a": 1}}"#;

fn startup_part(bin: &Path, work: &Path, rounds: usize) -> Result<()> {
    println!("\n## 2. start-up ({rounds} rounds, interleaved)");
    let home = work.join("startup-home");
    let call = || {
        let mut c = longhand(bin, &home);
        c.args(["tool", "call", "json", "query", "--input", QUERY]);
        c
    };
    // Warm the compile cache: the first call compiles `json`.
    let first = run(&mut call())?;
    if first.code != 0 {
        bail!("`longhand tool call json query` exited {}", first.code);
    }
    let (mut t_true, mut t_version, mut t_call, mut rss_call, mut rss_version) =
        (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        t_true.push(run(&mut Command::new("/bin/true"))?.wall.as_secs_f64() * 1e3);
        let v = run(longhand(bin, &home).arg("--version"))?;
        t_version.push(v.wall.as_secs_f64() * 1e3);
        rss_version.push(mib(v.max_rss));
        let c = run(&mut call())?;
        if c.code != 0 {
            bail!("`longhand tool call json query` exited {}", c.code);
        }
        t_call.push(c.wall.as_secs_f64() * 1e3);
        rss_call.push(mib(c.max_rss));
    }
    let base = median(&mut t_true);
    let version = median(&mut t_version);
    let call_ms = median(&mut t_call);
    println!("/bin/true                      {base:7.2} ms  (baseline)");
    println!(
        "longhand --version             {version:7.2} ms  {:5.1}x  peak RSS {:5.1} MiB",
        version / base,
        median(&mut rss_version)
    );
    println!(
        "longhand tool call json query  {call_ms:7.2} ms  {:5.1}x  peak RSS {:5.1} MiB  (first call, compiling: {:.1} ms)",
        call_ms / base,
        median(&mut rss_call),
        first.wall.as_secs_f64() * 1e3
    );
    println!(
        "target: tool call <= 4x /bin/true: {}",
        verdict(call_ms / base <= 4.0)
    );
    Ok(())
}

// ---------------------------------------------------------------- memory

/// `VmRSS`, `VmHWM` and `VmSize` of `pid`, in bytes.
fn vm(pid: u32) -> Result<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Ok((field("VmRSS:"), field("VmHWM:"), field("VmSize:")))
}

/// CPU time (user + system) `pid` has used so far.
fn cpu(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_millis(ticks * 1000 / hz))
}

/// A worker on `home`'s store: its RSS, peak and address space once it
/// has settled, and the CPU it used over `watch`.
struct Idle {
    rss: u64,
    hwm: u64,
    size: u64,
    cpu: Duration,
}

fn idle_worker(bin: &Path, home: &Path, concurrency: usize, watch: Duration) -> Result<Idle> {
    let mut child = longhand(bin, home)
        .args(["worker", "--concurrency", &concurrency.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(1500));
    let before = cpu(pid)?;
    std::thread::sleep(watch);
    let after = cpu(pid)?;
    let (rss, hwm, size) = vm(pid)?;
    let _ = child.kill();
    let _ = child.wait();
    Ok(Idle {
        rss,
        hwm,
        size,
        cpu: after.saturating_sub(before),
    })
}

/// An agent that pauses at once: code-audit with `max_steps = 1`.
fn pausing_agent(work: &Path) -> Result<PathBuf> {
    let agent = work.join("pausing-agent");
    copy_dir(&repo().join("examples/code-audit"), &agent)?;
    let toml = agent.join("agent.toml");
    let text = std::fs::read_to_string(&toml)?.replace("max_steps = 12", "max_steps = 1");
    std::fs::write(&toml, text)?;
    Ok(agent)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            if entry.file_name() != "out" {
                copy_dir(&entry.path(), &target)?;
            }
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Make `n` paused sessions in `home`'s store: one by running a pausing
/// agent, the rest as copies of its log through the store's own API.
fn paused_sessions(bin: &Path, home: &Path, work: &Path, n: usize) -> Result<()> {
    let agent = pausing_agent(work)?;
    let ran = run(longhand(bin, home).arg("run").arg(&agent))?;
    if ran.code != 3 {
        bail!("the pausing agent exited {} (not 3, paused)", ran.code);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = SqliteStore::open(home).await?;
        let sessions = store.list().await?;
        let first = sessions.first().context("no session was made")?;
        let events = store.read(&first.id, 1).await?;
        let (created, rest) = events.split_first().context("an empty log")?;
        for i in 1..n {
            let id = store.create(&first.agent_name, &created.event).await?;
            let lease = store
                .acquire_lease(&id, "edge-bench", Duration::from_secs(60))
                .await?;
            let body: Vec<_> = rest.iter().map(|r| r.event.clone()).collect();
            store.append(&id, &lease, 2, &body).await?;
            store.release(&lease).await?;
            if i % 250 == 0 {
                eprintln!("  {i} paused sessions copied");
            }
        }
        anyhow::Ok(())
    })
}

fn memory_part(bin: &Path, work: &Path, quick: bool) -> Result<()> {
    println!("\n## 3. memory");
    let watch = Duration::from_secs(if quick { 3 } else { 6 });
    let empty = work.join("idle-home");
    std::fs::create_dir_all(&empty)?;
    let idle = idle_worker(bin, &empty, 4, watch)?;
    println!(
        "idle worker, empty store:        RSS {:5.1} MiB (peak {:5.1}), address space {:8.1} GiB, CPU {:4} ms in {} s; target RSS <= 20 MiB: {}",
        mib(idle.rss),
        mib(idle.hwm),
        mib(idle.size) / 1024.0,
        idle.cpu.as_millis(),
        watch.as_secs(),
        verdict(mib(idle.rss) <= 20.0)
    );
    let n = if quick { 200 } else { 1000 };
    let paused = work.join("paused-home");
    paused_sessions(bin, &paused, work, n)?;
    let busy = idle_worker(bin, &paused, 4, watch)?;
    println!(
        "idle worker, {n:4} paused sessions: RSS {:5.1} MiB (peak {:5.1}), CPU {:4} ms in {} s; {:+.1} MiB against the empty store",
        mib(busy.rss),
        mib(busy.hwm),
        busy.cpu.as_millis(),
        watch.as_secs(),
        mib(busy.rss) - mib(idle.rss)
    );

    // One running session: the offline example, start to end.
    let example = work.join("code-audit");
    copy_dir(&repo().join("examples/code-audit"), &example)?;
    let home = work.join("run-home");
    let mut peaks = Vec::new();
    let mut walls = Vec::new();
    for _ in 0..if quick { 2 } else { 5 } {
        let ran = run(longhand(bin, &home).arg("run").arg(&example))?;
        if ran.code != 0 {
            bail!("the code-audit example exited {}", ran.code);
        }
        peaks.push(mib(ran.max_rss));
        walls.push(ran.wall.as_secs_f64() * 1e3);
    }
    let peak = median(&mut peaks);
    println!(
        "one running session (code-audit): peak RSS {peak:5.1} MiB, {:.0} ms end to end (median); target <= 40 MiB: {}",
        median(&mut walls),
        verdict(peak <= 40.0)
    );

    // The instance pool, in this process: what each size reserves.
    println!("instance pool by call slots (in process, HandsConfig::max_concurrent_calls):");
    println!("  slots  components  core inst.  memories  address space  resident");
    for slots in [1u32, 4, 16, 64] {
        let (rss0, _, size0) = vm(std::process::id())?;
        let hands = Hands::new(HandsConfig {
            max_concurrent_calls: slots,
            ..HandsConfig::default()
        })?;
        let (rss1, _, size1) = vm(std::process::id())?;
        println!(
            "  {slots:5}  {slots:10}  {:10}  {:8}  {:10.1} GiB  {:6.1} MiB",
            slots * 64,
            slots * 4,
            mib(size1.saturating_sub(size0)) / 1024.0,
            mib(rss1.saturating_sub(rss0))
        );
        drop(hands);
    }
    println!("worker by --concurrency (every process has 4 call slots):");
    for concurrency in [1usize, 4, 16, 64] {
        let w = idle_worker(bin, &empty, concurrency, Duration::from_millis(500))?;
        println!(
            "  --concurrency {concurrency:3}: RSS {:5.1} MiB, address space {:8.1} GiB",
            mib(w.rss),
            mib(w.size) / 1024.0
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- pulley

fn pulley_part(work: &Path, n: usize) -> Result<()> {
    println!("\n## 4. Pulley against Cranelift ({n} calls each, in process)");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let input = json!({"filter": "[.[] | . * 2]", "input": [1, 2, 3, 4, 5, 6, 7, 8]});
    let mut per_call = Vec::new();
    for interpreter in [false, true] {
        let hands = Hands::new(HandsConfig {
            cache_dir: Some(work.join("pulley-cache")),
            cache_key: None,
            max_concurrent_calls: 4,
            interpreter,
            kept_dir: None,
        })?;
        let ms = runtime.block_on(async {
            let tool = hands.load(ToolSource::Builtin("json")).await?;
            let mut times = Vec::with_capacity(n);
            for _ in 0..n + n / 10 {
                let t = Instant::now();
                let outcome = hands.call(&tool, &Grants::default(), "query", &input).await;
                outcome.result.map_err(|e| anyhow::anyhow!("{e}"))?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            // The first tenth warms up.
            anyhow::Ok(median(&mut times[n / 10..]))
        })?;
        per_call.push(ms);
    }
    println!("native (Cranelift)  {:7.3} ms per call", per_call[0]);
    println!(
        "Pulley interpreter  {:7.3} ms per call  {:5.1}x",
        per_call[1],
        per_call[1] / per_call[0]
    );
    Ok(())
}
