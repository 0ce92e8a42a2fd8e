//! Run a native program the operator granted, inside the tool's grants.
//!
//! A thin wrapper over the `longhand:tool/process` import. The host runs
//! only programs granted to this tool (`programs = ["cargo"]`), seeing only
//! the tool's granted directories at their guest paths, with no network and
//! with every limit the operator set: the tool decides *what* to run, never
//! *where* or *with what access*.
//!
//! ```no_run
//! use longhand_sdk::process::{self, Command};
//!
//! # fn main() -> Result<(), longhand_sdk::ToolError> {
//! let outcome = process::run(&Command::new(["cargo", "test", "--offline"], "/workspace"))?;
//! if outcome.exit_code != Some(0) {
//!     println!("{}", outcome.stderr.text);
//! }
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use crate::ToolError;
use crate::bindings::longhand::tool::process as wit;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program and its arguments; `argv[0]` names a granted program.
    pub argv: Vec<String>,
    /// The working directory, a guest path inside a granted directory.
    pub cwd: String,
    /// Bytes given on standard input. Default none (empty).
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit, at most what is left of the call. Default none
    /// (what is left of the call).
    pub timeout: Option<Duration>,
}

impl Command {
    /// `argv` in `cwd`, with no input and the call's time.
    pub fn new<S: Into<String>>(argv: impl IntoIterator<Item = S>, cwd: impl Into<String>) -> Self {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            stdin: None,
            timeout: None,
        }
    }
}

/// One output stream as kept by the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// All of it, or its head and tail around a line saying what was cut.
    pub text: String,
    /// Bytes the program wrote.
    pub total_bytes: u64,
    /// Bytes left out of `text`.
    pub cut_bytes: u64,
    /// Where the whole stream was saved (a guest path in a read-write
    /// grant), when bytes were cut and such a grant exists.
    pub saved_to: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code, when the program exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Standard output.
    pub stdout: Output,
    /// Standard error.
    pub stderr: Output,
    /// How long it ran.
    pub duration_ms: u64,
    /// Limits it reached: `wall`, `cpu`, `file-size`, `output`.
    pub limits_hit: Vec<String>,
}

impl From<wit::Output> for Output {
    fn from(o: wit::Output) -> Self {
        Self {
            text: o.text,
            total_bytes: o.total_bytes,
            cut_bytes: o.cut_bytes,
            saved_to: o.saved_to,
        }
    }
}

/// Run `command` to its end or its limits. `Err` means it did not start
/// (a program or directory not granted, a malformed command, a host that
/// cannot confine it); a program that ran and failed is an `Ok` with its
/// exit code.
///
/// Off wasm32 there is no host: every run is refused, so a tool's native
/// unit tests see the same error a tool granted no program sees.
pub fn run(command: &Command) -> Result<Outcome, ToolError> {
    if !cfg!(target_arch = "wasm32") {
        return Err(ToolError::access_denied(
            command.argv.first().map_or("", String::as_str),
            "no host to run programs outside a component",
        ));
    }
    let timeout_ms = command
        .timeout
        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    let outcome = wit::run(&wit::Command {
        argv: command.argv.clone(),
        cwd: command.cwd.clone(),
        stdin: command.stdin.clone(),
        timeout_ms,
    })?;
    Ok(Outcome {
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        stdout: outcome.stdout.into(),
        stderr: outcome.stderr.into(),
        duration_ms: outcome.duration_ms,
        limits_hit: outcome.limits_hit,
    })
}
