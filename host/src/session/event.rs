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
//! results, snapshots go to the blob store and the event carries a
//! [`BlobRef`].
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
            digest: format!("sha256:{}", hex::encode(Sha256::digest(bytes))),
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
        /// The provider's requested wait, if it named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
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
    },
    /// The goal was reached (the judge said so, not the worker).
    Finished {
        /// What was done, for people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
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
            Event::ToolStarted { .. } => "tool_started",
            Event::ToolFinished { .. } => "tool_finished",
            Event::ToolInDoubt { .. } => "tool_in_doubt",
            Event::Paused { .. } => "paused",
            Event::Resumed { .. } => "resumed",
            Event::Finished { .. } => "finished",
            Event::Failed { .. } => "failed",
            Event::Snapshot { .. } => "snapshot",
            Event::Error { .. } => "error",
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
            },
            Event::ModelFailed {
                step: 1,
                attempt: 2,
                error: "429".into(),
                retryable: true,
                retry_after_ms: Some(1000),
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
            },
            Event::Finished {
                summary: Some("done".into()),
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
