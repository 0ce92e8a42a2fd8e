//! The brain: the stateless agent loop and the model providers it calls.

pub mod agent;
mod bind;
mod calls;
pub mod config;
pub mod decide;
mod lease;
pub mod model;
mod runner;
pub mod script;
pub mod snapshot;
pub mod state;
mod turn;
