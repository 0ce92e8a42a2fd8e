//! The session protocol: every fact the agent loop records, one enum.
//!
//! [`Event`] is what the store persists, what `wake` folds into state, and
//! what every front end speaks (the CLI's `--json`, the HTTP API, the web
//! page). It is serialised as one JSON object tagged by `"type"`, with
//! snake_case names, e.g.
//!
//! ```json
//! {"type":"tool_started","step":3,"call_id":"c-1","component":"fs",
//!  "component_digest":"sha256:…","tool":"read","effect":"read-only",
//!  "input":{"digest":"sha256:…","bytes":42}}
//! ```
//!
//! Compatibility rules, because logs outlive binaries: variants and fields are
//! only ever added, never renamed or re-typed; a new field is optional
//! (`Option` or `#[serde(default)]`) so older logs still decode. Readers
//! ignore fields they do not know.
//!
//! Event JSON stays small (the store refuses an event over
//! [`MAX_EVENT_JSON`]): model requests and responses, tool inputs and
//! results, the final summary when it is long, and snapshots go to the blob
//! store and the event carries a [`BlobRef`]. Free text that only explains
//! (pause details, errors) is cut to [`MAX_INLINE_TEXT`] by
//! [`Event::bound_text`] instead: a provider's error body or a breaker's
//! message has no value past its start, and must never make the event that
//! records a pause or a failure unwritable.
//!
//! This module owns the shapes only. It must not know how events are stored
//! (that is `store`), nor what state they fold into (that is the brain's).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The largest event, as JSON, the store accepts: 256 KiB. Large payloads
/// belong in blobs; this ceiling keeps `read` and `wake` cheap and catches a
/// caller that inlined one by mistake.
pub const MAX_EVENT_JSON: usize = 256 * 1024;

/// The most bytes of free text an event carries inline: 4 KiB. Longer text
/// is either moved to a blob (the final summary: see [`Event::Finished`])
/// or cut (explanations: see [`Event::bound_text`]). Small enough that an
/// event with a few such fields stays far below [`MAX_EVENT_JSON`] even when
/// JSON escaping multiplies every byte by six.
pub const MAX_INLINE_TEXT: usize = 4 * 1024;

/// `text` if it is at most [`MAX_INLINE_TEXT`] bytes; otherwise its longest
/// prefix within that bound that ends on a character boundary, followed by
/// `…` (so a reader sees it was cut).
pub fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_INLINE_TEXT {
        return std::borrow::Cow::Borrowed(text);
    }
    let end = text.floor_char_boundary(MAX_INLINE_TEXT);
    std::borrow::Cow::Owned(format!("{}…", &text[..end]))
}

/// A content-addressed reference to bytes in the blob store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlobRef {
    /// `sha256:` followed by 64 lowercase hex digits of the content's SHA-256.
    pub digest: String,
    /// Length of the content in bytes.
    pub bytes: u64,
}

impl BlobRef {
    /// The reference `bytes` would be stored under. Pure: stores nothing.
    pub fn of(bytes: &[u8]) -> Self {
        BlobRef {
            digest: sha256_digest(bytes),
            bytes: bytes.len() as u64,
        }
    }

    /// Whether `digest` has the `sha256:<64 lowercase hex>` shape.
    pub fn is_well_formed(&self) -> bool {
        self.digest.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    }
}

/// `sha256:` and the 64 lowercase hex digits of the SHA-256 of `bytes`: how
/// the session names content (blobs, and digests recorded in events). The
/// hands name components the same way (`hands::digest_of`).
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl fmt::Display for BlobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes)", self.digest, self.bytes)
    }
}

/// One event as stored: its place in the log, when it was appended, and
/// what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Position in the session's log: 1 for `session_created`, then +1 per
    /// event, no gaps. The only ordering that counts.
    pub seq: u64,
    /// Wall-clock time the store appended it, unix milliseconds. Informative
    /// only (clocks step backwards); never order by it.
    pub at_ms: u64,
    /// The event, flattened into the record: `{"seq":..,"at_ms":..,"type":..}`.
    #[serde(flatten)]
    pub event: Event,
}

/// Why a session stopped making progress until someone acts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseReason {
    /// What kind of stop this is; says who can resume it.
    pub kind: PauseKind,
    /// For [`PauseKind::Limit`] and [`PauseKind::Breaker`]: the name of the
    /// limit hit (`tokens`, `cost_micros`, `tool_calls`, `wall_ms`,
    /// `consecutive_failures`, …), the key [`Event::Resumed::raised`] uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Human-readable explanation, shown as is by front ends.
    pub detail: String,
}

/// Why a session went on after it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeCause {
    /// `longhand resume` (or another operator action) on a paused session.
    #[default]
    Operator,
    /// A worker woke a session whose last worker stopped without pausing
    /// or finishing (killed, crashed, lost its store).
    Crash,
    /// A worker took the session from a holder that is gone or whose lease
    /// expired.
    TakeOver,
}

impl ResumeCause {
    fn is_operator(&self) -> bool {
        *self == Self::Operator
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The kinds of pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseKind {
    /// A budget (tokens, cost, tool calls, wall time) ran out. Raising it
    /// resumes.
    Limit,
    /// A circuit breaker tripped (e.g. too many consecutive failures).
    Breaker,
    /// A person asked the session to stop.
    User,
    /// A tool call needs a person's approval before it runs.
    Approval,
    /// The plan cannot go on by itself (a task failed its checks on every
    /// attempt and no planner may revise it). Resuming gives failed tasks
    /// new attempts.
    Plan,
}

/// Where a session stands, as the last lifecycle event left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Created; no goal yet.
    Created,
    /// Has a goal and is (or should be) making progress.
    Running,
    /// Waiting for someone: see the last [`Event::Paused`].
    Paused,
    /// Reached its goal.
    Finished,
    /// Gave up; see the last [`Event::Failed`].
    Failed,
}

impl SessionStatus {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Created => "created",
            SessionStatus::Running => "running",
            SessionStatus::Paused => "paused",
            SessionStatus::Finished => "finished",
            SessionStatus::Failed => "failed",
        }
    }

    /// Inverse of [`SessionStatus::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "created" => SessionStatus::Created,
            "running" => SessionStatus::Running,
            "paused" => SessionStatus::Paused,
            "finished" => SessionStatus::Finished,
            "failed" => SessionStatus::Failed,
            _ => return None,
        })
    }
}

impl fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can happen in a session. See the module docs for the
/// wire shape and the compatibility rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// Always seq 1, written by `Store::create`, never appended later. Freezes
    /// the agent's configuration for the whole life of the session, so a
    /// session woken a week later runs with the grants and prompts it was
    /// started with, not with whatever the config file says today.
    SessionCreated {
        /// The agent's name, as in its config.
        agent_name: String,
        /// The frozen agent config: model(s), prompts, tool digests, grants,
        /// limits. Opaque to the store.
        agent: serde_json::Value,
        /// `sha256:<hex>` of the canonical config, to tell at a glance
        /// whether two sessions ran the same agent.
        config_digest: String,
    },
    /// The goal the agent works toward. Moves the session to `running`.
    /// Appended again when a schedule or trigger adds work to a session.
    GoalSet {
        /// The goal, as the operator wrote it.
        goal: String,
    },
    /// A model request is about to be sent. Written before sending, so that
    /// on wake a request without a [`Event::ModelResponded`] is simply sent
    /// again (model calls have no side effects worth guarding).
    ModelRequested {
        /// The loop step this request belongs to.
        step: u64,
        /// The role asking: `planner`, `worker`, `judge`, …
        role: String,
        /// Provider name as configured (`anthropic`, `openai`, `replay`, …).
        provider: String,
        /// Model id as sent to the provider.
        model: String,
        /// The full request body (blob).
        request: BlobRef,
        /// 1 for the first try of this step's request, +1 per retry.
        attempt: u32,
    },
    /// The model answered the request of `step`.
    ModelResponded {
        /// The step of the matching [`Event::ModelRequested`].
        step: u64,
        /// The full response (blob).
        response: BlobRef,
        /// Input tokens billed.
        input_tokens: u64,
        /// Output tokens billed.
        output_tokens: u64,
        /// Time from send to the complete answer, milliseconds.
        latency_ms: u64,
        /// Provider's stop reason (`end_turn`, `tool_use`, `max_tokens`, …).
        stop_reason: String,
        /// Ids of the tool calls the answer asked for, in order (as
        /// normalised by the loop: see `brain::turn`). The loop decides from
        /// these without reading the response blob. `None` in logs written
        /// before the field existed: the loop then reads the blob once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        calls: Option<Vec<String>>,
        /// Of `input_tokens`, those the provider served from its prompt
        /// cache (0 when it reports none).
        #[serde(default, skip_serializing_if = "is_zero")]
        cached_input_tokens: u64,
        /// What the answer cost in micro-dollars (1e-6 USD), by the price
        /// frozen into the session; `None` when no price is known for the
        /// model (tokens are still counted) or in older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<u64>,
    },
    /// A model request failed. Consecutive failures feed the circuit breaker.
    ModelFailed {
        /// The step of the failed request.
        step: u64,
        /// Which attempt failed.
        attempt: u32,
        /// The error, for people.
        error: String,
        /// Whether trying again may help (rate limits, overload, timeouts).
        retryable: bool,
        /// The wait chosen before the next attempt (the provider's
        /// `Retry-After` when it named one, else the backoff); absent when
        /// none follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
        /// The error's kind (`rate_limited`, `auth`, `diverged`…, see the
        /// model's `ErrorKind`); absent in logs written before it was
        /// recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        /// No attempt follows: the worker gave up on this request, and the
        /// next decision pauses the session (or fails it, for a `diverged`
        /// replay). False in logs written before it was recorded (their
        /// `paused` or `failed` follows in the log).
        #[serde(default, skip_serializing_if = "is_false")]
        last: bool,
    },
    /// The calls of turn `step`'s answer, read from its response blob:
    /// written once for an answer whose `model_responded` predates the
    /// `calls` field, so the fold learns them from an event like any
    /// other fact (the journal is the only writer of the state).
    CallsLearned {
        /// The answer's turn.
        step: u64,
        /// Its call ids, in order.
        calls: Vec<String>,
    },
    /// A tool call is about to run. Durable before the tool starts, so a
    /// crash leaves a `tool_started` without a `tool_finished`: the call is
    /// re-run on wake only if `effect` is `read-only` or `idempotent`,
    /// otherwise it becomes [`Event::ToolInDoubt`].
    ToolStarted {
        /// The loop step that asked for the call.
        step: u64,
        /// The model's id for the call; pairs started and finished.
        call_id: String,
        /// The component's name (e.g. `fs`).
        component: String,
        /// `sha256:<hex>` of the component that ran; grants are bound to it.
        component_digest: String,
        /// The tool within the component (e.g. `read`).
        tool: String,
        /// `read-only`, `idempotent` or `writes`, as the tool declared it.
        effect: String,
        /// The input JSON (blob).
        input: BlobRef,
    },
    /// A tool call ended, successfully or with a tool error the model can act
    /// on. Host faults (traps, broken limits) are recorded here too, with
    /// `ok: false`, and in `receipt`.
    ToolFinished {
        /// The step of the matching [`Event::ToolStarted`].
        step: u64,
        /// The call id of the matching [`Event::ToolStarted`].
        call_id: String,
        /// Whether the tool returned a value (`true`) or an error (`false`).
        ok: bool,
        /// The output JSON, or the error JSON when `ok` is false (blob).
        result: BlobRef,
        /// The host's receipt: time, fuel, memory, capabilities used and
        /// denied. Small by construction; shape owned by the hands.
        receipt: serde_json::Value,
    },
    /// A tool call was started and never finished, and re-running it is not
    /// known to be safe (`effect: writes`). Written on wake; the model (or a
    /// person, where approval applies) decides what to do.
    ToolInDoubt {
        /// The step of the unfinished call.
        step: u64,
        /// The call id of the unfinished call.
        call_id: String,
        /// Why the outcome is unknown (e.g. `worker died during call`).
        reason: String,
    },
    /// The session stopped until someone acts. Holds no process and no RAM.
    Paused {
        /// Why, and who can resume it.
        reason: PauseReason,
    },
    /// Someone let a paused session go on.
    Resumed {
        /// Limits raised to allow it, by name (the names of
        /// [`PauseReason::limit`]) and new value. Empty when nothing was
        /// raised (e.g. a user pause, an approval).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        raised: BTreeMap<String, u64>,
        /// Why, for the record.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// Who let it go on: an operator (the default, omitted), or a worker
        /// that woke a session left running by a crash or took it over from
        /// a holder whose lease lapsed.
        #[serde(default, skip_serializing_if = "ResumeCause::is_operator")]
        cause: ResumeCause,
    },
    /// The goal was reached (the judge said so, not the worker).
    ///
    /// The summary is the model's final answer, which has no size limit of
    /// its own. Up to [`MAX_INLINE_TEXT`] bytes it is `summary`, whole, and
    /// `summary_blob` is absent. Longer, `summary` is a preview (see
    /// [`bounded`]) and `summary_blob` holds the whole text as UTF-8: a
    /// reader that wants the answer checks `summary_blob` first. Logs
    /// written before `summary_blob` existed carry only `summary`, which is
    /// then the whole text.
    Finished {
        /// What was done, for people: the whole text, or a preview of it when
        /// `summary_blob` is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// The whole summary (UTF-8, blob), when it is longer than
        /// [`MAX_INLINE_TEXT`]; absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_blob: Option<BlobRef>,
    },
    /// The session gave up and will not continue on its own.
    Failed {
        /// Why.
        error: String,
    },
    /// The brain's folded state through `through_seq`, so `wake` reads the
    /// latest snapshot plus the events after it instead of the whole log.
    /// Opaque to the store; never required (a log without snapshots folds
    /// from seq 1).
    Snapshot {
        /// The serialised state (blob).
        state: BlobRef,
        /// The last seq folded into `state`.
        through_seq: u64,
    },
    /// The session's plan: the operator's `plan.toml` (frozen with the
    /// agent) or the planner's first valid answer. See `brain::work::plan`.
    PlanCreated {
        /// The plan (a `brain::work::plan::Plan`), inline: it is bounded by the
        /// plan validator well below [`MAX_EVENT_JSON`].
        plan: serde_json::Value,
        /// `operator` or `planner`.
        author: String,
    },
    /// A revision of the plan, accepted or refused (the ratchet): both are
    /// recorded.
    PlanRevised {
        /// The revised plan; in force only when `accepted`.
        plan: serde_json::Value,
        /// `operator` or `planner`.
        author: String,
        /// Why it was revised (for people).
        reason: String,
        /// Whether it is now the plan.
        accepted: bool,
        /// Checks the revision removes or changes, one line each. A
        /// revision with any is refused unless the agent allows weakening.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        weakened: Vec<String>,
    },
    /// The worker starts an attempt at a task, in a fresh context whose
    /// first message is `briefing`.
    TaskStarted {
        /// Task id.
        task: String,
        /// 1 for the first attempt.
        attempt: u32,
        /// The briefing the context starts from (UTF-8 text, blob): the
        /// goal, the task and its checks, what failed last time, the
        /// latest handoff, progress notes and memories.
        briefing: BlobRef,
        /// Memory entries put into the briefing (provenance).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        memories: Vec<String>,
        /// With `max_parallel_tasks` > 1: the child session the task runs
        /// in (its own log, worker, checks); this session waits for it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        child: Option<String>,
    },
    /// A side role (the judge, the planner) starts a fresh conversation.
    RoleStarted {
        /// `judge` or `planner`.
        role: String,
        /// The task it is about, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The check it grades (index in the task's `done_when`), for the judge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        check: Option<u32>,
        /// Its first message (UTF-8 text, blob).
        briefing: BlobRef,
    },
    /// A check of a task ran (by the harness, or the judge's verdict).
    CheckFinished {
        /// Task id.
        task: String,
        /// Index in the task's `done_when`.
        check: u32,
        /// `tool`, `command` or `judge`.
        kind: String,
        /// Whether it passed.
        passed: bool,
        /// What happened, for the worker's next attempt and for people
        /// (cut to [`MAX_INLINE_TEXT`]).
        detail: String,
        /// The whole output (tool result, command output, verdict), blob.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<BlobRef>,
        /// For a command check: the confinement that applied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confinement: Option<serde_json::Value>,
    },
    /// A task ended: `done` (every check passed) or `failed` (attempts ran out).
    TaskFinished {
        /// Task id.
        task: String,
        /// `done` or `failed`.
        status: String,
        /// Attempts it took.
        attempts: u32,
    },
    /// The worker's context was replaced by a typed handoff before its
    /// window filled; the context starts again from `briefing`.
    Handoff {
        /// The task in progress, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        /// The handoff (JSON, `brain::work::handoff::Handoff`), blob.
        handoff: BlobRef,
        /// The briefing the new context starts from (UTF-8 text, blob).
        briefing: BlobRef,
        /// The context's size when it was replaced, as the provider
        /// reported it (input + output tokens of the last answer).
        context_tokens: u64,
        /// Whether the model wrote it (`false`: it failed to produce a
        /// valid one and the harness built it from the plan).
        #[serde(default)]
        by_model: bool,
        /// Memory entries put into the briefing (provenance).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        memories: Vec<String>,
    },
    /// The harness's note after a task: what was done, check results. The
    /// `progress.txt` of a long run, shown to later contexts.
    ProgressNoted {
        /// Task id.
        task: String,
        /// The note (cut to [`MAX_INLINE_TEXT`]).
        text: String,
    },
    /// A memory entry was written or forgotten through the loop.
    MemoryWritten {
        /// Entry id.
        id: String,
        /// Its scope.
        scope: String,
        /// The text (cut to [`MAX_INLINE_TEXT`]; the bank holds it whole).
        text: String,
        /// The entry it replaces.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        supersedes: Option<String>,
        /// The tool call that wrote it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A tool call waits for a person's approval; the session pauses with
    /// it. See `brain::control::approvals`.
    ApprovalRequested {
        /// The request's id, unique in the session (`ap-<seq>`).
        request: String,
        /// The turn whose answer asked for the call.
        step: u64,
        /// The call.
        call_id: String,
        /// The tool, as the model named it.
        tool: String,
        /// `read-only`, `idempotent` or `writes`.
        effect: String,
        /// `sha256:` of the exact action: component digest, tool, canonical
        /// arguments, grants, effect. An approval applies to it only.
        fingerprint: String,
        /// The call's arguments (blob).
        input: BlobRef,
    },
    /// A person approved a request.
    ApprovalGranted {
        /// The request.
        request: String,
        /// `once` (this call) or `session` (this fingerprint, from now on).
        scope: String,
        /// When the approval lapses, unix ms; `None`: never.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_ms: Option<u64>,
        /// Who (for the record).
        by: String,
    },
    /// A person denied a request; the model is told why.
    ApprovalDenied {
        /// The request.
        request: String,
        /// Why (cut to [`MAX_INLINE_TEXT`]).
        reason: String,
        /// Who (for the record).
        by: String,
    },
    /// A control from the session's inbox (`longhand pause`, `cancel`,
    /// `send`) was acted on; what it causes follows (a pause, the end) or,
    /// for `send`, is this event: the model reads the text at its next step.
    Steered {
        /// The control's id in the inbox (the loop asks for newer ones).
        control: u64,
        /// `pause`, `cancel`, `cancel_now` or `send`.
        kind: String,
        /// The reason or the message (cut to [`MAX_INLINE_TEXT`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Who posted it.
        by: String,
    },
    /// The session was left for a `longhand worker` (`run --detach`,
    /// `resume --detach`): running, with no process yet. A worker that
    /// picks it up is not recovering from a crash.
    Detached {
        /// Who left it.
        by: String,
    },
    /// A `delegate` call started a child session (written after the child
    /// exists, before it runs: a crash before this leaves a child nobody
    /// names, which never runs; after it, recovery waits for this child).
    ChildStarted {
        /// The `delegate` call.
        call_id: String,
        /// The child session.
        child: String,
        /// The `[agents.<name>]` it runs.
        agent: String,
        /// The budget it was given, by limit name, out of this session's.
        slice: BTreeMap<String, u64>,
    },
    /// This session is a child: who started it (the parent link).
    Delegated {
        /// The parent session.
        parent: String,
        /// The parent's `delegate` call.
        call_id: String,
        /// The `[agents.<name>]` it runs.
        agent: String,
        /// Depth in the tree (1 for a child of a session started by `run`).
        depth: u32,
    },
    /// An error or retry worth recording that is not one of the events above
    /// (e.g. a malformed model answer sent back for repair).
    Error {
        /// The step it happened in, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<u64>,
        /// What went wrong, for people.
        message: String,
    },
}

impl Event {
    /// The `"type"` tag this event serialises with. Stored beside the JSON so
    /// the store can find snapshots without decoding every event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionCreated { .. } => "session_created",
            Event::GoalSet { .. } => "goal_set",
            Event::ModelRequested { .. } => "model_requested",
            Event::ModelResponded { .. } => "model_responded",
            Event::ModelFailed { .. } => "model_failed",
            Event::CallsLearned { .. } => "calls_learned",
            Event::ToolStarted { .. } => "tool_started",
            Event::ToolFinished { .. } => "tool_finished",
            Event::ToolInDoubt { .. } => "tool_in_doubt",
            Event::Paused { .. } => "paused",
            Event::Resumed { .. } => "resumed",
            Event::Finished { .. } => "finished",
            Event::Failed { .. } => "failed",
            Event::Snapshot { .. } => "snapshot",
            Event::Error { .. } => "error",
            Event::PlanCreated { .. } => "plan_created",
            Event::PlanRevised { .. } => "plan_revised",
            Event::TaskStarted { .. } => "task_started",
            Event::RoleStarted { .. } => "role_started",
            Event::CheckFinished { .. } => "check_finished",
            Event::TaskFinished { .. } => "task_finished",
            Event::Handoff { .. } => "handoff",
            Event::ProgressNoted { .. } => "progress_noted",
            Event::MemoryWritten { .. } => "memory_written",
            Event::ApprovalRequested { .. } => "approval_requested",
            Event::ApprovalGranted { .. } => "approval_granted",
            Event::ApprovalDenied { .. } => "approval_denied",
            Event::Steered { .. } => "steered",
            Event::Detached { .. } => "detached",
            Event::ChildStarted { .. } => "child_started",
            Event::Delegated { .. } => "delegated",
        }
    }

    /// Cut every explanatory text field (pause detail, error messages,
    /// in-doubt reasons) to [`MAX_INLINE_TEXT`] with [`bounded`]. These hold
    /// text a model provider or a tool chose (an error body, a call key), so
    /// their size is not ours to promise; cutting them keeps the event that
    /// records a pause or a failure writable. The summary of
    /// [`Event::Finished`] is not touched: it is the session's result, so the
    /// loop moves a long one to a blob rather than lose its end.
    pub fn bound_text(&mut self) {
        let cut = |text: &mut String| {
            if let std::borrow::Cow::Owned(short) = bounded(text) {
                *text = short;
            }
        };
        match self {
            Event::ModelFailed { error, .. } | Event::Failed { error } => cut(error),
            Event::ToolInDoubt { reason, .. } => cut(reason),
            Event::Paused { reason } => cut(&mut reason.detail),
            Event::Error { message, .. } => cut(message),
            Event::PlanRevised { reason, .. } | Event::ApprovalDenied { reason, .. } => cut(reason),
            Event::CheckFinished { detail, .. } => cut(detail),
            Event::ProgressNoted { text, .. } | Event::MemoryWritten { text, .. } => cut(text),
            Event::Resumed {
                note: Some(note), ..
            }
            | Event::Steered {
                text: Some(note), ..
            } => cut(note),
            _ => {}
        }
    }

    /// The status a session has right after this event, if this is a
    /// lifecycle event; `None` leaves the status as it was.
    pub fn status_after(&self) -> Option<SessionStatus> {
        Some(match self {
            Event::SessionCreated { .. } => SessionStatus::Created,
            Event::GoalSet { .. } | Event::Resumed { .. } => SessionStatus::Running,
            Event::Paused { .. } => SessionStatus::Paused,
            Event::Finished { .. } => SessionStatus::Finished,
            Event::Failed { .. } => SessionStatus::Failed,
            _ => return None,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn blob() -> BlobRef {
        BlobRef::of(b"x")
    }

    /// One of each variant, so a new variant without a test is noticed here.
    pub(crate) fn every_event() -> Vec<Event> {
        vec![
            Event::SessionCreated {
                agent_name: "a".into(),
                agent: serde_json::json!({"model": "m"}),
                config_digest: "sha256:00".into(),
            },
            Event::GoalSet { goal: "g".into() },
            Event::ModelRequested {
                step: 1,
                role: "worker".into(),
                provider: "replay".into(),
                model: "m".into(),
                request: blob(),
                attempt: 1,
            },
            Event::ModelResponded {
                step: 1,
                response: blob(),
                input_tokens: 10,
                output_tokens: 5,
                latency_ms: 3,
                stop_reason: "end_turn".into(),
                calls: Some(vec!["c1".into()]),
                cached_input_tokens: 4,
                cost_micros: None,
            },
            Event::ModelFailed {
                step: 1,
                attempt: 2,
                error: "429".into(),
                retryable: true,
                retry_after_ms: Some(1000),
                kind: Some("rate_limited".into()),
                last: false,
            },
            Event::CallsLearned {
                step: 1,
                calls: vec!["c1".into()],
            },
            Event::ToolStarted {
                step: 2,
                call_id: "c".into(),
                component: "fs".into(),
                component_digest: "sha256:00".into(),
                tool: "read".into(),
                effect: "read-only".into(),
                input: blob(),
            },
            Event::ToolFinished {
                step: 2,
                call_id: "c".into(),
                ok: true,
                result: blob(),
                receipt: serde_json::json!({"fuel": 1}),
            },
            Event::ToolInDoubt {
                step: 2,
                call_id: "c".into(),
                reason: "crash".into(),
            },
            Event::Paused {
                reason: PauseReason {
                    kind: PauseKind::Limit,
                    limit: Some("tokens".into()),
                    detail: "spent".into(),
                },
            },
            Event::Resumed {
                raised: BTreeMap::from([("tokens".into(), 9)]),
                note: None,
                cause: ResumeCause::Operator,
            },
            Event::Resumed {
                raised: BTreeMap::new(),
                note: Some("after a crash".into()),
                cause: ResumeCause::Crash,
            },
            Event::Finished {
                summary: Some("done".into()),
                summary_blob: None,
            },
            Event::Failed { error: "no".into() },
            Event::Snapshot {
                state: blob(),
                through_seq: 7,
            },
            Event::Error {
                step: None,
                message: "m".into(),
            },
        ]
    }

    #[test]
    fn kind_is_the_serde_tag_and_round_trips() {
        for event in every_event() {
            let json = serde_json::to_value(&event).unwrap();
            assert_eq!(json["type"], event.kind(), "{json}");
            let back: Event = serde_json::from_value(json).unwrap();
            assert_eq!(back, event);
        }
    }

    #[test]
    fn record_flattens_the_event() {
        let record = EventRecord {
            seq: 3,
            at_ms: 9,
            event: Event::GoalSet { goal: "g".into() },
        };
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(json, r#"{"seq":3,"at_ms":9,"type":"goal_set","goal":"g"}"#);
        assert_eq!(serde_json::from_str::<EventRecord>(&json).unwrap(), record);
    }

    #[test]
    fn pause_reason_wire_shape() {
        let event = Event::Paused {
            reason: PauseReason {
                kind: PauseKind::Approval,
                limit: None,
                detail: "ok?".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"paused","reason":{"kind":"approval","detail":"ok?"}}"#
        );
    }

    #[test]
    fn finished_of_the_older_shape_decodes() {
        // Written before `summary_blob` existed: the inline summary is the
        // whole text.
        let old = r#"{"seq":9,"at_ms":1,"type":"finished","summary":"all done"}"#;
        let record: EventRecord = serde_json::from_str(old).unwrap();
        assert_eq!(
            record.event,
            Event::Finished {
                summary: Some("all done".into()),
                summary_blob: None,
            }
        );
        // And an absent summary still decodes, and writes back the same.
        let bare: Event = serde_json::from_str(r#"{"type":"finished"}"#).unwrap();
        assert_eq!(
            bare,
            Event::Finished {
                summary: None,
                summary_blob: None
            }
        );
        assert_eq!(
            serde_json::to_string(&bare).unwrap(),
            r#"{"type":"finished"}"#
        );
    }

    #[test]
    fn bounded_cuts_on_a_character_boundary() {
        let short = "é".repeat(10);
        assert_eq!(bounded(&short), short.as_str());
        // Two-byte characters across an odd bound: the cut backs off to
        // the boundary below it.
        let long = format!("a{}", "é".repeat(MAX_INLINE_TEXT));
        let cut = bounded(&long);
        assert!(cut.ends_with('…'));
        let kept = cut.trim_end_matches('…');
        assert!(kept.len() <= MAX_INLINE_TEXT && kept.len() >= MAX_INLINE_TEXT - 1);
        assert!(long.starts_with(kept));
    }

    #[test]
    fn bound_text_keeps_every_event_writable() {
        let huge = "\u{1}".repeat(MAX_EVENT_JSON);
        let mut events = every_event();
        for event in &mut events {
            match event {
                Event::ModelFailed { error, .. } | Event::Failed { error } => *error = huge.clone(),
                Event::ToolInDoubt { reason, .. } => *reason = huge.clone(),
                Event::Paused { reason } => reason.detail = huge.clone(),
                Event::Error { message, .. } => *message = huge.clone(),
                Event::Resumed { note, .. } => *note = Some(huge.clone()),
                _ => {}
            }
            event.bound_text();
            let json = serde_json::to_string(&event).unwrap();
            // Six bytes of JSON per control character, plus the rest.
            assert!(json.len() < 7 * MAX_INLINE_TEXT, "{}", event.kind());
        }
        // The summary is never cut: a long one is the loop's to blob.
        let mut finished = Event::Finished {
            summary: Some(huge.clone()),
            summary_blob: None,
        };
        finished.bound_text();
        assert!(matches!(finished, Event::Finished { summary: Some(s), .. } if s == huge));
    }

    #[test]
    fn blob_ref_of_bytes() {
        let r = BlobRef::of(b"abc");
        assert_eq!(
            r.digest,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(r.bytes, 3);
        assert!(r.is_well_formed());
        assert!(
            !BlobRef {
                digest: "sha256:AB".into(),
                bytes: 0
            }
            .is_well_formed()
        );
    }
}

#[cfg(test)]
mod fuzz {
    //! Property tests over event JSON as a reader meets it: a log written
    //! by another version, a damaged row, a hostile client of the HTTP
    //! API. Decoding any bytes ends in an event or an error, never a panic
    //! or a stack overflow; every event round-trips exactly; unknown fields
    //! are ignored, as the module's compatibility rules promise. Case
    //! counts are fixed so CI spends about a second here;
    //! `PROPTEST_RNG_SEED` replays a run.

    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    fn cases(cases: u32) -> ProptestConfig {
        ProptestConfig {
            cases,
            failure_persistence: None,
            max_shrink_iters: 1024,
            ..ProptestConfig::default()
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "\\PC{0,16}",
            Just(String::new()),
            Just("\u{1b}[2J\u{9b}\u{202e}\0".to_owned()),
        ]
    }

    /// JSON without floats: serde_json parses floats to the nearest
    /// double, not always to the same bits, and events carry none.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(text(), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn blob() -> impl Strategy<Value = BlobRef> {
        prop_oneof![
            any::<Vec<u8>>().prop_map(|b| BlobRef::of(&b)),
            (text(), any::<u64>()).prop_map(|(digest, bytes)| BlobRef { digest, bytes }),
        ]
    }

    fn pause_reason() -> impl Strategy<Value = PauseReason> {
        let kind = prop::sample::select(vec![
            PauseKind::Limit,
            PauseKind::Breaker,
            PauseKind::User,
            PauseKind::Approval,
        ]);
        (kind, prop::option::of(text()), text()).prop_map(|(kind, limit, detail)| PauseReason {
            kind,
            limit,
            detail,
        })
    }

    /// Any event, every variant, every field free.
    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (text(), json(), text()).prop_map(|(agent_name, agent, config_digest)| {
                Event::SessionCreated {
                    agent_name,
                    agent,
                    config_digest,
                }
            }),
            text().prop_map(|goal| Event::GoalSet { goal }),
            (any::<u64>(), text(), text(), text(), blob(), any::<u32>()).prop_map(
                |(step, role, provider, model, request, attempt)| Event::ModelRequested {
                    step,
                    role,
                    provider,
                    model,
                    request,
                    attempt,
                }
            ),
            (
                any::<u64>(),
                blob(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                text(),
                prop::option::of(prop::collection::vec(text(), 0..4)),
                any::<u64>(),
            )
                .prop_map(
                    |(
                        step,
                        response,
                        input_tokens,
                        output_tokens,
                        latency_ms,
                        stop_reason,
                        calls,
                        cached_input_tokens,
                    )| {
                        Event::ModelResponded {
                            step,
                            response,
                            input_tokens,
                            output_tokens,
                            latency_ms,
                            stop_reason,
                            calls,
                            cached_input_tokens,
                            cost_micros: (cached_input_tokens % 3 == 0).then_some(input_tokens / 7),
                        }
                    }
                ),
            (
                any::<u64>(),
                any::<u32>(),
                text(),
                any::<bool>(),
                prop::option::of(any::<u64>()),
                prop::option::of(text()),
                any::<bool>()
            )
                .prop_map(
                    |(step, attempt, error, retryable, retry_after_ms, kind, last)| {
                        Event::ModelFailed {
                            step,
                            attempt,
                            error,
                            retryable,
                            retry_after_ms,
                            kind,
                            last,
                        }
                    }
                ),
            (any::<u64>(), prop::collection::vec(text(), 0..3))
                .prop_map(|(step, calls)| Event::CallsLearned { step, calls }),
            (any::<u64>(), text(), text(), text(), text(), text(), blob()).prop_map(
                |(step, call_id, component, component_digest, tool, effect, input)| {
                    Event::ToolStarted {
                        step,
                        call_id,
                        component,
                        component_digest,
                        tool,
                        effect,
                        input,
                    }
                }
            ),
            (any::<u64>(), text(), any::<bool>(), blob(), json()).prop_map(
                |(step, call_id, ok, result, receipt)| Event::ToolFinished {
                    step,
                    call_id,
                    ok,
                    result,
                    receipt,
                }
            ),
            (any::<u64>(), text(), text()).prop_map(|(step, call_id, reason)| {
                Event::ToolInDoubt {
                    step,
                    call_id,
                    reason,
                }
            }),
            pause_reason().prop_map(|reason| Event::Paused { reason }),
            (
                prop::collection::btree_map(text(), any::<u64>(), 0..4),
                prop::option::of(text()),
                prop::sample::select(vec![
                    ResumeCause::Operator,
                    ResumeCause::Crash,
                    ResumeCause::TakeOver
                ]),
            )
                .prop_map(|(raised, note, cause)| Event::Resumed {
                    raised,
                    note,
                    cause
                }),
            (prop::option::of(text()), prop::option::of(blob())).prop_map(
                |(summary, summary_blob)| Event::Finished {
                    summary,
                    summary_blob
                }
            ),
            text().prop_map(|error| Event::Failed { error }),
            (blob(), any::<u64>())
                .prop_map(|(state, through_seq)| Event::Snapshot { state, through_seq }),
            (prop::option::of(any::<u64>()), text())
                .prop_map(|(step, message)| Event::Error { step, message }),
        ]
    }

    fn record() -> impl Strategy<Value = EventRecord> {
        (any::<u64>(), any::<u64>(), event()).prop_map(|(seq, at_ms, event)| EventRecord {
            seq,
            at_ms,
            event,
        })
    }

    /// Replace the node number `n` (depth first) of `value` by `with`.
    fn replace_node(value: &mut Value, n: &mut usize, with: &Value) {
        if *n == 0 {
            *value = with.clone();
            *n = usize::MAX;
            return;
        }
        *n = n.saturating_sub(1);
        match value {
            Value::Array(items) => {
                for item in items {
                    replace_node(item, n, with);
                }
            }
            Value::Object(map) => {
                for (_, item) in map.iter_mut() {
                    replace_node(item, n, with);
                }
            }
            _ => {}
        }
    }

    fn count_nodes(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count_nodes).sum(),
            Value::Object(map) => map.values().map(count_nodes).sum(),
            _ => 0,
        }
    }

    proptest! {
        #![proptest_config(cases(512))]

        #[test]
        fn any_bytes_decode_or_fail(bytes in prop_oneof![
            any::<Vec<u8>>(),
            "\\PC{0,64}".prop_map(String::into_bytes),
            // Truncated and spliced real events: the shapes a damaged
            // row or a torn write leaves.
            (record(), any::<prop::sample::Index>(), any::<Vec<u8>>()).prop_map(|(r, at, junk)| {
                let mut bytes = serde_json::to_vec(&r).unwrap();
                bytes.truncate(at.index(bytes.len() + 1));
                bytes.extend(junk);
                bytes
            }),
        ]) {
            let _ = serde_json::from_slice::<EventRecord>(&bytes);
            let _ = serde_json::from_slice::<Event>(&bytes);
        }

        #[test]
        fn every_event_round_trips_and_is_tagged_with_its_kind(record in record()) {
            let text = serde_json::to_string(&record).unwrap();
            let back: EventRecord = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &record);
            let value: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(value["type"].as_str(), Some(record.event.kind()));
        }

        #[test]
        fn unknown_fields_are_ignored(
            record in record(),
            extra in prop::collection::btree_map("x_[a-z_]{0,8}", json(), 1..4),
        ) {
            let mut value = serde_json::to_value(&record).unwrap();
            let object = value.as_object_mut().unwrap();
            for (key, item) in extra {
                object.insert(key, item);
            }
            let back: EventRecord = serde_json::from_value(value).unwrap();
            prop_assert_eq!(back, record);
        }

        #[test]
        fn a_damaged_event_decodes_to_something_that_round_trips(
            record in record(),
            at in any::<prop::sample::Index>(),
            with in json(),
        ) {
            let mut value = serde_json::to_value(&record).unwrap();
            let mut n = at.index(count_nodes(&value));
            replace_node(&mut value, &mut n, &with);
            let text = value.to_string();
            if let Ok(decoded) = serde_json::from_str::<EventRecord>(&text) {
                let again: EventRecord =
                    serde_json::from_str(&serde_json::to_string(&decoded).unwrap()).unwrap();
                prop_assert_eq!(again, decoded);
            }
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        for open in ["[", "{\"a\":"] {
            let deep = open.repeat(100_000);
            let event = format!(
                r#""type":"session_created","agent_name":"a","config_digest":"d","agent":{deep}"#
            );
            let record = format!(r#"{{"seq":1,"at_ms":1,{event}"#);
            assert!(serde_json::from_str::<EventRecord>(&record).is_err());
            assert!(serde_json::from_str::<Event>(&format!("{{{event}")).is_err());
        }
    }

    #[test]
    fn numbers_out_of_range_are_errors() {
        for seq in ["-1", "18446744073709551616", "1e3", "1.5", "\"1\""] {
            let text = format!(r#"{{"seq":{seq},"at_ms":1,"type":"goal_set","goal":"g"}}"#);
            assert!(
                serde_json::from_str::<EventRecord>(&text).is_err(),
                "{text}"
            );
        }
        let text = r#"{"seq":18446744073709551615,"at_ms":0,"type":"goal_set","goal":"g"}"#;
        assert_eq!(
            serde_json::from_str::<EventRecord>(text).unwrap().seq,
            u64::MAX
        );
    }

    #[test]
    fn the_generator_reaches_every_variant() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let strategy = event();
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            kinds.insert(strategy.new_tree(&mut runner).unwrap().current().kind());
        }
        let all: std::collections::BTreeSet<_> =
            tests::every_event().iter().map(Event::kind).collect();
        assert_eq!(kinds, all);
    }
}
