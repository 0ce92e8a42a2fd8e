//! The executors: one file per family of [`Action`](super::decide::Action),
//! each an `impl Ctx` block: an executor sees the session's context
//! (`core::ctx`) — store, hands, frozen agent, kit, inbox, lease, journal —
//! and never the runner. The runner (`core::runner`) is the only caller;
//! children start through `Ctx::launch`, never by naming the runner.
//!
//! - [`ask`]: ask a role's model for its next answer;
//! - [`dispatch`]: run the last answer's tool calls (and recover calls a
//!   crash left open, and the completion check);
//! - [`task`]: the plan and its revisions, tasks and the end of a plan;
//! - [`check`]: a task's harness checks (tool and command);
//! - [`judge`]: a task's `judge` checks;
//! - [`handoff`]: replacing a full worker context with a handoff;
//! - [`children`]: tasks run side by side in child sessions;

pub(crate) mod ask;
pub(crate) mod check;
pub(crate) mod children;
pub(crate) mod dispatch;
pub(crate) mod handoff;
pub(crate) mod judge;
pub(crate) mod task;
