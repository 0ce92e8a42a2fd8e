//! The agent loop's public face: freeze and bind an agent, then run a
//! session with a [`Runner`].
//!
//! The loop is split by responsibility: [`decide`](super::decide) picks the
//! next action from the folded state (pure), [`runner`](super::runner)
//! executes actions and writes events, [`turn`](super::turn) asks the model,
//! [`calls`](super::calls) runs tools, [`lease`](super::lease) keeps the
//! session held, [`snapshot`](super::snapshot) makes waking cheap, and
//! [`bind`](super::bind) turns an agent file into what a session runs with.
//! This module re-exports what callers use, under the names they have used.

pub use super::bind::{BoundAgent, Frozen, FrozenTool, NAME_SEPARATOR, bind, freeze};
pub use super::error::{AgentError, LogError, MAX_GOAL_BYTES, RunError};
pub use super::lease::{LEASE_TTL, ttl as lease_ttl};
pub use super::runner::{Observer, RunEnd, Runner, SNAPSHOT_EVERY, durability_of};

use super::state::SessionState;
use crate::session::{SessionId, Store};

/// Fold a session from its latest snapshot and the events after it.
pub async fn load_state(store: &dyn Store, session: &SessionId) -> Result<SessionState, RunError> {
    Ok(super::snapshot::load_state(store, session).await?)
}
