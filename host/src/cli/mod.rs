//! The `longhand` command line: a door, not a room.
//!
//! clap structs only parse; [`settings`] turns flags and the environment into
//! validated settings; the commands call the library; [`main`] is the one
//! place that maps errors to exit codes. Logs go to stderr (`RUST_LOG`),
//! data to stdout.

mod run;
mod settings;
mod term;
mod tool;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes, documented in README.md.
pub mod exit {
    /// The command did what was asked.
    pub const OK: u8 = 0;
    /// The tool ran and returned an error (invalid input, not found, failed,
    /// crashed).
    pub const TOOL_ERROR: u8 = 1;
    /// The command line or configuration is wrong; nothing ran.
    pub const USAGE: u8 = 2;
    /// A capability was denied or a limit was hit (including a component
    /// refused for its imports).
    pub const DENIED: u8 = 3;
}

/// An error that knows its exit code.
#[derive(Debug)]
pub struct Failure {
    /// Exit code from [`exit`].
    pub code: u8,
    /// What to tell the user.
    pub error: anyhow::Error,
}

impl Failure {
    /// A usage or configuration error.
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::USAGE,
            error: error.into(),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Self {
            code: exit::USAGE,
            error,
        }
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
    /// List sessions.
    Sessions {
        /// One JSON object per session.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's trajectory.
    Log(run::LogArgs),
}

/// Parse the command line, run it, and return the process exit code.
pub fn main() -> ExitCode {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Tool(cmd) => tool::run(cmd).await,
            Command::Run(args) => run::run(args).await,
            Command::Resume(args) => run::resume(args).await,
            Command::Sessions { json } => run::sessions(json).await,
            Command::Log(args) => run::log(args).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            // Errors can carry guest text (a describe panic, a name).
            let message = format!("{:#}", failure.error);
            eprintln!("error: {}", term::printable(&message));
            ExitCode::from(failure.code)
        }
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
