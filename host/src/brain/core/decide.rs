//! What the loop does next: a pure function of the folded state.
//!
//! [`next`] reads a [`SessionState`] and the session's limits and returns
//! one [`Action`]; it does no I/O, reads no clock and calls no model, so the
//! whole decision table is tested without a store, a tool host or a
//! provider (see the tests below). The runner (`brain::runner`) executes
//! the action, appends the events that record it, folds them, and asks
//! again. New behaviour — planner and judge turns, handoffs, finishing a
//! plan, sub-agents — is a new variant and a new row here, not a new guard
//! somewhere in the executor. Three decisions are still taken by executors
//! and wait for their row: the approval gate (`control::approvals`, which
//! pauses from inside a dispatch, since it needs the call's fingerprint and
//! the clock), a model turn whose attempts run out (`act::ask`), and the
//! planner's and judge's [`MAX_REJECTED`] (`act::task`).
//!
//! The order of the rows is the argument for crash safety: whatever a crash
//! left half-done is finished before anything new starts.
//! 1. A terminal or paused session stops the loop.
//! 2. Calls started and never finished are recovered (re-run when read-only
//!    or idempotent, recorded in doubt otherwise).
//! 3. The circuit breaker pauses on repeated failure.
//! 4. Calls of the last answer that have not run are dispatched, as many as
//!    `max_tool_calls` has room for; with no room, the session pauses and
//!    they run on `resume --raise`.
//! 5. A final answer is checked (when the agent has a completion check) and
//!    finished when the check passed or there is none.
//! 6. A limit reached pauses.
//! 7. Otherwise the worker is asked for its next answer.

use std::collections::BTreeMap;

pub use super::state::Role;
use super::state::{JUDGE, PLANNER, SessionState, WORKER};
use crate::brain::config::{PlannerMode, SessionLimits};
use crate::brain::work::plan::{Check, TaskStatus};
use crate::session::{PauseKind, PauseReason, SessionStatus};

/// One thing for the runner to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The loop ends: the session is finished, failed or paused.
    Stop(SessionStatus),
    /// Read the last answer's calls from its blob (logs written before
    /// `model_responded.calls` existed), then decide again.
    LearnCalls,
    /// Calls started and never finished, by id: re-run the safe ones,
    /// record the rest in doubt.
    Recover(Vec<String>),
    /// Pause for this reason.
    Pause(PauseReason),
    /// Run these calls of the last answer (ids, in the model's order).
    Dispatch {
        /// The answer's turn.
        step: u64,
        /// Call ids.
        calls: Vec<String>,
    },
    /// Run the completion check on the last (final) answer.
    Check {
        /// The answer's turn.
        step: u64,
    },
    /// Finish with the last answer's text.
    Finish,
    /// Finish a planned session: every task is done (the summary is built
    /// from the progress notes, not from an answer).
    FinishPlan,
    /// Ask a role for the answer of turn `step`.
    Ask {
        /// Who is asked.
        role: Role,
        /// The turn (1 for the first answer).
        step: u64,
    },
    /// Record the operator's plan (frozen with the agent).
    CreatePlan,
    /// Start the planner's conversation.
    StartPlanner(PlannerPurpose),
    /// Check the planner's final answer (turn `step`) and record the plan
    /// or send the errors back.
    AcceptPlan {
        /// The answer's turn.
        step: u64,
    },
    /// Start an attempt at a task in a fresh context.
    StartTask(String),
    /// Run a harness check (`tool` or `command`) of the current task.
    RunCheck {
        /// Task id.
        task: String,
        /// Index in its `done_when`.
        check: u32,
    },
    /// Start the judge's conversation on a `judge` check.
    StartJudge {
        /// Task id.
        task: String,
        /// Index in its `done_when`.
        check: u32,
    },
    /// Read the judge's final answer (turn `step`) as its verdict.
    AcceptVerdict {
        /// The answer's turn.
        step: u64,
    },
    /// Start a ready task in a child session of its own (parallel tasks).
    StartChild(String),
    /// Run the child sessions of running tasks until each ends, and record
    /// their results.
    AwaitChildren(Vec<(String, String)>),
    /// Record the end of a task.
    FinishTask {
        /// Task id.
        task: String,
        /// Whether its checks passed (else it ran out of attempts).
        done: bool,
    },
    /// Check the handoff the model wrote and replace the context with it,
    /// or send it back.
    AcceptHandoff,
    /// The model wrote [`MAX_HANDOFF_TRIES`] handoffs that were refused:
    /// replace the context with one the harness builds from the plan.
    FallbackHandoff,
}

/// Why the planner is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlannerPurpose {
    /// There is no plan yet.
    Create,
    /// Add to the operator's plan before work starts.
    Extend,
    /// A task failed: change the approach.
    Revise {
        /// The failed task.
        task: String,
    },
}

/// What `next` needs besides the state: the frozen agent's policy.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// Session limits as frozen (raises are in the state).
    pub limits: &'a SessionLimits,
    /// Whether a final answer must pass a completion check.
    pub has_check: bool,
    /// A planned session's settings; `None` for a single loop.
    pub plan: Option<PlanPolicy>,
}

/// The part of `[plan]` decisions read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanPolicy {
    /// Whether the agent has an operator plan.
    pub has_file: bool,
    /// What the planner does.
    pub planner: PlannerMode,
    /// Attempts per task unless the task says otherwise.
    pub max_attempts: u32,
    /// Worker answers per attempt before the checks run anyway.
    pub steps_per_attempt: u64,
    /// Planner revisions before a failure pauses instead.
    pub max_revisions: u32,
    /// Context tokens at which the worker's context is handed off.
    pub handoff_tokens: u64,
    /// Tasks run side by side, each in a child session, when above 1.
    pub max_parallel: u32,
}

/// Invalid planner or judge answers sent back before giving up.
pub const MAX_REJECTED: u32 = 3;

/// Invalid handoffs before the harness builds one from the plan.
pub const MAX_HANDOFF_TRIES: u32 = 2;

/// Decide the next action. Pure: same state, same action.
pub fn next(state: &SessionState, policy: Policy<'_>) -> Action {
    match state.status {
        SessionStatus::Finished | SessionStatus::Failed | SessionStatus::Paused => {
            return Action::Stop(state.status);
        }
        SessionStatus::Created | SessionStatus::Running => {}
    }
    if state.answer.as_ref().is_some_and(|a| a.calls.is_none()) {
        return Action::LearnCalls;
    }
    if !state.open_calls.is_empty() {
        return Action::Recover(state.open_calls.keys().cloned().collect());
    }
    if let Some(reason) = breaker(state, policy.limits) {
        return Action::Pause(reason);
    }
    if let Some(answer) = &state.answer
        && !state.pending_calls.is_empty()
    {
        let room = tool_call_room(state, policy.limits);
        if room == 0 {
            return Action::Pause(tool_calls_reason(
                state,
                policy.limits,
                state.pending_calls.len(),
            ));
        }
        return Action::Dispatch {
            step: answer.step,
            calls: state.pending_calls.iter().take(room).cloned().collect(),
        };
    }
    if let Some(plan) = policy.plan {
        return next_planned(state, policy.limits, plan);
    }
    if let Some(answer) = &state.answer
        && answer.is_final()
    {
        match state.check_passed {
            // A check that passed with no `finished` after it: the process
            // stopped between the two. The answer stands; asking the model
            // again would tell it a check failed that passed.
            Some(true) => return Action::Finish,
            None if policy.has_check => return Action::Check { step: answer.step },
            None => return Action::Finish,
            // Failed: the model is told (the result is in the history) and
            // asked again, below.
            Some(false) => {}
        }
    }
    if let Some(reason) = limit_hit(state, policy.limits) {
        return Action::Pause(reason);
    }
    Action::Ask {
        role: Role::Worker,
        step: state.steps + 1,
    }
}

/// The decision table of a planned session, after the rows every session
/// shares (stop, recovery, breaker, dispatch). In order:
/// 1. A handoff the model wrote is checked; after [`MAX_HANDOFF_TRIES`]
///    refused ones the harness writes it (row 4).
/// 2. The planner's and the judge's final answers are checked; otherwise
///    they are asked for their next answer.
/// 3. No plan yet: the operator's is recorded, or the planner is asked;
///    an `extend` planner runs once before work starts.
/// 4. The current task: its worker is asked until it claims the task done
///    (or spends its steps); then its checks run one by one — harness checks
///    first, judges only when those passed; then the task finishes, or a new
///    attempt starts, or it fails. A full context is handed off first.
/// 5. No current task: the next ready one starts; all done finishes the
///    plan ([`Action::FinishPlan`]); a failed task asks the planner to
///    revise, or pauses.
fn next_planned(state: &SessionState, limits: &SessionLimits, policy: PlanPolicy) -> Action {
    if state.handoff_reply.is_some() {
        return Action::AcceptHandoff;
    }
    let role = state.conversation.as_ref().map(|c| c.role.as_str());
    let final_answer = state
        .answer
        .as_ref()
        .filter(|a| a.is_final())
        .map(|a| a.step);
    let ask = |role| match limit_hit(state, limits) {
        Some(reason) => Action::Pause(reason),
        None => Action::Ask {
            role,
            step: state.steps + 1,
        },
    };
    match role {
        Some(PLANNER) => {
            return match final_answer {
                Some(step) => Action::AcceptPlan { step },
                None => ask(Role::Planner),
            };
        }
        Some(JUDGE) => {
            return match final_answer {
                Some(step) => Action::AcceptVerdict { step },
                None => ask(Role::Judge),
            };
        }
        _ => {}
    }
    let Some(plan) = &state.plan else {
        return if policy.has_file {
            Action::CreatePlan
        } else {
            Action::StartPlanner(PlannerPurpose::Create)
        };
    };
    if policy.planner == PlannerMode::Extend && !plan.planner_ran && plan.current.is_none() {
        return Action::StartPlanner(PlannerPurpose::Extend);
    }
    if policy.max_parallel > 1 {
        // Side by side: each task in a child session; this one schedules
        // them in waves of up to `max_parallel` and records their results.
        let running = plan.children();
        if running.len() < policy.max_parallel as usize
            && let Some(task) = plan.next_ready()
        {
            return match limit_hit(state, limits) {
                Some(reason) => Action::Pause(reason),
                None => Action::StartChild(task.id.clone()),
            };
        }
        if !running.is_empty() {
            return Action::AwaitChildren(running);
        }
    }
    if let Some(task_id) = &plan.current {
        let Some(task) = plan.plan.task(task_id) else {
            // A revision dropped the current task; the fold clears
            // `current` then, so this is not reached.
            return Action::Pause(plan_reason(format!(
                "task {task_id} is current but not in the plan"
            )));
        };
        let record = plan.tasks.get(task_id).cloned().unwrap_or_default();
        let conversation = state.conversation.as_ref();
        let worker_here = conversation
            .is_some_and(|c| c.role == WORKER && c.task.as_deref() == Some(task_id.as_str()));
        let claimed = worker_here
            && (final_answer.is_some()
                || conversation.is_some_and(|c| c.steps >= policy.steps_per_attempt));
        if !worker_here {
            // Between attempts (a crash after `task_finished` of an attempt
            // is not possible: attempts end in `task_started`), or the
            // judge just ended: go on with the checks if they started.
            if record.checked.is_empty() {
                return Action::StartTask(task_id.clone());
            }
        } else if !claimed {
            if conversation.is_some_and(|c| c.context_tokens >= policy.handoff_tokens) {
                // The model had its tries at writing the handoff: the
                // harness writes one (no model call, so no limit applies).
                if state.handoff_tries >= MAX_HANDOFF_TRIES {
                    return Action::FallbackHandoff;
                }
                return ask(Role::Handoff);
            }
            return ask(Role::Worker);
        }
        // The checks of this attempt, harness checks first.
        let harness_failed = task.done_when.iter().enumerate().any(|(i, c)| {
            !matches!(c, Check::Judge { .. })
                && record.checked.contains(&(i as u32))
                && record.checks.get(i).copied().flatten() == Some(false)
        });
        let unchecked = |judge: bool| {
            task.done_when.iter().enumerate().find(|(i, c)| {
                matches!(c, Check::Judge { .. }) == judge && !record.checked.contains(&(*i as u32))
            })
        };
        if let Some((i, _)) = unchecked(false) {
            return Action::RunCheck {
                task: task_id.clone(),
                check: i as u32,
            };
        }
        if !harness_failed && let Some((i, _)) = unchecked(true) {
            return Action::StartJudge {
                task: task_id.clone(),
                check: i as u32,
            };
        }
        let passed = task.done_when.iter().enumerate().all(|(i, _)| {
            record.checked.contains(&(i as u32))
                && record.checks.get(i).copied().flatten() == Some(true)
        });
        if passed {
            return Action::FinishTask {
                task: task_id.clone(),
                done: true,
            };
        }
        let max = task.max_attempts.unwrap_or(policy.max_attempts);
        if record.in_set() < max {
            return match limit_hit(state, limits) {
                Some(reason) => Action::Pause(reason),
                None => Action::StartTask(task_id.clone()),
            };
        }
        return Action::FinishTask {
            task: task_id.clone(),
            done: false,
        };
    }
    if plan.all_done() {
        return Action::FinishPlan;
    }
    if let Some(task) = plan.next_ready() {
        return match limit_hit(state, limits) {
            Some(reason) => Action::Pause(reason),
            None => Action::StartTask(task.id.clone()),
        };
    }
    // Nothing ready and not all done: a task failed (and blocks the rest).
    let failed = plan
        .plan
        .tasks
        .iter()
        .find(|t| plan.status(&t.id) == TaskStatus::Failed)
        .map(|t| t.id.clone());
    match failed {
        Some(task)
            if policy.planner != PlannerMode::Off && plan.revision < policy.max_revisions =>
        {
            Action::StartPlanner(PlannerPurpose::Revise { task })
        }
        Some(task) => Action::Pause(plan_reason(format!(
            "task {task} failed its checks on every attempt; look at `longhand plan` and \
             `longhand log`, fix what blocks it, then `longhand resume` (failed tasks get new \
             attempts)"
        ))),
        None => Action::Pause(plan_reason(
            "no task can start: every remaining task waits on one that cannot finish".to_owned(),
        )),
    }
}

fn plan_reason(detail: String) -> PauseReason {
    PauseReason {
        kind: PauseKind::Plan,
        limit: None,
        detail,
    }
}

/// A limit's value: raised by `resume --raise`, else as configured.
pub fn limit(raised: &BTreeMap<String, u64>, name: &str, configured: u64) -> u64 {
    raised.get(name).copied().unwrap_or(configured)
}

/// How many more tool calls `max_tool_calls` allows. Every call counts,
/// including one refused before it ran (unknown tool, bad arguments):
/// those are recorded as finished like any other.
fn tool_call_room(state: &SessionState, limits: &SessionLimits) -> usize {
    let max = limit(&state.raised, "max_tool_calls", limits.max_tool_calls);
    usize::try_from(max.saturating_sub(state.tool_calls)).unwrap_or(usize::MAX)
}

/// The pause for `max_tool_calls` reached with `waiting` calls of the last
/// answer not started. They are not answered as "not run": an unstarted
/// call of a recorded answer is exactly what a crash between two calls
/// leaves, so `resume --raise max_tool_calls=N` runs them as the model
/// asked, and nothing is lost.
fn tool_calls_reason(state: &SessionState, limits: &SessionLimits, waiting: usize) -> PauseReason {
    let max = limit(&state.raised, "max_tool_calls", limits.max_tool_calls);
    let mut reason = limit_reason("max_tool_calls", state.tool_calls, max);
    reason.detail.push_str(&format!(
        " ({waiting} calls of the last answer have not run; they run on resume)"
    ));
    reason
}

fn limit_hit(state: &SessionState, limits: &SessionLimits) -> Option<PauseReason> {
    let checks = [
        ("max_steps", state.steps, limits.max_steps),
        (
            "max_input_tokens",
            state.input_tokens,
            limits.max_input_tokens,
        ),
        (
            "max_output_tokens",
            state.output_tokens,
            limits.max_output_tokens,
        ),
        ("max_tool_calls", state.tool_calls, limits.max_tool_calls),
        (
            "max_wall_secs",
            state.active_ms / 1000,
            limits.max_wall_secs,
        ),
        (
            "max_write_bytes",
            state.bytes_written,
            limits.max_write_bytes,
        ),
    ];
    if let Some(reason) = checks.into_iter().find_map(|(name, used, configured)| {
        let max = limit(&state.raised, name, configured);
        // What children were given counts as spent.
        let used = used + state.reserved.get(name).copied().unwrap_or(0);
        (used >= max).then(|| limit_reason(name, used, max))
    }) {
        return Some(reason);
    }
    // Money: 0 is no limit.
    let max_cost = limit(&state.raised, "max_cost_micros", limits.max_cost_micros);
    // Slices handed to children count as spent.
    let spent = state.cost_micros + state.reserved.get("max_cost_micros").copied().unwrap_or(0);
    if max_cost > 0 && spent >= max_cost {
        let mut reason = limit_reason("max_cost_micros", spent, max_cost);
        if state.cost_unknown > 0 {
            reason.detail.push_str(&format!(
                " ({} answers had no known price and are not counted)",
                state.cost_unknown
            ));
        }
        return Some(reason);
    }
    // The no-progress breaker: between turns, like the limits.
    let max = limit(
        &state.raised,
        "max_steps_without_progress",
        limits.max_steps_without_progress,
    );
    (max > 0 && state.steps_since_progress >= max).then(|| PauseReason {
        kind: PauseKind::Breaker,
        limit: Some("max_steps_without_progress".to_owned()),
        detail: format!(
            "{} worker answers in a row without progress (no check passed, no call changed \
             anything); look at `longhand log`, then `longhand resume` (or --raise \
             max_steps_without_progress=<more>)",
            state.steps_since_progress
        ),
    })
}

fn breaker(state: &SessionState, limits: &SessionLimits) -> Option<PauseReason> {
    let max_consecutive = limit(
        &state.raised,
        "max_consecutive_failures",
        limits.max_consecutive_failures,
    );
    if state.consecutive_failures >= max_consecutive {
        return Some(PauseReason {
            kind: PauseKind::Breaker,
            limit: Some("max_consecutive_failures".to_owned()),
            detail: format!(
                "{} tool calls failed in a row; look at `longhand log` and resume when fixed",
                state.consecutive_failures
            ),
        });
    }
    let max_repeat = limit(
        &state.raised,
        "max_repeated_failure",
        limits.max_repeated_failure,
    );
    let (key, n) = state
        .repeated_failures
        .iter()
        .find(|(_, n)| **n >= max_repeat)?;
    Some(PauseReason {
        kind: PauseKind::Breaker,
        limit: Some("max_repeated_failure".to_owned()),
        detail: format!("the same call failed {n} times: {key}"),
    })
}

/// The pause for limit `name` reached (`used` of `limit`).
pub fn limit_reason(name: &str, used: u64, limit: u64) -> PauseReason {
    PauseReason {
        kind: PauseKind::Limit,
        limit: Some(name.to_owned()),
        detail: format!("{name} reached ({used} of {limit}); resume with --raise {name}=<higher>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brain::core::state::{CHECK_PREFIX, HANDOFF_ROLE};
    use crate::session::{BlobRef, Event, EventRecord, ResumeCause};

    /// Folds events numbered from 1, the way a log does.
    struct Log {
        state: SessionState,
        seq: u64,
    }

    impl Log {
        fn new() -> Self {
            let mut log = Self {
                state: SessionState::default(),
                seq: 0,
            };
            log.push(Event::SessionCreated {
                agent_name: "a".into(),
                agent: serde_json::json!({}),
                config_digest: "sha256:00".into(),
            });
            log.push(Event::GoalSet { goal: "g".into() });
            log
        }

        fn push(&mut self, event: Event) -> &mut Self {
            self.seq += 1;
            self.state.apply(&EventRecord {
                seq: self.seq,
                at_ms: 0,
                event,
            });
            self
        }

        fn answer(&mut self, step: u64, calls: &[&str]) -> &mut Self {
            self.push(Event::ModelRequested {
                step,
                role: "worker".into(),
                provider: "p".into(),
                model: "m".into(),
                request: BlobRef::of(b"req"),
                attempt: 1,
            });
            self.push(Event::ModelResponded {
                step,
                response: BlobRef::of(format!("answer {step}").as_bytes()),
                input_tokens: 10,
                output_tokens: 5,
                latency_ms: 1,
                stop_reason: "end_turn".into(),
                calls: Some(calls.iter().map(|c| (*c).to_owned()).collect()),
                cached_input_tokens: 0,
                cost_micros: None,
            })
        }

        fn started(&mut self, step: u64, call: &str, effect: &str) -> &mut Self {
            self.push(Event::ToolStarted {
                step,
                call_id: call.into(),
                component: "fs".into(),
                component_digest: "sha256:11".into(),
                tool: "write".into(),
                effect: effect.into(),
                input: BlobRef::of(call.as_bytes()),
            })
        }

        fn finished(&mut self, step: u64, call: &str, ok: bool) -> &mut Self {
            self.push(Event::ToolFinished {
                step,
                call_id: call.into(),
                ok,
                result: BlobRef::of(b"{}"),
                receipt: serde_json::Value::Null,
            })
        }
    }

    fn limits() -> SessionLimits {
        SessionLimits::default()
    }

    fn decide(log: &Log, has_check: bool) -> Action {
        next(
            &log.state,
            Policy {
                limits: &limits(),
                has_check,
                plan: None,
            },
        )
    }

    fn ask(step: u64) -> Action {
        Action::Ask {
            role: Role::Worker,
            step,
        }
    }

    /// A planned session's policy: the operator's plan, no planner, a
    /// handoff once the context holds 10 tokens (every answer is 15).
    fn planned(log: &Log) -> Action {
        next(
            &log.state,
            Policy {
                limits: &limits(),
                has_check: false,
                plan: Some(PlanPolicy {
                    has_file: true,
                    planner: PlannerMode::Off,
                    max_attempts: 2,
                    steps_per_attempt: 50,
                    max_revisions: 0,
                    handoff_tokens: 10,
                    max_parallel: 1,
                }),
            },
        )
    }

    /// A log with a one-task plan (`t`, no checks) whose first attempt has
    /// started.
    fn task_started() -> Log {
        let mut log = Log::new();
        log.push(Event::PlanCreated {
            plan: serde_json::json!({"tasks": [{"id": "t", "title": "T"}]}),
            author: "operator".into(),
        });
        log.push(Event::TaskStarted {
            task: "t".into(),
            attempt: 1,
            briefing: BlobRef::of(b"brief"),
            memories: Vec::new(),
            child: None,
        });
        log
    }

    /// A handoff asked for and answered at `step`.
    fn handoff_answer(log: &mut Log, step: u64) {
        log.push(Event::ModelRequested {
            step,
            role: HANDOFF_ROLE.into(),
            provider: "p".into(),
            model: "m".into(),
            request: BlobRef::of(b"req"),
            attempt: 1,
        });
        log.push(Event::ModelResponded {
            step,
            response: BlobRef::of(format!("handoff {step}").as_bytes()),
            input_tokens: 10,
            output_tokens: 5,
            latency_ms: 1,
            stop_reason: "end_turn".into(),
            calls: Some(Vec::new()),
            cached_input_tokens: 0,
            cost_micros: None,
        });
    }

    #[test]
    fn a_plan_with_every_task_done_finishes_the_plan_not_an_answer() {
        let mut log = task_started();
        assert_eq!(planned(&log), ask(1));
        log.push(Event::TaskFinished {
            task: "t".into(),
            status: "done".into(),
            attempts: 1,
        });
        // `Finish` would finish with the last answer's text; a plan's end
        // is summed up from its progress notes.
        assert_eq!(planned(&log), Action::FinishPlan);
    }

    #[test]
    fn refused_handoffs_are_asked_again_until_the_harness_writes_one() {
        let mut log = task_started();
        log.answer(1, &["c1"])
            .started(1, "c1", "read-only")
            .finished(1, "c1", true);
        // The context is full (15 of 10 tokens): the model writes a handoff.
        let handoff = |step| Action::Ask {
            role: Role::Handoff,
            step,
        };
        assert_eq!(planned(&log), handoff(2));
        handoff_answer(&mut log, 2);
        assert_eq!(planned(&log), Action::AcceptHandoff);
        for refused in 1..=MAX_HANDOFF_TRIES {
            log.push(Event::Error {
                step: Some(refused as u64 + 1),
                message: "the handoff was refused: no status".into(),
            });
            if refused < MAX_HANDOFF_TRIES {
                assert_eq!(planned(&log), handoff(refused as u64 + 2));
                handoff_answer(&mut log, refused as u64 + 2);
                assert_eq!(planned(&log), Action::AcceptHandoff);
            }
        }
        assert_eq!(planned(&log), Action::FallbackHandoff);
        // Its `handoff` event starts the worker afresh and resets the count.
        log.push(Event::Handoff {
            task: Some("t".into()),
            handoff: BlobRef::of(b"{}"),
            briefing: BlobRef::of(b"brief 2"),
            context_tokens: 15,
            by_model: false,
            memories: Vec::new(),
        });
        assert_eq!(planned(&log), ask(2 + MAX_HANDOFF_TRIES as u64));
    }

    #[test]
    fn a_new_session_asks_the_worker_for_turn_one() {
        assert_eq!(decide(&Log::new(), false), ask(1));
    }

    #[test]
    fn a_request_without_an_answer_is_asked_again_for_the_same_turn() {
        let mut log = Log::new();
        log.push(Event::ModelRequested {
            step: 1,
            role: "worker".into(),
            provider: "p".into(),
            model: "m".into(),
            request: BlobRef::of(b"r"),
            attempt: 1,
        });
        log.push(Event::ModelFailed {
            step: 1,
            attempt: 2,
            error: "500".into(),
            retryable: true,
            retry_after_ms: None,
        });
        assert_eq!(decide(&log, false), ask(1));
        // Attempts carry across processes.
        assert_eq!(
            log.state.pending_request.as_ref().map(|p| p.attempts),
            Some(2)
        );
    }

    #[test]
    fn calls_of_an_answer_are_dispatched_in_order_then_the_model_is_asked() {
        let mut log = Log::new();
        log.answer(1, &["a", "b", "c"]);
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["a".into(), "b".into(), "c".into()]
            }
        );
        log.started(1, "a", "read-only").finished(1, "a", true);
        log.finished(1, "b", false); // refused before it ran: no start
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["c".into()]
            }
        );
        log.started(1, "c", "writes").finished(1, "c", true);
        assert_eq!(decide(&log, false), ask(2));
    }

    #[test]
    fn a_started_call_without_an_end_is_recovered_first() {
        let mut log = Log::new();
        log.answer(1, &["a", "b"]);
        log.started(1, "a", "writes");
        assert_eq!(decide(&log, false), Action::Recover(vec!["a".into()]));
        log.push(Event::ToolInDoubt {
            step: 1,
            call_id: "a".into(),
            reason: "stopped".into(),
        });
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["b".into()]
            }
        );
    }

    #[test]
    fn no_more_calls_start_than_max_tool_calls_allows() {
        let mut log = Log::new();
        let ids: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        log.answer(1, &refs);
        let mut l = limits();
        l.max_tool_calls = 30;
        let policy = Policy {
            limits: &l,
            has_check: false,
            plan: None,
        };
        let Action::Dispatch { calls, .. } = next(&log.state, policy) else {
            panic!("expected a dispatch");
        };
        assert_eq!(calls.len(), 30);
        for id in &calls {
            log.finished(1, id, true);
        }
        let Action::Pause(reason) = next(&log.state, policy) else {
            panic!("expected a pause");
        };
        assert_eq!(reason.limit.as_deref(), Some("max_tool_calls"));
        assert!(
            reason.detail.contains("10 calls of the last answer"),
            "{}",
            reason.detail
        );
        // Raised: the remaining ten run, as the model asked.
        log.push(Event::Resumed {
            raised: [("max_tool_calls".to_owned(), 100)].into(),
            note: None,
            cause: ResumeCause::Operator,
        });
        let Action::Dispatch { calls, .. } = next(&log.state, policy) else {
            panic!("expected a dispatch after the raise");
        };
        assert_eq!(calls, ids[30..].to_vec());
    }

    #[test]
    fn a_final_answer_finishes_or_is_checked_first() {
        let mut log = Log::new();
        log.answer(1, &[]);
        assert_eq!(decide(&log, false), Action::Finish);
        assert_eq!(decide(&log, true), Action::Check { step: 1 });
        let check = format!("{CHECK_PREFIX}1");
        log.started(1, &check, "read-only")
            .finished(1, &check, false);
        // Failed: the model is asked again (it sees the failure).
        assert_eq!(decide(&log, true), ask(2));
        log.answer(2, &[]);
        assert_eq!(decide(&log, true), Action::Check { step: 2 });
        let check = format!("{CHECK_PREFIX}2");
        log.started(2, &check, "read-only")
            .finished(2, &check, true);
        // Passed and no `finished` yet (a crash in between): finish, never
        // ask again.
        assert_eq!(decide(&log, true), Action::Finish);
        log.push(Event::Finished {
            summary: Some("done".into()),
            summary_blob: None,
        });
        assert_eq!(decide(&log, true), Action::Stop(SessionStatus::Finished));
    }

    #[test]
    fn limits_pause_between_turns_not_in_the_middle_of_one() {
        let mut log = Log::new();
        let mut l = limits();
        l.max_steps = 1;
        let policy = Policy {
            limits: &l,
            has_check: false,
            plan: None,
        };
        log.answer(1, &["a"]);
        // The answer's calls still run although max_steps is reached.
        assert!(matches!(next(&log.state, policy), Action::Dispatch { .. }));
        log.started(1, "a", "read-only").finished(1, "a", true);
        let Action::Pause(reason) = next(&log.state, policy) else {
            panic!("expected a pause");
        };
        assert_eq!(reason.kind, PauseKind::Limit);
        assert_eq!(reason.limit.as_deref(), Some("max_steps"));
        log.push(Event::Paused { reason });
        assert_eq!(
            next(&log.state, policy),
            Action::Stop(SessionStatus::Paused)
        );
    }

    #[test]
    fn the_breaker_pauses_and_only_an_operator_resets_it() {
        let mut log = Log::new();
        let mut l = limits();
        l.max_consecutive_failures = 2;
        let policy = Policy {
            limits: &l,
            has_check: false,
            plan: None,
        };
        log.answer(1, &["a", "b", "c"]);
        log.started(1, "a", "read-only").finished(1, "a", false);
        log.started(1, "b", "read-only").finished(1, "b", false);
        let Action::Pause(reason) = next(&log.state, policy) else {
            panic!("expected the breaker");
        };
        assert_eq!(reason.kind, PauseKind::Breaker);
        // A crash recovery is not a person looking: still tripped.
        log.push(Event::Resumed {
            raised: BTreeMap::new(),
            note: None,
            cause: ResumeCause::Crash,
        });
        assert!(matches!(next(&log.state, policy), Action::Pause(_)));
        log.push(Event::Resumed {
            raised: BTreeMap::new(),
            note: None,
            cause: ResumeCause::Operator,
        });
        assert!(matches!(next(&log.state, policy), Action::Dispatch { .. }));
    }

    #[test]
    fn an_answer_from_an_older_log_is_read_before_deciding() {
        let mut log = Log::new();
        log.push(Event::ModelResponded {
            step: 1,
            response: BlobRef::of(b"old"),
            input_tokens: 1,
            output_tokens: 1,
            latency_ms: 1,
            stop_reason: "tool_use".into(),
            calls: None,
            cached_input_tokens: 0,
            cost_micros: None,
        });
        log.started(1, "a", "read-only").finished(1, "a", true);
        assert_eq!(decide(&log, false), Action::LearnCalls);
        log.state.learn_calls(vec!["a".into(), "b".into()]);
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["b".into()]
            }
        );
    }

    #[test]
    fn finished_failed_and_paused_sessions_stop() {
        for (event, status) in [
            (Event::Failed { error: "x".into() }, SessionStatus::Failed),
            (
                Event::Paused {
                    reason: limit_reason("max_steps", 1, 1),
                },
                SessionStatus::Paused,
            ),
        ] {
            let mut log = Log::new();
            log.answer(1, &["a"]);
            log.push(event);
            assert_eq!(decide(&log, false), Action::Stop(status));
        }
    }

    #[test]
    fn the_fold_is_the_same_from_a_snapshot_of_any_prefix() {
        let mut log = Log::new();
        log.answer(1, &["a", "b"]);
        log.started(1, "a", "read-only").finished(1, "a", true);
        let mid = log.state.clone();
        let json = serde_json::to_vec(&mid).unwrap();
        let back: SessionState = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, mid);
        assert_eq!(
            decide(&log, false),
            next(
                &back,
                Policy {
                    limits: &limits(),
                    has_check: false,
                    plan: None,
                }
            )
        );
    }
}
