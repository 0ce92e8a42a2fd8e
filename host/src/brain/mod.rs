//! The brain: the stateless agent loop and the model providers it calls.
//!
//! Its door: a [`Runner`] runs a session of an agent [`freeze`]d and
//! [`bind`]ed from its file; [`load_state`] folds a session's log. Rooms:
//! `agent/` (what an agent is: its file, freezing, binding, skills, the
//! attenuation rule) and `model/` (the providers), below the loop's files
//! here.

pub mod agent;
pub mod approvals;
pub mod briefing;
mod calls;
pub mod decide;
pub mod delegate;
pub mod handoff;
mod lanes;
mod lease;
pub mod model;
pub mod plan;
pub mod pricing;
pub mod recall;
mod runner;
pub mod snapshot;
pub mod state;
mod steer;
mod tasks;
mod turn;

// Compatibility aliases while issue 17's rooms are merged: the modules
// moved into `agent/` and `model/`, and siblings still name them here. The
// lead removes these after the merge.
pub use agent::config;
pub use agent::skills;
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
pub use lease::{LEASE_TTL, ttl as lease_ttl};
pub use runner::{
    AgentError, LogError, MAX_GOAL_BYTES, Observer, RunEnd, RunError, Runner, SNAPSHOT_EVERY,
    durability_of,
};

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
