//! The brain: the stateless agent loop and the model providers it calls.

pub mod agent;
pub mod approvals;
mod bind;
pub mod briefing;
mod calls;
pub mod config;
pub mod decide;
pub mod delegate;
pub mod handoff;
mod lanes;
pub mod launch;
mod lease;
pub mod model;
pub mod plan;
pub mod pricing;
pub mod recall;
mod runner;
pub mod script;
pub mod skills;
pub mod snapshot;
pub mod state;
mod steer;
mod tasks;
mod turn;

/// Now, unix milliseconds (the loop's clock, for callers that stamp what
/// it compares against, such as an approval's expiry).
pub fn runner_now_ms() -> u64 {
    runner::now_ms()
}
