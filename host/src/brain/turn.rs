//! One model turn: build the request from the state, record it, call the
//! provider with retries — each failed attempt recorded when it happens —
//! and record the answer, or pause when the attempts run out.

use std::collections::HashSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::decide::Role;
use super::model::{Attempts, Message, ModelError, ModelRequest, ModelResponse, ToolCall};
use super::runner::{RunError, Runner, digest_hex};
use super::state::{CHECK_PREFIX, HistoryItem};
use crate::session::{BlobRef, Event, PauseKind, PauseReason};

/// Compact description of a model request, stored instead of the request
/// itself so the log does not re-store the whole history every step. The
/// request is rebuilt from the same state when needed.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RequestManifest {
    step: u64,
    system: BlobRef,
    tools: BlobRef,
    goal: BlobRef,
    history_through_seq: u64,
    history_items: usize,
    history_omitted: u64,
    /// sha256 of the canonical request JSON.
    request_digest: String,
}

/// Longest call id kept as the model wrote it. Ids are the model's to
/// choose; both APIs accept `[A-Za-z0-9_-]` ids of this length and the
/// whole conversation is replayed from our own records, so an id outside
/// these bounds is replaced, consistently, by one of ours.
const MAX_CALL_ID: usize = 64;

/// The most calls of one answer the loop records and runs. More is not a
/// plan but a flood; the rest are answered as refused.
pub const MAX_CALLS_PER_ANSWER: usize = 1024;

impl Runner<'_> {
    /// Ask `role` for the answer of turn `step`.
    pub(super) async fn ask(&mut self, role: Role, step: u64) -> Result<(), RunError> {
        let request = self.build_request(step).await?;
        let request_json = serde_json::to_vec(&request)
            .map_err(|e| RunError::Log(format!("cannot serialize the request: {e}")))?;
        let system = self.put(request.system.clone().into_bytes());
        let tools = self.put(serde_json::to_vec(&request.tools).unwrap_or_default());
        let goal = self.put(self.state.goal.clone().unwrap_or_default().into_bytes());
        let manifest = RequestManifest {
            step,
            system,
            tools,
            goal,
            history_through_seq: self.state.last_seq,
            history_items: self.state.history.len(),
            history_omitted: self.state.history_omitted,
            request_digest: digest_hex(&request_json),
        };
        let manifest = self.put(serde_json::to_vec(&manifest).unwrap_or_default());
        // Attempts count across processes: a resumed worker goes on from
        // the highest attempt recorded for this turn.
        let mut attempt = match &self.state.pending_request {
            Some(p) if p.step == step => p.attempts + 1,
            _ => 1,
        };
        self.write(vec![Event::ModelRequested {
            step,
            role: role.as_str().to_owned(),
            provider: self.provider.name().to_owned(),
            model: self.provider.model().to_owned(),
            request: manifest,
            attempt,
        }])
        .await?;

        let mut attempts = Attempts::default();
        loop {
            let started = Instant::now();
            let result = self.provider.complete(&request).await;
            let latency_ms = started.elapsed().as_millis() as u64;
            let err = match result {
                Ok(response) => return self.answered(step, response, latency_ms).await,
                Err(err) => err,
            };
            let wait = attempts.failed(&self.retry, &err);
            // Durable as it happens: a worker killed during the backoff
            // leaves every failure it saw in the log.
            self.write(vec![Event::ModelFailed {
                step,
                attempt,
                error: err.to_string(),
                retryable: err.retryable(),
                retry_after_ms: wait.map(|w| w.as_millis() as u64),
            }])
            .await?;
            if let ModelError::Diverged { .. } = err {
                // A cassette that no longer matches will not match later.
                return self
                    .write(vec![Event::Failed {
                        error: format!("model: {err}"),
                    }])
                    .await;
            }
            let Some(wait) = wait else {
                let detail = if err.retryable() {
                    format!(
                        "the model call failed {} times in a row; the last error: {err}",
                        attempts.tries()
                    )
                } else {
                    format!(
                        "the model call failed and was not retried (retrying cannot help): {err}"
                    )
                };
                return self
                    .write(vec![Event::Paused {
                        reason: PauseReason {
                            kind: PauseKind::Breaker,
                            limit: None,
                            detail,
                        },
                    }])
                    .await;
            };
            tracing::debug!(
                provider = self.provider.name(),
                attempt,
                error = %err,
                wait_ms = wait.as_millis() as u64,
                "model call failed; retrying"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Record an answer: the response blob plus the shape the loop decides
    /// from (its call ids, normalised).
    async fn answered(
        &mut self,
        step: u64,
        mut response: ModelResponse,
        latency_ms: u64,
    ) -> Result<(), RunError> {
        self.normalise_calls(step, &mut response);
        let bytes = serde_json::to_vec(&response)
            .map_err(|e| RunError::Log(format!("cannot serialize the response: {e}")))?;
        let blob = self.put(bytes);
        let calls = response.tool_calls.iter().map(|c| c.id.clone()).collect();
        self.write(vec![Event::ModelResponded {
            step,
            response: blob,
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            latency_ms,
            stop_reason: serde_json::to_value(&response.stop_reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "other".to_owned()),
            calls: Some(calls),
            cached_input_tokens: response.usage.cached_input_tokens,
        }])
        .await
    }

    /// Make call ids safe to decide by: bounded, of the characters both
    /// APIs accept, unique in the answer and unused by any call still in
    /// the history (a repeated id would make one call's result answer
    /// another). An id that is not is replaced by `lh_<step>_<index>`; the
    /// stored answer carries the new id, so the conversation stays
    /// consistent. Calls past [`MAX_CALLS_PER_ANSWER`] are dropped from the
    /// answer and the model is told in the next request's text.
    fn normalise_calls(&self, step: u64, response: &mut ModelResponse) {
        if response.tool_calls.len() > MAX_CALLS_PER_ANSWER {
            let dropped = response.tool_calls.len() - MAX_CALLS_PER_ANSWER;
            response.tool_calls.truncate(MAX_CALLS_PER_ANSWER);
            let note = format!(
                "[{dropped} tool calls past the first {MAX_CALLS_PER_ANSWER} of this answer were \
                 not run: ask for fewer at a time]"
            );
            response.text = Some(match response.text.take() {
                Some(t) => format!("{t}\n{note}"),
                None => note,
            });
        }
        let mut seen: HashSet<String> = self
            .state
            .history
            .iter()
            .filter_map(|h| match h {
                HistoryItem::ToolResult { call_id, .. } => Some(call_id.clone()),
                HistoryItem::Assistant { .. } => None,
            })
            .collect();
        for (index, call) in response.tool_calls.iter_mut().enumerate() {
            let valid = (1..=MAX_CALL_ID).contains(&call.id.len())
                && call
                    .id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                && !call.id.starts_with(CHECK_PREFIX);
            if !valid || seen.contains(&call.id) {
                call.id = format!("lh_{step}_{index}");
            }
            seen.insert(call.id.clone());
        }
    }

    /// Build the request from state alone: instructions, goal, and the
    /// history that fits the context budget.
    async fn build_request(&mut self, step: u64) -> Result<ModelRequest, RunError> {
        let frozen = &self.agent.frozen;
        let system = frozen.instructions.clone();
        let max_tokens = frozen.model.max_tokens;
        let temperature = frozen.model.temperature;
        let tools = self.agent.defs.clone();
        let mut messages = vec![Message::User {
            text: self.state.goal.clone().unwrap_or_default(),
        }];
        if self.state.history_omitted > 0 {
            messages.push(Message::User {
                text: format!(
                    "[{} earlier items of this session were left out to fit the context window]",
                    self.state.history_omitted
                ),
            });
        }
        let history: Vec<HistoryItem> = self.state.history.iter().cloned().collect();
        for item in history {
            match item {
                HistoryItem::Assistant { response, .. } => {
                    let bytes = self.get(&response).await?;
                    let r: ModelResponse = serde_json::from_slice(&bytes)
                        .map_err(|e| RunError::Log(format!("model response blob: {e}")))?;
                    messages.push(Message::from(&r));
                }
                HistoryItem::ToolResult {
                    call_id,
                    ok,
                    result,
                    note,
                    ..
                } => {
                    let content = match (&result, &note) {
                        (_, Some(note)) => note.clone(),
                        (Some(blob), None) => {
                            String::from_utf8_lossy(&self.get(blob).await?).into_owned()
                        }
                        (None, None) => String::new(),
                    };
                    if call_id.starts_with(CHECK_PREFIX) {
                        // A passed check is always followed by `finished`,
                        // so none reaches a request; were one to, it is
                        // left out rather than reported as a failure or
                        // sent as a call the model never made.
                        if !ok {
                            messages.push(Message::User {
                                text: format!(
                                    "The completion check did not pass, so the task is not done \
                                     yet: {content}"
                                ),
                            });
                        }
                    } else {
                        messages.push(Message::ToolResult {
                            call_id,
                            content,
                            is_error: !ok,
                        });
                    }
                }
            }
        }
        Ok(ModelRequest {
            system,
            messages,
            tools,
            max_tokens,
            temperature,
            step,
        })
    }
}

/// The calls of `response` with these ids, in the order of `ids`.
pub(super) fn calls_by_id(response: ModelResponse, ids: &[String]) -> Vec<ToolCall> {
    let mut calls = response.tool_calls;
    ids.iter()
        .filter_map(|id| {
            let at = calls.iter().position(|c| &c.id == id)?;
            Some(calls.swap_remove(at))
        })
        .collect()
}
