//! One model turn: build the request from the state, record it, call the
//! provider with retries (`model::retry::retrying`) — each failed attempt
//! recorded when it happens, the last one marked `last` when no attempt
//! follows — and record the answer. What a request given up on does to the
//! session (pause, or fail for a diverged replay) is `decide`'s.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::ask_cache::Built;
use crate::core::ctx::Ctx;
use crate::core::state::roles::Role;
use crate::core::state::{CHECK_PREFIX, HistoryItem, MAX_HISTORY_ITEMS};
use crate::error::{RunError, json_error};
use crate::model::{
    Message, ModelError, ModelRequest, ModelResponse, Retried, RetryCaller, ToolCall, retrying,
};
use longhand_session::{BlobRef, Event};

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
    /// [`Ctx::request_digest`]), not over its JSON, so it costs no
    /// serialisation of the history per turn.
    request_digest: String,
}

/// Longest call id kept as the model wrote it. Ids are the model's to
/// choose; both APIs accept `[A-Za-z0-9_-]` ids of this length and the
/// whole conversation is replayed from our own records, so an id outside
/// these bounds is replaced, consistently, by one of ours.
const MAX_CALL_ID: usize = 64;

use crate::model::MAX_CALLS_PER_ANSWER;

/// The loop's side of one turn's retries: every attempt and every wait
/// dropped for a `pause` or `cancel` (see `steer`), every failure written
/// as it happens, so a worker killed during the backoff leaves each one in
/// the log.
struct Turn<'r, 'h> {
    runner: &'r mut Ctx<'h>,
    step: u64,
    /// The number of this worker's first attempt: attempts count across
    /// processes.
    first: u32,
}

impl RetryCaller for Turn<'_, '_> {
    type Error = RunError;

    async fn guard<T: Send>(&mut self, work: impl Future<Output = T> + Send) -> Option<T> {
        self.runner.abandon_on_stop(work).await
    }

    async fn failed(
        &mut self,
        attempt: u32,
        err: &ModelError,
        wait: Option<Duration>,
    ) -> Result<(), RunError> {
        self.runner
            .write(vec![Event::ModelFailed {
                step: self.step,
                attempt: self.first + attempt - 1,
                error: err.to_string(),
                retryable: err.retryable(),
                retry_after_ms: wait.map(|w| w.as_millis() as u64),
                kind: Some(err.kind().as_str().to_owned()),
                last: wait.is_none(),
            }])
            .await
    }
}

impl Ctx<'_> {
    /// Ask `role` for the answer of turn `step`.
    pub(crate) async fn ask(&mut self, role: Role, step: u64) -> Result<(), RunError> {
        // The handoff writer sees the worker's context, then its own
        // instruction: the worker's request is built (and kept) as usual.
        let base = if role == Role::Handoff {
            Role::Worker
        } else {
            role
        };
        let built = self.build_request(base, step).await?;
        let mut sent = None;
        if role == Role::Handoff {
            let mut request = built.request.clone();
            request.messages.push(Message::User {
                text: crate::core::prompts::handoff_instruction(),
            });
            // A retry shows the refused answer and why it was refused.
            if let (Some(refused), Some(problems)) = (
                self.journal.state.handoff_refused.clone(),
                self.journal.state.handoff_problems.clone(),
            ) {
                let bytes = self.get(&refused).await?;
                let answer: ModelResponse =
                    serde_json::from_slice(&bytes).map_err(json_error("a model response blob"))?;
                request.messages.push(Message::from(&answer));
                request.messages.push(Message::User {
                    text: crate::core::prompts::handoff_refused(&problems),
                });
            }
            sent = Some(request);
        }
        let request = sent.as_ref().unwrap_or(&built.request);
        let (system, tools) = match self.context.fixed.get(role.as_str()) {
            Some(fixed) => fixed.clone(),
            None => {
                let system = self.put(request.system.clone().into_bytes());
                let tools = self.put(serde_json::to_vec(&request.tools).unwrap_or_default());
                self.context
                    .fixed
                    .insert(role.as_str(), (system.clone(), tools.clone()));
                (system, tools)
            }
        };
        let goal = match &self.journal.state.conversation {
            // A conversation starts from its briefing, a blob already.
            Some(c) => c.briefing.clone(),
            None => self.goal_blob(),
        };
        let mut request_digest = self.request_digest(request, [&system, &tools, &goal]);
        if let Some(sent) = &sent {
            let extra = &sent.messages[built.request.messages.len()..];
            request_digest = longhand_session::sha256_digest(
                format!(
                    "{request_digest}\0{}",
                    serde_json::to_string(extra).unwrap_or_default()
                )
                .as_bytes(),
            );
        }
        let manifest = RequestManifest {
            step,
            system,
            tools,
            goal,
            history_through_seq: self.journal.state.last_seq,
            history_items: self.journal.state.history.len(),
            history_omitted: self.journal.state.history_omitted,
            request_digest,
        };
        let manifest = self.put(serde_json::to_vec(&manifest).unwrap_or_default());
        // Attempts count across processes: a resumed worker goes on from
        // the highest attempt recorded for this turn.
        let attempt = match &self.journal.state.pending_request {
            Some(p) if p.step == step => p.attempts + 1,
            _ => 1,
        };
        let provider = self.provider_for(role);
        self.write(vec![Event::ModelRequested {
            step,
            role: role.as_str().to_owned(),
            provider: provider.name().to_owned(),
            model: provider.model().to_owned(),
            request: manifest,
            attempt,
        }])
        .await?;

        // What goes on the wire: the history in log order can hold a note
        // between an answer's calls and their results (an operator's
        // `send` during the calls), which every API refuses; put it in
        // the order they accept. A log already like that resumes too.
        let wire = {
            let request = sent.as_ref().unwrap_or(&built.request);
            crate::model::pairing::repair(&request.messages).map(|messages| {
                tracing::debug!(step, "tool results moved before the notes of their turn");
                ModelRequest {
                    messages,
                    system: request.system.clone(),
                    tools: request.tools.clone(),
                    max_tokens: request.max_tokens,
                    temperature: request.temperature,
                    step: request.step,
                    agent: request.agent.clone(),
                }
            })
        };
        let request = wire.as_ref().or(sent.as_ref()).unwrap_or(&built.request);
        let policy = self.kit.retry.clone();
        let mut turn = Turn {
            runner: self,
            step,
            first: attempt,
        };
        let outcome = retrying(provider.as_ref(), request, &policy, &mut turn).await;
        match outcome {
            Retried::Answered(response, took) => {
                // Kept for the next turn only once the turn is over: a
                // turn abandoned half-way rebuilds from the state.
                self.context.built = Some(built);
                self.answered(step, response, took.as_millis() as u64).await
            }
            // The last failure is recorded (`last`): `decide` pauses or
            // fails the session for it next.
            Retried::GaveUp(_) => Ok(()),
            // A pause or cancel arrived: the request is redoable, so it
            // was dropped and is sent again on resume; the control is
            // acted on at the loop's next safe point (at once).
            Retried::Stopped => Ok(()),
            Retried::Caller(e) => Err(e),
        }
    }

    /// The goal's blob (cached).
    fn goal_blob(&mut self) -> BlobRef {
        let goal_text = self.journal.state.goal.clone().unwrap_or_default();
        match &self.context.goal {
            Some((text, blob)) if *text == goal_text => blob.clone(),
            _ => {
                let blob = self.put(goal_text.clone().into_bytes());
                self.context.goal = Some((goal_text, blob.clone()));
                blob
            }
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
        let bytes = serde_json::to_vec(&response).map_err(json_error("the response"))?;
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
            cost_micros: self.cost_of(&response.usage),
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
    fn normalise_calls(&mut self, step: u64, response: &mut ModelResponse) {
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
        // A superset of the history's ids, grown per answer; rebuilt from
        // the history once it holds far more than the history can.
        if self
            .context
            .call_ids
            .as_ref()
            .is_some_and(|ids| ids.len() > 4 * MAX_HISTORY_ITEMS)
        {
            self.context.call_ids = None;
        }
        let history = &self.journal.state.history;
        let seen = self.context.call_ids.get_or_insert_with(|| {
            history
                .iter()
                .filter_map(|h| match h {
                    HistoryItem::ToolResult { call_id, .. } => Some(call_id.clone()),
                    HistoryItem::Assistant { .. } | HistoryItem::Note { .. } => None,
                })
                .collect()
        });
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
    /// tools and goal, the settings, and the history it holds, named by
    /// the seqs of its first and last items and their count (the log is
    /// append-only, so within a session that range names exactly those
    /// items) and the count of items left out before them.
    fn request_digest(&self, request: &ModelRequest, parts: [&BlobRef; 3]) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"longhand.request/3\0");
        if let Some(c) = &self.journal.state.conversation {
            // A conversation's role and briefing are in the parts; its
            // place in the log tells two equal briefings apart.
            h.update(c.role.as_bytes());
            h.update(b"\0");
        }
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
        h.update(self.journal.state.history_omitted.to_be_bytes());
        h.update((self.journal.state.history.len() as u64).to_be_bytes());
        for item in [
            self.journal.state.history.front(),
            self.journal.state.history.back(),
        ] {
            h.update(item.map_or(0, HistoryItem::seq).to_be_bytes());
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    }

    /// The request for turn `step`, from the state alone: instructions,
    /// goal, and the history that fits the context budget. The last
    /// request is brought up to date at its ends when there is one (see
    /// [`ContextCache`]); otherwise it is built whole.
    async fn build_request(&mut self, role: Role, step: u64) -> Result<Built, RunError> {
        let last = self.context.built.take();
        let built = self.update_request(role, step, last).await?;
        // Debug builds (every test) check the update against a whole
        // rebuild, turn by turn.
        if cfg!(debug_assertions) {
            let whole = self.update_request(role, step, None).await?;
            assert_eq!(
                built.request, whole.request,
                "a request brought up to date differs from one built whole"
            );
        }
        Ok(built)
    }

    async fn update_request(
        &mut self,
        role: Role,
        step: u64,
        last: Option<Built>,
    ) -> Result<Built, RunError> {
        // The first message: the conversation's briefing, or the goal.
        let first = match self.journal.state.conversation.clone() {
            Some(c) => String::from_utf8_lossy(&self.get(&c.briefing).await?).into_owned(),
            None => self.journal.state.goal.clone().unwrap_or_default(),
        };
        let mut built = match last {
            Some(b)
                if b.role == role
                    && matches!(b.request.messages.first(), Some(Message::User { text }) if *text == first) =>
            {
                b
            }
            _ => {
                let frozen = &self.agent.frozen;
                let model = self.model_config(role);
                Built {
                    role,
                    request: ModelRequest {
                        system: {
                            let mut system =
                                crate::core::prompts::system_prompt(role, &frozen.instructions);
                            let skills = crate::agent::skills::catalogue(&frozen.skills);
                            if matches!(role, Role::Worker | Role::Handoff) && !skills.is_empty() {
                                system.push_str("\n\n");
                                system.push_str(&skills);
                            }
                            system
                        },
                        messages: vec![Message::User { text: first }],
                        tools: self.tools_for(role),
                        max_tokens: model.max_tokens,
                        temperature: model.temperature,
                        step,
                        agent: frozen.name.clone(),
                    },
                    prefix: 1,
                    seqs: VecDeque::new(),
                    through: 0,
                    omitted: 0,
                }
            }
        };
        built.request.step = step;
        // The front: whole turns dropped from the history since.
        let first = self
            .journal
            .state
            .history
            .front()
            .map_or(u64::MAX, HistoryItem::seq);
        let gone = built.seqs.iter().take_while(|s| **s < first).count();
        if gone > 0 {
            built.seqs.drain(..gone);
            built
                .request
                .messages
                .drain(built.prefix..built.prefix + gone);
        }
        // The note on left-out items, right after the goal.
        let omitted = self.journal.state.history_omitted
            - self.journal.state.conversation.as_ref().map_or(0, |c| {
                c.omitted_before.min(self.journal.state.history_omitted)
            });
        if omitted != built.omitted {
            let note = Message::User {
                text: format!(
                    "[{omitted} earlier items of this session were left out to fit the context \
                     window]"
                ),
            };
            if built.prefix == 1 {
                built.request.messages.insert(1, note);
                built.prefix = 2;
            } else {
                built.request.messages[1] = note;
            }
            built.omitted = omitted;
        }
        // The back: what happened since.
        let new: Vec<HistoryItem> = self
            .journal
            .state
            .history
            .iter()
            .rev()
            .take_while(|h| h.seq() > built.through)
            .cloned()
            .collect();
        for item in new.into_iter().rev() {
            built.through = item.seq();
            if let Some(message) = self.message_of(item).await? {
                built.seqs.push_back(built.through);
                built.request.messages.push(message);
            }
        }
        Ok(built)
    }

    /// The message a history item stands for in a request, if any.
    async fn message_of(&mut self, item: HistoryItem) -> Result<Option<Message>, RunError> {
        match item {
            HistoryItem::Note { text, .. } => Ok(Some(Message::User { text })),
            HistoryItem::Assistant { response, .. } => {
                let bytes = self.get(&response).await?;
                let r: ModelResponse =
                    serde_json::from_slice(&bytes).map_err(json_error("a model response blob"))?;
                Ok(Some(Message::from(&r)))
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
                if !call_id.starts_with(CHECK_PREFIX) {
                    return Ok(Some(Message::ToolResult {
                        call_id,
                        content,
                        is_error: !ok,
                    }));
                }
                // A passed check is always followed by `finished`, so none
                // reaches a request; were one to, it is left out rather
                // than reported as a failure or sent as a call the model
                // never made.
                Ok((!ok).then(|| Message::User {
                    text: format!(
                        "The completion check did not pass, so the task is not done yet: \
                         {content}"
                    ),
                }))
            }
        }
    }
}

/// The calls of `response` with these ids, in the order of `ids`.
pub(crate) fn calls_by_id(response: ModelResponse, ids: &[String]) -> Vec<ToolCall> {
    let mut calls = response.tool_calls;
    ids.iter()
        .filter_map(|id| {
            let at = calls.iter().position(|c| &c.id == id)?;
            Some(calls.swap_remove(at))
        })
        .collect()
}
