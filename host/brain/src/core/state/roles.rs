//! Who a model request is for, and the names roles go by in events
//! (`model_requested.role`, `role_started.role`, `conversation.role`, a
//! plan's author). One place, so a name the fold compares against is the
//! one the executors write.

/// The worker's role name.
pub const WORKER: &str = "worker";
/// The judge's role name.
pub const JUDGE: &str = "judge";
/// The role name of a model call writing a handoff.
pub const HANDOFF_ROLE: &str = "handoff";
/// The planner's role name; also the author of a plan it wrote (the other
/// author is the operator, `plan::OPERATOR`).
pub const PLANNER: &str = "planner";

/// Who a model request is for. Recorded in `model_requested.role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Does the work: sees the goal (or its task's briefing), the history
    /// and the tools.
    Worker,
    /// Writes and revises the plan; no tools.
    Planner,
    /// Grades a task against a rubric in a fresh context; read-only tools.
    Judge,
    /// Writes the handoff that replaces a full worker context.
    Handoff,
}

impl Role {
    /// The name written in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Worker => WORKER,
            Role::Planner => PLANNER,
            Role::Judge => JUDGE,
            Role::Handoff => HANDOFF_ROLE,
        }
    }
}
