//! The conversation: model requests and answers (steps, tokens, cost), the
//! history the next request is built from and its trimming, the role whose
//! conversation it is, handoffs, operator messages, and the harness's
//! refusals of an answer (a note in the history).

use super::roles::{HANDOFF_ROLE, JUDGE, PLANNER, WORKER};
use super::{
    Answer, CHECK_PREFIX, CONTEXT_OVERFLOW, Conversation, GaveUp, HandoffReply, HistoryItem,
    MAX_HISTORY_ITEMS, PendingRequest, Refused, SessionState, StopAsked,
};
use longhand_session::{BlobRef, Event};

impl SessionState {
    /// Fold an event of this concern, recorded at `seq`.
    pub(super) fn fold_conversation(&mut self, seq: u64, event: &Event) {
        match event {
            Event::ModelRequested {
                step,
                request,
                attempt,
                role,
                ..
            } => {
                let before = match &self.pending_request {
                    Some(p) if p.step == *step => p.attempts,
                    _ => 0,
                };
                let (overflows, trimmed) = match &self.pending_request {
                    Some(p) if p.step == *step => (p.overflows, p.trimmed),
                    _ => (0, false),
                };
                self.pending_request = Some(PendingRequest {
                    step: *step,
                    request: request.clone(),
                    attempts: before.max(*attempt),
                    role: role.clone(),
                    failures: 0,
                    gave_up: None,
                    overflows,
                    trimmed,
                });
            }
            Event::ModelFailed {
                step,
                attempt,
                error,
                retryable,
                kind,
                last,
                ..
            } => {
                let overflow = kind.as_deref() == Some(CONTEXT_OVERFLOW);
                if let Some(p) = &mut self.pending_request
                    && p.step == *step
                {
                    p.attempts = p.attempts.max(*attempt);
                    p.failures += 1;
                    if overflow {
                        p.overflows += 1;
                    }
                    if *last {
                        p.gave_up = Some(GaveUp {
                            error: error.clone(),
                            retryable: *retryable,
                            kind: kind.clone(),
                        });
                    }
                }
                if overflow {
                    // The model's window holds less than the budget says:
                    // keep half the history it refused from now on.
                    let before = self.history_omitted;
                    self.context_cap = Some(self.history_tokens / 2);
                    self.trim_history();
                    let trimmed = self.history_omitted > before;
                    if let Some(p) = &mut self.pending_request
                        && p.step == *step
                    {
                        p.trimmed = trimmed;
                    }
                }
            }
            Event::CallsLearned { step, calls } => self.learn_calls(*step, calls),
            Event::ModelResponded {
                step,
                response,
                input_tokens,
                output_tokens,
                latency_ms,
                calls,
                cost_micros,
                ..
            } => {
                match cost_micros {
                    Some(c) => self.cost_micros = self.cost_micros.saturating_add(*c),
                    None => self.cost_unknown += 1,
                }
                let role = self.pending_request.take().map(|p| p.role);
                self.steps = self.steps.max(*step);
                self.input_tokens += input_tokens;
                self.output_tokens += output_tokens;
                self.active_ms += latency_ms;
                if role.as_deref() == Some(HANDOFF_ROLE) {
                    // Not an answer of the conversation: checked, then
                    // the conversation is replaced by it.
                    self.handoff_reply = Some(HandoffReply {
                        step: *step,
                        response: response.clone(),
                    });
                    return;
                }
                if let Some(c) = &mut self.conversation {
                    c.steps += 1;
                    c.context_tokens = input_tokens + output_tokens;
                    c.refused = None;
                }
                // What the request held beyond its history, measured: the
                // answer's usage less the history's estimate (the answer
                // pushed below is counted in both).
                let answer_tokens = super::estimate_tokens(response.bytes);
                if *input_tokens + *output_tokens > 0 {
                    self.overhead_tokens = (input_tokens + output_tokens)
                        .saturating_sub(self.history_tokens + answer_tokens);
                }
                if self.conversation.as_ref().is_none_or(|c| c.role == WORKER) {
                    self.steps_since_progress += 1;
                }
                self.answer = Some(Answer {
                    step: *step,
                    response: response.clone(),
                    calls: calls.clone(),
                });
                self.pending_calls = calls.clone().unwrap_or_default();
                self.check_passed = None;
                self.push_history(HistoryItem::Assistant {
                    seq,
                    step: *step,
                    response: response.clone(),
                });
            }
            Event::Error {
                step: Some(step),
                message,
            } => self.feedback(
                seq,
                *step,
                message,
                Refused::Answer {
                    problem: message.clone(),
                },
            ),
            Event::Error { step: None, .. } => {}
            Event::RoleStarted {
                role,
                task,
                check,
                briefing,
            } => {
                self.keep_claim();
                self.start_conversation(role, task.clone(), *check, briefing.clone());
            }
            Event::Handoff {
                task,
                handoff,
                briefing,
                ..
            } => {
                self.latest_handoff = Some(handoff.clone());
                self.handoff_reply = None;
                self.handoff_problems = None;
                self.handoff_refused = None;
                self.handoff_tries = 0;
                self.start_conversation(WORKER, task.clone(), None, briefing.clone());
            }
            Event::Steered {
                control,
                kind,
                text,
                by,
            } => {
                self.last_control = self.last_control.max(*control);
                if kind == "pause" || kind == "cancel" || kind == "cancel_now" {
                    self.stop_asked = Some(StopAsked {
                        cancel: kind != "pause",
                        now: kind == "cancel_now",
                        by: by.clone(),
                        text: text.clone(),
                    });
                }
                if kind == "send" {
                    self.push_history(HistoryItem::Note {
                        seq,
                        text: format!(
                            "[a message from {by}, the operator] {}",
                            text.as_deref().unwrap_or_default()
                        ),
                    });
                }
            }
            _ => {}
        }
    }

    /// Keep the worker's last answer as its claim, when the worker's
    /// conversation is the one in progress.
    pub(super) fn keep_claim(&mut self) {
        if self.conversation.as_ref().is_some_and(|c| c.role == WORKER)
            && let Some(answer) = &self.answer
        {
            self.claim = Some(answer.response.clone());
        }
    }

    /// Start a fresh conversation: nothing of the last one is sent again.
    pub(super) fn start_conversation(
        &mut self,
        role: &str,
        task: Option<String>,
        check: Option<u32>,
        briefing: BlobRef,
    ) {
        self.reset_context();
        self.conversation = Some(Conversation {
            role: role.to_owned(),
            task,
            check,
            briefing,
            steps: 0,
            context_tokens: 0,
            rejected: 0,
            omitted_before: self.history_omitted,
            refused: None,
        });
    }

    /// End the judge's or the planner's conversation (a no-op for any
    /// other): its result is recorded, its history is not needed again.
    pub(super) fn end_side_conversation(&mut self, role: &str) {
        if self.conversation.as_ref().is_some_and(|c| c.role == role) {
            self.reset_context();
            self.conversation = None;
        }
    }

    /// Empty the context. The history's positions go on counting (see
    /// `history_omitted`), as when old turns are dropped from the front.
    pub(super) fn reset_context(&mut self) {
        self.history_omitted += self.history.len() as u64;
        self.history.clear();
        self.history_tokens = 0;
        self.answer = None;
        self.pending_calls.clear();
        self.check_passed = None;
    }

    /// An `error` about turn `step`: when it is the handoff waiting to be
    /// checked, or the final answer of a planner or judge conversation, it
    /// is the harness refusing that answer — the model is told why (a note
    /// in its history) and asked again.
    pub(super) fn feedback(&mut self, seq: u64, step: u64, message: &str, refused: Refused) {
        if self.handoff_reply.as_ref().is_some_and(|h| h.step == step) {
            self.handoff_refused = self.handoff_reply.take().map(|h| h.response);
            self.handoff_problems = Some(message.to_owned());
            self.handoff_tries += 1;
            return;
        }
        let side = self
            .conversation
            .as_ref()
            .is_some_and(|c| c.role == PLANNER || c.role == JUDGE);
        if side
            && self
                .answer
                .as_ref()
                .is_some_and(|a| a.step == step && a.is_final())
        {
            self.answer = None;
            if let Some(c) = &mut self.conversation {
                c.rejected += 1;
                c.refused = Some(refused);
            }
            self.push_history(HistoryItem::Note {
                seq,
                text: message.to_owned(),
            });
        }
    }

    /// The calls of turn `step`'s answer, learned from its blob (a log
    /// older than `model_responded.calls`): what that event would have
    /// said, folded now.
    fn learn_calls(&mut self, step: u64, calls: &[String]) {
        let Some(answer) = &mut self.answer else {
            return;
        };
        if answer.step != step || answer.calls.is_some() {
            return;
        }
        // Calls of this answer already resolved (started, finished or in
        // doubt) are in the history or open after it.
        let after = self
            .history
            .iter()
            .rev()
            .take_while(|h| !matches!(h, HistoryItem::Assistant { .. }))
            .filter_map(|h| match h {
                HistoryItem::ToolResult { call_id, .. } => Some(call_id.as_str()),
                HistoryItem::Assistant { .. } | HistoryItem::Note { .. } => None,
            })
            .collect::<std::collections::HashSet<_>>();
        self.pending_calls = calls
            .iter()
            .filter(|c| !after.contains(c.as_str()) && !self.open_calls.contains_key(*c))
            .cloned()
            .collect();
        if let Some(HistoryItem::ToolResult { call_id, ok, .. }) = self.history.back()
            && call_id.starts_with(CHECK_PREFIX)
        {
            self.check_passed = Some(*ok);
        }
        answer.calls = Some(calls.to_vec());
    }

    pub(super) fn push_history(&mut self, item: HistoryItem) {
        self.history_tokens += item.tokens();
        self.history.push_back(item);
        self.trim_history();
    }

    /// The tokens the history may hold: what `context_tokens` leaves after
    /// the request's measured overhead (system prompt, tools, briefing),
    /// never less than a quarter of it (an overhead that large is the
    /// model's to refuse, and [`Self::context_cap`] then learns from it),
    /// and within the cap a refused request taught.
    pub fn history_budget(&self) -> u64 {
        let budget = self
            .context_tokens
            .saturating_sub(self.overhead_tokens)
            .max(self.context_tokens / 4);
        self.context_cap.map_or(budget, |cap| budget.min(cap))
    }

    /// Drop whole turns from the front while the history is over its
    /// budget: an assistant answer goes with the tool results that follow
    /// it, so no result is left without its call. The newest turn always
    /// stays, whatever its size.
    pub(super) fn trim_history(&mut self) {
        let budget = self.history_budget();
        while (self.history_tokens > budget || self.history.len() > MAX_HISTORY_ITEMS)
            && self.first_turn_len() < self.history.len()
        {
            for _ in 0..self.first_turn_len() {
                if let Some(old) = self.history.pop_front() {
                    self.history_tokens = self.history_tokens.saturating_sub(old.tokens());
                    self.history_omitted += 1;
                }
            }
        }
    }

    /// Items in the first turn of `history`.
    pub(super) fn first_turn_len(&self) -> usize {
        let mut n = 0;
        for (i, item) in self.history.iter().enumerate() {
            if i > 0 && matches!(item, HistoryItem::Assistant { .. }) {
                break;
            }
            n += 1;
        }
        n.max(1)
    }
}
