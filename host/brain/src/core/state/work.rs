//! Long-run work: the plan and its revisions, task attempts, check results
//! and progress notes.

use super::roles::{JUDGE, PLANNER, WORKER};
use super::{MAX_PROGRESS_NOTES, ProgressNote, SessionState};
use crate::work::plan::{PlanState, TaskStatus};
use longhand_session::Event;

impl SessionState {
    /// Fold an event of this concern, recorded at `seq`.
    pub(super) fn fold_work(&mut self, seq: u64, event: &Event) {
        match event {
            Event::PlanCreated { plan, author } => {
                if let Ok(plan) = serde_json::from_value(plan.clone()) {
                    let mut state = PlanState::new(plan);
                    state.planner_ran = author == PLANNER;
                    self.plan = Some(state);
                }
                self.end_side_conversation(PLANNER);
            }
            Event::PlanRevised {
                plan,
                accepted,
                weakened,
                author,
                ..
            } => {
                if *accepted {
                    if let (Some(state), Ok(plan)) =
                        (&mut self.plan, serde_json::from_value(plan.clone()))
                    {
                        state.replace(plan);
                        state.revision += 1;
                        if author == PLANNER {
                            state.planner_ran = true;
                        }
                    }
                    self.end_side_conversation(PLANNER);
                } else if let Some(step) = self.answer.as_ref().map(|a| a.step) {
                    let text = format!(
                        "The revision was refused: it removes or changes checks, which this \
                         agent does not allow. Keep every existing check; you may add tasks and \
                         checks. Refused: {}",
                        weakened.join("; ")
                    );
                    self.feedback(seq, step, &text, super::Refused::Revision);
                }
            }
            Event::TaskStarted {
                task,
                briefing,
                child,
                ..
            } => {
                if let Some(plan) = &mut self.plan {
                    // A new attempt at the same task keeps what the last
                    // one changed: it is still there to judge.
                    if plan.current.as_ref() != Some(task) {
                        self.changes.clear();
                    }
                    let record = plan.tasks.entry(task.clone()).or_default();
                    record.status = Some(TaskStatus::Running);
                    record.attempts += 1;
                    record.checked.clear();
                    record.child = child.clone();
                    if child.is_some() {
                        // Its worker runs in the child session; this
                        // session's conversation is not touched.
                        return;
                    }
                    plan.current = Some(task.clone());
                }
                self.failures.clear();
                self.claim = None;
                self.start_conversation(WORKER, Some(task.clone()), None, briefing.clone());
            }
            Event::CheckFinished {
                task,
                check,
                kind,
                passed,
                detail,
                ..
            } => {
                self.keep_claim();
                if *passed {
                    self.steps_since_progress = 0;
                }
                if let Some(plan) = &mut self.plan {
                    let label = plan
                        .plan
                        .task(task)
                        .and_then(|t| t.done_when.get(*check as usize))
                        .map(|c| c.label())
                        .unwrap_or_else(|| format!("{kind} check {check}"));
                    if let Some(record) = plan.tasks.get_mut(task) {
                        if let Some(slot) = record.checks.get_mut(*check as usize) {
                            *slot = Some(*passed);
                        }
                        record.checked.insert(*check);
                    }
                    if !passed {
                        self.failures.push(format!("{label}: {detail}"));
                    }
                }
                if kind == "judge" {
                    self.end_side_conversation(JUDGE);
                }
            }
            Event::TaskFinished {
                task,
                status,
                attempts,
            } => {
                if let Some(plan) = &mut self.plan {
                    if let Some(record) = plan.tasks.get_mut(task) {
                        // A task run in a child session made its attempts
                        // there; its start here counted one of them.
                        if record.child.is_some() {
                            record.attempts += attempts.saturating_sub(1);
                        }
                        record.status = Some(if status == "done" {
                            TaskStatus::Done
                        } else {
                            TaskStatus::Failed
                        });
                    }
                    if plan.current.as_ref() == Some(task) {
                        plan.current = None;
                    }
                }
                self.reset_context();
                self.conversation = None;
            }
            Event::ProgressNoted { task, text } => {
                self.progress.push_back(ProgressNote {
                    task: task.clone(),
                    text: text.clone(),
                });
                while self.progress.len() > MAX_PROGRESS_NOTES {
                    self.progress.pop_front();
                }
            }
            _ => {}
        }
    }
}
