//! `exec`: run a native program the operator granted, by argv, in a
//! granted directory, and return its exit code and bounded output.
//!
//! This crate owns the tool's shape for the model — the input it reads, the
//! output it returns, the messages it gets — and nothing of the sandbox:
//! which programs may run, what they see and how long they may take are the
//! host's (`longhand:tool/process`), decided from the operator's grants. A
//! second check here could only disagree with the host's.
//!
//! No shell is involved: `argv` is run as given. A pipeline needs `sh`
//! granted as a program, which the operator then chose.

use longhand_sdk::process::{self, Command};
use longhand_sdk::{Effect, Tool, ToolError, parse_timeout};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a command runs when the input names no directory: where `fs`
/// puts relative paths.
const WORKSPACE: &str = "/workspace";

fn workspace() -> String {
    WORKSPACE.to_owned()
}

/// Input of `run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunInput {
    /// The program and its arguments, e.g. `["cargo", "test", "--offline"]`.
    /// No shell: each element is one argument as given. The first names a
    /// program the operator granted.
    #[schemars(length(min = 1, max = 4096))]
    argv: Vec<String>,
    /// The working directory, a path inside a granted directory. Default
    /// `/workspace`.
    #[serde(default = "workspace")]
    cwd: String,
    /// Text given on standard input. Default: none (empty).
    #[serde(default)]
    stdin: Option<String>,
    /// Wall-clock limit, e.g. `30s`, `2m`, `500ms`; at most what the
    /// operator allows a call. Default: what the operator allows a call.
    #[serde(default)]
    timeout: Option<String>,
}

/// How much of each stream was left out.
#[derive(Debug, Serialize)]
pub(crate) struct Truncated {
    /// Bytes of standard output left out of `stdout`.
    stdout: u64,
    /// Bytes of standard error left out of `stderr`.
    stderr: u64,
}

/// Where a cut stream was saved whole.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Saved {
    /// The file holding all of standard output, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout: Option<String>,
    /// The file holding all of standard error, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    stderr: Option<String>,
}

impl Saved {
    fn is_empty(&self) -> bool {
        self.stdout.is_none() && self.stderr.is_none()
    }
}

/// Output of `run`.
#[derive(Debug, Serialize)]
pub(crate) struct RunOutput {
    /// The exit code; `null` when a signal or a limit ended the program.
    exit_code: Option<i32>,
    /// Standard output: all of it, or its head and tail.
    stdout: String,
    /// Standard error: all of it, or its head and tail.
    stderr: String,
    duration_ms: u64,
    /// Bytes cut from each stream (0 when nothing was).
    truncated: Truncated,
    /// Where a cut stream was saved whole (a file in a read-write
    /// directory; read it with the file tools).
    #[serde(skip_serializing_if = "Saved::is_empty")]
    saved: Saved,
    /// The signal that ended the program, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    /// Limits the run reached: `wall`, `cpu`, `file-size`, `output`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    limits_hit: Vec<String>,
}

/// `run`: one program, to its end or its limits.
pub(crate) struct Run;

impl Tool for Run {
    const NAME: &'static str = "run";
    const DESCRIPTION: &'static str = "Run a program the operator granted, e.g. \
        {\"argv\": [\"cargo\", \"test\", \"--offline\"], \"cwd\": \"/workspace\"}. No shell: \
        argv is run as given. The program sees only the granted directories, at the same \
        paths as the file tools, and no network. Returns the exit code and stdout/stderr \
        (long output keeps its head and tail; `truncated` counts what was cut). A non-zero \
        exit code is a result, not an error.";
    // It can change the granted directories; the host treats it as
    // read-only when none is granted read-write.
    const EFFECT: Effect = Effect::Writes;
    type Input = RunInput;
    type Output = RunOutput;

    fn call(input: RunInput) -> Result<RunOutput, ToolError> {
        if input.argv.first().is_none_or(String::is_empty) {
            return Err(ToolError::invalid_input(
                "`argv` must start with the program to run, e.g. [\"cargo\", \"test\"]",
            ));
        }
        if let Some(i) = input.argv.iter().position(|a| a.contains('\0')) {
            return Err(ToolError::invalid_input(format!(
                "`argv[{i}]` contains a NUL character"
            )));
        }
        let timeout = input.timeout.as_deref().map(parse_timeout).transpose()?;
        let outcome = process::run(&Command {
            argv: input.argv,
            cwd: input.cwd,
            stdin: input.stdin.map(String::into_bytes),
            timeout,
        })?;
        Ok(RunOutput {
            exit_code: outcome.exit_code,
            truncated: Truncated {
                stdout: outcome.stdout.cut_bytes,
                stderr: outcome.stderr.cut_bytes,
            },
            saved: Saved {
                stdout: outcome.stdout.saved_to.clone(),
                stderr: outcome.stderr.saved_to.clone(),
            },
            stdout: outcome.stdout.text,
            stderr: outcome.stderr.text,
            duration_ms: outcome.duration_ms,
            signal: outcome.signal,
            limits_hit: outcome.limits_hit,
        })
    }
}

longhand_sdk::export! {
    name: "exec",
    description: "Run granted native programs (a test suite, a build, git) inside the directories the operator maps in, with no network.",
    tools: [Run],
    requests: {
        dirs: [("/workspace", read_write, "the project the programs run in")],
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_argv_is_refused_before_anything_runs() {
        let input = RunInput {
            argv: vec![String::new()],
            cwd: workspace(),
            stdin: None,
            timeout: None,
        };
        assert!(matches!(Run::call(input), Err(ToolError::InvalidInput(_))));
    }

    #[test]
    fn off_wasm_nothing_runs() {
        let input = RunInput {
            argv: vec!["true".into()],
            cwd: workspace(),
            stdin: None,
            timeout: None,
        };
        assert!(matches!(
            Run::call(input),
            Err(ToolError::AccessDenied { .. })
        ));
    }
}
