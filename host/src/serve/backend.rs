//! What the server asks of the process it runs in: the operations that
//! start, steer and answer sessions the way the CLI does.
//!
//! The server reads the store, the memory bank and the folded state
//! itself (library calls); what *changes* a session goes through this
//! trait, so `longhand serve` and `longhand run | resume | pause | approve`
//! share one implementation (the CLI's, in `cli/serve.rs`) and cannot
//! drift apart.

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;

use super::error::ApiError;
use longhand_session::{Control, ControlKind, SessionId, SessionStatus};

/// `POST /api/sessions`: start a session of an agent and leave it for a
/// worker, as `longhand run <agent> --detach` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The agent file or its directory, on the server's machine.
    pub agent: PathBuf,
    /// The goal; default the agent file's.
    pub goal: Option<String>,
    /// Workers run higher priorities first. Default 0.
    pub priority: i64,
}

/// A person's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerRequest {
    /// Approve `once` or for the `session`, lapsing after `expires`
    /// (`30m`, `2h`; default never).
    Approve {
        /// `once` or `session`.
        scope: String,
        /// A duration, as `longhand approve --expires` takes it.
        expires: Option<String>,
    },
    /// Deny, telling the model why.
    Deny {
        /// Why.
        reason: String,
    },
}

/// The operations that change sessions.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Start a session and leave it for a worker; its id.
    async fn start(&self, request: StartRequest) -> Result<SessionId, ApiError>;

    /// Resume a paused (or interrupted) session, raising limits, and leave
    /// it for a worker, as `longhand resume --detach` does; its status
    /// after.
    async fn resume(
        &self,
        session: &SessionId,
        raise: BTreeMap<String, u64>,
    ) -> Result<SessionStatus, ApiError>;

    /// Post a control to the session's inbox (pause, cancel, send).
    async fn control(
        &self,
        session: &SessionId,
        kind: ControlKind,
        text: Option<String>,
    ) -> Result<Control, ApiError>;

    /// Record an answer to `request`; the session to resume after it (the
    /// root of `session`'s tree).
    async fn answer(
        &self,
        session: &SessionId,
        request: &str,
        answer: AnswerRequest,
    ) -> Result<String, ApiError>;

    /// The plan as `longhand plan --json` prints it.
    async fn plan(&self, session: &SessionId) -> Result<serde_json::Value, ApiError>;

    /// The directories whose agents [`start`](Self::start) may start
    /// (`serve --agents`), for `GET /api/agents`. Default none: a backend
    /// that starts no agent lists none.
    fn agent_roots(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}
