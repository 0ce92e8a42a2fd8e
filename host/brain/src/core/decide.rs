//! What the loop does next: a pure function of the folded state.
//!
//! [`next`] reads a [`SessionState`] and the session's limits and returns
//! one [`Action`]; it does no I/O, reads no clock and calls no model, so the
//! whole decision table is tested without a store, a tool host or a
//! provider (see the tests below). The runner (`core::runner`) executes
//! the action, the executor (`core::act`, `control`) records what it did
//! as events, the journal folds them, and the runner asks again. Every
//! decision is a row here — retry or give up, wait for a person, stop for
//! an operator, finish, the limits — and a new behaviour is a new row, not
//! a guard in an executor. Executors record facts (an answer refused, a
//! request given up on, an approval asked for, a control received); the
//! rows read them back from the fold. `act::children` asks [`next`] itself
//! (with the loop's own policy) while its pool of child runs is in flight,
//! because those runs live in the executor, not in the loop; the answer is
//! still this table's.
//!
//! The order of the rows is the argument for crash safety: whatever a crash
//! left half-done is finished before anything new starts, and whatever
//! asked for a stop is obeyed before anything runs.
//! 1. A terminal or paused session stops the loop.
//! 2. An operator's `pause` or `cancel`, recorded (`steered`) and not yet
//!    acted on, pauses or fails the session.
//! 3. An answer from a log older than `model_responded.calls` has its
//!    calls read (and recorded) first.
//! 4. Calls started and never finished are recovered (re-run when read-only
//!    or idempotent, recorded in doubt otherwise).
//! 5. A model request whose attempts ran out (or that cannot be helped by
//!    retrying) pauses the session; a replay that diverged fails it. A
//!    request the model refused as too long for its window is asked again
//!    once, by the rows below, when the fold could cut the history for it.
//! 6. The circuit breaker pauses on repeated failure.
//! 7. Calls of the last answer that have not run: the first one waiting
//!    for a person pauses the session, a denied one is answered as denied,
//!    and the others are dispatched, as many as `max_tool_calls` has room
//!    for; with no room, the session pauses and they run on
//!    `resume --raise`.
//! 8. A planned session goes on by [`next_planned`]'s rows.
//! 9. A final answer is checked (when the agent has a completion check) and
//!    finished when the check passed or there is none.
//! 10. A limit reached pauses.
//! 11. Otherwise the worker is asked for its next answer.
//!
//! Last, over every row: a role is never asked under a money limit when
//! its model has no price (its spend could not be counted); the session
//! pauses for a price instead ([`unpriced`]). `cancel --now`, which drops
//! the step in flight from outside the loop, records what the drop left
//! and the control; its end is row 2's.

use std::collections::BTreeMap;

use super::state::Role;
use super::state::approvals::ApprovalStatus;
use super::state::{
    CONTEXT_OVERFLOW, GaveUp, JUDGE, PLANNER, Refused, SessionState, StopAsked, WORKER,
};
use crate::agent::config::{PlannerMode, SessionLimits};
use crate::work::plan::{Check, TaskStatus};
use longhand_session::{PauseKind, PauseReason, SessionStatus};

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
    /// Fail the session with this error (an operator's `cancel`, a replay
    /// that diverged).
    Fail(String),
    /// Answer a call of the last answer as denied by a person, with their
    /// reason (its approval request was denied).
    Deny {
        /// The answer's turn.
        step: u64,
        /// The call.
        call: String,
        /// Why, as the person said.
        reason: String,
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
        /// The judge has had its [`MAX_REJECTED`] tries with this one: an
        /// unreadable verdict fails the check instead of being sent back.
        last_try: bool,
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
    /// The roles whose model has no price.
    pub unpriced: &'a [UnpricedRole],
}

/// A role whose model has no price: under a money limit it is not asked,
/// since what it spends could not be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpricedRole {
    /// The role.
    pub role: Role,
    /// Its model.
    pub model: String,
    /// The model's provider, as the price file's section names it.
    pub provider: String,
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
    match by_rows(state, &policy) {
        Action::Ask { role, .. } if let Some(reason) = unpriced(state, &policy, role) => {
            Action::Pause(reason)
        }
        action => action,
    }
}

/// The pause for asking `role` under a money limit when its model has no
/// price: its answer's cost could not be counted, so the limit would not
/// hold. `run` refuses such an agent at start; this holds the line for
/// sessions started before that check, or whose limit a `--raise` put in
/// place.
fn unpriced(state: &SessionState, policy: &Policy<'_>, role: Role) -> Option<PauseReason> {
    let max = limit(
        &state.raised,
        "max_cost_micros",
        policy.limits.max_cost_micros,
    );
    let model = policy.unpriced.iter().find(|u| u.role == role)?;
    if max == 0 {
        return None;
    }
    Some(PauseReason {
        kind: PauseKind::Limit,
        limit: Some("max_cost_micros".to_owned()),
        detail: format!(
            "model `{}` (provider {}) has no price, so max_cost_micros = {max} cannot be \
             counted; give it a price in prices.toml (`longhand resume` reads it for a model \
             the session has none for), or resume with --raise max_cost_micros=0 to run \
             without a money limit",
            model.model, model.provider
        ),
    })
}

/// The table's rows, in order (see the module's documentation).
fn by_rows(state: &SessionState, policy: &Policy<'_>) -> Action {
    match state.status {
        SessionStatus::Finished | SessionStatus::Failed | SessionStatus::Paused => {
            return Action::Stop(state.status);
        }
        SessionStatus::Created | SessionStatus::Running => {}
    }
    if let Some(stop) = &state.stop_asked {
        return steered(stop);
    }
    if state.answer.as_ref().is_some_and(|a| a.calls.is_none()) {
        return Action::LearnCalls;
    }
    if !state.open_calls.is_empty() {
        return Action::Recover(state.open_calls.keys().cloned().collect());
    }
    if let Some((gave_up, pending)) = state
        .pending_request
        .as_ref()
        .and_then(|p| p.gave_up.as_ref().map(|g| (g, p)))
    {
        // A request too long for the model's window, once: the fold has
        // cut the history to half of what was refused, so the rows below
        // ask again with less. Twice, or with nothing left to cut, pauses.
        let overflow = gave_up.kind.as_deref() == Some(CONTEXT_OVERFLOW);
        if !(overflow && pending.trimmed && pending.overflows <= MAX_OVERFLOW_RETRIES) {
            return model_gave_up(state, gave_up, pending.failures);
        }
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
        let mut calls = Vec::new();
        for call in state.pending_calls.iter().take(room) {
            match (approval_of(state, call), calls.is_empty()) {
                (None, _) => calls.push(call.clone()),
                // What comes before it runs first.
                (Some(_), false) => break,
                (Some(Approval::Waiting { request, tool }), true) => {
                    return Action::Pause(approval_reason(request, tool));
                }
                (Some(Approval::Denied(reason)), true) => {
                    return Action::Deny {
                        step: answer.step,
                        call: call.clone(),
                        reason: reason.to_owned(),
                    };
                }
            }
        }
        return Action::Dispatch {
            step: answer.step,
            calls,
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
    let rejected = state.conversation.as_ref().map_or(0, |c| c.rejected);
    match role {
        Some(PLANNER) => {
            // Refused too often: a person looks (after a resume, the
            // planner has one more try each time).
            if rejected >= MAX_REJECTED
                && let Some(refused) = state.conversation.as_ref().and_then(|c| c.refused.as_ref())
            {
                return Action::Pause(planner_gave_up(refused));
            }
            return match final_answer {
                Some(step) => Action::AcceptPlan { step },
                None => ask(Role::Planner),
            };
        }
        Some(JUDGE) => {
            return match final_answer {
                Some(step) => Action::AcceptVerdict {
                    step,
                    last_try: rejected + 1 >= MAX_REJECTED,
                },
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

/// What an operator's recorded `pause` or `cancel` does.
fn steered(stop: &StopAsked) -> Action {
    let why = match stop.text.as_deref() {
        Some(text) if !text.is_empty() => format!(": {text}"),
        _ => String::new(),
    };
    let who = &stop.by;
    if stop.now {
        return Action::Fail(format!("cancelled now by {who}{why}"));
    }
    if stop.cancel {
        return Action::Fail(format!("cancelled by {who}{why}"));
    }
    Action::Pause(PauseReason {
        kind: PauseKind::User,
        limit: None,
        detail: format!("paused by {who}{why}; `longhand resume` carries on"),
    })
}

/// What a model request given up on does: a replay that no longer matches
/// the cassette will not match later, so the session fails; anything else
/// pauses for a person (`failures`: the attempts that worker made).
fn model_gave_up(state: &SessionState, gave_up: &GaveUp, failures: u32) -> Action {
    let err = &gave_up.error;
    if gave_up.kind.as_deref() == Some(DIVERGED) {
        return Action::Fail(format!("model: {err}"));
    }
    let detail = if gave_up.kind.as_deref() == Some(CONTEXT_OVERFLOW) {
        format!(
            "the request does not fit the model's context window, even with the history cut to \
             {} tokens (context_tokens is {}, of which the system prompt and tools took {}): \
             resume with `--raise context_tokens=N` below the model's window, or use a model \
             with a larger one; the model said: {err}",
            state.history_tokens, state.context_tokens, state.overhead_tokens
        )
    } else if gave_up.retryable {
        format!("the model call failed {failures} times in a row; the last error: {err}")
    } else {
        format!("the model call failed and was not retried (retrying cannot help): {err}")
    };
    Action::Pause(PauseReason {
        kind: PauseKind::Breaker,
        limit: None,
        detail,
    })
}

/// The recorded kind of a replay that diverged from its cassette.
pub const DIVERGED: &str = "diverged";

/// Times one turn's request is sent again after the model refused it as
/// too long for its window (each time with the history cut in half).
pub const MAX_OVERFLOW_RETRIES: u32 = 1;

/// Where a pending call stands with a person, when it has asked one.
enum Approval<'s> {
    /// Its request (by id) waits for an answer.
    Waiting { request: &'s str, tool: &'s str },
    /// Denied, with the reason.
    Denied(&'s str),
}

/// The newest approval request of `call`, when it is unanswered or denied.
/// A granted one lets the call be dispatched (where the gate checks it
/// still holds, and asks anew when it lapsed).
fn approval_of<'s>(state: &'s SessionState, call: &str) -> Option<Approval<'s>> {
    let (request, approval) = state.approvals.of_call(call)?;
    match &approval.status {
        ApprovalStatus::Pending => Some(Approval::Waiting {
            request,
            tool: &approval.tool,
        }),
        ApprovalStatus::Denied { reason } => Some(Approval::Denied(reason)),
        ApprovalStatus::Granted { .. } | ApprovalStatus::Used => None,
    }
}

/// The pause while a call of `tool` waits for approval `request`.
pub fn approval_reason(request: &str, tool: &str) -> PauseReason {
    PauseReason {
        kind: PauseKind::Approval,
        limit: None,
        detail: format!(
            "`{tool}` waits for approval (request {request}); `longhand approvals` shows it, \
             `longhand approve <session> {request}` or `longhand deny <session> {request} \
             --reason …` answers it, then `longhand resume <session>`"
        ),
    }
}

/// The pause when the planner's answers were refused [`MAX_REJECTED`]
/// times, by the last refusal.
fn planner_gave_up(refused: &Refused) -> PauseReason {
    plan_reason(match refused {
        Refused::Revision => format!(
            "the planner's revisions kept removing or changing checks ({MAX_REJECTED} \
             refused); see `longhand log`"
        ),
        Refused::Answer { problem } => format!(
            "the planner gave no valid plan in {MAX_REJECTED} answers; the last problem: {}",
            super::prompts::cut(problem, 1000)
        ),
    })
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
    // The key is `component/tool/digest-of-input`: say it in words.
    let mut parts = key.splitn(3, '/');
    let (component, tool, input) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    Some(PauseReason {
        kind: PauseKind::Breaker,
        limit: Some("max_repeated_failure".to_owned()),
        detail: format!(
            "the tool call `{component}__{tool}` failed {n} times with the same input (blob \
             {input}); `longhand log` shows its errors; resume when fixed, or with --raise \
             max_repeated_failure=<higher>"
        ),
    })
}

/// The limit or breaker an operator's resume raising `raise` would meet at
/// once: the state as that `resumed` would fold it (raises on top, the
/// breakers' counts reset), checked as between turns. `None` when the
/// resume lets the session go on. A front end refuses such a resume and
/// says which limit holds and how far to raise it: one that was taken
/// paused again at once and said nothing (issue 31). A model without a
/// price is not judged here: `resume` may find its price in prices.toml.
pub fn limit_after_resume(
    state: &SessionState,
    limits: &SessionLimits,
    raise: &BTreeMap<String, u64>,
) -> Option<PauseReason> {
    let mut after = state.clone();
    after.apply(&longhand_session::EventRecord {
        seq: state.last_seq + 1,
        at_ms: 0,
        event: longhand_session::Event::Resumed {
            raised: raise.clone(),
            note: None,
            cause: longhand_session::ResumeCause::Operator,
        },
    });
    limit_hit(&after, limits).or_else(|| breaker(&after, limits))
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
    use crate::core::state::{CHECK_PREFIX, HANDOFF_ROLE};
    use longhand_session::{BlobRef, Event, EventRecord, ResumeCause};

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
                unpriced: &[],
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
                unpriced: &[],
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
            kind: None,
            last: false,
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
            unpriced: &[],
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
            unpriced: &[],
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
    fn a_resume_that_does_not_lift_the_limit_is_named_before_it_is_taken() {
        let mut log = Log::new();
        let mut l = limits();
        l.max_steps = 1;
        log.answer(1, &[]);
        let raise = |n: u64| BTreeMap::from([("max_steps".to_owned(), n)]);
        let held = limit_after_resume(&log.state, &l, &BTreeMap::new()).expect("held");
        assert_eq!(held.limit.as_deref(), Some("max_steps"));
        assert!(held.detail.contains("(1 of 1)"), "{}", held.detail);
        assert!(limit_after_resume(&log.state, &l, &raise(1)).is_some());
        assert_eq!(limit_after_resume(&log.state, &l, &raise(2)), None);
        // The state itself is not changed by asking.
        assert!(log.state.raised.is_empty());
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
            unpriced: &[],
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
        log.push(Event::CallsLearned {
            step: 1,
            calls: vec!["a".into(), "b".into()],
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
                    unpriced: &[],
                }
            )
        );
    }

    fn steer(kind: &str, text: Option<&str>) -> Event {
        Event::Steered {
            control: 7,
            kind: kind.into(),
            text: text.map(str::to_owned),
            by: "ops".into(),
        }
    }

    fn resumed(cause: ResumeCause) -> Event {
        Event::Resumed {
            raised: BTreeMap::new(),
            note: None,
            cause,
        }
    }

    #[test]
    fn an_operators_pause_is_obeyed_before_anything_runs_even_after_a_crash() {
        let mut log = Log::new();
        log.answer(1, &["a"]);
        log.push(steer("pause", Some("lunch")));
        let Action::Pause(reason) = decide(&log, false) else {
            panic!("expected a pause");
        };
        assert_eq!(reason.kind, PauseKind::User);
        assert_eq!(
            reason.detail,
            "paused by ops: lunch; `longhand resume` carries on"
        );
        // Killed before the pause was written: a recovery is no answer.
        log.push(resumed(ResumeCause::Crash));
        assert_eq!(decide(&log, false), Action::Pause(reason.clone()));
        log.push(Event::Paused { reason });
        assert_eq!(decide(&log, false), Action::Stop(SessionStatus::Paused));
        log.push(resumed(ResumeCause::Operator));
        assert!(matches!(decide(&log, false), Action::Dispatch { .. }));
    }

    #[test]
    fn a_pause_posted_before_an_operators_resume_is_not_applied_after_it() {
        let mut log = Log::new();
        log.answer(1, &["a"]);
        log.push(Event::Paused {
            reason: limit_reason("max_steps", 1, 1),
        });
        // `steer` records it as superseded, then the resume.
        log.push(steer("pause", Some("superseded by the operator's resume")));
        log.push(resumed(ResumeCause::Operator));
        assert!(matches!(decide(&log, false), Action::Dispatch { .. }));
    }

    #[test]
    fn an_operators_cancel_fails_the_session_and_no_resume_undoes_it() {
        let mut log = Log::new();
        log.answer(1, &["a"]);
        log.push(steer("cancel", None));
        assert_eq!(decide(&log, false), Action::Fail("cancelled by ops".into()));
        log.push(resumed(ResumeCause::Operator));
        assert_eq!(decide(&log, false), Action::Fail("cancelled by ops".into()));
        log.push(Event::Failed {
            error: "cancelled by ops".into(),
        });
        assert_eq!(decide(&log, false), Action::Stop(SessionStatus::Failed));
        // A message is no stop.
        let mut log = Log::new();
        log.push(steer("send", Some("also check b")));
        assert_eq!(decide(&log, false), ask(1));
    }

    #[test]
    fn a_cancel_now_fails_the_session_with_its_own_words_once_the_drop_is_recorded() {
        let mut log = Log::new();
        log.answer(1, &["a"]).started(1, "a", "writes");
        // `cancel_now` records the call the drop left as in doubt, then
        // the control; the end is this row's, even after a crash.
        log.push(Event::ToolInDoubt {
            step: 1,
            call_id: "a".into(),
            reason: "ended by cancel --now".into(),
        });
        log.push(steer("cancel_now", Some("wrong repo")));
        let fail = Action::Fail("cancelled now by ops: wrong repo".into());
        assert_eq!(decide(&log, false), fail);
        log.push(resumed(ResumeCause::Crash));
        assert_eq!(decide(&log, false), fail);
    }

    #[test]
    fn a_role_whose_model_has_no_price_is_not_asked_under_a_money_limit() {
        let unpriced = [UnpricedRole {
            role: Role::Worker,
            model: "m".into(),
            provider: "p".into(),
        }];
        let capped = SessionLimits {
            max_cost_micros: 1_000,
            ..limits()
        };
        let with = |log: &Log, limits: &SessionLimits, unpriced: &[UnpricedRole]| {
            next(
                &log.state,
                Policy {
                    limits,
                    has_check: false,
                    plan: None,
                    unpriced,
                },
            )
        };
        let mut log = Log::new();
        let Action::Pause(reason) = with(&log, &capped, &unpriced) else {
            panic!("expected a pause");
        };
        assert_eq!(reason.kind, PauseKind::Limit);
        assert_eq!(reason.limit.as_deref(), Some("max_cost_micros"));
        assert!(
            reason
                .detail
                .contains("model `m` (provider p) has no price"),
            "{reason:?}"
        );
        // No limit, or a priced model: asked.
        assert_eq!(with(&log, &limits(), &unpriced), ask(1));
        assert_eq!(with(&log, &capped, &[]), ask(1));
        // Another role's model is unpriced: the worker is still asked.
        let judge = [UnpricedRole {
            role: Role::Judge,
            ..unpriced[0].clone()
        }];
        assert_eq!(with(&log, &capped, &judge), ask(1));
        // Resumed with the limit raised to 0: no money limit, asked.
        log.push(Event::Paused { reason });
        log.push(Event::Resumed {
            raised: BTreeMap::from([("max_cost_micros".to_owned(), 0)]),
            note: None,
            cause: ResumeCause::Operator,
        });
        assert_eq!(with(&log, &capped, &unpriced), ask(1));
    }

    fn failed(step: u64, attempt: u32, retryable: bool, kind: &str, last: bool) -> Event {
        Event::ModelFailed {
            step,
            attempt,
            error: format!("{kind} error"),
            retryable,
            retry_after_ms: (!last).then_some(10),
            kind: Some(kind.into()),
            last,
        }
    }

    fn requested(log: &mut Log, step: u64, attempt: u32) {
        log.push(Event::ModelRequested {
            step,
            role: "worker".into(),
            provider: "p".into(),
            model: "m".into(),
            request: BlobRef::of(b"r"),
            attempt,
        });
    }

    #[test]
    fn a_model_request_given_up_on_pauses_until_an_operator_resumes() {
        let mut log = Log::new();
        requested(&mut log, 1, 1);
        log.push(failed(1, 1, true, "server", false));
        // A retry is under way (or was, before a crash): asked again.
        assert_eq!(decide(&log, false), ask(1));
        log.push(failed(1, 2, true, "server", false));
        log.push(failed(1, 3, true, "server", true));
        let pause = |detail: &str| {
            Action::Pause(PauseReason {
                kind: PauseKind::Breaker,
                limit: None,
                detail: detail.into(),
            })
        };
        let gave_up = pause("the model call failed 3 times in a row; the last error: server error");
        assert_eq!(decide(&log, false), gave_up);
        // Killed before the pause was written: still given up.
        log.push(resumed(ResumeCause::Crash));
        assert_eq!(decide(&log, false), gave_up);
        let Action::Pause(reason) = gave_up else {
            unreachable!()
        };
        log.push(Event::Paused { reason });
        log.push(resumed(ResumeCause::Operator));
        assert_eq!(decide(&log, false), ask(1));
        // The next worker counts its own attempts in a row; the numbers go on.
        requested(&mut log, 1, 4);
        log.push(failed(1, 4, false, "auth", true));
        assert_eq!(
            decide(&log, false),
            pause("the model call failed and was not retried (retrying cannot help): auth error")
        );
    }

    #[test]
    fn a_replay_that_diverged_fails_the_session() {
        let mut log = Log::new();
        requested(&mut log, 1, 1);
        log.push(failed(1, 1, false, DIVERGED, true));
        assert_eq!(
            decide(&log, false),
            Action::Fail("model: diverged error".into())
        );
    }

    fn approval_requested(log: &mut Log, call: &str) -> String {
        let request = format!("ap-{}", log.seq + 1);
        log.push(Event::ApprovalRequested {
            request: request.clone(),
            step: 1,
            call_id: call.into(),
            tool: "fs_write".into(),
            effect: "writes".into(),
            fingerprint: format!("sha256:{call}"),
            input: BlobRef::of(call.as_bytes()),
        });
        request
    }

    #[test]
    fn a_call_waiting_for_a_person_pauses_and_a_denied_one_is_answered() {
        let mut log = Log::new();
        log.answer(1, &["a", "b"]);
        let request = approval_requested(&mut log, "a");
        let wait = Action::Pause(approval_reason(&request, "fs_write"));
        assert_eq!(decide(&log, false), wait);
        let Action::Pause(reason) = wait.clone() else {
            unreachable!()
        };
        assert_eq!(reason.kind, PauseKind::Approval);
        assert!(reason.detail.contains(&request), "{}", reason.detail);
        // Resumed with no answer: still waiting.
        log.push(Event::Paused { reason });
        log.push(resumed(ResumeCause::Operator));
        assert_eq!(decide(&log, false), wait);
        log.push(Event::ApprovalDenied {
            request,
            reason: "not that file".into(),
            by: "ops".into(),
        });
        assert_eq!(
            decide(&log, false),
            Action::Deny {
                step: 1,
                call: "a".into(),
                reason: "not that file".into()
            }
        );
        log.finished(1, "a", false);
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["b".into()]
            }
        );
    }

    #[test]
    fn a_granted_call_is_dispatched_and_a_waiting_one_ends_the_batch() {
        let mut log = Log::new();
        log.answer(1, &["a", "b", "c"]);
        let request = approval_requested(&mut log, "a");
        log.push(Event::ApprovalGranted {
            request,
            scope: "once".into(),
            expires_ms: None,
            by: "ops".into(),
        });
        approval_requested(&mut log, "b");
        // `a` runs (the gate checks its grant still holds); `b` and what
        // follows it wait.
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["a".into()]
            }
        );
    }

    /// A planner's conversation whose first answer (turn 1) is in.
    fn planner_answered() -> Log {
        let mut log = Log::new();
        log.push(Event::RoleStarted {
            role: PLANNER.into(),
            task: None,
            check: None,
            briefing: BlobRef::of(b"plan it"),
        });
        log.answer(1, &[]);
        log
    }

    #[test]
    fn a_planner_refused_max_rejected_times_pauses_and_gets_a_try_after_a_resume() {
        let mut log = planner_answered();
        for step in 1..=MAX_REJECTED as u64 {
            assert_eq!(planned(&log), Action::AcceptPlan { step });
            log.push(Event::Error {
                step: Some(step),
                message: format!("problem {step}"),
            });
            if step < MAX_REJECTED as u64 {
                assert_eq!(
                    planned(&log),
                    Action::Ask {
                        role: Role::Planner,
                        step: step + 1
                    }
                );
                log.answer(step + 1, &[]);
            }
        }
        let Action::Pause(reason) = planned(&log) else {
            panic!("expected a pause");
        };
        assert_eq!(reason.kind, PauseKind::Plan);
        assert_eq!(
            reason.detail,
            format!(
                "the planner gave no valid plan in {MAX_REJECTED} answers; the last problem: \
                 problem {MAX_REJECTED}"
            )
        );
        log.push(Event::Paused { reason });
        log.push(resumed(ResumeCause::Operator));
        let next = MAX_REJECTED as u64 + 1;
        assert_eq!(
            planned(&log),
            Action::Ask {
                role: Role::Planner,
                step: next
            }
        );
        // One more refusal pauses again, this time for a weakening revision.
        log.answer(next, &[]);
        log.push(Event::PlanRevised {
            plan: serde_json::json!({"tasks": []}),
            author: PLANNER.into(),
            reason: "r".into(),
            accepted: false,
            weakened: vec!["t: check 0 removed".into()],
        });
        let Action::Pause(reason) = planned(&log) else {
            panic!("expected a pause");
        };
        assert!(
            reason
                .detail
                .starts_with("the planner's revisions kept removing"),
            "{}",
            reason.detail
        );
    }

    #[test]
    fn the_judges_last_try_is_decided_by_its_refusals() {
        let mut log = task_started();
        log.push(Event::RoleStarted {
            role: JUDGE.into(),
            task: Some("t".into()),
            check: Some(0),
            briefing: BlobRef::of(b"judge it"),
        });
        for step in 1..=MAX_REJECTED as u64 {
            log.answer(step, &[]);
            assert_eq!(
                planned(&log),
                Action::AcceptVerdict {
                    step,
                    last_try: step == MAX_REJECTED as u64
                }
            );
            log.push(Event::Error {
                step: Some(step),
                message: "The verdict was not readable".into(),
            });
        }
    }

    #[test]
    fn an_old_log_without_the_new_facts_wakes_and_goes_on() {
        // Written before `calls`, `kind`, `last` and `calls_learned`: the
        // events parse with their defaults and the loop goes on from them.
        let old = [
            r#"{"type":"model_requested","step":1,"role":"worker","provider":"p","model":"m","request":{"digest":"sha256:01","bytes":1},"attempt":1}"#,
            r#"{"type":"model_failed","step":1,"attempt":1,"error":"500","retryable":true}"#,
            r#"{"type":"steered","control":3,"kind":"pause","by":"ops"}"#,
            r#"{"type":"paused","reason":{"kind":"user","detail":"paused by ops"}}"#,
            r#"{"type":"resumed","raised":{},"cause":"operator"}"#,
            r#"{"type":"model_responded","step":1,"response":{"digest":"sha256:02","bytes":1},"input_tokens":1,"output_tokens":1,"latency_ms":1,"stop_reason":"tool_use"}"#,
        ];
        let mut log = Log::new();
        for (i, json) in old.iter().enumerate() {
            let event: Event = serde_json::from_str(json).unwrap();
            log.push(event);
            if i == 1 {
                // A failure with no `last`: the request is asked again.
                assert_eq!(decide(&log, false), ask(1));
            }
        }
        assert_eq!(log.state.stop_asked, None);
        assert_eq!(decide(&log, false), Action::LearnCalls);
        log.push(Event::CallsLearned {
            step: 1,
            calls: vec!["a".into()],
        });
        assert_eq!(
            decide(&log, false),
            Action::Dispatch {
                step: 1,
                calls: vec!["a".into()]
            }
        );
        // A snapshot from before the new fields decodes with none set.
        let mut value = serde_json::to_value(&log.state).unwrap();
        value.as_object_mut().unwrap().remove("stop_asked");
        let back: SessionState = serde_json::from_value(value).unwrap();
        assert_eq!(back, log.state);
    }
}
