//! The approvals of a session, folded from its events: each request's
//! lifecycle (requested → granted | denied; a `once` grant → used by its
//! call's `tool_started`) and the fingerprints approved for the rest of the
//! session. Data and fold only; the gate that asks for approvals and the
//! operator's answers live in `brain::control::approvals`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use longhand_session::{BlobRef, Event};

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a person.
    Pending,
    /// Approved.
    Granted {
        /// `once` or `session`.
        scope: String,
        /// When it lapses (unix ms).
        expires_ms: Option<u64>,
    },
    /// Denied, with the reason the model is told.
    Denied {
        /// Why.
        reason: String,
    },
    /// Approved once and used by its call.
    Used,
}

/// One request, as the log tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The turn that asked for the call.
    pub step: u64,
    /// The call.
    pub call_id: String,
    /// The tool as the model named it.
    pub tool: String,
    /// Its effect.
    pub effect: String,
    /// The action's fingerprint.
    pub fingerprint: String,
    /// The arguments (blob).
    pub input: BlobRef,
    /// Where it stands.
    pub status: ApprovalStatus,
}

/// The approvals of a session, folded from its events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Approvals {
    /// Requests by id.
    pub requests: BTreeMap<String, Approval>,
    /// Fingerprints approved for the rest of the session, with their
    /// expiry.
    pub session: BTreeMap<String, Option<u64>>,
}

impl Approvals {
    /// Fold one event in.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::ApprovalRequested {
                request,
                step,
                call_id,
                tool,
                effect,
                fingerprint,
                input,
            } => {
                self.requests.insert(
                    request.clone(),
                    Approval {
                        step: *step,
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        effect: effect.clone(),
                        fingerprint: fingerprint.clone(),
                        input: input.clone(),
                        status: ApprovalStatus::Pending,
                    },
                );
            }
            Event::ApprovalGranted {
                request,
                scope,
                expires_ms,
                ..
            } => {
                if let Some(a) = self.requests.get_mut(request) {
                    a.status = ApprovalStatus::Granted {
                        scope: scope.clone(),
                        expires_ms: *expires_ms,
                    };
                    if scope == "session" {
                        self.session.insert(a.fingerprint.clone(), *expires_ms);
                    }
                }
            }
            Event::ApprovalDenied {
                request, reason, ..
            } => {
                if let Some(a) = self.requests.get_mut(request) {
                    a.status = ApprovalStatus::Denied {
                        reason: reason.clone(),
                    };
                }
            }
            Event::ToolStarted { call_id, .. } => {
                for a in self.requests.values_mut() {
                    if &a.call_id == call_id
                        && matches!(&a.status, ApprovalStatus::Granted { scope, .. } if scope == "once")
                    {
                        a.status = ApprovalStatus::Used;
                    }
                }
            }
            _ => {}
        }
    }

    /// Requests waiting for a person, by id.
    pub fn pending(&self) -> impl Iterator<Item = (&String, &Approval)> {
        self.requests
            .iter()
            .filter(|(_, a)| a.status == ApprovalStatus::Pending)
    }

    /// The newest request for `call_id`.
    pub fn of_call(&self, call_id: &str) -> Option<(&String, &Approval)> {
        self.requests
            .iter()
            .filter(|(_, a)| a.call_id == call_id)
            .max_by_key(|(id, _)| request_seq(id))
    }
}

fn request_seq(id: &str) -> u64 {
    id.strip_prefix("ap-")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Whether an approval expiring at `expires_ms` still holds at `now`.
pub fn live(expires_ms: Option<u64>, now: u64) -> bool {
    expires_ms.is_none_or(|at| now < at)
}
