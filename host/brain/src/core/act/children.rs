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

use crate::agent::attenuation::{Capabilities, covers};
use crate::agent::config::PlannerMode;
use crate::agent::frozen::FrozenPlan;
use crate::core::ctx::{BindChild, Child, Ctx, RunEnd};
use crate::error::{RunError, inconsistent};
use crate::work::plan::{Plan, TaskStatus};
use longhand_session::{Event, PauseKind, PauseReason, SessionId, SessionStatus};

/// A child session's run: it owns the child and gives it back with the
/// end, so children can be added while others run.
type ChildRun<'h> = Pin<
    Box<
        dyn Future<
                Output = (
                    String,
                    String,
                    Box<dyn Child + 'h>,
                    Result<RunEnd, RunError>,
                ),
            > + Send
            + 'h,
    >,
>;

impl<'h> Ctx<'h> {
    /// Create the child session of `task_id` and record it.
    pub(crate) async fn start_child(&mut self, task_id: String) -> Result<(), RunError> {
        let Some(plan) = &self.journal.state.plan else {
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
        let goal = self.journal.state.goal.clone().unwrap_or_default();
        let child = self
            .launch
            .start(self.parent(), agent, &goal, Vec::new())
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

    /// Run the running tasks' child sessions side by side, as a pool: when
    /// one ends, its result is recorded — the checks' results, the task done
    /// or failed — and the decision table is asked again, so a task that
    /// became ready starts at once in the freed slot while the others go on.
    /// Returns when no child is running: all ended, or no new one may start
    /// (a limit, a paused child — then this session pauses too, once the
    /// others have ended).
    ///
    /// Boxed as a `Send` future: a child's run is a run, whose future holds
    /// this one, and a type cannot contain itself.
    pub(crate) fn await_children(
        &mut self,
        children: Vec<(String, String)>,
    ) -> Pin<Box<dyn Future<Output = Result<(), RunError>> + Send + '_>> {
        Box::pin(self.await_children_inner(children))
    }

    async fn await_children_inner(
        &mut self,
        children: Vec<(String, String)>,
    ) -> Result<(), RunError> {
        use futures_util::StreamExt;
        let mut pool = futures_util::stream::FuturesUnordered::new();
        for (task, child) in children {
            // Awaited before `push`: the pool is not `Sync`, so no
            // reference to it may be held across an await.
            let run = self.child_run(task, child).await?;
            pool.push(run);
        }
        let mut paused = Vec::new();
        while let Some((task, child, runner, end)) = pool.next().await {
            let end = end?;
            if let Some(note) = self
                .record_child(&task, &child, runner.as_ref(), end)
                .await?
            {
                paused.push(note);
            }
            drop(runner);
            // A freed slot: start what is ready now, unless a child paused
            // (the session will pause once the others end).
            while paused.is_empty() {
                // The loop's own decision, with the loop's own policy: the
                // pool keeps its children running while it asks.
                let decision = crate::core::decide::next(&self.journal.state, self.policy());
                let crate::core::decide::Action::StartChild(next) = decision else {
                    break;
                };
                self.start_child(next.clone()).await?;
                let child = self
                    .journal
                    .state
                    .plan
                    .as_ref()
                    .and_then(|p| p.tasks.get(&next))
                    .and_then(|r| r.child.clone());
                let Some(child) = child else {
                    return Err(inconsistent(&format!(
                        "task {next} started without its child"
                    )));
                };
                let task = next;
                let run = self.child_run(task, child).await?;
                pool.push(run);
            }
        }
        if !paused.is_empty() {
            self.write(vec![Event::Paused {
                reason: PauseReason {
                    kind: PauseKind::Plan,
                    limit: None,
                    detail: format!(
                        "{}; `longhand resume` this session to go on (its paused children go on \
                         with it)",
                        paused.join("; ")
                    ),
                },
            }])
            .await?;
        }
        Ok(())
    }

    /// Wake the child session of `task` and return its run as a future
    /// that owns the child.
    async fn child_run(&mut self, task: String, child: String) -> Result<ChildRun<'h>, RunError> {
        let id: SessionId = child
            .parse()
            .map_err(|_| inconsistent(&format!("the child session id {child} does not parse")))?;
        // The child runs with this agent's bound grants and its own frozen
        // agent read back from its log: one holding more than this agent
        // does (a log edited by hand) is refused, by the same rule as a
        // delegated child.
        let mut agent = self.agent.clone();
        let name = child.clone();
        let bind: BindChild<'_> = Box::new(move |frozen| {
            if let Err(refusals) = covers(
                &Capabilities::of_frozen(&agent.frozen),
                &Capabilities::of_frozen(&frozen),
            ) {
                let refusals: Vec<String> = refusals.iter().map(ToString::to_string).collect();
                return Err(inconsistent(&format!(
                    "the child session {name} holds more than this agent: {}",
                    refusals.join("; ")
                )));
            }
            agent.frozen = frozen;
            Ok(agent)
        });
        let mut runner = self.launch.wake(self.parent(), id, bind).await?;
        Ok(Box::pin(async move {
            let end = runner.run().await;
            (task, child, runner, end)
        }))
    }

    /// Record how the child of `task` ended: its checks' results, then the
    /// task done or failed with a progress note. A paused child is not an
    /// end: its note for the pause is returned.
    async fn record_child(
        &mut self,
        task: &str,
        child: &str,
        runner: &dyn Child,
        end: RunEnd,
    ) -> Result<Option<String>, RunError> {
        match end.status {
            SessionStatus::Paused => {
                return Ok(Some(format!(
                    "task {task} (session {child}) paused: {}",
                    end.detail.unwrap_or_default()
                )));
            }
            SessionStatus::Finished | SessionStatus::Failed => {}
            SessionStatus::Created | SessionStatus::Running => {
                return Err(inconsistent(&format!(
                    "the child session {child} returned while {}",
                    end.status
                )));
            }
        }
        let record = runner
            .state()
            .plan
            .as_ref()
            .and_then(|p| p.tasks.get(task).cloned())
            .unwrap_or_default();
        let kinds: Vec<&'static str> = self
            .journal
            .state
            .plan
            .as_ref()
            .and_then(|p| p.plan.task(task))
            .map(|t| t.done_when.iter().map(|c| c.kind()).collect())
            .unwrap_or_default();
        let mut events = Vec::new();
        for (i, result) in record.checks.iter().enumerate() {
            if let (Some(passed), Some(kind)) = (result, kinds.get(i)) {
                events.push(Event::CheckFinished {
                    task: task.to_owned(),
                    check: i as u32,
                    kind: (*kind).to_owned(),
                    passed: *passed,
                    detail: format!("in the child session {child}"),
                    output: None,
                    confinement: None,
                });
            }
        }
        let status = if record.status == Some(TaskStatus::Done) {
            "done"
        } else {
            "failed"
        };
        events.push(Event::TaskFinished {
            task: task.to_owned(),
            status: status.to_owned(),
            attempts: record.attempts.max(1),
        });
        events.push(Event::ProgressNoted {
            task: task.to_owned(),
            text: crate::core::prompts::cut(
                &format!(
                    "{task}: {status} in the child session {child} after {} attempt(s){}",
                    record.attempts,
                    end.detail
                        .map(|d| format!(". {}", crate::core::prompts::cut(&d, 600)))
                        .unwrap_or_default()
                ),
                longhand_session::event::MAX_INLINE_TEXT - 8,
            ),
        });
        self.write(events).await?;
        Ok(None)
    }
}
