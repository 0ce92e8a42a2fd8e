//! `POST /hooks/<name>`: webhook triggers.
//!
//! A webhook is not behind the API token (the sender is another system,
//! not an operator); it is behind its own HMAC secret instead, named by the
//! trigger's `secret_env` and read when the server starts. A webhook whose
//! variable is unset or empty is disabled, not guessed at: the server
//! starts, says so on stderr naming the variable, and answers that hook
//! 503 `hook_disabled` until it is restarted with the secret. A request must
//! carry `X-Longhand-Timestamp` (unix seconds, within 5 minutes) and
//! `X-Longhand-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`;
//! the body is at most the server's 64 KiB request limit and UTF-8 text;
//! a signature already used is refused, so a captured request cannot be
//! replayed. Every refusal of the signature is the same 401, so a caller
//! learns nothing of which part was wrong. An accepted request starts a
//! detached session of the agent whose goal carries the body, fenced as
//! data from outside (the model is told it is not instructions).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};

use super::AppState;
use super::api::RawBody;
use super::backend::StartRequest;
use super::error::ApiError;
use crate::triggers::{WEBHOOK_SKEW_MS, verify_webhook, webhook_goal};
use longhand_brain::agent::trigger::When;
use longhand_session::{Clock, SystemClock};

/// One webhook trigger the server answers.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The agent's directory.
    pub agent: PathBuf,
    /// The agent's (or trigger's) goal, before the body is added.
    pub goal: String,
    /// The HMAC secret; `None` when its variable was not set at start
    /// (the hook is disabled).
    pub secret: Option<Vec<u8>>,
    /// The variable the secret is read from.
    pub secret_env: String,
}

/// The webhooks of the agents in `dirs` (each an agent directory, or a
/// directory of agent directories), secrets read with `var`, and a warning
/// for each webhook disabled because its secret variable is unset or
/// empty. Two webhooks with one name, or one without a goal, is an error:
/// refused at start, not at the first request.
pub fn load(
    dirs: &[PathBuf],
    var: impl Fn(&str) -> Option<String>,
) -> Result<(HashMap<String, Hook>, Vec<String>), String> {
    let mut hooks = HashMap::new();
    let mut warnings = Vec::new();
    for dir in dirs {
        for agent in agent_dirs(dir) {
            let (config, _) = longhand_brain::agent::config::AgentConfig::load(&agent)
                .map_err(|e| e.to_string())?;
            for t in &config.triggers {
                let Ok(When::Webhook { secret_env }) = t.when() else {
                    continue;
                };
                let secret = var(&secret_env).filter(|s| !s.is_empty());
                if secret.is_none() {
                    warnings.push(format!(
                        "the webhook `{}` of {} is disabled: its secret variable {secret_env} \
                         is not set (set {secret_env} and restart to enable POST /hooks/{})",
                        t.name,
                        agent.display(),
                        t.name
                    ));
                }
                let goal = t.goal.clone().or(config.goal.clone()).ok_or_else(|| {
                    format!(
                        "the webhook `{}` of {} has no goal: set `goal` on the trigger or the agent",
                        t.name,
                        agent.display()
                    )
                })?;
                if hooks.contains_key(&t.name) {
                    return Err(format!(
                        "two agents have a webhook named `{}`; /hooks/<name> must be unique",
                        t.name
                    ));
                }
                hooks.insert(
                    t.name.clone(),
                    Hook {
                        agent: agent.clone(),
                        goal,
                        secret: secret.map(String::into_bytes),
                        secret_env,
                    },
                );
            }
        }
    }
    Ok((hooks, warnings))
}

/// `dir` itself when it holds an agent.toml, else its subdirectories that do.
pub(super) fn agent_dirs(dir: &Path) -> Vec<PathBuf> {
    if dir
        .join(longhand_brain::agent::config::AGENT_FILE)
        .is_file()
    {
        return vec![dir.to_owned()];
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(longhand_brain::agent::config::AGENT_FILE).is_file())
        .collect();
    out.sort();
    out
}

/// Signatures seen within the skew window, oldest first.
#[derive(Debug, Default)]
pub struct Seen(Mutex<VecDeque<(u64, String)>>);

impl Seen {
    /// Whether `signature` is new (and remember it).
    fn first_use(&self, signature: &str, now_ms: u64) -> bool {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while seen
            .front()
            .is_some_and(|(at, _)| now_ms.saturating_sub(*at) > 2 * WEBHOOK_SKEW_MS)
        {
            seen.pop_front();
        }
        if seen.iter().any(|(_, s)| s == signature) {
            return false;
        }
        seen.push_back((now_ms, signature.to_owned()));
        true
    }
}

/// `POST /hooks/{name}`.
pub async fn fire(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let Some(hook) = state.hooks.get(&name) else {
        return Err(ApiError::not_found(
            "hook_not_found",
            "no webhook trigger of that name on this server",
        ));
    };
    let Some(secret) = &hook.secret else {
        // Which variable is the operator's business, in the server's log;
        // the caller learns only that the hook exists and is off.
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "hook_disabled",
            "this webhook is disabled: the server started without its secret (its log names \
             the variable); it answers once restarted with the secret set",
        ));
    };
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let now = SystemClock.now_ms();
    let signature = header("x-longhand-signature");
    verify_webhook(
        secret,
        header("x-longhand-timestamp"),
        signature,
        &body,
        now,
    )
    .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, "bad_signature", e.to_string()))?;
    if !state
        .seen_hooks
        .first_use(signature.unwrap_or_default(), now)
    {
        return Err(ApiError::conflict(
            "replayed",
            "this signature was used already; sign each request anew",
        ));
    }
    let text =
        std::str::from_utf8(&body).map_err(|_| ApiError::invalid("the body is not UTF-8 text"))?;
    let session = state
        .backend
        .start(StartRequest {
            agent: hook.agent.clone(),
            goal: Some(webhook_goal(&hook.goal, text)),
            priority: 0,
        })
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"hook": name, "session": session.as_str()})),
    ))
}
