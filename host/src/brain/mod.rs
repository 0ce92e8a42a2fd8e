//! The brain: the stateless agent loop and the model providers it calls.

pub mod agent;
mod bind;
pub mod briefing;
mod calls;
pub mod config;
pub mod decide;
pub mod handoff;
mod lanes;
mod lease;
pub mod model;
pub mod plan;
pub mod recall;
mod runner;
pub mod script;
pub mod snapshot;
pub mod state;
mod tasks;
mod turn;
