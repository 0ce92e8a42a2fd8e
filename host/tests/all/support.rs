//! What every test shares: a private `LONGHAND_HOME`, the `longhand` binary
//! run with a clean environment and a time limit, and small builders for
//! agent directories and model scripts.
//!
//! Compiling the `fs` component takes seconds in a debug build, so every
//! home's `cache` is a symlink to one compile cache under Cargo's
//! `CARGO_TARGET_TMPDIR`, warmed once per test run before the first test
//! uses it. The host writes cache entries to a temporary file and renames
//! them into place, so concurrent processes share it safely; entries are
//! keyed by component digest and engine, so a stale one is never reused.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhand_brain::core::state::SessionState;
use longhand_brain::load_state;
use longhand_session::{BlobRef, EventRecord, SessionId, SqliteStore, Store};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_longhand");

/// How long any one `longhand` process may take before the test kills it
/// and fails. Generous: a debug build on two busy cores.
pub const PROCESS_LIMIT: Duration = Duration::from_secs(120);

/// The compile cache shared by every test's home, warmed once.
fn shared_cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("longhand-host-all-cache");
        std::fs::create_dir_all(&cache).expect("create the shared compile cache");
        // Warm it with `fs` (every agent here uses it) while the other tests
        // wait on this OnceLock, instead of all compiling it at once.
        let home = TempDir::new().expect("tempdir");
        link_cache(home.path(), &cache);
        let out = run(command(home.path(), &["tool", "describe", "fs"]));
        assert_eq!(
            out.code,
            Some(0),
            "warming the compile cache failed:\n{}",
            out.stderr
        );
        cache
    })
}

fn link_cache(home: &Path, cache: &Path) {
    #[cfg(unix)]
    std::os::unix::fs::symlink(cache, home.join("cache")).expect("link the compile cache");
    #[cfg(not(unix))]
    let _ = (home, cache);
}

/// A `longhand` command with `LONGHAND_HOME = home` and nothing else from
/// the test's environment (no keys, no `HOME`, no `RUST_LOG`).
pub fn command(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_clear().env("LONGHAND_HOME", home);
    cmd
}

/// A private `LONGHAND_HOME`, removed when dropped.
pub struct Home {
    dir: TempDir,
}

impl Home {
    /// A fresh home sharing the warmed compile cache.
    pub fn new() -> Self {
        let cache = shared_cache();
        let dir = TempDir::new().expect("tempdir");
        link_cache(dir.path(), cache);
        Self { dir }
    }

    /// The directory `LONGHAND_HOME` points at.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `longhand <args>` against this home.
    pub fn cmd(&self, args: &[&str]) -> Command {
        command(self.path(), args)
    }

    /// Run `longhand <args>` to the end.
    pub fn run(&self, args: &[&str]) -> Ended {
        run(self.cmd(args))
    }

    /// A session's events, read with `longhand log <id> --json`.
    pub fn log(&self, session: &str) -> Vec<EventRecord> {
        let out = self.run(&["log", session, "--json"]);
        assert_eq!(out.code, Some(0), "longhand log failed:\n{}", out.stderr);
        out.stdout
            .iter()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("log line is not an event ({e}): {line}"))
            })
            .collect()
    }

    /// A session's state, folded by the library from the store.
    pub fn state(&self, session: &str) -> SessionState {
        let id: SessionId = session.parse().expect("session id");
        let home = self.path().to_owned();
        block_on(async move {
            let store = SqliteStore::open(&home).await.expect("open the store");
            load_state(&store, &id).await.expect("fold the session")
        })
    }
}

/// Run a future on a fresh single-threaded runtime (the store uses
/// `spawn_blocking`, which it supports).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}

/// How a process ended.
#[derive(Debug)]
pub struct Ended {
    /// Exit code; `None` when killed by a signal.
    pub code: Option<i32>,
    /// Stdout, by line.
    pub stdout: Vec<String>,
    /// Stderr.
    pub stderr: String,
}

impl Ended {
    /// Assert the exit code, showing both streams when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout_text(),
            self.stderr
        );
    }

    /// Stdout as one string.
    pub fn stdout_text(&self) -> String {
        self.stdout.join("\n")
    }

    /// Stdout lines parsed as JSON (each must be).
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}

/// A running `longhand`, read line by line, never waited on past
/// [`PROCESS_LIMIT`].
pub struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: Vec<String>,
    stderr: Option<JoinHandle<String>>,
    deadline: Instant,
}

impl Proc {
    /// Start `cmd` with stdout and stderr piped.
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Self {
            child,
            lines,
            stdout: Vec::new(),
            stderr: Some(stderr),
            deadline: Instant::now() + PROCESS_LIMIT,
        }
    }

    /// Allow `limit` from now instead of [`PROCESS_LIMIT`] (a process that
    /// runs a toolchain, not just Longhand).
    pub fn with_limit(mut self, limit: Duration) -> Self {
        self.deadline = Instant::now() + limit;
        self
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line of stdout; `None` once stdout is closed.
    pub fn next_line(&mut self) -> Option<String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                self.stdout.push(line.clone());
                Some(line)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let ended = self.kill();
                panic!(
                    "longhand ran past {PROCESS_LIMIT:?}; stdout:\n{}\nstderr:\n{}",
                    ended.stdout_text(),
                    ended.stderr
                );
            }
        }
    }

    /// SIGKILL it (a no-op if it already exited) and collect what it wrote.
    pub fn kill(&mut self) -> Ended {
        let _ = self.child.kill();
        let status = self.child.wait().expect("wait for longhand");
        self.collect(status.code())
    }

    /// Read stdout to its end and wait for the exit.
    pub fn finish(&mut self) -> Ended {
        while self.next_line().is_some() {}
        loop {
            if let Some(status) = self.child.try_wait().expect("poll longhand") {
                return self.collect(status.code());
            }
            if Instant::now() > self.deadline {
                let ended = self.kill();
                panic!(
                    "longhand did not exit after closing stdout:\n{}",
                    ended.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn collect(&mut self, code: Option<i32>) -> Ended {
        // Lines it wrote before it died still count: they were durable.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stdout.push(line);
        }
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        Ended {
            code,
            stdout: std::mem::take(&mut self.stdout),
            stderr,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A failed assertion must not leave a longhand running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `cmd` to the end.
pub fn run(cmd: Command) -> Ended {
    Proc::spawn(cmd).finish()
}

/// The session id from the first stdout line of `run`/`resume --json`.
pub fn session_of_json(first_line: &str) -> String {
    let v: Value = serde_json::from_str(first_line)
        .unwrap_or_else(|e| panic!("first line is not JSON ({e}): {first_line}"));
    v["session"]
        .as_str()
        .unwrap_or_else(|| panic!("first line names no session: {first_line}"))
        .to_owned()
}

/// Reads one HTTP/1.1 request from a test server's connection: its path and
/// body (by `Content-Length`). `None` when the peer went away first.
pub fn read_http_request(stream: &std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let path = first.split(' ').nth(1)?.to_owned();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, body))
}

/// Write `content` to `path`, creating parent directories.
pub fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent");
    }
    std::fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A tool call of a scripted model answer.
pub fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments.to_string()})
}

/// A scripted answer asking for `calls`.
pub fn tool_turn(text: &str, calls: Vec<Value>, input_tokens: u64, output_tokens: u64) -> Value {
    json!({
        "text": text,
        "tool_calls": calls,
        "stop_reason": "tool_use",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })
}

/// A scripted final answer.
pub fn text_turn(text: &str, input_tokens: u64, output_tokens: u64) -> Value {
    json!({
        "text": text,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })
}

/// An agent whose model is given by `--script`, with the `fs` tool granted
/// `work/` read-write as `/w`. The config must name a provider; `replay`
/// with a cassette that `--script` replaces is the offline one.
pub fn scripted_agent(dir: &Path, name: &str, limits: &str, responses: &[Value]) -> PathBuf {
    write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "{name}"
instructions = "Do exactly what the script says."
goal = "Follow the script."

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[limits]
{limits}

[[tools]]
component = "fs"
only = ["read", "write", "edit", "stat"]
dirs = ["work:/w:rw"]
"#
        ),
    );
    std::fs::create_dir_all(dir.join("work")).expect("create work/");
    let script = dir.join("script.json");
    write(&script, &json!({"responses": responses}).to_string());
    script
}

/// Every regular file under `dir`, recursively, not following symlinks.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}

/// `longhand run <dir> --script <script> --json`: what it printed and the
/// session id.
pub fn run_script(home: &Home, dir: &Path, script: &Path) -> (Ended, String) {
    let run = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]);
    let session = session_of_json(&run.stdout[0]);
    (run, session)
}

/// `longhand plan <session> --json`.
pub fn plan_json(home: &Home, session: &str) -> Value {
    let out = home.run(&["plan", session, "--json"]);
    out.expect_code(0);
    serde_json::from_str(&out.stdout[0]).expect("plan --json is one JSON object")
}

/// The events of `log` of this kind (`"task_started"`, …).
pub fn of_kind<'a>(log: &'a [EventRecord], kind: &str) -> Vec<&'a EventRecord> {
    log.iter().filter(|r| r.event.kind() == kind).collect()
}

/// A blob of the store in `home`.
pub fn blob(home: &Home, blob: &BlobRef) -> Vec<u8> {
    let home = home.path().to_owned();
    let blob = blob.clone();
    block_on(async move {
        let store = SqliteStore::open(&home).await.expect("open the store");
        store.get_blob(&blob).await.expect("blob").to_vec()
    })
}
