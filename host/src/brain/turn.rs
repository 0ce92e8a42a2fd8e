//! One model turn: build the request from the state, record it, call the
//! provider with retries — each failed attempt recorded when it happens —
//! and record the answer, or pause when the attempts run out.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::decide::Role;
use super::model::{Attempts, Message, ModelError, ModelRequest, ModelResponse, ToolCall};
use super::runner::{RunError, Runner};
use super::state::{CHECK_PREFIX, HistoryItem, MAX_HISTORY_ITEMS};
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
    /// Identity of the whole request: sha256 over its parts (see
    /// [`Runner::request_digest`]), not over its JSON, so it costs no
    /// serialisation of the history per turn.
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

/// What a runner keeps between turns to rebuild requests cheaply: each
/// turn's request is the last one plus a little, but is rebuilt from the
/// state, so the parts that do not change are converted once.
#[derive(Default)]
pub(super) struct ContextCache {
    /// History blobs as converted for a request, by use and digest.
    converted: HashMap<(bool, String), Converted>,
    /// The system prompt's and the tool list's blobs (fixed for a session).
    fixed: Option<(BlobRef, BlobRef)>,
    /// The goal and its blob.
    goal: Option<(String, BlobRef)>,
}

/// A history blob as a request uses it.
#[derive(Clone)]
enum Converted {
    /// A model answer, as the message that replays it.
    Answer(Message),
    /// A tool result, as the text the model reads.
    Text(String),
}

/// How a request uses a history blob.
#[derive(Clone, Copy)]
enum Kind {
    Answer,
    Text,
}

/// Most history blobs kept converted; past this the cache starts over
/// (the history holds at most `MAX_HISTORY_ITEMS`).
const MAX_CACHED_MESSAGES: usize = 2 * MAX_HISTORY_ITEMS;

impl Runner<'_> {
    /// Ask `role` for the answer of turn `step`.
    pub(super) async fn ask(&mut self, role: Role, step: u64) -> Result<(), RunError> {
        let request = self.build_request(step).await?;
        let (system, tools) = match self.context.fixed.clone() {
            Some(fixed) => fixed,
            None => {
                let system = self.put(request.system.clone().into_bytes());
                let tools = self.put(serde_json::to_vec(&request.tools).unwrap_or_default());
                self.context.fixed = Some((system.clone(), tools.clone()));
                (system, tools)
            }
        };
        let goal_text = self.state.goal.clone().unwrap_or_default();
        let goal = match &self.context.goal {
            Some((text, blob)) if *text == goal_text => blob.clone(),
            _ => {
                let blob = self.put(goal_text.clone().into_bytes());
                self.context.goal = Some((goal_text, blob.clone()));
                blob
            }
        };
        let request_digest = self.request_digest(&request, [&system, &tools, &goal]);
        let manifest = RequestManifest {
            step,
            system,
            tools,
            goal,
            history_through_seq: self.state.last_seq,
            history_items: self.state.history.len(),
            history_omitted: self.state.history_omitted,
            request_digest,
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

    /// The request's identity from its parts: the blobs of system prompt,
    /// tools and goal, the settings, the count of left-out items, and each
    /// history item (answer blob; call id, outcome and result blob or
    /// note). Two requests with the same digest have the same content.
    fn request_digest(&self, request: &ModelRequest, parts: [&BlobRef; 3]) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"longhand.request/2\0");
        for part in parts {
            h.update(part.digest.as_bytes());
            h.update(b"\0");
        }
        h.update(request.max_tokens.to_be_bytes());
        h.update(
            request
                .temperature
                .map_or(u32::MAX, f32::to_bits)
                .to_be_bytes(),
        );
        h.update(self.state.history_omitted.to_be_bytes());
        for item in &self.state.history {
            match item {
                HistoryItem::Assistant { response, .. } => {
                    h.update(b"a");
                    h.update(response.digest.as_bytes());
                }
                HistoryItem::ToolResult {
                    call_id,
                    ok,
                    result,
                    note,
                    ..
                } => {
                    h.update(b"r");
                    h.update((call_id.len() as u64).to_be_bytes());
                    h.update(call_id.as_bytes());
                    h.update([u8::from(*ok)]);
                    if let Some(blob) = result {
                        h.update(blob.digest.as_bytes());
                    }
                    if let Some(note) = note {
                        h.update((note.len() as u64).to_be_bytes());
                        h.update(note.as_bytes());
                    }
                }
            }
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    }

    /// A history blob as a request uses it, converted once.
    async fn converted(&mut self, blob: &BlobRef, kind: Kind) -> Result<Converted, RunError> {
        // Keyed by use as well as digest: a tool may return the very bytes
        // of a stored answer, and must still read as text.
        let key = (matches!(kind, Kind::Answer), blob.digest.clone());
        if let Some(c) = self.context.converted.get(&key) {
            return Ok(c.clone());
        }
        let bytes = self.get(blob).await?;
        let converted = match kind {
            Kind::Answer => {
                let r: ModelResponse = serde_json::from_slice(&bytes)
                    .map_err(|e| RunError::Log(format!("model response blob: {e}")))?;
                Converted::Answer(Message::from(&r))
            }
            Kind::Text => Converted::Text(String::from_utf8_lossy(&bytes).into_owned()),
        };
        if self.context.converted.len() >= MAX_CACHED_MESSAGES {
            self.context.converted.clear();
        }
        self.context.converted.insert(key, converted.clone());
        Ok(converted)
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
                    let converted = self.converted(&response, Kind::Answer).await?;
                    if let Converted::Answer(message) = converted {
                        messages.push(message);
                    }
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
                        (Some(blob), None) => match self.converted(blob, Kind::Text).await? {
                            Converted::Text(text) => text,
                            Converted::Answer(_) => String::new(),
                        },
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
