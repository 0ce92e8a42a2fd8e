//! Run one native program confined like a guest: the layers of
//! [`super`] put together, with limits and bounded output.
//!
//! What the program gets:
//! - its argv, no shell unless the program is one;
//! - the view ([`super::view`]): its grants at their guest paths, the
//!   read-only system paths the caller lists, `/dev`'s harmless devices, a
//!   `/proc` of its own, a fresh `/tmp`; nothing else of the host;
//! - Landlock over the same inodes ([`super::landlock`]);
//! - namespaces of its own ([`super::tree::hold_isolated`]): no network at
//!   all (a loopback of its own, down), no process of the host to signal or
//!   trace, no abstract unix socket or System V IPC of the host, no
//!   capability after exec;
//! - an environment of exactly the variables the caller gives;
//! - limits: wall time (the whole process tree dies at it, grandchildren
//!   included), CPU seconds, address space, processes, open files and file
//!   size per process (`setrlimit`), and output: past the cap, the head and
//!   the tail are kept and what was cut is counted.
//!
//! Fail closed: where the kernel cannot give the namespaces or Landlock,
//! nothing runs ([`ConfinedError::Unavailable`]).
//!
//! This module must not decide what runs or which paths a program gets;
//! the caller (the `exec` tool's host side, a command check) does.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::landlock;
use super::tree;
use super::view::{self, Mount, Plan, ViewError};

/// Bounds on one run. Per-process limits (`setrlimit`) apply to each
/// process of the tree on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Wall time of the whole run.
    pub wall: Duration,
    /// CPU time of each process (SIGXCPU, then SIGKILL a second later).
    pub cpu: Duration,
    /// Address space of each process, bytes.
    pub memory: u64,
    /// Processes (threads included) of the run's user at once.
    pub processes: u64,
    /// Open files of each process.
    pub open_files: u64,
    /// Largest file a process may write, bytes (SIGXFSZ past it).
    pub file_size: u64,
    /// Bytes kept of stdout and of stderr each (half head, half tail).
    pub output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(60),
            cpu: Duration::from_secs(60),
            memory: 4 << 30,
            processes: 256,
            open_files: 1024,
            file_size: 1 << 30,
            output: 64 << 10,
        }
    }
}

/// One program to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The program's host path, absolute; the view must show it at the
    /// same path (list it, or its directory, in `system`).
    pub program: PathBuf,
    /// Arguments after the program (argv[1..]).
    pub args: Vec<String>,
    /// What the program sees as argv[0].
    pub arg0: String,
    /// Working directory, a guest path inside a grant.
    pub cwd: PathBuf,
    /// The environment, exactly.
    pub env: Vec<(String, String)>,
    /// Bytes written to stdin, then closed; none: stdin is empty.
    pub stdin: Option<Vec<u8>>,
    /// Grants: host directories at guest paths.
    pub mounts: Vec<Mount>,
    /// Read-only host paths shown at their own paths (the program, its
    /// libraries, a toolchain).
    pub system: Vec<PathBuf>,
    /// Bounds.
    pub limits: Limits,
    /// Files to write each whole stream to, beside the head and tail
    /// kept in memory. Default none.
    pub spill: Option<Spill>,
}

/// Where the whole of each stream goes, up to `limit` bytes each (the
/// caller opened the files, in a place it chose).
#[derive(Debug, Clone)]
pub struct Spill {
    /// Receives all of stdout.
    pub stdout: Arc<std::fs::File>,
    /// Receives all of stderr.
    pub stderr: Arc<std::fs::File>,
    /// Bytes written to each at most.
    pub limit: u64,
}

/// What a stream printed, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Captured {
    /// What was kept (lossy UTF-8): all of it, or the head, a marker line
    /// and the tail.
    pub text: String,
    /// Bytes printed in all.
    pub total: u64,
    /// Bytes left out of `text`.
    pub cut: u64,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// Exit code, when the program exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Stdout.
    pub stdout: Captured,
    /// Stderr.
    pub stderr: Captured,
    /// Wall time, milliseconds.
    pub duration_ms: u64,
    /// Limits the run reached: `wall`, `cpu`, `file_size`, `output`.
    pub limits_hit: Vec<&'static str>,
}

/// Why a program did not run.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    /// The kernel cannot confine it.
    #[error("{0}")]
    Unavailable(String),
    /// A grant or system path cannot be used.
    #[error(transparent)]
    View(#[from] ViewError),
    /// A path Landlock could not be given.
    #[error(transparent)]
    Landlock(#[from] landlock::PathError),
    /// The per-run temporary directory.
    #[error("cannot make the command's /tmp: {0}")]
    Tmp(std::io::Error),
    /// The program could not be started (missing, not executable, or a
    /// step of the confinement failed: the OS error says which).
    #[error("cannot start `{program}` confined: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Whether this kernel gives every layer; the reason when not.
pub fn available() -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("confined commands need Linux (namespaces and Landlock)".into());
    }
    if !tree::isolation_available() {
        return Err(tree::Unavailable.to_string());
    }
    match landlock::abi() {
        0 => Err(
            "Landlock is not available in this kernel (Linux 5.13 or later, with \
                  `landlock` in the lsm= list): a command cannot be confined, so it does not run"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// A confined program that was started: its process (the keeper of its
/// tree, see [`super::tree`]) and the per-run `/tmp` it sees, removed when
/// this is dropped. Dropping it kills the whole tree.
pub struct Started {
    /// The process; its stdin, stdout and stderr are as the caller asked.
    pub child: tokio::process::Child,
    /// The run's `/tmp` on the host side.
    _tmp: tempfile::TempDir,
}

/// How a started program's standard streams are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipes {
    /// stdin piped when `spec.stdin` is given (else empty), stdout and
    /// stderr piped: a run to its end ([`run`]).
    Run,
    /// All three piped: a program the caller talks to for as long as it
    /// lives (an MCP server speaking on stdin and stdout).
    Talk,
}

/// Start `spec` confined (everything [`run`] gives but the wall limit and
/// the output bounds, which are the caller's when it talks to the program
/// itself). The tree dies when the returned [`Started`] is dropped, and
/// when the harness dies.
pub async fn start(spec: &Spec, pipes: Pipes) -> Result<Started, ConfinedError> {
    available().map_err(ConfinedError::Unavailable)?;
    let tmp = tempfile::Builder::new()
        .prefix("longhand-exec-")
        .tempdir()
        .map_err(ConfinedError::Tmp)?;
    let plan = Arc::new(Plan::new(
        &spec.mounts,
        &spec.system,
        tmp.path(),
        &spec.cwd,
    )?);
    let mut read_only: Vec<PathBuf> = spec.system.clone();
    let mut writable: Vec<PathBuf> = vec![tmp.path().to_owned()];
    for m in &spec.mounts {
        if m.writable {
            writable.push(m.host.clone());
        } else {
            read_only.push(m.host.clone());
        }
    }
    writable.extend(
        view::DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|d| d.exists()),
    );
    let mut ruleset = landlock::Ruleset::build(&read_only, &writable)?;
    // The view's root, opened after `pivot_root`: everything beneath it is
    // the view (grants, system paths, the command's own /proc), so the
    // command may list and read what it was given, and write only where
    // the rules above say.
    ruleset.read_in_child(Path::new("/"));

    let mut command = tokio::process::Command::new(&spec.program);
    command
        .arg0(&spec.arg0)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() || pipes == Pipes::Talk {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Order matters: namespaces, then the view (it mounts), then limits,
    // then Landlock (a restricted process may not mount).
    tree::hold_isolated(&mut command, spec.limits.processes)
        .map_err(|e| ConfinedError::Unavailable(e.to_string()))?;
    plan.apply_in_child(&mut command);
    limit_in_child(&mut command, &spec.limits);
    ruleset.apply_in_child(&mut command);
    let child = tree::spawn(command)
        .await
        .map_err(|source| match source.raw_os_error() {
            Some(tree::PROCESSES_UNBOUNDED) => ConfinedError::Unavailable(
                "the command's processes cannot be bounded: the host user is root, whom \
                 RLIMIT_NPROC does not stop, and this kernel keeps pid_max global (Linux 6.14 \
                 or later keeps one per pid namespace); run Longhand as an ordinary user, or \
                 on a newer kernel"
                    .into(),
            ),
            _ => ConfinedError::Spawn {
                program: spec.program.display().to_string(),
                source,
            },
        })?;
    drop(ruleset);
    drop(plan);
    Ok(Started { child, _tmp: tmp })
}

/// Run `spec` to its end or its wall limit.
pub async fn run(spec: &Spec) -> Result<Outcome, ConfinedError> {
    // The run's /tmp lives until the run is over.
    let Started { mut child, _tmp } = start(spec, Pipes::Run).await?;
    let started = Instant::now();
    if let (Some(bytes), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            // A program that does not read its stdin closes the pipe: fine.
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let sink = |pick: fn(&Spill) -> &Arc<std::fs::File>| {
        spec.spill.as_ref().and_then(|s| {
            let file = pick(s).try_clone().ok()?;
            Some((tokio::fs::File::from_std(file), s.limit))
        })
    };
    let out = tokio::spawn(capture(
        child.stdout.take(),
        spec.limits.output,
        sink(|s| &s.stdout),
    ));
    let err = tokio::spawn(capture(
        child.stderr.take(),
        spec.limits.output,
        sink(|s| &s.stderr),
    ));
    let mut limits_hit = Vec::new();
    let status = match tokio::time::timeout(spec.limits.wall, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            // Killing the keeper kills pid 1 of the namespace, and with it
            // every process of the run.
            limits_hit.push("wall");
            let _ = child.kill().await;
            None
        }
    };
    // The pipes close when the last process of the run is gone; the
    // kernel is killing them all by now, but a loaded machine may take a
    // moment: wait for the output a bounded time, then keep what came.
    let drain = Duration::from_secs(2);
    let (stdout, stderr) = tokio::join!(drained(out, drain), drained(err, drain));
    use std::os::unix::process::ExitStatusExt;
    let signal = status.and_then(|s| s.signal());
    match signal {
        // The program is pid 1 of its namespace, which the kernel spares
        // the default action of SIGXCPU: it dies of the SIGKILL at the
        // hard limit a second later. A SIGKILL the harness did not send
        // is counted as the CPU limit (RLIMIT_AS fails allocations, it
        // does not kill).
        Some(libc::SIGXCPU) => limits_hit.push("cpu"),
        Some(libc::SIGKILL) if !limits_hit.contains(&"wall") => limits_hit.push("cpu"),
        Some(libc::SIGXFSZ) => limits_hit.push("file_size"),
        _ => {}
    }
    if stdout.cut > 0 || stderr.cut > 0 {
        limits_hit.push("output");
    }
    Ok(Outcome {
        exit_code: status.and_then(|s| s.code()),
        signal: if limits_hit.contains(&"wall") {
            Some(libc::SIGKILL)
        } else {
            signal
        },
        stdout,
        stderr,
        duration_ms: started.elapsed().as_millis() as u64,
        limits_hit,
    })
}

async fn drained(task: tokio::task::JoinHandle<Captured>, within: Duration) -> Captured {
    let abort = task.abort_handle();
    match tokio::time::timeout(within, task).await {
        Ok(captured) => captured.unwrap_or_default(),
        Err(_) => {
            abort.abort();
            Captured::default()
        }
    }
}

/// `setrlimit` of each bound, between fork and exec.
fn limit_in_child(command: &mut tokio::process::Command, limits: &Limits) {
    let cpu = limits.cpu.as_secs().max(1);
    let table = [
        (libc::RLIMIT_CPU, cpu, cpu + 1),
        (libc::RLIMIT_AS, limits.memory, limits.memory),
        (libc::RLIMIT_NPROC, limits.processes, limits.processes),
        (libc::RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (libc::RLIMIT_FSIZE, limits.file_size, limits.file_size),
        (libc::RLIMIT_CORE, 0, 0),
    ];
    // SAFETY: setrlimit and setpriority are async-signal-safe; the table is
    // copied into the closure before the fork.
    unsafe {
        command.pre_exec(move || {
            // Below the harness, as long guest calls are (exec.rs): a busy
            // command slows on a busy machine, the loop that must stop it
            // does not.
            libc::setpriority(libc::PRIO_PROCESS, 0, crate::exec::GUEST_NICE);
            for (resource, soft, hard) in table {
                let limit = libc::rlimit {
                    rlim_cur: soft as libc::rlim_t,
                    rlim_max: hard as libc::rlim_t,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Read a pipe to its end keeping the first and last `cap / 2` bytes, and
/// writing the first `limit` bytes of all of it to `sink` when given (a
/// failed write stops the sink, not the capture).
async fn capture(
    pipe: Option<impl tokio::io::AsyncRead + Unpin>,
    cap: usize,
    mut sink: Option<(tokio::fs::File, u64)>,
) -> Captured {
    let Some(mut pipe) = pipe else {
        return Captured::default();
    };
    let half = cap / 2;
    let mut head = Vec::new();
    let mut tail = std::collections::VecDeque::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((file, limit)) = &mut sink {
            let room = usize::try_from((*limit).saturating_sub(total)).unwrap_or(usize::MAX);
            let part = &buf[..n.min(room)];
            if !part.is_empty() && file.write_all(part).await.is_err() {
                sink = None;
            }
        }
        total += n as u64;
        let mut chunk = &buf[..n];
        let room = half.saturating_sub(head.len()).min(chunk.len());
        head.extend_from_slice(&chunk[..room]);
        chunk = &chunk[room..];
        if chunk.len() >= half {
            tail.clear();
            tail.extend(&chunk[chunk.len() - half..]);
        } else {
            tail.extend(chunk);
            while tail.len() > half {
                tail.pop_front();
            }
        }
    }
    if let Some((mut file, _)) = sink {
        let _ = file.flush().await;
    }
    let kept = (head.len() + tail.len()) as u64;
    let cut = total - kept;
    let mut text = String::from_utf8_lossy(&head).into_owned();
    if cut > 0 {
        text.push_str(&format!("\n[… {cut} bytes cut …]\n"));
    }
    text.push_str(&String::from_utf8_lossy(tail.make_contiguous()));
    Captured { text, total, cut }
}

/// The system paths a program needs on a typical Linux: `/usr` and the
/// top-level links into it, the loader's configuration and the files that
/// name users and hosts. Never `/etc` whole (it holds `shadow`), never a
/// home.
pub fn system_paths() -> Vec<PathBuf> {
    [
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
        "/etc/localtime",
        "/etc/ssl/certs",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| Path::new(p).exists())
    .collect()
}
