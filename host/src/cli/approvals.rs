//! `longhand approvals | approve | deny`: the approval inbox across
//! sessions, and a person's answers. See `brain::control::approvals`.

use std::io::Write;

use super::term::{json_line, one_line};
use super::{Outcome, usage};
use longhand_brain::control::approvals::{self, Answer, AnswerError};

/// `longhand approvals` flags.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// One JSON object per pending request: `{"session", "request",
    /// "call_id", "tool", "effect", "fingerprint", "input"}` (`input` is
    /// the arguments as JSON).
    #[arg(long)]
    pub json: bool,
}

/// `longhand approve` flags.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The session.
    pub session: String,
    /// The request (`ap-…`, as `longhand approvals` lists it).
    pub request: String,
    /// `once` (this call) or `session` (the same action — same tool, same
    /// arguments, same grants — for the rest of the session).
    #[arg(long, default_value = "once", value_parser = ["once", "session"])]
    pub scope: String,
    /// The approval lapses after this long, e.g. `30m`, `2h`.
    #[arg(long, value_name = "DURATION")]
    pub expires: Option<String>,
}

/// `longhand deny` flags.
#[derive(Debug, clap::Args)]
pub struct DenyArgs {
    /// The session.
    pub session: String,
    /// The request.
    pub request: String,
    /// Why: the model is told, and goes on.
    #[arg(long)]
    pub reason: String,
}

/// `longhand approvals`.
pub async fn list(args: ListArgs) -> anyhow::Result<Outcome> {
    let store = super::env::open_store().await?;
    let pending = approvals::pending_everywhere(store.as_ref()).await?;
    let mut out = std::io::stdout().lock();
    for (session, request, a) in &pending {
        let input = store
            .get_blob(&a.input)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if args.json {
            let input: serde_json::Value =
                serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input));
            let line = serde_json::json!({
                "session": session.as_str(), "request": request, "call_id": a.call_id,
                "tool": a.tool, "effect": a.effect, "fingerprint": a.fingerprint,
                "input": input,
            });
            writeln!(out, "{}", json_line(&line))?;
        } else {
            let shown: String = input.chars().take(160).collect();
            writeln!(
                out,
                "{session}  {request}  {} [{}]  {}",
                one_line(&a.tool),
                a.effect,
                one_line(&shown)
            )?;
        }
    }
    if pending.is_empty() && !args.json {
        writeln!(out, "no approval is pending")?;
    }
    Ok(Outcome::Done)
}

/// `longhand approve`.
pub async fn approve(args: ApproveArgs) -> anyhow::Result<Outcome> {
    let answer = approval(&args.scope, args.expires.as_deref())?;
    record(&args.session, &args.request, answer).await?;
    println!(
        "approved {} of session {} (scope {}); `longhand resume {}` carries on",
        args.request,
        args.session,
        args.scope,
        resume_target(&args.session).await
    );
    Ok(Outcome::Done)
}

/// `longhand deny`.
pub async fn deny(args: DenyArgs) -> anyhow::Result<Outcome> {
    let answer = denial(&args.reason)?;
    record(&args.session, &args.request, answer).await?;
    println!(
        "denied {} of session {}; `longhand resume {}` tells the model and carries on",
        args.request,
        args.session,
        resume_target(&args.session).await
    );
    Ok(Outcome::Done)
}

/// An approval with `scope` (`once` or `session`) lapsing after `expires`
/// (`30m`, `2h`; default never), or a usage error.
pub(super) fn approval(scope: &str, expires: Option<&str>) -> anyhow::Result<Answer> {
    if !matches!(scope, "once" | "session") {
        return Err(usage(format!("scope `{scope}`: give `once` or `session`")));
    }
    let expires_ms = match expires {
        None => None,
        Some(text) => {
            let d = humantime::parse_duration(text)
                .map_err(|e| usage(format!("--expires `{text}`: {e} (e.g. 30m, 2h)")))?;
            Some(longhand_session::now_ms() + d.as_millis() as u64)
        }
    };
    Ok(Answer::Approve {
        scope: scope.to_owned(),
        expires_ms,
    })
}

/// A denial telling the model `reason`, or a usage error if it is blank.
pub(super) fn denial(reason: &str) -> anyhow::Result<Answer> {
    if reason.trim().is_empty() {
        return Err(usage("--reason is empty: say why, the model is told"));
    }
    Ok(Answer::Deny {
        reason: reason.to_owned(),
    })
}

/// The session to resume after answering one of `session`'s requests: its
/// root, since a sub-agent is run by its parent.
async fn resume_target(session: &str) -> String {
    let Ok(store) = super::env::open_store().await else {
        return session.to_owned();
    };
    root_of(store.as_ref(), session).await
}

/// `session`'s root: itself, or the parent of its parent … (at most eight
/// levels up).
pub(super) async fn root_of(store: &dyn longhand_session::Store, session: &str) -> String {
    let mut current = session.to_owned();
    for _ in 0..8 {
        let Ok(id) = super::env::parse_session(&current) else {
            break;
        };
        match longhand_brain::load_state(store, &id).await {
            Ok(state) => match state.parent {
                Some(parent) => current = parent,
                None => break,
            },
            Err(_) => break,
        }
    }
    current
}

async fn record(session: &str, request: &str, answer: Answer) -> anyhow::Result<()> {
    let id = super::env::parse_session(session)?;
    let store = super::env::open_store().await?;
    let by = format!("person@{}", super::env::owner());
    match approvals::answer(store.as_ref(), &id, request, answer, &by).await {
        Ok(()) => Ok(()),
        // Typed causes keep their exit codes (a held lease is 3, a broken
        // store 4); a wrong request is the caller's to fix.
        Err(AnswerError::Store(e)) => Err(e.into()),
        Err(AnswerError::Run(e)) => Err(e.into()),
        Err(e @ (AnswerError::Unknown { .. } | AnswerError::Answered { .. })) => Err(usage(e)),
    }
}
