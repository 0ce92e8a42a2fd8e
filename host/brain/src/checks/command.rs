//! `command` checks: a native command the operator wrote (exact argv, never
//! one a model chose), run by the harness to decide whether a task is done.
//!
//! What the command gets:
//! - its argv as written, no shell unless the argv names one;
//! - a working directory the caller has checked is inside a grant;
//! - an environment scrubbed to an allowlist of variable names;
//! - a wall-time limit (the whole process group is killed at the end of
//!   it) and a cap on the output kept from stdout and stderr;
//! - on Linux with Landlock, a filesystem confined to the listed read-only
//!   paths (a toolchain, the project) and writable paths, and no TCP
//!   connect or bind (Landlock ABI 4 and later). Where the kernel offers
//!   less, the outcome says exactly what applied: a check never claims a
//!   confinement it did not have.
//!
//! Exit status 0 passes.
//!
//! A check never outlives its run, nor the harness that ran it:
//! - the command's whole process tree is held in a pid namespace of its
//!   own ([`longhand_hands::sandbox::tree`]): when the command ends, times out, is
//!   dropped (the worker lost its lease) or the harness dies (`kill -9`
//!   included), the kernel kills every process of it, background children
//!   and those that left the process group included;
//! - every process of a run also carries `LONGHAND_CHECK=<marker>` in its
//!   environment ([`MARKER_VAR`]), and what still carries it when the run
//!   ends is killed. That is the whole of the cleanup where user namespaces
//!   are unavailable (the outcome's `process_tree` is then false): there a
//!   background process survives a `kill -9` of the harness, so [`run_as`]
//!   first kills every process of this machine still carrying its marker —
//!   a resumed session's check never runs beside the copy its dead
//!   predecessor started. A grandchild that clears its own environment
//!   escapes the marker; one on another machine is that machine's to reap.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use longhand_hands::sandbox::{confined, landlock};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

/// A command check as the operator configured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// Program and arguments, exactly (e.g. `["cargo", "test", "--offline"]`).
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Names of environment variables passed through (values from this
    /// process, read when the command starts); every other variable is
    /// removed.
    pub env: Vec<String>,
    /// Variables set to fixed values (after the pass-through ones, so a
    /// name in both takes this value). Default none.
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
    /// Paths the command may read and execute, not write.
    pub read_only: Vec<PathBuf>,
    /// Paths the command may read and write.
    pub writable: Vec<PathBuf>,
    /// Wall-time limit.
    pub timeout: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is counted and
    /// dropped.
    pub max_output: usize,
    /// Confine the command with Landlock where the kernel has it. Default
    /// true, and the only value [`resolve`](super::resolve::resolve)
    /// gives: agent.toml has no key that turns it off. False runs the
    /// command as a kernel without Landlock would, and the outcome says
    /// so; it exists so that the report of an unconfined run can be
    /// tested on any kernel, not only on one that lacks Landlock.
    #[serde(default = "confine_default")]
    pub confine: bool,
}

fn confine_default() -> bool {
    true
}

/// The confinement a command actually ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// The Landlock ABI the kernel offered (0: none).
    pub landlock_abi: u32,
    /// Whether file access outside the listed paths was denied.
    pub filesystem: bool,
    /// Whether TCP connect and bind were denied.
    pub network: bool,
    /// What was not confined, and why, for people.
    pub note: Option<String>,
    /// Whether the command's whole process tree was held in a pid
    /// namespace of its own ([`longhand_hands::sandbox::tree`]), so that what it
    /// left in the background died with the run and with the harness.
    /// False where user namespaces are unavailable; records written before
    /// this field read false.
    #[serde(default)]
    pub process_tree: bool,
}

/// What a command check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandOutcome {
    /// Exit status 0, within the time limit.
    pub passed: bool,
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Whether it was killed at the time limit.
    pub timed_out: bool,
    /// Wall time, milliseconds.
    pub wall_ms: u64,
    /// Stdout, cut to `max_output` bytes (lossy UTF-8).
    pub stdout: String,
    /// Stderr, cut likewise.
    pub stderr: String,
    /// Bytes of output dropped past the caps.
    pub dropped_bytes: u64,
    /// What confinement applied.
    pub confinement: Confinement,
}

/// Why a command check could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The argv is empty.
    #[error("the command is empty: give the program and its arguments")]
    Empty,
    /// The working directory is missing or not a directory (a directory
    /// the worker was to create, say). The check fails; nothing ran.
    #[error("the command's working directory {path} cannot be used: {reason}")]
    Cwd {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A path to confine to cannot be opened.
    #[error("cannot open {path} for the command's confinement: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The process could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The environment variable naming the run every process of a command
/// check belongs to.
pub const MARKER_VAR: &str = "LONGHAND_CHECK";

/// Run `spec` to its end or its time limit, its processes marked with a
/// marker of their own.
pub async fn run(spec: &CommandSpec) -> Result<CommandOutcome, CommandError> {
    let mut random = [0u8; 16];
    // A marker only has to differ from other runs' markers; the time and
    // pid make it unique enough should randomness be unavailable.
    let _ = getrandom::fill(&mut random);
    let marker = format!(
        "run-{}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()),
        random
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    run_as(spec, &marker).await
}

/// Run `spec` with its processes marked `marker` (the same for every run of
/// the same check of the same session), after killing any process of this
/// machine still carrying that marker: the leftovers of a harness that died
/// while the check ran.
pub async fn run_as(spec: &CommandSpec, marker: &str) -> Result<CommandOutcome, CommandError> {
    reap(marker).await;
    let (program, args) = spec.argv.split_first().ok_or(CommandError::Empty)?;
    // Checked here because a missing cwd makes spawn fail with the same
    // ENOENT as a missing program, and the message would blame the program.
    match std::fs::metadata(&spec.cwd) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(CommandError::Cwd {
                path: spec.cwd.clone(),
                reason: "not a directory".to_owned(),
            });
        }
        Err(e) => {
            return Err(CommandError::Cwd {
                path: spec.cwd.clone(),
                reason: e.to_string(),
            });
        }
    }
    // Where the kernel gives every layer, the check runs as `exec` runs a
    // program: one sandbox implementation. Elsewhere it runs under what
    // the kernel offers, and its outcome says what that was.
    if spec.confine && confined::available().is_ok() {
        return run_in_view(spec, program, args, marker).await;
    }
    let ruleset = if spec.confine {
        landlock::Ruleset::build(&spec.read_only, &spec.writable).map_err(|e| {
            CommandError::Path {
                path: e.path,
                source: e.source,
            }
        })?
    } else {
        landlock::Ruleset::none()
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(allowed_env(&spec.env))
        .envs(&spec.set_env)
        // Last, so no configured variable can unset it.
        .env(MARKER_VAR, marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    // First, so Landlock applies in the process that execs, not in the
    // keeper the tree is held by.
    let tree = longhand_hands::sandbox::tree::hold(&mut command);
    ruleset.apply_in_child(&mut command);
    let started = Instant::now();
    let mut child = longhand_hands::sandbox::tree::spawn(command)
        .await
        .map_err(|source| CommandError::Spawn {
            program: program.clone(),
            source,
        })?;
    drop(ruleset);
    // From here until the leader is reaped, dropping this future (a lost
    // lease, a `cancel --now`) kills the whole run.
    let mut guard = RunGuard {
        group: child.id().and_then(|p| i32::try_from(p).ok()),
        marker: Some(marker.to_owned()),
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = tokio::spawn(read_capped(stdout, spec.max_output));
    let err = tokio::spawn(read_capped(stderr, spec.max_output));
    let (code, timed_out) = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(Ok(status)) => (status.code(), false),
        Ok(Err(_)) => (None, false),
        Err(_) => {
            // The leader is not reaped yet, so its group id cannot have
            // been reused.
            kill_group(&child);
            let _ = child.kill().await;
            (None, true)
        }
    };
    // The leader is reaped: its pid (the group id) may be reused from now
    // on, so what is left of the run is found by its marker instead —
    // background children that would hold the output pipes open and keep
    // running with the check's access.
    guard.group = None;
    guard.marker = None;
    reap(marker).await;
    let (stdout, dropped_out) = out.await.unwrap_or_default();
    let (stderr, dropped_err) = err.await.unwrap_or_default();
    Ok(CommandOutcome {
        passed: code == Some(0) && !timed_out,
        code,
        timed_out,
        wall_ms: started.elapsed().as_millis() as u64,
        stdout,
        stderr,
        dropped_bytes: dropped_out + dropped_err,
        confinement: held(
            tree,
            if spec.confine {
                landlock_confinement()
            } else {
                unconfined()
            },
        ),
    })
}

/// `confinement` with what held the process tree added to it.
fn held(tree: longhand_hands::sandbox::tree::Tree, confinement: Confinement) -> Confinement {
    let note = match (confinement.note, tree.note()) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b.map(str::to_owned)),
    };
    Confinement {
        process_tree: tree.contained(),
        note,
        ..confinement
    }
}

/// Run `spec` under [`confined`], `exec`'s sandbox: a view holding only
/// the system paths, its `read_only` and `writable` paths, each at its own
/// path (so its output names the paths the rest of the check machinery
/// rewrites), the command's own namespaces (no network at all, no process
/// of the host), Landlock over the same paths, and the whole tree killed
/// at the time limit or with the harness.
async fn run_in_view(
    spec: &CommandSpec,
    program: &str,
    args: &[String],
    marker: &str,
) -> Result<CommandOutcome, CommandError> {
    use longhand_hands::sandbox::view::Mount;
    let program_path = PathBuf::from(program);
    let mut system = confined::system_paths();
    for path in &spec.read_only {
        let Ok(path) = std::fs::canonicalize(path) else {
            continue;
        };
        let usable = !path.starts_with("/dev") && !path.starts_with("/proc");
        if usable && !spec.writable.contains(&path) && !system.contains(&path) {
            system.push(path);
        }
    }
    if program_path.is_absolute() && !system.iter().any(|s| program_path.starts_with(s)) {
        system.push(program_path.clone());
    }
    // A path beneath another listed one is shown by it already (and a
    // mount point cannot be made inside a read-only bind).
    let listed = system.clone();
    system.retain(|p| !listed.iter().any(|q| q != p && p.starts_with(q)));
    let mut env: Vec<(String, String)> = allowed_env(&spec.env).into_iter().collect();
    for (k, v) in &spec.set_env {
        env.retain(|(name, _)| name != k);
        env.push((k.clone(), v.clone()));
    }
    env.retain(|(name, _)| name != MARKER_VAR);
    env.push((MARKER_VAR.to_owned(), marker.to_owned()));
    let run = confined::Spec {
        program: program_path,
        args: args.to_vec(),
        arg0: program.rsplit('/').next().unwrap_or(program).to_owned(),
        cwd: spec.cwd.clone(),
        env,
        stdin: None,
        mounts: spec
            .writable
            .iter()
            .map(|w| Mount {
                host: w.clone(),
                guest: w.clone(),
                writable: true,
            })
            .collect(),
        system,
        limits: confined::Limits {
            wall: spec.timeout,
            cpu: spec.timeout,
            memory: 8 << 30,
            processes: longhand_hands::sandbox::tree::HELD_PROCESSES,
            open_files: confined::Limits::default().open_files,
            file_size: confined::Limits::default().file_size,
            output: spec.max_output,
        },
        spill: None,
    };
    let outcome = confined::run(&run).await.map_err(|e| match e {
        confined::ConfinedError::Spawn { program, source } => {
            CommandError::Spawn { program, source }
        }
        confined::ConfinedError::Landlock(e) => CommandError::Path {
            path: e.path,
            source: e.source,
        },
        other => CommandError::Spawn {
            program: program.to_owned(),
            source: std::io::Error::other(other.to_string()),
        },
    })?;
    let timed_out = outcome.limits_hit.contains(&"wall");
    let abi = landlock::abi();
    Ok(CommandOutcome {
        passed: outcome.exit_code == Some(0) && !timed_out,
        code: outcome.exit_code,
        timed_out,
        wall_ms: outcome.duration_ms,
        dropped_bytes: outcome.stdout.cut + outcome.stderr.cut,
        stdout: outcome.stdout.text,
        stderr: outcome.stderr.text,
        confinement: Confinement {
            landlock_abi: abi,
            filesystem: true,
            network: true,
            process_tree: true,
            note: Some(format!(
                "confined as exec runs a program: only the listed paths exist (a mount \
                 namespace), Landlock ABI {abi} over them, no network at all (a network \
                 namespace), no process of the host (a pid namespace)"
            )),
        },
    })
}

/// What a run with `confine = false` had: nothing, whatever the kernel
/// offered.
fn unconfined() -> Confinement {
    Confinement {
        landlock_abi: landlock::abi(),
        filesystem: false,
        network: false,
        process_tree: false,
        note: Some(
            "confinement was not applied to this command: files and network are not confined"
                .into(),
        ),
    }
}

fn allowed_env(names: &[String]) -> BTreeMap<String, String> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect()
}

#[cfg(unix)]
fn kill_group(child: &tokio::process::Child) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // The group the child leads (`process_group(0)`): its children too.
        // SAFETY: kill(2) with a negative pid signals that process group;
        // no memory is involved.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

#[cfg(not(unix))]
fn kill_group(_: &tokio::process::Child) {}

/// Kills a run that is dropped before its leader was reaped: its process
/// group at once, then (off this thread) whatever still carries its marker.
struct RunGuard {
    group: Option<i32>,
    marker: Option<String>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self.group {
            // SAFETY: kill(2) on the group the unreaped leader heads; no
            // memory is involved.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
        }
        if let Some(marker) = self.marker.take() {
            // Drop cannot wait; the scan is short and needs no runtime.
            let _ = std::thread::Builder::new()
                .name("longhand-reap".into())
                .spawn(move || reap_blocking(&marker));
        }
    }
}

/// Kill every process of this machine whose environment carries
/// `LONGHAND_CHECK=<marker>`, until none is left (at most about 5 s:
/// a process being killed may fork once more). Returns how many were
/// killed. Only processes of this user can be read, and so killed.
pub async fn reap(marker: &str) -> usize {
    let marker = marker.to_owned();
    tokio::task::spawn_blocking(move || reap_blocking(&marker))
        .await
        .unwrap_or(0)
}

fn reap_blocking(marker: &str) -> usize {
    let needle = format!("{MARKER_VAR}={marker}").into_bytes();
    let mut killed = 0;
    for _ in 0..50 {
        let found = marked(&needle);
        if found.is_empty() {
            break;
        }
        for pid in found {
            kill_pid(pid);
            killed += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    killed
}

/// Processes whose environment holds exactly the entry `needle`.
#[cfg(target_os = "linux")]
fn marked(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| u32::try_from(*pid).is_ok_and(|p| p != me))
        .filter(|pid| {
            // Unreadable (another user's) or gone: not ours. A zombie's
            // environment reads empty: it is dead already.
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == needle))
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn marked(_: &[u8]) -> Vec<i32> {
    Vec::new()
}

#[cfg(unix)]
fn kill_pid(pid: i32) {
    // SAFETY: kill(2) with a positive pid signals that process only.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill_pid(_: i32) {}

/// Read a pipe to its end, keeping `cap` bytes; returns the text kept and
/// the count dropped.
async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>, cap: usize) -> (String, u64) {
    let Some(mut pipe) = pipe else {
        return (String::new(), 0);
    };
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
                dropped += (n - room) as u64;
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), dropped)
}

/// What Landlock gives a command on this kernel.
fn landlock_confinement() -> Confinement {
    let abi = landlock::abi();
    Confinement {
        landlock_abi: abi,
        filesystem: abi >= 1,
        network: abi >= 4,
        process_tree: false,
        note: match abi {
            0 if cfg!(target_os = "linux") => {
                Some("Landlock is not available: files and network are not confined".into())
            }
            0 => Some("Landlock exists on Linux only: files and network are not confined".into()),
            1..=3 => Some(format!(
                "Landlock ABI {abi} confines files only; TCP needs ABI 4 (UDP is never covered)"
            )),
            _ => Some("UDP is not covered by Landlock".into()),
        },
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::path::Path;

    use super::*;

    /// What a shell needs to start, read-only.
    fn system() -> Vec<PathBuf> {
        ["/bin", "/usr", "/lib", "/lib64", "/etc"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect()
    }

    fn sh(script: &str, cwd: &Path, writable: Vec<PathBuf>) -> CommandSpec {
        CommandSpec {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            cwd: cwd.to_owned(),
            env: vec!["PATH".into()],
            set_env: BTreeMap::new(),
            read_only: system(),
            writable,
            timeout: Duration::from_secs(20),
            max_output: 4096,
            confine: true,
        }
    }

    #[tokio::test]
    async fn exit_zero_passes_and_anything_else_fails() {
        let dir = tempfile::TempDir::new().unwrap();
        let ok = run(&sh("exit 0", dir.path(), vec![dir.path().into()]))
            .await
            .unwrap();
        assert!(ok.passed, "{ok:?}");
        let bad = run(&sh(
            "echo no >&2; exit 3",
            dir.path(),
            vec![dir.path().into()],
        ))
        .await
        .unwrap();
        assert!(!bad.passed);
        assert_eq!(bad.code, Some(3));
        assert_eq!(bad.stderr, "no\n");
    }

    #[tokio::test]
    async fn writes_outside_the_writable_paths_are_denied_where_landlock_is() {
        let work = tempfile::TempDir::new().unwrap();
        let outside = tempfile::TempDir::new().unwrap();
        let script = format!(
            "echo in > {}/in.txt && echo out > {}/out.txt",
            work.path().display(),
            outside.path().display()
        );
        let mut spec = sh(&script, work.path(), vec![work.path().into()]);
        spec.read_only.push(outside.path().into());
        let outcome = run(&spec).await.unwrap();
        assert!(work.path().join("in.txt").exists(), "{outcome:?}");
        if outcome.confinement.filesystem {
            assert!(!outcome.passed, "{outcome:?}");
            assert!(!outside.path().join("out.txt").exists());
            // Landlock's refusal, or the view's read-only bind.
            assert!(
                outcome.stderr.contains("ermission denied")
                    || outcome.stderr.contains("Read-only file system"),
                "{outcome:?}"
            );
        } else {
            // Where the kernel has no Landlock the outcome says so.
            assert!(outcome.confinement.note.is_some());
        }
        // A path in neither list cannot even be read.
        let secret = tempfile::TempDir::new().unwrap();
        std::fs::write(secret.path().join("s"), "secret").unwrap();
        let read = run(&sh(
            &format!("cat {}/s", secret.path().display()),
            work.path(),
            vec![work.path().into()],
        ))
        .await
        .unwrap();
        if read.confinement.filesystem {
            assert!(!read.passed && read.stdout.is_empty(), "{read:?}");
        }
    }

    #[tokio::test]
    async fn a_run_without_landlock_says_it_was_not_confined() {
        let work = tempfile::TempDir::new().unwrap();
        let outside = tempfile::TempDir::new().unwrap();
        let script = format!("echo out > {}/out.txt", outside.path().display());
        let mut spec = sh(&script, work.path(), vec![work.path().into()]);
        spec.read_only.push(outside.path().into());
        spec.confine = false;
        let outcome = run(&spec).await.unwrap();
        // Unconfined, the write outside the writable paths happens: the
        // report below is about a run that really had no walls.
        assert!(outcome.passed, "{outcome:?}");
        assert!(outside.path().join("out.txt").exists());
        let confinement = &outcome.confinement;
        assert!(
            !confinement.filesystem && !confinement.network,
            "{outcome:?}"
        );
        assert_eq!(
            confinement.landlock_abi,
            landlock_confinement().landlock_abi
        );
        let note = confinement.note.as_deref().unwrap_or_default();
        assert!(note.contains("not confined"), "{note}");
        // What a `check_finished` event records as its `confinement`.
        let recorded = serde_json::to_value(confinement).unwrap();
        assert_eq!(recorded["filesystem"], false);
        assert_eq!(recorded["network"], false);
        assert_eq!(recorded["note"], note);
        // The default is confined: a spec written without the field.
        let mut json = serde_json::to_value(&spec).unwrap();
        json.as_object_mut().unwrap().remove("confine");
        let parsed: CommandSpec = serde_json::from_value(json).unwrap();
        assert!(parsed.confine);
    }

    #[tokio::test]
    async fn tcp_is_denied_where_the_abi_covers_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::TempDir::new().unwrap();
        let mut spec = sh(
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
            dir.path(),
            vec![dir.path().into()],
        );
        spec.argv[0] = "/bin/bash".into();
        if !Path::new("/bin/bash").exists() {
            return;
        }
        let outcome = run(&spec).await.unwrap();
        let accepted = listener.accept().is_ok();
        if outcome.confinement.network {
            assert!(!outcome.passed, "{outcome:?}");
            assert!(!accepted, "the connection reached the listener");
        } else {
            assert!(
                outcome.passed && accepted,
                "without confinement it connects: {outcome:?}"
            );
            assert!(outcome.confinement.note.is_some());
        }
    }

    #[tokio::test]
    async fn the_environment_is_scrubbed_and_time_is_limited() {
        let dir = tempfile::TempDir::new().unwrap();
        // HOME is set in any test environment; it is not on the allowlist.
        let env = run(&sh("echo \"[$HOME]\"", dir.path(), vec![dir.path().into()]))
            .await
            .unwrap();
        assert_eq!(env.stdout, "[]\n", "{env:?}");
        let mut slow = sh("sleep 30 & sleep 30", dir.path(), vec![dir.path().into()]);
        slow.timeout = Duration::from_millis(300);
        let outcome = run(&slow).await.unwrap();
        assert!(outcome.timed_out && !outcome.passed, "{outcome:?}");
        assert!(outcome.wall_ms < 10_000, "{outcome:?}");
    }

    #[tokio::test]
    async fn fixed_variables_are_set_and_a_missing_cwd_is_named() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut spec = sh("echo \"[$X]\"", dir.path(), vec![]);
        // The working directory is in a grant, read-only, as a resolved
        // check's always is.
        spec.read_only.push(dir.path().into());
        spec.set_env.insert("X".into(), "fixed".into());
        let outcome = run(&spec).await.unwrap();
        assert_eq!(outcome.stdout, "[fixed]\n", "{outcome:?}");
        spec.cwd = dir.path().join("not-yet");
        let err = run(&spec).await.unwrap_err();
        assert!(matches!(err, CommandError::Cwd { .. }), "{err}");
        assert!(err.to_string().contains("not-yet"), "{err}");
    }

    #[tokio::test]
    async fn output_past_the_cap_is_counted_not_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut spec = sh(
            "head -c 100000 /dev/zero | tr '\\0' a",
            dir.path(),
            vec![dir.path().into()],
        );
        spec.read_only.push("/dev".into());
        spec.max_output = 1000;
        let outcome = run(&spec).await.unwrap();
        // 1000 bytes kept — the head, and under the sandbox also the tail
        // around a line saying what was cut — and the rest counted.
        let kept = outcome.stdout.bytes().filter(|&b| b == b'a').count();
        assert_eq!(kept, 1000, "{outcome:?}");
        assert!(outcome.stdout.len() < 1100, "{outcome:?}");
        assert_eq!(outcome.dropped_bytes, 99_000);
    }
}
