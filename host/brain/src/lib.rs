//! The brain: the stateless agent loop and the model providers it calls,
//! the crate `longhand-brain`. It stands on the session (`longhand-session`)
//! and the hands (`longhand-hands`) and on nothing built on it: the
//! application crate (`longhand-host`: the CLI, serve, MCP, distribution,
//! triggers, telemetry) depends on it, never the reverse.
//!
//! Its rooms, floor by floor (an import points down only):
//! - [`error`]: the errors every room names, and [`watch`], what a
//!   process may observe of every run (ground floor);
//! - [`http_client`]: the one outgoing HTTP client's TLS settings;
//! - [`memory`]: the memory bank, what outlives a session;
//! - [`model`]: the providers; [`pricing`];
//! - [`work`]: the data of long-run work — the plan and its checks, the
//!   handoff format; [`checks`]: running a check (a command in its
//!   sandbox, a tool predicate);
//! - [`agent`]: what an agent is — its file, checks, freezing, binding,
//!   skills and the one attenuation rule;
//! - [`core`]: the loop, bottom up — [`core::state`] (the pure fold and
//!   its snapshots), [`core::decide`] (every decision), `core::journal`
//!   (the one writer of the log and the state), `core::ctx` (what an
//!   executor may touch, and the `Launch` door children start through),
//!   `core::prompts` (what the model is told), then `core::act` (one
//!   executor per action family) and `core::runner` (the loop);
//! - [`services`]: what one process adds to frozen agents (providers, the
//!   memory bank, retry), below the runner;
//! - [`control`]: what reaches a session from outside while it runs or
//!   waits — the lease, the inbox controls, the approval gate and the
//!   operator's answers;
//! - [`tools`]: the one tool registry — a `Toolset` trait every source of
//!   tools implements (components in `tools::component`, the host's own
//!   tools in `host_tools`), and the `Registry` a runner calls through;
//! - [`host_tools`]: the tools the host itself serves (memory, skills,
//!   delegate), each a `Toolset`;
//! - [`launch`]: the one builder of every runner (top level, resumed,
//!   worker, delegate child, parallel task) from the frozen session.
//!
//! Outside the brain, code names this door for the loop's lifecycle
//! (`Runner`, `RunEnd`, errors, `freeze`/`bind`, `Frozen`, `load_state`)
//! and a room's own path for anything else (`brain::agent::config`,
//! `brain::work::plan`, `brain::core::state`).

pub mod agent;
pub mod checks;
pub mod control;
pub mod core;
pub mod error;
pub mod host_tools;
pub mod http_client;
pub mod launch;
pub mod memory;
pub mod model;
pub mod pricing;
pub mod services;
pub mod tools;
pub mod watch;
pub mod work;

pub use self::agent::bind::{BoundAgent, bind};
pub use self::agent::config::NAME_SEPARATOR;
pub use self::agent::freeze::freeze;
pub use self::agent::frozen::{Frozen, FrozenTool};
pub use self::control::lease::{LEASE_TTL, ttl as lease_ttl};
pub use self::core::ctx::RunEnd;
pub use self::core::journal::{Observer, SNAPSHOT_EVERY, durability_of};
pub use self::core::runner::Runner;
pub use self::error::{AgentError, LogError, MAX_GOAL_BYTES, RunError};

/// A session's state: its latest snapshot plus the events after it, folded.
pub async fn load_state(
    store: &dyn longhand_session::Store,
    session: &longhand_session::SessionId,
) -> Result<core::state::SessionState, RunError> {
    Ok(core::state::snapshot::load_state(store, session).await?)
}
