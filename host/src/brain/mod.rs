//! The brain: the stateless agent loop and the model providers it calls.

pub mod agent;
pub mod config;
pub mod model;
pub mod script;
pub mod state;
