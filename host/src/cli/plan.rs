//! `longhand plan <session> [--json]`: a planned session's tasks with their
//! statuses, attempts and each check's last result, folded from its log.

use std::io::Write;

use super::Outcome;
use super::term::{json_line, printable};
use longhand_brain::work::plan::PlanState;
use longhand_session::SessionId;

/// `longhand plan` flags.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The session.
    pub session: String,
    /// One JSON object: `{"session", "revision", "tasks": [{"id", "title",
    /// "status", "attempts", "depends_on", "checks": [{"kind", "label",
    /// "passed"}]}]}`; `passed` is true, false or null (not run yet).
    #[arg(long)]
    pub json: bool,
}

/// The plan as JSON.
pub fn plan_json(session: &SessionId, plan: &PlanState) -> serde_json::Value {
    let tasks: Vec<serde_json::Value> = plan
        .plan
        .tasks
        .iter()
        .map(|task| {
            let record = plan.tasks.get(&task.id).cloned().unwrap_or_default();
            let checks: Vec<serde_json::Value> = task
                .done_when
                .iter()
                .enumerate()
                .map(|(i, check)| {
                    serde_json::json!({
                        "kind": check.kind(),
                        "label": check.label(),
                        "passed": record.checks.get(i).copied().flatten(),
                    })
                })
                .collect();
            serde_json::json!({
                "id": task.id,
                "title": task.title,
                "status": plan.status(&task.id).as_str(),
                "attempts": record.attempts,
                "depends_on": task.depends_on,
                "priority": task.priority,
                "checks": checks,
            })
        })
        .collect();
    serde_json::json!({
        "session": session.as_str(),
        "revision": plan.revision,
        "current": plan.current,
        "tasks": tasks,
    })
}

/// `session`'s state; [`StoreError::NotFound`](longhand_session::StoreError)
/// for a session that does not exist.
async fn load(
    store: &dyn longhand_session::Store,
    session: &SessionId,
) -> anyhow::Result<longhand_brain::core::state::SessionState> {
    let state = longhand_brain::load_state(store, session).await?;
    if state.last_seq == 0 {
        return Err(longhand_session::StoreError::NotFound {
            what: format!("session {session}"),
        }
        .into());
    }
    Ok(state)
}

/// `longhand plan --json`'s object for `session`: [`plan_json`], or
/// `{"session", "tasks": []}` when it has no plan.
#[cfg(feature = "serve")]
pub(super) async fn plan_value(
    store: &dyn longhand_session::Store,
    session: &SessionId,
) -> anyhow::Result<serde_json::Value> {
    let state = load(store, session).await?;
    Ok(match &state.plan {
        Some(plan) => plan_json(session, plan),
        None => serde_json::json!({"session": session.as_str(), "tasks": []}),
    })
}

/// `longhand plan`.
pub async fn plan(args: PlanArgs) -> anyhow::Result<Outcome> {
    let session = super::env::parse_session(&args.session)?;
    let store = super::env::open_store().await?;
    let state = load(store.as_ref(), &session).await?;
    let mut out = std::io::stdout().lock();
    let Some(plan) = &state.plan else {
        if args.json {
            writeln!(
                out,
                "{}",
                json_line(&serde_json::json!({"session": session.as_str(), "tasks": []}))
            )?;
        } else {
            writeln!(
                out,
                "session {session} has no plan (its agent has no [plan], or the planner has \
                 not written one yet)"
            )?;
        }
        return Ok(Outcome::Done);
    };
    if args.json {
        writeln!(out, "{}", json_line(&plan_json(&session, plan)))?;
        return Ok(Outcome::Done);
    }
    writeln!(
        out,
        "plan of session {session} (revision {}, status {})",
        plan.revision, state.status
    )?;
    for task in &plan.plan.tasks {
        let record = plan.tasks.get(&task.id).cloned().unwrap_or_default();
        let deps = if task.depends_on.is_empty() {
            String::new()
        } else {
            format!("  after {}", task.depends_on.join(", "))
        };
        writeln!(
            out,
            "{:<8} {}  {}  ({} attempts){}",
            plan.status(&task.id).as_str(),
            printable(&task.id),
            printable(&task.title),
            record.attempts,
            printable(&deps)
        )?;
        for (i, check) in task.done_when.iter().enumerate() {
            let result = match record.checks.get(i).copied().flatten() {
                Some(true) => "pass",
                Some(false) => "FAIL",
                None => "-",
            };
            writeln!(
                out,
                "           [{result:^4}] {}",
                printable(&check.label())
            )?;
        }
    }
    Ok(Outcome::Done)
}
