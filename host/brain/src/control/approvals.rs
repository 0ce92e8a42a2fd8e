//! Approvals bound to the action.
//!
//! `[approve]` names the tool calls that wait for a person (`never`,
//! `writes`: any effect but read-only, `always`; by tool, component or
//! `*`). Before such a call runs, the loop looks for an approval of its
//! **fingerprint** — `sha256` of the component digest, the tool, the
//! arguments as canonical JSON, the grants the call would run with, and
//! the effect — and without one appends `approval_requested` and pauses: a
//! waiting session holds no process and no memory. `longhand approve`
//! (scope `once`, or `session`: the same fingerprint from then on;
//! optionally expiring) or `longhand deny` (the model is told why and goes
//! on) append their answer to the paused session; `resume` carries on.
//!
//! The same tool with other arguments is another fingerprint and needs its
//! own approval; an expired approval does not apply. A crash between the
//! approval and the call runs the call once: the approval stays until the
//! call's `tool_started` (fsynced before a writing call runs) uses it, and
//! a call started and not finished is never re-run blindly.
//!
//! The gate here only looks up and records: whether `[approve]` names the
//! call, whether a live grant covers its fingerprint (both need the bound
//! agent and the clock), and, when none does, the request. What follows is
//! `decide`'s: a call whose request is unanswered pauses the session, a
//! denied one is answered as denied (`deny` records it), a granted
//! one is dispatched again and passes the gate.

use sha2::{Digest, Sha256};

use crate::agent::config::{ApprovePolicy, approve_policy};
use crate::core::ctx::Ctx;
use crate::core::state::approvals::live;
pub use crate::core::state::approvals::{Approval, ApprovalStatus, Approvals};
use crate::core::state::effect_name;
use crate::error::RunError;
use longhand_hands::Effect;
use longhand_session::now_ms;
use longhand_session::{Event, SessionId, SessionStatus, Store, StoreError};

/// What the gate says of a call.
pub(crate) enum Gate {
    /// Run it.
    Run,
    /// It waits for a person: its request is written (`decide` pauses
    /// the session for it next).
    Wait,
}

impl Ctx<'_> {
    /// Whether `[approve]` makes a call of `name` with `effect` wait for a
    /// person.
    pub(crate) fn needs_approval(&self, name: &str, effect: Effect) -> bool {
        match approve_policy(&self.agent.frozen.approve, name) {
            ApprovePolicy::Never => false,
            ApprovePolicy::Writes => effect != Effect::ReadOnly,
            ApprovePolicy::Always => true,
        }
    }

    /// Whether the call `call_id` of `name` may run now with `input`: run
    /// it (no approval needed, or a live one for its fingerprint), or ask
    /// a person — the request is written and the call waits. `decide`
    /// never dispatches a call whose request is unanswered or denied, so
    /// a request found here is granted: used, or lapsed, it is asked anew.
    pub(crate) async fn gate(
        &mut self,
        step: u64,
        call_id: &str,
        name: &str,
        effect: Effect,
        input: &serde_json::Value,
    ) -> Result<Gate, RunError> {
        if !self.needs_approval(name, effect) {
            return Ok(Gate::Run);
        }
        let fingerprint = self.fingerprint(name, effect, input);
        let now = now_ms();
        let approvals = &self.journal.state.approvals;
        if approvals
            .session
            .get(&fingerprint)
            .is_some_and(|exp| live(*exp, now))
        {
            return Ok(Gate::Run);
        }
        if let Some((_, a)) = approvals.of_call(call_id)
            && a.fingerprint == fingerprint
            && let ApprovalStatus::Granted { expires_ms, .. } = &a.status
            && live(*expires_ms, now)
        {
            return Ok(Gate::Run);
        }
        let request = format!("ap-{}", self.journal.state.last_seq + 1);
        let blob = self.put(input.to_string().into_bytes());
        self.write(vec![Event::ApprovalRequested {
            request,
            step,
            call_id: call_id.to_owned(),
            tool: name.to_owned(),
            effect: effect_name(effect).to_owned(),
            fingerprint,
            input: blob,
        }])
        .await?;
        Ok(Gate::Wait)
    }

    /// Answer the call `call_id` of turn `step` as denied by a person, with
    /// their `reason` (`decide`'s `Deny`): the model reads why and goes on.
    pub(crate) async fn deny(
        &mut self,
        step: u64,
        call_id: String,
        reason: String,
    ) -> Result<(), RunError> {
        let result = self.put(
            serde_json::to_vec(&serde_json::json!({"error": {
                "kind": "denied",
                "message": format!("a person did not approve this call: {reason}"),
            }}))
            .unwrap_or_default(),
        );
        self.write(vec![Event::ToolFinished {
            step,
            call_id,
            ok: false,
            result,
            receipt: serde_json::Value::Null,
        }])
        .await
    }

    /// The fingerprint of calling `name` with `input`: component digest,
    /// tool, canonical arguments, the grants it runs with, effect.
    pub(crate) fn fingerprint(
        &self,
        name: &str,
        effect: Effect,
        input: &serde_json::Value,
    ) -> String {
        let (digest, grants) = match self.tools.get(name) {
            Some(tool) => tool.set().fingerprint_parts(&self.agent.frozen),
            // Not a tool of this agent: the call is refused before any
            // gate; a fingerprint of it matches nothing granted.
            None => (String::new(), serde_json::Value::Null),
        };
        let mut args = String::new();
        crate::model::replay::canonical_json(input, &mut args);
        let mut grants_json = String::new();
        crate::model::replay::canonical_json(&grants, &mut grants_json);
        let mut h = Sha256::new();
        for part in [
            "longhand.approval/1",
            &digest,
            name,
            &args,
            &grants_json,
            &format!("{effect:?}"),
        ] {
            h.update(part.as_bytes());
            h.update(b"\0");
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    }
}

/// A person's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Approve: `once` or for the `session`, optionally until `expires_ms`.
    Approve {
        /// `once` or `session`.
        scope: String,
        /// Unix ms.
        expires_ms: Option<u64>,
    },
    /// Deny, telling the model why.
    Deny {
        /// Why.
        reason: String,
    },
}

/// Why an answer was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No such request in the session.
    #[error(
        "session {session} has no approval request {request}; `longhand approvals` lists the pending ones"
    )]
    Unknown {
        /// The session.
        session: String,
        /// The request named.
        request: String,
    },
    /// The request was answered already.
    #[error("request {request} is not pending (it is {status}); nothing to answer")]
    Answered {
        /// The request.
        request: String,
        /// Where it stands.
        status: String,
    },
    /// The session store refused (another worker holds the session, …).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log cannot be folded.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Record a person's `answer` to `request` in a paused `session`: lease
/// it, append the answer at the log's end, release it. The session stays
/// paused; `resume` carries on.
pub async fn answer(
    store: &dyn Store,
    session: &SessionId,
    request: &str,
    answer: Answer,
    by: &str,
) -> Result<(), AnswerError> {
    // Held while the log is read and the answer appended, so no worker
    // and no other answer slips in between.
    let lease = store
        .acquire_lease(session, by, std::time::Duration::from_secs(30))
        .await?;
    let result = answer_held(store, session, &lease, request, answer, by).await;
    let _ = store.release(&lease).await;
    result
}

async fn answer_held(
    store: &dyn Store,
    session: &SessionId,
    lease: &longhand_session::Lease,
    request: &str,
    answer: Answer,
    by: &str,
) -> Result<(), AnswerError> {
    let state = crate::core::state::snapshot::load_state(store, session).await?;
    let Some(found) = state.approvals.requests.get(request) else {
        return Err(AnswerError::Unknown {
            session: session.to_string(),
            request: request.to_owned(),
        });
    };
    if found.status != ApprovalStatus::Pending {
        let status = match &found.status {
            ApprovalStatus::Granted { .. } => "approved",
            ApprovalStatus::Denied { .. } => "denied",
            ApprovalStatus::Used => "approved and used",
            ApprovalStatus::Pending => "pending",
        };
        return Err(AnswerError::Answered {
            request: request.to_owned(),
            status: status.to_owned(),
        });
    }
    let event = match answer {
        Answer::Approve { scope, expires_ms } => Event::ApprovalGranted {
            request: request.to_owned(),
            scope,
            expires_ms,
            by: by.to_owned(),
        },
        Answer::Deny { reason } => Event::ApprovalDenied {
            request: request.to_owned(),
            reason: longhand_session::event::bounded(&reason).into_owned(),
            by: by.to_owned(),
        },
    };
    store
        .append(session, lease, state.last_seq + 1, &[event])
        .await?;
    Ok(())
}

/// Pending requests of every session in `store`, with their session.
pub async fn pending_everywhere(
    store: &dyn Store,
) -> Result<Vec<(SessionId, String, Approval)>, RunError> {
    let mut out = Vec::new();
    for summary in store.list().await? {
        if summary.status != SessionStatus::Paused {
            continue;
        }
        let state = crate::core::state::snapshot::load_state(store, &summary.id).await?;
        for (id, approval) in state.approvals.pending() {
            out.push((summary.id.clone(), id.clone(), approval.clone()));
        }
    }
    Ok(out)
}
