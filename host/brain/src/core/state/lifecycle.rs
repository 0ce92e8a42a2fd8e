//! The session's lifecycle and budget: creation (the frozen agent and its
//! context budget), the goal, pauses and resumes (raised limits, the
//! breaker's reset), the end, snapshots, and the budget handed to children.

use super::{DEFAULT_CONTEXT_TOKENS, FrozenAgent, SessionState};
use crate::work::plan::TaskStatus;
use longhand_session::{Event, ResumeCause};

impl SessionState {
    /// Fold an event of the session's lifecycle.
    pub(super) fn fold_lifecycle(&mut self, event: &Event) {
        match event {
            Event::SessionCreated {
                agent_name,
                agent,
                config_digest,
            } => {
                self.agent_name = agent_name.clone();
                (self.agent, self.agent_unreadable) = match FrozenAgent::read(agent) {
                    Ok(frozen) => (Some(frozen), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                self.config_digest = config_digest.clone();
                self.context_tokens = agent
                    .pointer("/limits/context_tokens")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(DEFAULT_CONTEXT_TOKENS);
            }
            Event::GoalSet { goal } => self.goal = Some(goal.clone()),
            Event::ChildStarted {
                call_id,
                child,
                slice,
                ..
            } => {
                self.children.insert(call_id.clone(), child.clone());
                for (name, amount) in slice {
                    *self.reserved.entry(name.clone()).or_default() += amount;
                }
            }
            Event::Delegated { parent, .. } => self.parent = Some(parent.clone()),
            Event::Paused { reason } => {
                self.pause = Some(reason.clone());
                // A pause answers whatever asked for one: a `pause`
                // control, a model request given up on, a planner refused
                // too often; after a resume each is tried again. A
                // `cancel` stands until the session ends.
                if self.stop_asked.as_ref().is_some_and(|s| !s.cancel) {
                    self.stop_asked = None;
                }
                if let Some(p) = &mut self.pending_request {
                    p.gave_up = None;
                }
                if let Some(c) = &mut self.conversation {
                    c.refused = None;
                }
            }
            Event::Resumed { raised, cause, .. } => {
                self.pause = None;
                // An operator's resume answers the pauses posted before it
                // (`steer` records them as superseded); never a cancel.
                if *cause == ResumeCause::Operator
                    && self.stop_asked.as_ref().is_some_and(|s| !s.cancel)
                {
                    self.stop_asked = None;
                }
                for (k, v) in raised {
                    self.raised.insert(k.clone(), *v);
                }
                // The operator set the window: it replaces what an
                // overflow taught, and the history is fitted to it now.
                if let Some(tokens) = raised.get("context_tokens") {
                    self.context_tokens = *tokens;
                    self.context_cap = None;
                    self.trim_history();
                }
                // A person looked at it: the breaker starts counting afresh.
                // A worker recovering from a crash is not a person.
                if *cause == ResumeCause::Operator {
                    self.consecutive_failures = 0;
                    self.repeated_failures.clear();
                    self.steps_since_progress = 0;
                    // A failed task paused the session for a person, who
                    // has looked: it gets a fresh set of attempts.
                    if let Some(plan) = &mut self.plan {
                        for record in plan.tasks.values_mut() {
                            if record.status == Some(TaskStatus::Failed) {
                                record.fresh_set();
                            }
                        }
                    }
                }
            }
            Event::Finished {
                summary,
                summary_blob,
            } => {
                self.pause = None;
                self.summary = summary.clone();
                self.summary_blob = summary_blob.clone();
            }
            Event::Failed { error } => self.error = Some(error.clone()),
            Event::Snapshot { .. } => self.since_snapshot = 0,
            _ => {}
        }
    }
}
