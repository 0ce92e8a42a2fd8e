//! Session state: a pure fold over the event log.
//!
//! `wake` = latest snapshot (if any) + `apply` of every later event. Nothing
//! here does I/O, reads a clock or calls a model: the same events always fold
//! to the same state, which is what makes crash-resume exact. `decide`
//! (`brain::core::decide`) picks the next action from this state alone and
//! the runner (`brain::core::runner`) executes it; the runner's journal is
//! the only code that folds events into a live state.
//!
//! [`SessionState::apply`] routes each event to the fold of its concern:
//! `lifecycle` (creation, goal, pauses, the end, budget), `conversation`
//! (model turns and the history), `work` (plan, tasks, checks), `calls`
//! (tool calls) and [`approvals`]. Role names live in [`roles`]; the
//! snapshot codec in [`snapshot`]. This module imports no executor.

pub mod approvals;
mod calls;
mod conversation;
mod lifecycle;
pub mod roles;
pub mod snapshot;
mod work;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use self::roles::{HANDOFF_ROLE, JUDGE, PLANNER, Role, WORKER};
use crate::agent::frozen::Frozen;
use longhand_hands::Effect;
use longhand_session::{BlobRef, Event, EventRecord, PauseReason, SessionStatus};

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
    /// The last answer was refused and neither a new answer nor a pause
    /// has followed: with [`MAX_REJECTED`](crate::core::decide::MAX_REJECTED)
    /// refusals, `decide` gives up on the planner here.
    #[serde(default)]
    pub refused: Option<Refused>,
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
    /// What the call does to the world, parsed once from the event's
    /// `effect` (see [`effect_of`]). Stored in snapshots under the same
    /// names (`read-only`, `idempotent`, `writes`).
    pub effect: Effect,
    /// Input blob.
    pub input: BlobRef,
}

/// The effect an event records by name. A name this version does not know
/// is taken as `writes`, the one effect never repeated blindly.
pub fn effect_of(name: &str) -> Effect {
    match name {
        "read-only" => Effect::ReadOnly,
        "idempotent" => Effect::Idempotent,
        _ => Effect::Writes,
    }
}

/// The name an event records for `effect` (the inverse of [`effect_of`]).
pub fn effect_name(effect: Effect) -> &'static str {
    match effect {
        Effect::ReadOnly => "read-only",
        Effect::Idempotent => "idempotent",
        Effect::Writes => "writes",
    }
}

/// Whether a call of this recorded effect may run again without harm
/// ([`Effect::safe_to_retry`]): such a call needs no durable record before
/// it runs and is re-run after a crash; any other is recorded in doubt.
pub fn repeatable(effect: &str) -> bool {
    effect_of(effect).safe_to_retry()
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
    /// Failed attempts since its last `model_requested`: those one worker
    /// made in a row.
    #[serde(default)]
    pub failures: u32,
    /// The worker gave up on it (a `model_failed` with no wait after it),
    /// and no pause has answered that yet: `decide` pauses (or fails).
    #[serde(default)]
    pub gave_up: Option<GaveUp>,
    /// Times this turn's request was refused as too long for the model's
    /// context window, across its re-sends.
    #[serde(default)]
    pub overflows: u32,
    /// Whether the history was shortened after the last such refusal, so
    /// asking again sends less (`decide` asks once more only then).
    #[serde(default)]
    pub trimmed: bool,
}

/// The last failure of a model request the worker gave up on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaveUp {
    /// The error, as recorded.
    pub error: String,
    /// Whether retrying could have helped (so the attempts ran out).
    pub retryable: bool,
    /// The error's kind, when recorded (`diverged` fails the session).
    #[serde(default)]
    pub kind: Option<String>,
}

/// Why the harness refused the last answer of a planner or judge
/// conversation, until the model answers again or a pause answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refused {
    /// The answer was not valid; the problem the model was told.
    Answer {
        /// The message sent back.
        problem: String,
    },
    /// A revision removed or changed checks and the agent does not allow it.
    Revision,
}

/// A `pause` or `cancel` from the inbox, recorded (`steered`) and not yet
/// acted on: `decide` pauses or fails the session for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopAsked {
    /// `cancel` (the session ends, failed) rather than `pause`.
    pub cancel: bool,
    /// `cancel --now`: the step in flight was dropped (what it left is
    /// recorded before the control).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub now: bool,
    /// Who posted it.
    pub by: String,
    /// Their reason, if they gave one.
    pub text: Option<String>,
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

/// The recorded kind of a model failure that says the request does not fit
/// the model's context window (`ErrorKind::ContextOverflow`).
pub const CONTEXT_OVERFLOW: &str = "context_overflow";

/// Everything the loop needs, folded from events.
///
/// Every field defaults when missing, so a snapshot written before a field
/// existed still decodes; a change of meaning (not just a new field) bumps
/// the snapshot format version instead (see [`snapshot`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionState {
    /// Last event folded in.
    pub last_seq: u64,
    /// Agent name.
    pub agent_name: String,
    /// The frozen agent of `session_created`, read once by the fold.
    /// `None` before that event, or when its JSON does not read as an
    /// agent this version knows (then `agent_unreadable` says why).
    pub agent: Option<FrozenAgent>,
    /// Why the agent of `session_created` does not read, if it does not (a
    /// log written by a version whose agent this one cannot read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_unreadable: Option<String>,
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
    /// Context budget in tokens, from the frozen agent's limits (or the
    /// operator's `resume --raise context_tokens=N`). It bounds the whole
    /// request: the history gets what the system prompt, the tool
    /// definitions and the goal leave of it ([`Self::history_budget`]).
    pub context_tokens: u64,
    /// Tokens of a request beyond its history (system prompt, tool
    /// definitions, briefing), as the last answer's usage measured them:
    /// its input and output tokens less the history's estimate. 0 until an
    /// answer reports usage.
    pub overhead_tokens: u64,
    /// A tighter history budget learned from the model refusing a request
    /// as too long for its window (half the history it refused); cleared
    /// when the operator sets `context_tokens`.
    pub context_cap: Option<u64>,
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
    pub plan: Option<crate::work::plan::PlanState>,
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
    pub approvals: self::approvals::Approvals,
    /// The highest id of the inbox controls acted on (`steered`).
    pub last_control: u64,
    /// A `pause` or `cancel` recorded and not yet acted on.
    pub stop_asked: Option<StopAsked>,
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

/// The frozen agent as the fold holds it: read from `session_created`
/// once, then shared (a state's clone, a snapshot, the runner's binding)
/// without another parse. Its serde form is the agent's own.
#[derive(Debug, Clone)]
pub struct FrozenAgent(Arc<Frozen>);

impl FrozenAgent {
    /// Read the agent of a `session_created` event.
    pub fn read(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
        Frozen::deserialize(value).map(|frozen| Self(Arc::new(frozen)))
    }

    /// The agent.
    pub fn get(&self) -> &Frozen {
        &self.0
    }
}

/// Two states hold the same agent when it encodes the same (the agent's
/// types are compared nowhere else, so they need no equality of their own).
impl PartialEq for FrozenAgent {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || serde_json::to_value(&*self.0).ok() == serde_json::to_value(&*other.0).ok()
    }
}

impl Serialize for FrozenAgent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FrozenAgent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Frozen::deserialize(deserializer).map(|frozen| Self(Arc::new(frozen)))
    }
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
            agent: None,
            agent_unreadable: None,
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
            overhead_tokens: 0,
            context_cap: None,
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
            stop_asked: None,
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
        // Each concern folds its own events (see the sub-modules); this
        // match is exhaustive so a new event must be given a home.
        let seq = record.seq;
        match &record.event {
            Event::SessionCreated { .. }
            | Event::GoalSet { .. }
            | Event::Paused { .. }
            | Event::Resumed { .. }
            | Event::Finished { .. }
            | Event::Failed { .. }
            | Event::Snapshot { .. }
            | Event::ChildStarted { .. }
            | Event::Delegated { .. } => self.fold_lifecycle(&record.event),
            Event::ModelRequested { .. }
            | Event::ModelFailed { .. }
            | Event::ModelResponded { .. }
            | Event::CallsLearned { .. }
            | Event::Error { .. }
            | Event::RoleStarted { .. }
            | Event::Handoff { .. }
            | Event::Steered { .. } => self.fold_conversation(seq, &record.event),
            Event::PlanCreated { .. }
            | Event::PlanRevised { .. }
            | Event::TaskStarted { .. }
            | Event::CheckFinished { .. }
            | Event::TaskFinished { .. }
            | Event::ProgressNoted { .. } => self.fold_work(seq, &record.event),
            Event::ToolStarted { .. } | Event::ToolFinished { .. } | Event::ToolInDoubt { .. } => {
                self.fold_calls(seq, &record.event)
            }
            // Folded by `approvals` above; memory writes and detaching
            // change nothing else here.
            Event::ApprovalRequested { .. }
            | Event::ApprovalGranted { .. }
            | Event::ApprovalDenied { .. }
            | Event::MemoryWritten { .. }
            | Event::Detached { .. } => {}
        }
    }

    /// Whether the session can make no more progress on its own.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status, SessionStatus::Finished | SessionStatus::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhand_session::ResumeCause;

    #[test]
    fn an_effect_is_read_back_as_recorded_and_an_unknown_one_is_never_repeated() {
        for effect in [Effect::ReadOnly, Effect::Idempotent, Effect::Writes] {
            assert_eq!(effect_of(effect_name(effect)), effect);
            assert_eq!(repeatable(effect_name(effect)), effect.safe_to_retry());
        }
        // A name from a newer version: taken as a write, so a call left
        // open is recorded in doubt rather than run twice.
        assert_eq!(effect_of("appends"), Effect::Writes);
        assert!(!repeatable("appends"));
        // Snapshots keep the same names the events use.
        let open = OpenCall {
            step: 1,
            component: "fs".into(),
            tool: "write".into(),
            effect: Effect::Idempotent,
            input: BlobRef::of(b"{}"),
        };
        let json = serde_json::to_value(&open).unwrap();
        assert_eq!(json["effect"], "idempotent");
        assert_eq!(serde_json::from_value::<OpenCall>(json).unwrap(), open);
    }

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
    fn an_agent_this_version_cannot_read_is_kept_as_why_not_a_guess() {
        // `lead()`'s agent is `{}`: no name, model or limits.
        let state = SessionState::fold(&lead());
        assert!(state.agent.is_none());
        let why = state.agent_unreadable.as_deref().unwrap();
        assert!(why.contains("missing field"), "{why}");
        assert_eq!(state.agent_name, "a");
        // A snapshot keeps the reason.
        let back: SessionState =
            serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
        assert_eq!(back, state);
    }

    #[test]
    fn finished_folds_the_summary_and_its_blob() {
        let whole = "x".repeat(longhand_session::event::MAX_INLINE_TEXT + 1);
        let blob = BlobRef::of(whole.as_bytes());
        let preview = longhand_session::event::bounded(&whole).into_owned();
        // Paused first: finishing clears the pause.
        let mut records = lead();
        records.push(record(
            3,
            Event::Paused {
                reason: PauseReason {
                    kind: longhand_session::PauseKind::User,
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
