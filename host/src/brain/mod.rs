//! The brain: the stateless agent loop and the model providers it calls.

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
use agent::bind;
pub use model::script;

/// Now, unix milliseconds (the loop's clock, for callers that stamp what
/// it compares against, such as an approval's expiry).
pub fn runner_now_ms() -> u64 {
    runner::now_ms()
}
