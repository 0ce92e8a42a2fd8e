//! The brain's errors: what stops the loop ([`RunError`]), why an agent
//! cannot be assembled ([`AgentError`]), why a runner's services cannot be
//! built ([`LaunchError`]), and what in a log this version cannot read
//! ([`LogError`]); plus the two small constructors every
//! executor uses, and the JSON shape of an error a host tool hands the model.
//!
//! This module sits on the brain's ground floor: it imports nothing from the
//! brain but the model's own error types (`model::error`, the cassette's),
//! so every other module can name these errors without a cycle.
//! Tool and model failures are *not* here: they are recorded in the log and
//! handed to the model or pause the session.

use std::path::PathBuf;

use serde_json::{Value, json};

use longhand_session::StoreError;

/// The longest goal a session accepts, in bytes (64 KiB). The goal is sent
/// in every request and stored inline in `goal_set`; a longer text belongs
/// in a file the agent's tools can read.
pub const MAX_GOAL_BYTES: usize = 64 * 1024;

/// Errors that stop the loop. Tool and model failures are *not* here: they
/// are recorded and handed to the model or pause the session.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The session store refused or failed (fenced by another writer,
    /// lease lost, I/O). Abort: another worker may own the session now.
    #[error("session store: {0}")]
    Store(#[from] StoreError),
    /// The heartbeat could not keep the lease: another worker took the
    /// session, or the store refused renewals until it ran out. The step in
    /// flight was abandoned.
    #[error("lost the session's lease: {0}")]
    LeaseLost(String),
    /// The agent cannot be assembled (component missing or changed, bad
    /// grant). Fix the configuration.
    #[error("agent: {0}")]
    Agent(#[from] AgentError),
    /// The log holds something this version cannot read. Report it.
    #[error("session log: {0}")]
    Log(#[from] LogError),
    /// A model's provider or the memory bank cannot be set up (see
    /// `brain::launch`). Fix the configuration or the environment.
    #[error("{0}")]
    Launch(#[from] LaunchError),
    /// Internal to `run`: a `cancel --now` arrived and the step in flight
    /// was dropped; `run` records it and returns the end, never this.
    #[error("cancelled now")]
    CancelNow(Box<longhand_session::inbox::Control>),
}

/// Why a runner's services cannot be built. Nothing has run.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The agent names no model (no `[model]`) and no flag gave it one.
    #[error(transparent)]
    NoModel(crate::model::provider::BuildError),
    /// A model's provider cannot be built (no key for a public API, a
    /// cassette or script that cannot be read…).
    #[error("model {model}: {source}")]
    Provider {
        /// `provider/model`.
        model: String,
        /// Why.
        source: crate::model::provider::BuildError,
    },
    /// The `--record` cassette cannot be opened.
    #[error("--record {}: {source}", path.display())]
    Record {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::model::replay::CassetteError,
    },
    /// `[memory]` names scopes but this process has no data directory.
    #[error(
        "cannot find a data directory for the memory bank: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)"
    )]
    NoDataDir,
    /// The memory bank cannot be opened.
    #[error("opening the memory bank {}: {source}", path.display())]
    Memory {
        /// The bank's file.
        path: PathBuf,
        /// Why.
        source: crate::memory::MemoryError,
    },
}

/// A component as an agent file names it, as an error shows it: cut to a
/// path's length, since the file may say anything.
fn shown(component: &str) -> std::borrow::Cow<'_, str> {
    longhand_hands::bound::cut_str(component, longhand_hands::bound::MAX_PATH_BYTES)
}

/// Why an agent cannot be frozen or bound. Nothing has run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The instructions cannot be read.
    #[error("instructions: {0}")]
    Instructions(String),
    /// The goal is longer than [`MAX_GOAL_BYTES`].
    #[error(
        "the goal is {bytes} bytes; at most {MAX_GOAL_BYTES} are accepted — put long material \
         in a file the agent's tools can read and name it in the goal"
    )]
    GoalTooLong {
        /// Its length.
        bytes: usize,
    },
    /// A `{run}` directory cannot be created.
    #[error("cannot create the run directory {path}: {source}")]
    RunDir {
        /// The directory, as written with `{run}` filled in.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A component cannot be loaded (missing, not a component, refused for
    /// its imports…).
    #[error("{0}")]
    Load(#[from] longhand_hands::LoadError),
    /// The plan file is invalid or names what the agent does not have.
    #[error("{0}")]
    Plan(String),
    /// An `[[mcp]]` server cannot be granted, started or listed.
    #[error("{0}")]
    Mcp(String),
    /// `only` names a tool the component does not offer.
    #[error(
        "tool {}: `only` names `{}`, which this component does not offer; it offers: {offered}",
        shown(.component),
        longhand_hands::bound::name(.name)
    )]
    UnknownTool {
        /// The component as configured.
        component: String,
        /// The name that is not offered.
        name: String,
        /// What it offers, comma-separated.
        offered: String,
    },
    /// `effects` does not fit the component: it exports the longhand:tool
    /// world (and declares its own effects), or a name it gives is not one
    /// of the component's tools. The operator fixes the agent file.
    #[error("tool {}: `effects`: {reason}", shown(.component))]
    Effects {
        /// The component as configured.
        component: String,
        /// What is wrong, naming the key.
        reason: String,
    },
    /// A grant is invalid (an unset variable, a bad directory, a bad limit).
    #[error("tool {}: {source}", shown(.component))]
    Grant {
        /// The component as configured.
        component: String,
        /// Why.
        source: longhand_hands::GrantError,
    },
    /// The component's binary is not the one the session was started with.
    #[error(
        "component {} changed since the session started (was {was}, now {now}); its grants are \
         not carried over to a different binary",
        shown(.component)
    )]
    Changed {
        /// The component as configured.
        component: String,
        /// The digest frozen into the session.
        was: String,
        /// The digest found now.
        now: String,
    },
    /// The component is not the one its `digest` (or `longhand.lock`) pins.
    /// Refused before it was compiled or cached.
    #[error("tool {}: {reason}", shown(.component))]
    Pinned {
        /// The component as configured.
        component: String,
        /// The pinned and the found digest, and what to do.
        reason: String,
    },
}

/// What in a session's log this version cannot read or write.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A stored JSON value (a blob or the frozen agent) does not decode,
    /// or a value cannot be encoded.
    #[error("{what}: {source}")]
    Json {
        /// Which value.
        what: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// The agent frozen into `session_created` does not read as one this
    /// version knows.
    #[error(
        "the agent frozen into this session does not read as one this version of Longhand \
         knows ({0}); wake it with the version that started it"
    )]
    Agent(String),
    /// The log's events contradict each other (an event names what the
    /// log does not hold).
    #[error("{0}")]
    Inconsistent(String),
    /// An append task stopped without an answer (it panicked or was
    /// cancelled).
    #[error("an append task failed: {0}")]
    Task(String),
}

/// A JSON error about `what` as a [`RunError`].
pub(crate) fn json_error(what: &'static str) -> impl Fn(serde_json::Error) -> RunError {
    move |source| RunError::Log(LogError::Json { what, source })
}

/// The log contradicts itself about `what`: a [`LogError::Inconsistent`].
pub(crate) fn inconsistent(what: &str) -> RunError {
    RunError::Log(LogError::Inconsistent(what.to_owned()))
}

/// The JSON a host tool (memory, delegate, skills) answers the model with
/// when a call cannot be done: `{"error": {"kind", "message"}}`, the shape
/// component tools' errors have, so the model reads one format.
pub(crate) fn tool_error(kind: &str, message: impl Into<String>) -> Value {
    json!({"error": {"kind": kind, "message": message.into()}})
}
