//! The data of long-run work: the [`plan`] (tasks, checks, their validation)
//! and the [`handoff`] format. Plain data and pure functions; nothing here
//! runs the loop.

pub mod handoff;
pub mod plan;
