//! The brain: the stateless agent loop and the model providers it calls.
//!
//! Its rooms, floor by floor (an import points down only):
//! - [`error`]: the errors every room names (ground floor);
//! - [`model`]: the providers; [`pricing`];
//! - [`work`]: the data of long-run work — the plan and its checks, the
//!   handoff format;
//! - [`agent`]: what an agent is — its file, checks, freezing, binding,
//!   skills and the one attenuation rule;
//! - [`core`]: the loop — [`core::state`] (the pure fold and its
//!   snapshots), [`core::decide`] (every decision), `core::runner` (the
//!   loop and the journal that writes the log), `core::act` (one executor
//!   per action family), `core::prompts` (what the model is told);
//! - [`control`]: what reaches a session from outside while it runs or
//!   waits — the lease, the inbox controls, the approval gate and the
//!   operator's answers;
//! - [`host_tools`]: the tools the host itself serves (memory, delegate).

pub mod agent;
pub mod control;
pub mod core;
pub mod error;
pub mod host_tools;
pub mod launch;
pub mod model;
pub mod pricing;
pub mod services;
pub mod work;

// Where these modules lived before the rooms; other modules (and code
// outside the brain) still name them here. Kept until every caller names the
// room.
pub use self::control::approvals;
use self::control::lease;
pub use self::core::prompts as briefing;
use self::core::runner;
pub use self::core::state::snapshot;
pub use self::core::{decide, state};
pub use self::host_tools::{delegate, memory as recall};
pub use self::work::{handoff, plan};

// Compatibility aliases while issue 17's rooms are merged: the modules
// moved into `agent/` and `model/`, and siblings still name them here. The
// lead removes these after the merge.
pub use agent::config;
pub use agent::skills;
#[allow(
    unused_imports,
    reason = "compatibility aliases, removed after the merge"
)]
mod bind {
    pub(crate) use super::agent::bind::*;
    pub(crate) use super::agent::config::NAME_SEPARATOR;
    pub(crate) use super::agent::freeze::*;
    pub(crate) use super::agent::frozen::*;
}
pub use model::script;

pub use agent::bind::bind;
pub use agent::freeze::freeze;
pub use agent::{BoundAgent, Frozen, FrozenTool, NAME_SEPARATOR};
pub use error::{AgentError, LogError, MAX_GOAL_BYTES, RunError};
pub use lease::{LEASE_TTL, ttl as lease_ttl};
pub use runner::{Observer, RunEnd, Runner, SNAPSHOT_EVERY, durability_of};

/// Fold a session from its latest snapshot and the events after it.
pub async fn load_state(
    store: &dyn crate::session::Store,
    session: &crate::session::SessionId,
) -> Result<state::SessionState, RunError> {
    Ok(snapshot::load_state(store, session).await?)
}

/// Now, unix milliseconds (the loop's clock, for callers that stamp what
/// it compares against, such as an approval's expiry).
pub fn runner_now_ms() -> u64 {
    runner::now_ms()
}
