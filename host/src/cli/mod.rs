//! The `longhand` command line: a door, not a room.
//!
//! clap structs only parse; [`settings`] turns flags and the environment into
//! validated settings; the commands call the library and return an
//! [`Outcome`] or an error; [`exit_code`] is the one place that maps either
//! to an exit code. Logs go to stderr (`RUST_LOG`), data to stdout.

mod approvals;
mod author;
mod bundled;
mod control;
mod describe;
mod dist;
mod env;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "mcp")]
mod mcp_client;
mod memory;
mod plan;
mod progress;
mod run;
#[cfg(feature = "serve")]
mod serve;
mod settings;
pub(crate) mod term;
mod tool;
mod triggers;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::dist::DistError;
use longhand_brain::RunError;
use longhand_brain::agent::config::ConfigError;
use longhand_hands::{CallError, GrantError, LoadError, PinnedLoadError};
use longhand_session::{SessionStatus, StoreError};

/// Exit codes, documented in README.md's table. [`exit_code`] is the only
/// place that picks one.
pub mod exit {
    /// The command did what was asked; the session finished.
    pub const OK: u8 = 0;
    /// The tool ran and returned an error (invalid input, not found, failed,
    /// crashed); the session failed.
    pub const TOOL_ERROR: u8 = 1;
    /// The command line or configuration is wrong, or names something that
    /// does not exist (a session id); nothing ran.
    pub const USAGE: u8 = 2;
    /// A capability was denied or a limit was hit (including a component
    /// refused for its imports, its digest pin or its signature, a hostile
    /// registry answer, an upgrade held for review); the session paused;
    /// another worker holds the session's lease.
    pub const DENIED: u8 = 3;
    /// The session store or log is broken, or something failed that no
    /// input explains: a corrupt database or checksum chain, an I/O error,
    /// a log or store this version cannot read, a bug. Running the same
    /// command again will most likely fail the same way; a person looks.
    pub const INTERNAL: u8 = 4;
}

/// How a command that ran to its end ended. Not an error: a tool error or
/// a paused session is a result the command reports, and [`exit_code`]
/// turns it into a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command did what was asked (a listing, a description, a log, a
    /// successful tool call).
    Done,
    /// `tool call` ran the tool and it returned this error.
    ToolError(CallError),
    /// A session stopped (or was already over) with this status.
    Session(SessionStatus),
}

/// The CLI's own refusal of what it was given — a flag value, a missing
/// goal, a session id that does not parse, a tool the component lacks —
/// when no library error says it. Exit [`exit::USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A [`Usage`] error.
pub fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    Usage(message.to_string()).into()
}

/// The refusal of something this binary was built without: `what` needs
/// the cargo feature `feature` (every default build has it).
#[cfg_attr(
    all(
        feature = "serve",
        feature = "mcp",
        feature = "postgres",
        feature = "otel",
        feature = "oci"
    ),
    allow(dead_code, reason = "every optional part is built in")
)]
pub(crate) fn not_built(feature: &str, what: &str) -> anyhow::Error {
    usage(format!(
        "this longhand was built without {what} (cargo feature `{feature}`): build it with \
         `cargo build --release` (all features) or add `--features {feature}`"
    ))
}

/// The arguments of a command this build leaves out, taken as they come,
/// so that the refusal names the missing part rather than a flag.
#[cfg(not(all(feature = "serve", feature = "mcp")))]
#[derive(Debug, clap::Args)]
struct NotBuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    args: Vec<String>,
}

/// The exit code of a command's result: the one map from outcomes and
/// errors to README's table.
///
/// An error is classified by the first error in its chain (outermost
/// first, through `.context(..)`) that a row below names; the loop's
/// [`RunError`] is matched on its outer variants, the store's
/// [`StoreError`] on each. An error no row names is one the CLI did not
/// expect, so it is [`exit::INTERNAL`], never mistaken for a denial or a
/// usage error.
pub fn exit_code(result: &Result<Outcome, anyhow::Error>) -> u8 {
    match result {
        Ok(Outcome::Done) => exit::OK,
        Ok(Outcome::ToolError(e)) if e.is_denial_or_limit() => exit::DENIED,
        Ok(Outcome::ToolError(_)) => exit::TOOL_ERROR,
        Ok(Outcome::Session(status)) => match status {
            SessionStatus::Finished => exit::OK,
            SessionStatus::Failed => exit::TOOL_ERROR,
            SessionStatus::Paused => exit::DENIED,
            // The loop returns only once the session finished, failed or
            // paused; anything else is a bug in it.
            SessionStatus::Created | SessionStatus::Running => exit::INTERNAL,
        },
        Err(error) => error
            .chain()
            .find_map(code_of_cause)
            .unwrap_or(exit::INTERNAL),
    }
}

fn code_of_cause(cause: &(dyn std::error::Error + 'static)) -> Option<u8> {
    if cause.is::<Usage>() || cause.is::<ConfigError>() || cause.is::<GrantError>() {
        return Some(exit::USAGE);
    }
    if let Some(e) = cause.downcast_ref::<clap::Error>() {
        return Some(if e.use_stderr() {
            exit::USAGE
        } else {
            exit::OK
        });
    }
    if let Some(e) = cause.downcast_ref::<PinnedLoadError>() {
        return match e {
            PinnedLoadError::Mismatch { .. } => Some(exit::DENIED),
            PinnedLoadError::Load(e) => code_of_cause(e),
        };
    }
    if let Some(e) = cause.downcast_ref::<DistError>() {
        return Some(match e {
            DistError::Usage(_) => exit::USAGE,
            DistError::Refused(_) => exit::DENIED,
            DistError::Remote(_) | DistError::Io { .. } => exit::INTERNAL,
        });
    }
    if let Some(e) = cause.downcast_ref::<LoadError>() {
        return Some(match e {
            LoadError::Unsupported { .. }
            | LoadError::Installed { .. }
            | LoadError::Kept { .. } => exit::DENIED,
            LoadError::UnknownBuiltin { .. }
            | LoadError::Unbuilt { .. }
            | LoadError::Read { .. }
            | LoadError::NotComponent { .. }
            | LoadError::Link { .. }
            | LoadError::Describe { .. } => exit::USAGE,
        });
    }
    if let Some(e) = cause.downcast_ref::<RunError>() {
        return Some(match e {
            RunError::Store(e) => store_code(e),
            RunError::LeaseLost(_) => exit::DENIED,
            RunError::Agent(_) => exit::USAGE,
            RunError::Launch(longhand_brain::error::LaunchError::Memory { .. }) => exit::INTERNAL,
            RunError::Launch(_) => exit::USAGE,
            RunError::Log(_) | RunError::CancelNow(_) => exit::INTERNAL,
        });
    }
    if let Some(e) = cause.downcast_ref::<StoreError>() {
        return Some(store_code(e));
    }
    None
}

fn store_code(error: &StoreError) -> u8 {
    match error {
        StoreError::LeaseHeld { .. } | StoreError::Fenced { .. } => exit::DENIED,
        StoreError::NotFound { .. } => exit::USAGE,
        StoreError::Corrupt { .. }
        | StoreError::TooNew { .. }
        | StoreError::SeqConflict { .. }
        | StoreError::Invalid(_)
        | StoreError::Io { .. }
        | StoreError::Db { .. } => exit::INTERNAL,
    }
}

/// Longhand: long-running agents whose tools run as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "longhand", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List, describe and call tool components.
    #[command(subcommand)]
    Tool(tool::ToolCommand),
    /// Start a session of an agent and run it until it finishes or pauses.
    Run(run::RunArgs),
    /// Continue a paused or interrupted session.
    Resume(run::ResumeArgs),
    /// Ask a session to pause at its next safe point (it may be running
    /// in another process).
    Pause(control::PauseArgs),
    /// Ask a session to end at its next safe point (`--now`: at once).
    Cancel(control::CancelArgs),
    /// Put a message before a session's model at its next step.
    Send(control::SendArgs),
    /// List sessions.
    Sessions {
        /// One JSON object per session.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's trajectory, with its child sessions' events nested
    /// under the events that started them.
    Log(run::LogArgs),
    /// Show a planned session's tasks, statuses and check results.
    Plan(plan::PlanArgs),
    /// List tool calls waiting for a person's approval, across sessions.
    Approvals(approvals::ListArgs),
    /// Approve a waiting call (then `resume` the session).
    Approve(approvals::ApproveArgs),
    /// Deny a waiting call; the model is told why (then `resume`).
    Deny(approvals::DenyArgs),
    /// Run every runnable session of the store (started or resumed with
    /// `--detach`), picking up new ones as they come.
    Worker(worker::WorkerArgs),
    /// List, search, show and forget memory bank entries.
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// Trust publishers' signing keys (`trust add KEY.pub`).
    #[command(subcommand)]
    Trust(dist::TrustCommand),
    /// Serve sandboxed tools to MCP clients over stdio or Streamable HTTP.
    #[cfg(feature = "mcp")]
    Mcp(mcp::McpArgs),
    /// Serve tools to MCP clients (not in this build: cargo feature `mcp`).
    #[cfg(not(feature = "mcp"))]
    Mcp(NotBuilt),
    /// Serve the HTTP API and the web page (and run runnable sessions).
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
    /// Serve the HTTP API and the page (not in this build: cargo feature `serve`).
    #[cfg(not(feature = "serve"))]
    Serve(NotBuilt),
    /// Fire agents' timer triggers (`every`, `cron`) and run the sessions
    /// they start.
    Triggers(triggers::TriggersArgs),
}

/// Parse the command line, run it, and return the process exit code.
pub fn main() -> ExitCode {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap formats its own help and errors.
            let _ = err.print();
            return ExitCode::from(exit_code(&Err(err.into())));
        }
    };
    sigpipe_for(&cli.command);
    settings::protect_home();
    let result = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(async {
            // Refused before anything runs, like any bad configuration.
            if let Err(e) = crate::telemetry::init_from_env() {
                return Err(usage(e.to_string()));
            }
            let result = match cli.command {
                Command::Tool(cmd) => tool::run(cmd).await,
                Command::Run(args) => run::run(args).await,
                Command::Resume(args) => run::resume(args).await,
                Command::Pause(args) => control::pause(args).await,
                Command::Cancel(args) => control::cancel(args).await,
                Command::Send(args) => control::send(args).await,
                Command::Sessions { json } => run::sessions(json).await,
                Command::Log(args) => run::log(args).await,
                Command::Plan(args) => plan::plan(args).await,
                Command::Approvals(args) => approvals::list(args).await,
                Command::Approve(args) => approvals::approve(args).await,
                Command::Deny(args) => approvals::deny(args).await,
                Command::Worker(args) => worker::worker(args).await,
                Command::Memory(cmd) => memory::run(cmd),
                Command::Trust(cmd) => dist::trust(cmd),
                #[cfg(feature = "mcp")]
                Command::Mcp(args) => mcp::mcp(args).await,
                #[cfg(not(feature = "mcp"))]
                Command::Mcp(_) => Err(not_built("mcp", "the MCP server")),
                #[cfg(feature = "serve")]
                Command::Serve(args) => serve::serve(args).await,
                #[cfg(not(feature = "serve"))]
                Command::Serve(_) => Err(not_built("serve", "the HTTP API and page")),
                Command::Triggers(args) => triggers::triggers(args).await,
            };
            crate::telemetry::shutdown(std::time::Duration::from_secs(3)).await;
            result
        }),
        Err(err) => Err(anyhow::Error::new(err).context("cannot start the async runtime")),
    };
    if let Err(error) = &result {
        // Errors can carry guest text (a describe panic, a name): made
        // harmless, and cut, whatever layer forgot to bound its part.
        let message = longhand_hands::bound::cut(message_of(error), MAX_ERROR_BYTES);
        eprintln!("error: {}", term::printable(&message));
        if let Some(hint) = bundled::hint(error) {
            eprintln!("hint: {hint}");
        }
    }
    ExitCode::from(exit_code(&result))
}

/// Rust starts programs with SIGPIPE ignored, so a write to a closed pipe
/// or socket is an `EPIPE` error, not a silent death. A command whose
/// point is printing to a pipe (`longhand log … | head`) should end
/// quietly when the reader goes, as `cat` does: those get the default
/// back. Everything else keeps it ignored: servers and workers (a client
/// that hangs up must not kill them), and every command that talks to a
/// network peer (a registry, a model, a guest's host) or runs guests,
/// where a peer closing its end would otherwise kill the process with
/// exit 141 and no word. There `EPIPE` is an error like any other.
fn sigpipe_for(command: &Command) {
    let printer = match command {
        Command::Log(_) | Command::Sessions { .. } | Command::Plan(_) => true,
        Command::Approvals(_) => true,
        Command::Trust(dist::TrustCommand::List) => true,
        Command::Tool(cmd) => tool::only_prints(cmd),
        _ => false,
    };
    if printer {
        #[cfg(unix)]
        // SAFETY: called before the async runtime (or any other thread)
        // exists; setting a signal's disposition to the default has no
        // other effect.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

/// Longest error message the CLI prints, in bytes: 64 KiB. Each layer
/// bounds what it quotes (names 256 bytes, paths 4 KiB, reasons 16 KiB);
/// this is the last line of defence for one that does not.
pub const MAX_ERROR_BYTES: usize = 64 << 10;

/// The error and its causes on one line, outermost first, as `{:#}` prints
/// them, except that a cause whose text an outer layer already quoted
/// (an `#[error("…: {0}")]` that also names it as its source) is not
/// printed twice.
fn message_of(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // Colours only on a terminal: a log file or a pipe gets plain text (a
    // warning's escape codes are terminal controls like any other).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

#[cfg(test)]
mod tests {
    //! The map, row by row, on typed values; `tests/all/exit_codes.rs` runs
    //! the binary for each row of README's table.

    use super::*;

    fn code_of(error: impl Into<anyhow::Error>) -> u8 {
        exit_code(&Err(error.into()))
    }

    fn corrupt() -> StoreError {
        StoreError::Corrupt {
            seq: Some(7),
            detail: "checksum mismatch".to_owned(),
        }
    }

    #[test]
    fn outcomes_map_to_their_rows() {
        let call = |e: CallError| exit_code(&Ok(Outcome::ToolError(e)));
        let session = |s: SessionStatus| exit_code(&Ok(Outcome::Session(s)));
        assert_eq!(exit_code(&Ok(Outcome::Done)), exit::OK);
        let message = String::new;
        assert_eq!(
            call(CallError::InvalidInput { message: message() }),
            exit::TOOL_ERROR
        );
        assert_eq!(
            call(CallError::Crashed { message: message() }),
            exit::TOOL_ERROR
        );
        assert_eq!(
            call(CallError::AccessDenied {
                resource: message(),
                reason: message()
            }),
            exit::DENIED
        );
        assert_eq!(call(CallError::Limit { message: message() }), exit::DENIED);
        assert_eq!(session(SessionStatus::Finished), exit::OK);
        assert_eq!(session(SessionStatus::Failed), exit::TOOL_ERROR);
        assert_eq!(session(SessionStatus::Paused), exit::DENIED);
        assert_eq!(session(SessionStatus::Running), exit::INTERNAL);
    }

    #[test]
    fn errors_map_by_type_through_context() {
        assert_eq!(code_of(usage("no goal")), exit::USAGE);
        assert_eq!(code_of(GrantError::Limit("memory".into())), exit::USAGE);
        assert_eq!(
            code_of(LoadError::UnknownBuiltin {
                name: "x".into(),
                known: "fs".into()
            }),
            exit::USAGE
        );
        let held = StoreError::LeaseHeld {
            owner: "w".into(),
            expires_ms: 0,
            holder: String::new(),
            now_ms: 0,
        };
        assert_eq!(code_of(RunError::Store(held)), exit::DENIED);
        let fenced = StoreError::Fenced {
            token: 1,
            current: None,
        };
        assert_eq!(code_of(fenced), exit::DENIED);
        assert_eq!(code_of(RunError::Store(corrupt())), exit::INTERNAL);
        let unreadable = longhand_brain::LogError::Inconsistent("bad".into());
        assert_eq!(code_of(RunError::Log(unreadable)), exit::INTERNAL);
        let changed = longhand_brain::AgentError::Changed {
            component: "fs".into(),
            was: "sha256:0".into(),
            now: "sha256:1".into(),
        };
        assert_eq!(code_of(RunError::Agent(changed)), exit::USAGE);
        assert_eq!(code_of(RunError::LeaseLost("taken".into())), exit::DENIED);
        let missing = StoreError::NotFound {
            what: "session s-1".into(),
        };
        assert_eq!(code_of(RunError::Store(missing)), exit::USAGE);
        // Context wrapping does not hide the type.
        let wrapped = anyhow::Error::new(corrupt()).context("opening the store");
        assert_eq!(code_of(wrapped), exit::INTERNAL);
        let io = StoreError::Io {
            context: "creating the store".into(),
            source: std::io::Error::other("disk full"),
        };
        assert_eq!(code_of(io), exit::INTERNAL);
        // What no row names is not mistaken for a usage error or a denial.
        assert_eq!(code_of(anyhow::anyhow!("surprise")), exit::INTERNAL);
        assert_eq!(code_of(std::io::Error::other("eio")), exit::INTERNAL);
    }

    #[test]
    fn distribution_refusals_are_denials_and_bad_input_is_usage() {
        assert_eq!(code_of(DistError::Refused("held".into())), exit::DENIED);
        assert_eq!(code_of(DistError::Usage("bad source".into())), exit::USAGE);
        assert_eq!(
            code_of(DistError::Remote("unreachable".into())),
            exit::INTERNAL
        );
        let mismatch = PinnedLoadError::Mismatch {
            label: "greet".into(),
            expected: "sha256:0".into(),
            actual: "sha256:1".into(),
        };
        assert_eq!(code_of(mismatch), exit::DENIED);
        // A pinned load that failed for another reason keeps that reason's code.
        let unknown = PinnedLoadError::Load(LoadError::UnknownBuiltin {
            name: "x".into(),
            known: "fs".into(),
        });
        assert_eq!(code_of(unknown), exit::USAGE);
        let changed = LoadError::Installed {
            name: "greet".into(),
            reason: "changed on disk".into(),
        };
        assert_eq!(code_of(changed), exit::DENIED);
    }

    #[test]
    fn a_cause_already_quoted_is_printed_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("session store: {0}")]
        struct Quoting(#[source] StoreError);
        let error = anyhow::Error::new(Quoting(corrupt())).context("resuming");
        assert_eq!(
            message_of(&error),
            "resuming: session store: session store is corrupt: checksum mismatch"
        );
        let error = anyhow::Error::new(corrupt()).context("opening the store");
        assert_eq!(
            message_of(&error),
            "opening the store: session store is corrupt: checksum mismatch"
        );
    }

    #[test]
    fn clap_errors_are_usage_and_help_is_success() {
        let bad = Cli::try_parse_from(["longhand", "--no-such-flag"]).unwrap_err();
        assert_eq!(code_of(bad), exit::USAGE);
        let help = Cli::try_parse_from(["longhand", "--help"]).unwrap_err();
        assert_eq!(code_of(help), exit::OK);
    }
}
