//! The data of long-run work: the [`plan`] (tasks, checks, their validation)
//! and the [`handoff`] format. Plain data and pure functions, but for
//! [`plan::predicate_errors`], which compiles a plan's jq checks in the tool
//! host's sandbox; nothing here runs the loop. It sits below `agent/` and
//! the loop, and imports neither.

pub mod handoff;
pub mod plan;
