//! `longhand pause | cancel | send`: steer a session from outside.
//!
//! These commands never append to the session's log: the process running
//! the session holds its lease, and only the holder may append (fencing).
//! They post a [`Control`] to the session's inbox instead
//! ([`Store::post_control`], no lease needed, durable when it returns), and
//! the worker running the session acts on it at its next safe point; a
//! session nobody runs reads its inbox when it is next resumed.
//!
//! Refused (exit 2): a session id that does not parse or does not exist, a
//! session that already finished or failed (nothing is left to steer), a
//! `pause` of a paused session (it would only pause again as soon as it is
//! resumed), an empty `send`, a text over [`MAX_CONTROL_TEXT`] bytes.
//!
//! A session that ends between the status check and the post simply never
//! reads the control: the post is harmless, and the check is advice, not a
//! lock.

use std::io::Write;

use super::term::{json_line, printable};
use super::{Outcome, usage};
use longhand_session::{Control, ControlKind, MAX_CONTROL_TEXT, SessionId, SessionStatus};

/// `longhand pause` flags.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// The session.
    pub session: String,
    /// Why, recorded with the pause. Default: none.
    #[arg(long)]
    pub reason: Option<String>,
    /// Print the posted control as one JSON object (see [`post`]).
    #[arg(long)]
    pub json: bool,
}

/// `longhand cancel` flags.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// The session.
    pub session: String,
    /// Why, recorded with the cancellation. Default: none.
    #[arg(long)]
    pub reason: Option<String>,
    /// Also end a tool call in progress (recorded as in doubt) instead of
    /// waiting for it to return. Default: off.
    #[arg(long)]
    pub now: bool,
    /// Print the posted control as one JSON object (see [`post`]).
    #[arg(long)]
    pub json: bool,
}

/// `longhand send` flags.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The session.
    pub session: String,
    /// The message the model sees at its next step.
    pub text: String,
    /// Print the posted control as one JSON object (see [`post`]).
    #[arg(long)]
    pub json: bool,
}

/// `longhand pause`.
pub async fn pause(args: PauseArgs) -> anyhow::Result<Outcome> {
    post(&args.session, ControlKind::Pause, args.reason, args.json).await
}

/// `longhand cancel`.
pub async fn cancel(args: CancelArgs) -> anyhow::Result<Outcome> {
    let kind = ControlKind::Cancel { now: args.now };
    post(&args.session, kind, args.reason, args.json).await
}

/// `longhand send`.
pub async fn send(args: SendArgs) -> anyhow::Result<Outcome> {
    post(&args.session, ControlKind::Send, Some(args.text), args.json).await
}

/// Posts `kind` to `session`'s inbox and says what happens next. With
/// `json`, prints the [`Control`] as JSON with the session added:
/// `{"session", "id", "kind", ["now",] "text", "posted_ms", "by",
/// "handled_ms"}`.
async fn post(
    session: &str,
    kind: ControlKind,
    text: Option<String>,
    json: bool,
) -> anyhow::Result<Outcome> {
    let session = super::env::parse_session(session)?;
    let store = super::env::open_store().await?;
    let by = format!("cli@{}", host_pid());
    let (control, status) = post_to(store.as_ref(), &session, kind, text, &by).await?;
    let mut out = std::io::stdout().lock();
    if json {
        let mut value = serde_json::to_value(&control)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("session".into(), session.as_str().into());
        }
        writeln!(out, "{}", json_line(&value))?;
    } else {
        writeln!(out, "{}", describe(&session, &control))?;
        let next = match status {
            SessionStatus::Paused | SessionStatus::Created => format!(
                "the session is {status}: it acts on this when it next runs \
                 (`longhand resume {session}`)"
            ),
            _ => "the worker running it acts within a second at its next safe point; \
                  if none is running, at its next resume"
                .to_owned(),
        };
        writeln!(out, "{next}")?;
    }
    Ok(Outcome::Done)
}

/// Posts `kind` to `session`'s inbox for `by`, after the checks every
/// front end makes (an empty `send`, a text over [`MAX_CONTROL_TEXT`], an
/// unknown or ended session, a second pause: usage errors); returns the
/// control and the session's status when it was posted.
pub(super) async fn post_to(
    store: &dyn longhand_session::Store,
    session: &SessionId,
    kind: ControlKind,
    text: Option<String>,
    by: &str,
) -> anyhow::Result<(Control, SessionStatus)> {
    if kind == ControlKind::Send && text.as_deref().is_none_or(|t| t.trim().is_empty()) {
        return Err(usage("`send` needs a message: the text is empty"));
    }
    if let Some(text) = &text
        && text.len() > MAX_CONTROL_TEXT
    {
        return Err(usage(format!(
            "the text is {} bytes, over the {MAX_CONTROL_TEXT}-byte limit of a control; \
             put longer text in a file the agent can read and send its path",
            text.len()
        )));
    }
    // NotFound (exit 2) for a session that does not exist.
    let status = store.summary(session).await?.status;
    refuse_for(session, kind, status)?;
    let control = store.post_control(session, kind, text, by).await?;
    Ok((control, status))
}

/// Why `kind` makes no sense for a session in `status`, as a usage error.
fn refuse_for(session: &SessionId, kind: ControlKind, status: SessionStatus) -> anyhow::Result<()> {
    match (kind, status) {
        (_, SessionStatus::Finished | SessionStatus::Failed) => Err(usage(format!(
            "session {session} has already {status}; there is nothing to steer"
        ))),
        (ControlKind::Pause, SessionStatus::Paused) => Err(usage(format!(
            "session {session} is already paused; `longhand resume {session}` continues it, \
             `longhand cancel {session}` ends it"
        ))),
        _ => Ok(()),
    }
}

/// `posted cancel (now) #2 to session s-…: "reason"`.
fn describe(session: &SessionId, control: &Control) -> String {
    let what = match control.kind {
        ControlKind::Pause => "pause",
        ControlKind::Cancel { now: false } => "cancel",
        ControlKind::Cancel { now: true } => "cancel (now)",
        ControlKind::Send => "message",
    };
    let text = control
        .text
        .as_deref()
        .map(|t| format!(": {:?}", printable(t)))
        .unwrap_or_default();
    format!("posted {what} #{} to session {session}{text}", control.id)
}

/// `<host>-<pid>`, naming this process in the control's `by`.
fn host_pid() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "local".to_owned());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_sessions_and_a_second_pause_are_refused() {
        let id = SessionId::generate(1);
        let refused = |kind, status| refuse_for(&id, kind, status).is_err();
        let cancel = ControlKind::Cancel { now: false };
        for kind in [ControlKind::Pause, cancel, ControlKind::Send] {
            assert!(refused(kind, SessionStatus::Finished));
            assert!(refused(kind, SessionStatus::Failed));
            assert!(!refused(kind, SessionStatus::Running));
            assert!(!refused(kind, SessionStatus::Created));
        }
        assert!(refused(ControlKind::Pause, SessionStatus::Paused));
        assert!(!refused(cancel, SessionStatus::Paused));
        assert!(!refused(ControlKind::Send, SessionStatus::Paused));
    }
}
