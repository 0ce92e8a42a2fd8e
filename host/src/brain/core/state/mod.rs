//! Session state: a pure fold over the event log.
//!
//! `wake` = latest snapshot (if any) + `apply` of every later event. Nothing
//! here does I/O, reads a clock or calls a model: the same events always fold
//! to the same state, which is what makes crash-resume exact. The loop
//! (`agent.rs`) decides what to do next from this state alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::brain::plan::{PLANNER, PlanState, TaskStatus};
use crate::session::{BlobRef, Event, EventRecord, PauseReason, ResumeCause, SessionStatus};

/// The worker's role name.
pub const WORKER: &str = "worker";
/// The judge's role name.
pub const JUDGE: &str = "judge";
/// The role name of a model call writing a handoff.
pub const HANDOFF_ROLE: &str = "handoff";

/// One item of the conversation after the goal, in log order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryItem {
    /// A model answer (a serialized `ModelResponse`).
    Assistant {
        /// Event sequence number.
        seq: u64,
        /// Model turn.
        step: u64,
        /// The response blob.
        response: BlobRef,
    },
    /// The result of a tool call, as the model will see it.
    ToolResult {
        /// Event sequence number.
        seq: u64,
        /// The model's id for the call.
        call_id: String,
        /// Whether the call succeeded.
        ok: bool,
        /// Output or error JSON; `None` when the outcome is unknown.
        result: Option<BlobRef>,
        /// Set when the outcome is unknown (crash mid-call of a non-idempotent tool).
        note: Option<String>,
    },
    /// A message from the harness to the model: why its last answer was
    /// not accepted (an invalid plan or verdict, a refused revision).
    Note {
        /// Event sequence number.
        seq: u64,
        /// The message.
        text: String,
    },
}

/// The conversation the loop is in, in a planned session: whose it is and
/// the briefing it started from. Each starts fresh (`task_started`,
/// `handoff`, `role_started`): the history before it is not sent again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// `worker`, `judge` or `planner`.
    pub role: String,
    /// The task it is about.
    pub task: Option<String>,
    /// For the judge: the check it grades.
    pub check: Option<u32>,
    /// The first message (UTF-8 text blob).
    pub briefing: BlobRef,
    /// Answers received in it.
    pub steps: u64,
    /// Its size at the last answer as the provider reported it: input
    /// plus output tokens.
    pub context_tokens: u64,
    /// Answers sent back as invalid (an unreadable plan or verdict).
    pub rejected: u32,
    /// `history_omitted` when it started: items dropped before it are not
    /// part of it, so the note on left-out items counts from here.
    #[serde(default)]
    pub omitted_before: u64,
}

/// A handoff the model wrote, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffReply {
    /// Its turn.
    pub step: u64,
    /// The response blob.
    pub response: BlobRef,
}

/// A progress note, as `progress_noted` recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressNote {
    /// Task id.
    pub task: String,
    /// The note.
    pub text: String,
}

/// Progress notes kept in the state (the newest); older ones stay in the
/// log.
pub const MAX_PROGRESS_NOTES: usize = 32;

/// A tool call recorded as started and not (yet) finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCall {
    /// Model turn that asked for it.
    pub step: u64,
    /// Component label.
    pub component: String,
    /// Tool name within the component.
    pub tool: String,
    /// `read-only`, `idempotent` or `writes`.
    pub effect: String,
    /// Input blob.
    pub input: BlobRef,
}

/// Whether a call of this recorded effect may run again without harm
/// (`read-only` or `idempotent`): such a call needs no durable record before
/// it runs and is re-run after a crash; any other is recorded in doubt.
pub fn repeatable(effect: &str) -> bool {
    matches!(effect, "read-only" | "idempotent")
}

/// A model request with no response yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    /// Model turn.
    pub step: u64,
    /// Request blob.
    pub request: BlobRef,
    /// Attempts recorded for this turn so far, across processes: the
    /// highest `attempt` of its `model_requested` and `model_failed` events.
    #[serde(default)]
    pub attempts: u32,
    /// The role asking (`worker` in logs before roles).
    #[serde(default = "worker_role")]
    pub role: String,
}

fn worker_role() -> String {
    "worker".to_owned()
}

/// The shape of the last model answer: what the loop decides from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Model turn.
    pub step: u64,
    /// The response blob (its text and the calls' arguments live there).
    pub response: BlobRef,
    /// Ids of the calls it asked for, in order; `None` when the log
    /// predates `model_responded.calls` and the blob has not been read yet.
    pub calls: Option<Vec<String>>,
}

impl Answer {
    /// Whether this is a final answer: it asked for no tools.
    pub fn is_final(&self) -> bool {
        self.calls.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Prefix of the call ids of completion checks (never shown to the model as
/// calls).
pub const CHECK_PREFIX: &str = "completion-check-";

/// Everything the loop needs, folded from events.
///
/// Every field defaults when missing, so a snapshot written before a field
/// existed still decodes; a change of meaning (not just a new field) bumps
/// the snapshot format version instead (see `brain::snapshot`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionState {
    /// Last event folded in.
    pub last_seq: u64,
    /// Agent name.
    pub agent_name: String,
    /// The frozen agent (see `agent::Frozen`).
    pub agent: serde_json::Value,
    /// Digest of the frozen agent.
    pub config_digest: String,
    /// The goal.
    pub goal: Option<String>,
    /// Lifecycle.
    pub status: SessionStatus,
    /// Why it is paused, while paused.
    pub pause: Option<PauseReason>,
    /// Final summary, once finished: the whole text, or a preview of it
    /// when `summary_blob` is set (see `Event::Finished`).
    pub summary: Option<String>,
    /// The whole final summary (UTF-8), when it was too long to keep inline.
    /// Defaulted so snapshots taken before it existed still decode.
    #[serde(default)]
    pub summary_blob: Option<BlobRef>,
    /// Error, once failed.
    pub error: Option<String>,
    /// Model answers received.
    pub steps: u64,
    /// A request sent without an answer.
    pub pending_request: Option<PendingRequest>,
    /// The last model answer.
    pub answer: Option<Answer>,
    /// Calls of the last answer not yet started, finished or in doubt, in
    /// the order the model asked for them.
    pub pending_calls: Vec<String>,
    /// The completion check run after the last answer: `None` until one
    /// finished, then whether it passed.
    pub check_passed: Option<bool>,
    /// The conversation after the goal that still fits the context budget
    /// (oldest whole turns are dropped first). Bounded, so snapshots and
    /// wake time do not grow with the length of the log.
    pub history: std::collections::VecDeque<HistoryItem>,
    /// Estimated tokens of `history` (bytes / 4).
    pub history_tokens: u64,
    /// History items dropped from the front so far.
    pub history_omitted: u64,
    /// Context budget in tokens, from the frozen agent's limits.
    pub context_tokens: u64,
    /// Calls started and not finished, by call id.
    pub open_calls: BTreeMap<String, OpenCall>,
    /// Calls whose outcome is unknown, in order.
    pub in_doubt: Vec<String>,
    /// Input tokens, all turns.
    pub input_tokens: u64,
    /// Output tokens, all turns.
    pub output_tokens: u64,
    /// Tool calls finished (any outcome).
    pub tool_calls: u64,
    /// Bytes tool calls wrote into granted directories, from their receipts.
    /// Defaulted so snapshots taken before it existed still decode.
    #[serde(default)]
    pub bytes_written: u64,
    /// Time spent in model calls and tool calls, in milliseconds.
    pub active_ms: u64,
    /// Failed tool calls in a row.
    pub consecutive_failures: u64,
    /// Failures of the same call (tool + input digest) since the last resume.
    pub repeated_failures: BTreeMap<String, u64>,
    /// Limits raised by `resume --raise`.
    pub raised: BTreeMap<String, u64>,
    /// Events since the last snapshot.
    pub since_snapshot: u64,
    /// The plan and its tasks, in a planned session.
    pub plan: Option<crate::brain::plan::PlanState>,
    /// The conversation in progress, in a planned session (`None` in a
    /// single loop, whose context starts from the goal).
    pub conversation: Option<Conversation>,
    /// A handoff answer waiting to be checked.
    pub handoff_reply: Option<HandoffReply>,
    /// Why the last handoff answer was refused, for the next try.
    pub handoff_problems: Option<String>,
    /// Handoff answers refused since the last handoff.
    pub handoff_tries: u32,
    /// The last refused handoff answer (response blob): the next try shows
    /// it to the model with why it was refused.
    pub handoff_refused: Option<BlobRef>,
    /// The latest handoff (JSON blob).
    pub latest_handoff: Option<BlobRef>,
    /// The newest progress notes.
    pub progress: std::collections::VecDeque<ProgressNote>,
    /// Failed checks of the current task's latest attempt, one line each,
    /// for the worker's next attempt.
    pub failures: Vec<String>,
    /// The worker's last answer of the current attempt, kept when its
    /// checks start (the judge reads it; the progress note quotes it).
    pub claim: Option<BlobRef>,
    /// Inputs of the calls that changed something (not read-only) in the
    /// current task, all its attempts, oldest first, at most the newest
    /// [`MAX_CHANGES`]: the judge and the harness's handoff name what the
    /// worker touched.
    pub changes: Vec<BlobRef>,
    /// Approval requests and answers.
    pub approvals: crate::brain::approvals::Approvals,
    /// The highest id of the inbox controls acted on (`steered`).
    pub last_control: u64,
    /// The last event is `detached`: running, left for a worker.
    pub awaiting_worker: bool,
    /// Worker answers since the last progress: a check that passed or a
    /// call that changed something (the no-progress breaker's count).
    pub steps_since_progress: u64,
    /// Results of read-only calls by their key (see
    /// `Runner::fingerprint`), for `cache_read_only`: emptied by any call
    /// that changes something. At most [`MAX_CACHED`].
    pub read_cache: BTreeMap<String, CachedResult>,
    /// Child sessions started by `delegate`, by call id.
    pub children: BTreeMap<String, String>,
    /// Budget handed to children, by limit name: counted as spent.
    pub reserved: BTreeMap<String, u64>,
    /// The parent session, for a child.
    pub parent: Option<String>,
    /// What the model answers cost, micro-dollars, by the frozen prices.
    pub cost_micros: u64,
    /// Answers whose cost is unknown (no price for their model): the cost
    /// above is then a lower bound.
    pub cost_unknown: u64,
}

/// A read-only call's result kept for `cache_read_only`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedResult {
    /// The call that produced it.
    pub call_id: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// The result blob.
    pub result: BlobRef,
}

/// Read-only results kept for the cache.
pub const MAX_CACHED: usize = 1024;

/// Inputs of changing calls kept per task.
pub const MAX_CHANGES: usize = 64;

impl Default for SessionState {
    fn default() -> Self {
        Self {
            last_seq: 0,
            agent_name: String::new(),
            agent: serde_json::Value::Null,
            config_digest: String::new(),
            goal: None,
            status: SessionStatus::Created,
            pause: None,
            summary: None,
            summary_blob: None,
            error: None,
            steps: 0,
            pending_request: None,
            answer: None,
            pending_calls: Vec::new(),
            check_passed: None,
            history: std::collections::VecDeque::new(),
            history_tokens: 0,
            history_omitted: 0,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            open_calls: BTreeMap::new(),
            in_doubt: Vec::new(),
            input_tokens: 0,
            output_tokens: 0,
            tool_calls: 0,
            bytes_written: 0,
            active_ms: 0,
            consecutive_failures: 0,
            repeated_failures: BTreeMap::new(),
            raised: BTreeMap::new(),
            since_snapshot: 0,
            plan: None,
            conversation: None,
            handoff_reply: None,
            handoff_problems: None,
            handoff_tries: 0,
            handoff_refused: None,
            latest_handoff: None,
            progress: std::collections::VecDeque::new(),
            failures: Vec::new(),
            claim: None,
            changes: Vec::new(),
            approvals: Default::default(),
            last_control: 0,
            awaiting_worker: false,
            steps_since_progress: 0,
            read_cache: BTreeMap::new(),
            children: BTreeMap::new(),
            reserved: BTreeMap::new(),
            parent: None,
            cost_micros: 0,
            cost_unknown: 0,
        }
    }
}

/// Budget used when the frozen agent names none.
pub const DEFAULT_CONTEXT_TOKENS: u64 = 100_000;

/// Most history items kept, whatever their size.
pub const MAX_HISTORY_ITEMS: usize = 1024;

/// Rough token estimate of a payload: four bytes a token.
pub fn estimate_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4) + 4
}

impl HistoryItem {
    /// The seq of the event it comes from.
    pub fn seq(&self) -> u64 {
        match self {
            Self::Assistant { seq, .. } | Self::ToolResult { seq, .. } | Self::Note { seq, .. } => {
                *seq
            }
        }
    }

    fn tokens(&self) -> u64 {
        match self {
            Self::Assistant { response, .. } => estimate_tokens(response.bytes),
            Self::ToolResult { result, note, .. } => estimate_tokens(
                result.as_ref().map(|r| r.bytes).unwrap_or(0)
                    + note.as_ref().map(|n| n.len() as u64).unwrap_or(0),
            ),
            Self::Note { text, .. } => estimate_tokens(text.len() as u64),
        }
    }
}

/// Key under which repeated failures of the same call are counted.
pub fn failure_key(component: &str, tool: &str, input: &BlobRef) -> String {
    format!("{component}/{tool}/{}", input.digest)
}

impl SessionState {
    /// Fold a run of records (in order) into a fresh state.
    pub fn fold(records: &[EventRecord]) -> Self {
        let mut state = Self::default();
        for r in records {
            state.apply(r);
        }
        state
    }

    /// Apply one record. Records at or below `last_seq` are ignored, so a
    /// snapshot plus an overlapping tail folds correctly.
    pub fn apply(&mut self, record: &EventRecord) {
        if record.seq <= self.last_seq && self.last_seq != 0 {
            return;
        }
        self.last_seq = record.seq;
        self.since_snapshot += 1;
        if let Some(status) = record.event.status_after() {
            self.status = status;
        }
        self.approvals.apply(&record.event);
        self.awaiting_worker = matches!(record.event, Event::Detached { .. });
        match &record.event {
            Event::SessionCreated {
                agent_name,
                agent,
                config_digest,
            } => {
                self.agent_name = agent_name.clone();
                self.agent = agent.clone();
                self.config_digest = config_digest.clone();
                self.context_tokens = agent
                    .pointer("/limits/context_tokens")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(DEFAULT_CONTEXT_TOKENS);
            }
            Event::GoalSet { goal } => self.goal = Some(goal.clone()),
            Event::ModelRequested {
                step,
                request,
                attempt,
                role,
                ..
            } => {
                let before = match &self.pending_request {
                    Some(p) if p.step == *step => p.attempts,
                    _ => 0,
                };
                self.pending_request = Some(PendingRequest {
                    step: *step,
                    request: request.clone(),
                    attempts: before.max(*attempt),
                    role: role.clone(),
                });
            }
            Event::ModelFailed { step, attempt, .. } => {
                if let Some(p) = &mut self.pending_request
                    && p.step == *step
                {
                    p.attempts = p.attempts.max(*attempt);
                }
            }
            Event::ModelResponded {
                step,
                response,
                input_tokens,
                output_tokens,
                latency_ms,
                calls,
                cost_micros,
                ..
            } => {
                match cost_micros {
                    Some(c) => self.cost_micros = self.cost_micros.saturating_add(*c),
                    None => self.cost_unknown += 1,
                }
                let role = self.pending_request.take().map(|p| p.role);
                self.steps = self.steps.max(*step);
                self.input_tokens += input_tokens;
                self.output_tokens += output_tokens;
                self.active_ms += latency_ms;
                if role.as_deref() == Some(HANDOFF_ROLE) {
                    // Not an answer of the conversation: checked, then
                    // the conversation is replaced by it.
                    self.handoff_reply = Some(HandoffReply {
                        step: *step,
                        response: response.clone(),
                    });
                    return;
                }
                if let Some(c) = &mut self.conversation {
                    c.steps += 1;
                    c.context_tokens = input_tokens + output_tokens;
                }
                if self.conversation.as_ref().is_none_or(|c| c.role == WORKER) {
                    self.steps_since_progress += 1;
                }
                self.answer = Some(Answer {
                    step: *step,
                    response: response.clone(),
                    calls: calls.clone(),
                });
                self.pending_calls = calls.clone().unwrap_or_default();
                self.check_passed = None;
                self.push_history(HistoryItem::Assistant {
                    seq: record.seq,
                    step: *step,
                    response: response.clone(),
                });
            }
            Event::Error {
                step: Some(step),
                message,
            } => self.feedback(record.seq, *step, message),
            Event::Error { step: None, .. } => {}
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
                    self.feedback(record.seq, step, &text);
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
            Event::RoleStarted {
                role,
                task,
                check,
                briefing,
            } => {
                self.keep_claim();
                self.start_conversation(role, task.clone(), *check, briefing.clone());
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
            Event::Handoff {
                task,
                handoff,
                briefing,
                ..
            } => {
                self.latest_handoff = Some(handoff.clone());
                self.handoff_reply = None;
                self.handoff_problems = None;
                self.handoff_refused = None;
                self.handoff_tries = 0;
                self.start_conversation(WORKER, task.clone(), None, briefing.clone());
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
            Event::Steered {
                control,
                kind,
                text,
                by,
            } => {
                self.last_control = self.last_control.max(*control);
                if kind == "send" {
                    self.push_history(HistoryItem::Note {
                        seq: record.seq,
                        text: format!(
                            "[a message from {by}, the operator] {}",
                            text.as_deref().unwrap_or_default()
                        ),
                    });
                }
            }
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
            Event::MemoryWritten { .. }
            | Event::Detached { .. }
            | Event::ApprovalRequested { .. }
            | Event::ApprovalGranted { .. }
            | Event::ApprovalDenied { .. } => {}
            Event::ToolStarted {
                step,
                call_id,
                component,
                tool,
                effect,
                input,
                ..
            } => {
                self.pending_calls.retain(|c| c != call_id);
                if effect != "read-only" {
                    if self.changes.len() >= MAX_CHANGES {
                        self.changes.remove(0);
                    }
                    if !self.changes.contains(input) {
                        self.changes.push(input.clone());
                    }
                }
                self.open_calls.insert(
                    call_id.clone(),
                    OpenCall {
                        step: *step,
                        component: component.clone(),
                        tool: tool.clone(),
                        effect: effect.clone(),
                        input: input.clone(),
                    },
                );
            }
            Event::ToolFinished {
                call_id,
                ok,
                result,
                receipt,
                ..
            } => {
                let open = self.open_calls.remove(call_id);
                self.pending_calls.retain(|c| c != call_id);
                if call_id.starts_with(CHECK_PREFIX) {
                    self.check_passed = Some(*ok);
                    if *ok {
                        self.steps_since_progress = 0;
                    }
                }
                match &open {
                    // A change: progress, and what reads saw may differ now.
                    Some(o) if o.effect != "read-only" => {
                        self.read_cache.clear();
                        if *ok {
                            self.steps_since_progress = 0;
                        }
                    }
                    Some(_) if *ok => {
                        if let Some(key) = receipt.get("cache_key").and_then(|k| k.as_str())
                            && self.read_cache.len() < MAX_CACHED
                        {
                            self.read_cache.insert(
                                key.to_owned(),
                                CachedResult {
                                    call_id: call_id.clone(),
                                    ok: *ok,
                                    result: result.clone(),
                                },
                            );
                        }
                    }
                    _ => {}
                }
                self.tool_calls += 1;
                self.bytes_written += receipt
                    .get("bytes_written")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0);
                self.active_ms +=
                    receipt.get("wall_us").and_then(|v| v.as_u64()).unwrap_or(0) / 1000;
                if *ok {
                    self.consecutive_failures = 0;
                } else {
                    self.consecutive_failures += 1;
                    if let Some(open) = &open {
                        *self
                            .repeated_failures
                            .entry(failure_key(&open.component, &open.tool, &open.input))
                            .or_default() += 1;
                    }
                }
                self.push_history(HistoryItem::ToolResult {
                    seq: record.seq,
                    call_id: call_id.clone(),
                    ok: *ok,
                    result: Some(result.clone()),
                    note: None,
                });
            }
            Event::ToolInDoubt {
                call_id, reason, ..
            } => {
                self.open_calls.remove(call_id);
                self.pending_calls.retain(|c| c != call_id);
                self.in_doubt.push(call_id.clone());
                self.tool_calls += 1;
                self.push_history(HistoryItem::ToolResult {
                    seq: record.seq,
                    call_id: call_id.clone(),
                    ok: false,
                    result: None,
                    note: Some(reason.clone()),
                });
            }
            Event::Paused { reason } => self.pause = Some(reason.clone()),
            Event::Resumed { raised, cause, .. } => {
                self.pause = None;
                for (k, v) in raised {
                    self.raised.insert(k.clone(), *v);
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
        }
    }

    /// Keep the worker's last answer as its claim, when the worker's
    /// conversation is the one in progress.
    fn keep_claim(&mut self) {
        if self.conversation.as_ref().is_some_and(|c| c.role == WORKER)
            && let Some(answer) = &self.answer
        {
            self.claim = Some(answer.response.clone());
        }
    }

    /// Start a fresh conversation: nothing of the last one is sent again.
    fn start_conversation(
        &mut self,
        role: &str,
        task: Option<String>,
        check: Option<u32>,
        briefing: BlobRef,
    ) {
        self.reset_context();
        self.conversation = Some(Conversation {
            role: role.to_owned(),
            task,
            check,
            briefing,
            steps: 0,
            context_tokens: 0,
            rejected: 0,
            omitted_before: self.history_omitted,
        });
    }

    /// End the judge's or the planner's conversation (a no-op for any
    /// other): its result is recorded, its history is not needed again.
    fn end_side_conversation(&mut self, role: &str) {
        if self.conversation.as_ref().is_some_and(|c| c.role == role) {
            self.reset_context();
            self.conversation = None;
        }
    }

    /// Empty the context. The history's positions go on counting (see
    /// `history_omitted`), as when old turns are dropped from the front.
    fn reset_context(&mut self) {
        self.history_omitted += self.history.len() as u64;
        self.history.clear();
        self.history_tokens = 0;
        self.answer = None;
        self.pending_calls.clear();
        self.check_passed = None;
    }

    /// An `error` about turn `step`: when it is the handoff waiting to be
    /// checked, or the final answer of a planner or judge conversation, it
    /// is the harness refusing that answer — the model is told why (a note
    /// in its history) and asked again.
    fn feedback(&mut self, seq: u64, step: u64, message: &str) {
        if self.handoff_reply.as_ref().is_some_and(|h| h.step == step) {
            self.handoff_refused = self.handoff_reply.take().map(|h| h.response);
            self.handoff_problems = Some(message.to_owned());
            self.handoff_tries += 1;
            return;
        }
        let side = self
            .conversation
            .as_ref()
            .is_some_and(|c| c.role == PLANNER || c.role == JUDGE);
        if side
            && self
                .answer
                .as_ref()
                .is_some_and(|a| a.step == step && a.is_final())
        {
            self.answer = None;
            if let Some(c) = &mut self.conversation {
                c.rejected += 1;
            }
            self.push_history(HistoryItem::Note {
                seq,
                text: message.to_owned(),
            });
        }
    }

    fn push_history(&mut self, item: HistoryItem) {
        self.history_tokens += item.tokens();
        self.history.push_back(item);
        // Drop whole turns from the front: an assistant answer goes with the
        // tool results that follow it, so no result is left without its call.
        // The newest turn always stays, whatever its size.
        while (self.history_tokens > self.context_tokens || self.history.len() > MAX_HISTORY_ITEMS)
            && self.first_turn_len() < self.history.len()
        {
            for _ in 0..self.first_turn_len() {
                if let Some(old) = self.history.pop_front() {
                    self.history_tokens = self.history_tokens.saturating_sub(old.tokens());
                    self.history_omitted += 1;
                }
            }
        }
    }

    /// Items in the first turn of `history`.
    fn first_turn_len(&self) -> usize {
        let mut n = 0;
        for (i, item) in self.history.iter().enumerate() {
            if i > 0 && matches!(item, HistoryItem::Assistant { .. }) {
                break;
            }
            n += 1;
        }
        n.max(1)
    }

    /// Record the calls of an answer whose `model_responded` predates the
    /// `calls` field, once the loop has read them from its blob. The one
    /// piece of state not folded from events alone, and only for such logs:
    /// it is what the event would have said.
    pub fn learn_calls(&mut self, calls: Vec<String>) {
        let Some(answer) = &mut self.answer else {
            return;
        };
        if answer.calls.is_some() {
            return;
        }
        // Calls of this answer already resolved (started, finished or in
        // doubt) are in the history or open after it.
        let after = self
            .history
            .iter()
            .rev()
            .take_while(|h| !matches!(h, HistoryItem::Assistant { .. }))
            .filter_map(|h| match h {
                HistoryItem::ToolResult { call_id, .. } => Some(call_id.as_str()),
                HistoryItem::Assistant { .. } | HistoryItem::Note { .. } => None,
            })
            .collect::<std::collections::HashSet<_>>();
        self.pending_calls = calls
            .iter()
            .filter(|c| !after.contains(c.as_str()) && !self.open_calls.contains_key(*c))
            .cloned()
            .collect();
        if let Some(HistoryItem::ToolResult { call_id, ok, .. }) = self.history.back()
            && call_id.starts_with(CHECK_PREFIX)
        {
            self.check_passed = Some(*ok);
        }
        answer.calls = Some(calls);
    }

    /// Whether the session can make no more progress on its own.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status, SessionStatus::Finished | SessionStatus::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, event: Event) -> EventRecord {
        EventRecord {
            seq,
            at_ms: 0,
            event,
        }
    }

    fn lead() -> Vec<EventRecord> {
        vec![
            record(
                1,
                Event::SessionCreated {
                    agent_name: "a".into(),
                    agent: serde_json::json!({}),
                    config_digest: "sha256:00".into(),
                },
            ),
            record(2, Event::GoalSet { goal: "g".into() }),
        ]
    }

    #[test]
    fn finished_folds_the_summary_and_its_blob() {
        let whole = "x".repeat(crate::session::event::MAX_INLINE_TEXT + 1);
        let blob = BlobRef::of(whole.as_bytes());
        let preview = crate::session::event::bounded(&whole).into_owned();
        // Paused first: finishing clears the pause.
        let mut records = lead();
        records.push(record(
            3,
            Event::Paused {
                reason: PauseReason {
                    kind: crate::session::PauseKind::User,
                    limit: None,
                    detail: "wait".into(),
                },
            },
        ));
        records.push(record(
            4,
            Event::Resumed {
                raised: BTreeMap::new(),
                note: None,
                cause: ResumeCause::Operator,
            },
        ));
        records.push(record(
            5,
            Event::Finished {
                summary: Some(preview.clone()),
                summary_blob: Some(blob.clone()),
            },
        ));
        let state = SessionState::fold(&records);
        assert_eq!(state.status, SessionStatus::Finished);
        assert!(state.is_terminal());
        assert_eq!(state.pause, None);
        assert_eq!(state.summary.as_deref(), Some(preview.as_str()));
        assert_eq!(state.summary_blob, Some(blob));
    }

    #[test]
    fn finished_of_the_older_shape_folds_its_inline_summary() {
        let mut records = lead();
        let old: EventRecord =
            serde_json::from_str(r#"{"seq":3,"at_ms":1,"type":"finished","summary":"done"}"#)
                .unwrap();
        records.push(old);
        let state = SessionState::fold(&records);
        assert_eq!(state.status, SessionStatus::Finished);
        assert_eq!(state.summary.as_deref(), Some("done"));
        assert_eq!(state.summary_blob, None);
    }

    #[test]
    fn a_snapshot_without_summary_blob_decodes() {
        let mut value = serde_json::to_value(SessionState::fold(&lead())).unwrap();
        value.as_object_mut().unwrap().remove("summary_blob");
        let state: SessionState = serde_json::from_value(value).unwrap();
        assert_eq!(state, SessionState::fold(&lead()));
    }
}
