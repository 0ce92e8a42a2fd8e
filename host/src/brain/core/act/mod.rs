//! The executors: one file per family of [`Action`](super::decide::Action).
//! The runner (`core::runner`) is the only caller; an executor never calls
//! another.
//!
//! - [`ask`]: ask a role's model for its next answer;
//! - [`dispatch`]: run the last answer's tool calls (and recover calls a
//!   crash left open, and the completion check);
//! - [`task`]: the plan, tasks, harness checks, the judge and handoffs;
//! - [`children`]: tasks run side by side in child sessions.

pub(in crate::brain) mod ask;
pub(in crate::brain) mod children;
pub(in crate::brain) mod dispatch;
pub(in crate::brain) mod task;
