//! The control inbox: how someone other than the lease holder steers a
//! session (`longhand pause`, `cancel`, `send`).
//!
//! Why an inbox and not events: only the holder of a session's lease may
//! append to its log (fencing, see [`store`](super::store)), and the
//! process running a session holds that lease for hours. So a front end
//! never appends: it posts a [`Control`] to the session's inbox, which any
//! process may write, and the holder reads it and turns it into events of
//! its own at a safe point. A session nobody runs reads its inbox at its
//! next resume.
//!
//! "Handled" lives in the log, not here. The loop records the id of every
//! control it acted on in the events it writes, so after a crash it knows,
//! from its folded state alone, which controls it already applied and asks
//! the store for the ones after that id ([`Store::controls`]); a control is
//! applied exactly once however the process dies. [`Store::settle_control`]
//! marks a control handled in the inbox too, after the event is in the log:
//! bookkeeping for front ends (pending or not), never what the loop trusts.
//!
//! [`Store::controls`]: super::store::Store::controls
//! [`Store::settle_control`]: super::store::Store::settle_control
//!
//! This module owns the types; the store implements the inbox, the brain
//! acts on it.

use serde::{Deserialize, Serialize};

/// The longest `text` of a control, in bytes of UTF-8: 16 KiB. A reason or
/// a message to the model, not a document: larger text belongs in a file
/// the agent can read.
pub const MAX_CONTROL_TEXT: usize = 16 << 10;

/// What a control asks the session to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ControlKind {
    /// Pause at the next safe point (between steps, never inside a tool
    /// call), as a limit would; `resume` carries on.
    Pause,
    /// End the session at the next safe point. With `now`, a tool call in
    /// progress is ended too and recorded in doubt.
    Cancel {
        /// End a running tool call instead of waiting for it.
        #[serde(default)]
        now: bool,
    },
    /// Put `text` before the model at its next step.
    Send,
}

impl ControlKind {
    /// The kind's name as stored and printed: `pause`, `cancel`,
    /// `cancel_now` or `send`.
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Pause => "pause",
            ControlKind::Cancel { now: false } => "cancel",
            ControlKind::Cancel { now: true } => "cancel_now",
            ControlKind::Send => "send",
        }
    }

    /// The inverse of [`ControlKind::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pause" => ControlKind::Pause,
            "cancel" => ControlKind::Cancel { now: false },
            "cancel_now" => ControlKind::Cancel { now: true },
            "send" => ControlKind::Send,
            _ => return None,
        })
    }
}

/// One message in a session's control inbox. As JSON the kind is flattened:
/// `{"id": 3, "kind": "cancel", "now": true, "text": "wrong goal",
/// "posted_ms": …, "by": "cli@host-123", "handled_ms": null}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// Per session, from 1, strictly increasing in posting order; never
    /// reused.
    pub id: u64,
    /// What is asked.
    #[serde(flatten)]
    pub kind: ControlKind,
    /// The reason (pause, cancel) or the message (send); at most
    /// [`MAX_CONTROL_TEXT`] bytes.
    pub text: Option<String>,
    /// When it was posted, unix ms, by the store's clock.
    pub posted_ms: u64,
    /// Who posted it, e.g. `cli@<host>-<pid>`.
    pub by: String,
    /// When the lease holder marked it handled, unix ms; `None` while
    /// pending. Bookkeeping only: the log says what was applied.
    #[serde(default)]
    pub handled_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_as_text_and_json() {
        for kind in [
            ControlKind::Pause,
            ControlKind::Cancel { now: false },
            ControlKind::Cancel { now: true },
            ControlKind::Send,
        ] {
            assert_eq!(ControlKind::parse(kind.as_str()), Some(kind));
            let control = Control {
                id: 1,
                kind,
                text: Some("why".into()),
                posted_ms: 5,
                by: "cli@h-1".into(),
                handled_ms: None,
            };
            let json = serde_json::to_value(&control).unwrap();
            assert_eq!(json["kind"], kind.as_str().trim_end_matches("_now"));
            assert_eq!(serde_json::from_value::<Control>(json).unwrap(), control);
        }
        assert_eq!(ControlKind::parse("stop"), None);
        let json = serde_json::to_value(Control {
            id: 2,
            kind: ControlKind::Cancel { now: true },
            text: None,
            posted_ms: 7,
            by: "me".into(),
            handled_ms: Some(9),
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": 2, "kind": "cancel", "now": true, "text": null,
                "posted_ms": 7, "by": "me", "handled_ms": 9})
        );
    }
}
