//! Tasks side by side (`[plan] max_parallel_tasks` > 1): each ready task
//! runs in a **child session** of its own — its own log, lease, worker,
//! checks, judge and handoffs, a one-task plan with the same agent — while
//! the parent schedules waves of up to `max_parallel_tasks` children and
//! records what each one ended with.
//!
//! Crash safety follows from the two logs. A child is created (and its
//! goal written) before the parent's `task_started` names it: a crash in
//! between leaves a child nobody names, which never runs; after it, the
//! parent's log says which child is the task's, and a resumed parent wakes
//! that child, which carries on from its own log. Nothing is run twice.

use std::future::Future;
use std::pin::Pin;

use super::bind::FrozenPlan;
use super::config::PlannerMode;
use super::plan::{Plan, TaskStatus};
use super::runner::{LogError, RunEnd, RunError, Runner};
use crate::session::{Event, PauseKind, PauseReason, SessionId, SessionStatus};

impl<'h> Runner<'h> {
    /// Create the child session of `task_id` and record it.
    pub(super) async fn start_child(&mut self, task_id: String) -> Result<(), RunError> {
        let Some(plan) = &self.state.plan else {
            return Err(inconsistent("a child task starts but there is no plan"));
        };
        let Some(task) = plan.plan.task(&task_id) else {
            return Err(inconsistent(&format!("task {task_id} is not in the plan")));
        };
        let attempt = plan.tasks.get(&task_id).map_or(0, |r| r.attempts) + 1;
        let mut own = task.clone();
        // Its dependencies are done; the child's plan is this task alone.
        own.depends_on.clear();
        let mut agent = self.agent.clone();
        if let Some(parent) = &self.agent.frozen.plan {
            let mut config = parent.config.clone();
            config.planner = Some(PlannerMode::Off);
            config.max_parallel_tasks = 1;
            agent.frozen.plan = Some(FrozenPlan {
                config,
                operator: Some(Plan { tasks: vec![own] }),
            });
        }
        let goal = self.state.goal.clone().unwrap_or_default();
        let owner = self.lease.owner.clone();
        let child = Runner::start(
            self.store.clone(),
            self.hands,
            agent,
            self.provider.clone(),
            &goal,
            &owner,
        )
        .await?;
        let child_id = child.session().as_str().to_owned();
        // It runs when the parent awaits it, woken from its log.
        child.release().await;
        let note = format!("Task {task_id} runs in the child session {child_id}.");
        let briefing = self.put(note.into_bytes());
        self.write(vec![Event::TaskStarted {
            task: task_id,
            attempt,
            briefing,
            memories: Vec::new(),
            child: Some(child_id),
        }])
        .await
    }

    /// Run every running task's child session until it ends, side by side,
    /// then record each: its checks' results, and the task done or failed —
    /// or, for a child that paused, this session paused too.
    ///
    /// Boxed as a `Send` future: a child's run is a run, whose future holds
    /// this one, and a type cannot contain itself.
    pub(super) fn await_children(
        &mut self,
        children: Vec<(String, String)>,
    ) -> Pin<Box<dyn Future<Output = Result<(), RunError>> + Send + '_>> {
        Box::pin(self.await_children_inner(children))
    }

    async fn await_children_inner(
        &mut self,
        children: Vec<(String, String)>,
    ) -> Result<(), RunError> {
        let mut runners = Vec::new();
        for (_, child) in &children {
            let id: SessionId = child.parse().map_err(|_| {
                inconsistent(&format!("the child session id {child} does not parse"))
            })?;
            let frozen = Runner::frozen_of(self.store.as_ref(), &id).await?;
            let mut agent = self.agent.clone();
            agent.frozen = frozen;
            let mut runner = Runner::wake(
                self.store.clone(),
                self.hands,
                agent,
                self.provider.clone(),
                id,
                &self.lease.owner,
            )
            .await?;
            runner.role_providers = self.role_providers.clone();
            runner.memory = self.memory.clone();
            runner.retry = self.retry.clone();
            // The parent runs because someone let it go on: a child that
            // paused (and paused the parent) goes on with it.
            if runner.state.status == SessionStatus::Paused {
                runner.resume(Default::default()).await?;
            }
            runners.push(runner);
        }
        let ends = {
            type Run<'r> = Pin<Box<dyn Future<Output = Result<RunEnd, RunError>> + Send + 'r>>;
            let runs: Vec<Run<'_>> = runners
                .iter_mut()
                .map(|runner| -> Run<'_> { Box::pin(runner.run()) })
                .collect();
            futures_util::future::join_all(runs).await
        };
        let mut events = Vec::new();
        let mut paused = Vec::new();
        for ((task, child), (end, runner)) in
            children.into_iter().zip(ends.into_iter().zip(&runners))
        {
            let end = end?;
            let record = runner
                .state
                .plan
                .as_ref()
                .and_then(|p| p.tasks.get(&task).cloned())
                .unwrap_or_default();
            let kinds: Vec<&'static str> = self
                .state
                .plan
                .as_ref()
                .and_then(|p| p.plan.task(&task))
                .map(|t| t.done_when.iter().map(|c| c.kind()).collect())
                .unwrap_or_default();
            for (i, result) in record.checks.iter().enumerate() {
                if let (Some(passed), Some(kind)) = (result, kinds.get(i)) {
                    events.push(Event::CheckFinished {
                        task: task.clone(),
                        check: i as u32,
                        kind: (*kind).to_owned(),
                        passed: *passed,
                        detail: format!("in the child session {child}"),
                        output: None,
                        confinement: None,
                    });
                }
            }
            let done = record.status == Some(TaskStatus::Done);
            match end.status {
                SessionStatus::Paused => {
                    paused.push(format!(
                        "task {task} (session {child}) paused: {}",
                        end.detail.unwrap_or_default()
                    ));
                    continue;
                }
                SessionStatus::Finished | SessionStatus::Failed => {}
                SessionStatus::Created | SessionStatus::Running => {
                    return Err(inconsistent(&format!(
                        "the child session {child} returned while {}",
                        end.status
                    )));
                }
            }
            let status = if done { "done" } else { "failed" };
            events.push(Event::TaskFinished {
                task: task.clone(),
                status: status.to_owned(),
                attempts: record.attempts.max(1),
            });
            events.push(Event::ProgressNoted {
                task: task.clone(),
                text: super::briefing::cut(
                    &format!(
                        "{task}: {status} in the child session {child} after {} attempt(s){}",
                        record.attempts,
                        end.detail
                            .map(|d| format!(". {}", super::briefing::cut(&d, 600)))
                            .unwrap_or_default()
                    ),
                    crate::session::event::MAX_INLINE_TEXT - 8,
                ),
            });
        }
        drop(runners);
        if !paused.is_empty() {
            events.push(Event::Paused {
                reason: PauseReason {
                    kind: PauseKind::Plan,
                    limit: None,
                    detail: format!(
                        "{}; `longhand resume` this session to go on (its paused children go on \
                         with it)",
                        paused.join("; ")
                    ),
                },
            });
        }
        self.write(events).await
    }

    /// Give up this runner's lease without running.
    pub(super) async fn release(self) {
        let _ = self.store.release(&self.lease).await;
    }
}

fn inconsistent(what: &str) -> RunError {
    RunError::Log(LogError::Inconsistent(what.to_owned()))
}
