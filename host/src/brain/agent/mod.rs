//! What an agent is: the agent file's types ([`config`]) and their checks
//! (`check`), the [`Frozen`] agent a session records ([`frozen`]),
//! freezing an agent file into one ([`freeze`]), binding one to loaded and
//! granted tools ([`bind`](fn@bind)), skills, their front matter and
//! their host tool ([`skills`], `frontmatter`, `skill_tool`), and the one attenuation rule a child, a
//! skill or a parallel task is held to ([`attenuation`]).
//!
//! This room describes and prepares an agent; it must not run one: it
//! writes no session event, calls no model and decides nothing about a
//! session's next step (that is the loop's, which imports this room, never
//! the reverse — the loop's error types are the one thing it borrows until
//! they move below both). Model settings are `model/`'s ([`ModelConfig`]),
//! read here.
//!
//! [`ModelConfig`]: crate::brain::model::ModelConfig

pub mod attenuation;
pub(crate) mod bind;
mod check;
pub mod config;
pub(crate) mod freeze;
mod frontmatter;
pub mod frozen;
mod skill_tool;
pub mod skills;

pub use bind::{BoundAgent, bind};
pub use config::NAME_SEPARATOR;
pub use freeze::freeze;
pub use frozen::{Frozen, FrozenTool};

// Compatibility while issue 17's rooms are merged: callers outside the
// brain name the runner's items as `brain::agent::X`, as when this module
// was the loop's re-export facade. They now live at the brain's door
// (`brain::Runner`, `brain::load_state`…); the lead points the callers
// there and removes these.
pub use super::{
    AgentError, LEASE_TTL, LogError, MAX_GOAL_BYTES, Observer, RunEnd, RunError, Runner,
    SNAPSHOT_EVERY, durability_of, lease_ttl, load_state,
};
