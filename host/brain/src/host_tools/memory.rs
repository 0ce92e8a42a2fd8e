//! The loop's side of the memory bank: the host tools `memory__search` and
//! `memory__remember`, and the memories put into fresh contexts.
//!
//! Both tools exist only when `[memory]` grants them a scope (`search`,
//! `remember`) and a bank is attached; the worker is the only role offered
//! them. They run in the host, not in a component: the bank is ours, and
//! the model reaches only the scopes granted. Search is read-only; a
//! remember is a write — announced (fsynced) before it runs, recorded in
//! doubt if the process dies mid-call, and followed by `memory_written`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::config::MemoryConfig;
use crate::agent::frozen::Frozen;
use crate::core::ctx::Ctx;
use crate::error::tool_error as error;
use crate::memory::{MemorySource, NewMemory};
use crate::model::ToolDef;
use crate::tools::{CallCx, Offer, Offered, Outcome, Registered, Toolset};
use longhand_hands::Effect;
use longhand_session::Event;

/// The component name host memory tools are recorded under.
pub const COMPONENT: &str = "memory";
/// `tool_started.component_digest` of a host tool: no binary ran.
pub const HOST_DIGEST: &str = "host:memory";
/// `memory__search`.
pub const SEARCH: &str = "memory__search";
/// `memory__remember`.
pub const REMEMBER: &str = "memory__remember";
/// Most results of one search.
pub const MAX_RESULTS: usize = 20;

/// The memory tools `config` grants, as the model sees them.
pub fn defs(config: &MemoryConfig) -> Vec<ToolDef> {
    let mut defs = Vec::new();
    if !config.search.is_empty() {
        defs.push(ToolDef {
            name: SEARCH.to_owned(),
            description: format!(
                "Search the long-term memory (scopes: {}) by words; returns the best matches \
                 with their ids.",
                config.search.join(", ")
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "words to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        });
    }
    if let Some(scope) = &config.remember {
        defs.push(ToolDef {
            name: REMEMBER.to_owned(),
            description: format!(
                "Keep a fact for later sessions in the long-term memory (scope {scope}): a \
                 decision, a lesson, where something is. Short and self-contained. \
                 `supersedes` names an entry this one replaces."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": crate::memory::MAX_TEXT_BYTES},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "supersedes": {"type": "string"}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        });
    }
    defs
}

/// The effect of a granted memory tool named `name`.
pub fn effect(config: &MemoryConfig, name: &str) -> Option<Effect> {
    match name {
        SEARCH if !config.search.is_empty() => Some(Effect::ReadOnly),
        REMEMBER if config.remember.is_some() => Some(Effect::Writes),
        _ => None,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchInput {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RememberInput {
    text: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    supersedes: Option<String>,
}

/// `memory__search` and `memory__remember`, offered when `[memory]`
/// grants their scopes and a bank is attached.
pub(crate) struct Memory;

#[async_trait::async_trait]
impl Toolset for Memory {
    fn component(&self) -> &str {
        COMPONENT
    }

    fn digest(&self) -> &str {
        HOST_DIGEST
    }

    fn offer(&self, offer: &Offer<'_>) -> Vec<Offered> {
        if offer.memory.is_none() {
            return Vec::new();
        }
        let config = &offer.frozen.memory;
        defs(config)
            .into_iter()
            .filter_map(|def| {
                let effect = effect(config, &def.name)?;
                Some(super::offered(def, effect))
            })
            .collect()
    }

    fn fingerprint_parts(&self, frozen: &Frozen) -> (String, Value) {
        super::fingerprint_parts(frozen)
    }

    async fn call(&self, cx: &CallCx<'_>, tool: &Registered, input: &Value) -> Outcome {
        let started = std::time::Instant::now();
        super::timed(started, call(cx, &tool.name, input).await)
    }

    fn followed_by(&self, tool: &Registered, call_id: &str, result: &[u8]) -> Option<Event> {
        if tool.name != REMEMBER {
            return None;
        }
        let entry = serde_json::from_slice::<Value>(result).ok()?;
        let text = |key: &str| entry.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        Some(Event::MemoryWritten {
            id: text("id").unwrap_or_default(),
            scope: text("scope").unwrap_or_default(),
            text: text("text").unwrap_or_default(),
            supersedes: text("supersedes"),
            call_id: Some(call_id.to_owned()),
        })
    }
}

/// Run a memory tool; `(ok, result JSON)`.
async fn call(ctx: &CallCx<'_>, name: &str, input: &Value) -> (bool, Value) {
    let config = ctx.frozen.memory.clone();
    let Some(bank) = ctx.memory.cloned() else {
        return (
            false,
            error("unavailable", "no memory bank is attached to this worker"),
        );
    };
    let session = ctx.session.to_owned();
    let seq = ctx.seq;
    let outcome = match name {
        SEARCH => {
            let input: SearchInput = match serde_json::from_value(input.clone()) {
                Ok(i) => i,
                Err(e) => return (false, error("invalid-input", e.to_string())),
            };
            let limit = input.limit.unwrap_or(5).clamp(1, MAX_RESULTS);
            let scopes = config.search.clone();
            tokio::task::spawn_blocking(move || {
                bank.search(&input.query, &scopes, limit).map(|found| {
                    let results: Vec<Value> = found
                        .into_iter()
                        .map(|m| {
                            json!({"id": m.id, "scope": m.scope, "text": m.text, "tags": m.tags})
                        })
                        .collect();
                    json!({ "results": results })
                })
            })
            .await
        }
        REMEMBER => {
            let input: RememberInput = match serde_json::from_value(input.clone()) {
                Ok(i) => i,
                Err(e) => return (false, error("invalid-input", e.to_string())),
            };
            let Some(scope) = config.remember.clone() else {
                return (
                    false,
                    error("denied", "no memory scope is granted for writing"),
                );
            };
            tokio::task::spawn_blocking(move || {
                bank.remember(NewMemory {
                    scope,
                    text: input.text,
                    tags: input.tags,
                    source: Some(MemorySource { session, seq }),
                    supersedes: input.supersedes,
                })
                .map(|m| {
                    json!({"id": m.id, "scope": m.scope, "text": m.text,
                           "supersedes": m.supersedes})
                })
            })
            .await
        }
        other => {
            return (
                false,
                error("not-found", format!("no memory tool `{other}`")),
            );
        }
    };
    match outcome {
        Ok(Ok(value)) => (true, value),
        Ok(Err(e)) => {
            let kind = match e {
                crate::memory::MemoryError::Invalid { .. } => "invalid-input",
                crate::memory::MemoryError::NotFound { .. } => "not-found",
                _ => "failed",
            };
            (false, error(kind, e.to_string()))
        }
        Err(e) => (false, error("crashed", e.to_string())),
    }
}

impl Ctx<'_> {
    /// The most relevant memories of the `[memory] read` scopes for `query`
    /// (id, text), marked used by this session. None without a bank or
    /// scopes; a bank that fails is logged and skipped — memories help,
    /// they are not needed to go on.
    pub(crate) async fn memories_for(&self, query: &str) -> Vec<(String, String)> {
        let config = &self.agent.frozen.memory;
        let Some(bank) = self.kit.memory.clone() else {
            return Vec::new();
        };
        if config.read.is_empty() {
            return Vec::new();
        }
        let scopes = config.read.clone();
        let top = config.top();
        let query = query.to_owned();
        let session = self.session.as_str().to_owned();
        let found = tokio::task::spawn_blocking(move || {
            let found = bank.search(&query, &scopes, top)?;
            let ids: Vec<String> = found.iter().map(|m| m.id.clone()).collect();
            bank.mark_used(&ids, &session)?;
            Ok::<_, crate::memory::MemoryError>(found)
        })
        .await;
        match found {
            Ok(Ok(found)) => found.into_iter().map(|m| (m.id, m.text)).collect(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "memory search for a briefing failed; going on without");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "memory search task failed; going on without");
                Vec::new()
            }
        }
    }
}
