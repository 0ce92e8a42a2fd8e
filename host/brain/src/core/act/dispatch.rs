//! Running tool calls for the loop: the calls of an answer, the completion
//! check, and calls a crash left open.
//!
//! A call the model cannot have meant (unknown tool, arguments that are not
//! a JSON object) is answered at once without running. Read-only calls of
//! one answer run side by side; the rest run one by one, in order. A call
//! that writes is announced by a fsynced `tool_started` before it runs; a
//! read-only or idempotent call need not be announced first (running it
//! again is safe), so its `tool_started` is written together with its
//! `tool_finished`, in one append with no fsync.
//!
//! Every tool is an entry of the runner's registry (`crate::tools`):
//! components and the host's own tools are looked up, recorded, gated,
//! cached and run the same way. The one difference dispatch knows is how
//! an entry's calls run — inline, or as child sessions run side by side.

use futures_util::future::join_all;

use super::ask::calls_by_id;
use crate::agent::config::NAME_SEPARATOR;
use crate::control::approvals::Gate;
use crate::core::ctx::Ctx;
use crate::core::state::{CHECK_PREFIX, OpenCall, effect_name};
use crate::error::{LogError, RunError, json_error};
use crate::model::ToolCall;
use crate::tools::Outcome;
use longhand_hands::Effect;
use longhand_session::{BlobRef, Event};

/// A call ready to run: its id, the model's name for the tool, its input.
struct Ready {
    id: String,
    name: String,
    input: serde_json::Value,
}

impl Ctx<'_> {
    /// Run the calls `ids` of the last answer (turn `step`).
    pub(crate) async fn dispatch_pending(
        &mut self,
        step: u64,
        ids: Vec<String>,
    ) -> Result<(), RunError> {
        let Some(response) = self.last_response().await? else {
            return Err(RunError::Log(LogError::Inconsistent(
                "calls are pending but the log holds no answer".to_owned(),
            )));
        };
        let calls = calls_by_id(response, &ids);
        if calls.len() != ids.len() {
            return Err(RunError::Log(LogError::Inconsistent(format!(
                "the answer of turn {step} does not hold every call its event names"
            ))));
        }
        self.dispatch(step, calls).await
    }

    /// Run the completion check on the last answer.
    pub(crate) async fn check(&mut self, step: u64) -> Result<(), RunError> {
        let Some(check) = self.agent.frozen.completion.clone() else {
            return Ok(());
        };
        let call = ToolCall {
            id: format!("{CHECK_PREFIX}{step}"),
            name: check.tool.clone(),
            arguments: check.input.to_string(),
        };
        self.dispatch(step, vec![call]).await
    }

    /// Re-run or mark in doubt every call started but not finished.
    pub(crate) async fn recover(&mut self, ids: Vec<String>) -> Result<(), RunError> {
        for call_id in ids {
            let Some(call) = self.journal.state.open_calls.get(&call_id).cloned() else {
                continue;
            };
            // A call whose tool runs as a child session (delegate).
            let child = self
                .tools
                .recorded(&call.component, &call.tool)
                .is_some_and(|t| t.runs_as_child());
            if child {
                // Never in doubt: its child is found by the record, or was
                // never named and never ran (see `delegate`).
                let bytes = self.get(&call.input).await?;
                let input: serde_json::Value =
                    serde_json::from_slice(&bytes).map_err(json_error("a tool input blob"))?;
                self.finish_delegation(call.step, call_id, input).await?;
                continue;
            }
            let event = self.recover_one(call_id, call).await?;
            self.write(vec![event]).await?;
        }
        Ok(())
    }

    async fn recover_one(&mut self, call_id: String, call: OpenCall) -> Result<Event, RunError> {
        if !call.effect.safe_to_retry() {
            return Ok(Event::ToolInDoubt {
                step: call.step,
                call_id,
                reason: format!(
                    "The process stopped while `{}` was running, so whether it took effect is \
                     unknown. It is not safe to repeat blindly: check its effect first.",
                    call.tool
                ),
            });
        }
        let input_bytes = self.get(&call.input).await?;
        let input: serde_json::Value =
            serde_json::from_slice(&input_bytes).map_err(json_error("a tool input blob"))?;
        let name = match self.tools.recorded(&call.component, &call.tool) {
            Some(tool) => tool.name.clone(),
            None => format!("{}{NAME_SEPARATOR}{}", call.component, call.tool),
        };
        let Outcome {
            ok,
            result,
            receipt,
        } = self.execute(&name, &input).await;
        let result = self.put(result);
        Ok(Event::ToolFinished {
            step: call.step,
            call_id,
            ok,
            result,
            receipt,
        })
    }

    /// Run tool calls: invalid ones answered at once, read-only ones side by
    /// side, the rest one by one.
    async fn dispatch(&mut self, step: u64, calls: Vec<ToolCall>) -> Result<(), RunError> {
        let mut batch: Vec<Ready> = Vec::new();
        // `delegate` calls in a row: their children run side by side.
        let mut delegations: Vec<(String, serde_json::Value)> = Vec::new();
        for call in calls {
            if !self.runs_as_child(&call.name) && !delegations.is_empty() {
                self.delegate_group(step, std::mem::take(&mut delegations))
                    .await?;
                if self.journal.state.pause.is_some() {
                    // A child paused: the rest wait, pending, for resume.
                    return Ok(());
                }
            }
            match self.prepare(&call) {
                Err(message) => {
                    self.run_batch(step, std::mem::take(&mut batch)).await?;
                    let result = self.put(
                        serde_json::to_vec(&serde_json::json!({ "error": message }))
                            .unwrap_or_default(),
                    );
                    self.stage(vec![Event::ToolFinished {
                        step,
                        call_id: call.id,
                        ok: false,
                        result,
                        receipt: serde_json::Value::Null,
                    }]);
                }
                Ok((effect, input)) => {
                    if self.needs_approval(&call.name, effect) {
                        // What came before it runs first, so nothing runs
                        // after a request is recorded.
                        self.run_batch(step, std::mem::take(&mut batch)).await?;
                        match self
                            .gate(step, &call.id, &call.name, effect, &input)
                            .await?
                        {
                            Gate::Run => {}
                            // It and the calls after it stay pending until
                            // a person answers.
                            Gate::Wait => return Ok(()),
                        }
                    }
                    if self.runs_as_child(&call.name) {
                        // Child sessions: gathered, then run side by side
                        // after what came before them.
                        self.run_batch(step, std::mem::take(&mut batch)).await?;
                        delegations.push((call.id, input));
                        continue;
                    }
                    let ready = Ready {
                        id: call.id,
                        name: call.name,
                        input,
                    };
                    if effect == Effect::ReadOnly {
                        batch.push(ready);
                    } else {
                        self.run_batch(step, std::mem::take(&mut batch)).await?;
                        self.run_batch(step, vec![ready]).await?;
                    }
                }
            }
        }
        self.run_batch(step, batch).await?;
        if !delegations.is_empty() {
            self.delegate_group(step, delegations).await?;
        }
        Ok(())
    }

    /// Check a call before running it: known tool, JSON object arguments.
    fn prepare(&self, call: &ToolCall) -> Result<(Effect, serde_json::Value), serde_json::Value> {
        let judging = self.judging();
        let effect = match self.tools.get(&call.name) {
            Some(tool) if !judging || tool.offered_to_judge() => tool.effect,
            Some(tool) if tool.set().judge_may_use() => {
                return Err(serde_json::json!({
                    "kind": "denied",
                    "message": format!(
                        "the judge may only use read-only tools; `{}` changes things",
                        cut_name(&call.name)
                    ),
                }));
            }
            _ => {
                let available: Vec<&str> = self
                    .tools
                    .offered(judging)
                    .filter(|t| !t.runs_as_child())
                    .map(|t| t.name.as_str())
                    .collect();
                return Err(serde_json::json!({
                    "kind": "not-found",
                    "message": format!(
                        "there is no tool `{}`; available: {}",
                        cut_name(&call.name),
                        available.join(", ")
                    ),
                }));
            }
        };
        let text = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            call.arguments.as_str()
        };
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) if v.is_object() => Ok((effect, v)),
            Ok(_) => Err(serde_json::json!({
                "kind": "invalid-input",
                "message": "the arguments must be a JSON object",
            })),
            Err(e) => Err(serde_json::json!({
                "kind": "invalid-input",
                "message": format!(
                    "the arguments are not valid JSON ({e}); send a JSON object matching the \
                     tool's schema"
                ),
            })),
        }
    }

    /// Announce, run and finish a group of calls (all read-only, or one).
    async fn run_batch(&mut self, step: u64, batch: Vec<Ready>) -> Result<(), RunError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut started = Vec::new();
        for ready in &batch {
            let Some(tool) = self.tools.get(&ready.name) else {
                continue;
            };
            started.push(Event::ToolStarted {
                step,
                call_id: ready.id.clone(),
                component: tool.set().component().to_owned(),
                component_digest: tool.set().digest().to_owned(),
                tool: tool.tool.clone(),
                effect: effect_name(tool.effect).to_owned(),
                input: BlobRef::of(&[]),
            });
        }
        for (event, ready) in started.iter_mut().zip(&batch) {
            let blob = self.put(ready.input.to_string().into_bytes());
            if let Event::ToolStarted { input, .. } = event {
                *input = blob;
            }
        }
        // Staged, then written as durably as the calls need: a call that
        // writes is fsynced as started before it runs; the others are
        // written with their results.
        self.stage(started);
        if self.has_unsafe_open_call() {
            self.flush().await?;
        }

        // `cache_read_only`: a read-only call made before (same action,
        // nothing changed since) is answered from its recorded result.
        let cache = self.agent.frozen.limits.cache_read_only;
        let keys: Vec<Option<String>> = batch
            .iter()
            .map(|r| {
                let effect = self.tools.get(&r.name)?.effect;
                (cache && effect == Effect::ReadOnly)
                    .then(|| self.fingerprint(&r.name, effect, &r.input))
            })
            .collect();
        let hits: Vec<Option<crate::core::state::CachedResult>> = keys
            .iter()
            .map(|k| {
                k.as_ref()
                    .and_then(|k| self.journal.state.read_cache.get(k).cloned())
            })
            .collect();
        let this = &*self;
        let runs = batch.iter().zip(&hits).map(|(r, hit)| async move {
            match hit {
                Some(_) => None,
                None => Some(this.execute(&r.name, &r.input).await),
            }
        });
        let results = join_all(runs).await;
        let mut finished = Vec::new();
        for ((ready, run), (key, hit)) in batch
            .into_iter()
            .zip(results)
            .zip(keys.into_iter().zip(hits))
        {
            let (ok, result, receipt, written) = match (run, hit) {
                (_, Some(hit)) => (
                    hit.ok,
                    hit.result,
                    serde_json::json!({"cache_hit": hit.call_id, "cache_key": key}),
                    None,
                ),
                (
                    Some(Outcome {
                        ok,
                        result: bytes,
                        mut receipt,
                    }),
                    None,
                ) => {
                    if let (Some(key), Some(object)) = (key, receipt.as_object_mut()) {
                        object.insert("cache_key".to_owned(), key.into());
                    }
                    let written = if ok {
                        self.tools
                            .get(&ready.name)
                            .and_then(|tool| tool.followed_by(&ready.id, &bytes))
                    } else {
                        None
                    };
                    (ok, self.put(bytes), receipt, written)
                }
                (None, None) => continue,
            };
            finished.push(Event::ToolFinished {
                step,
                call_id: ready.id.clone(),
                ok,
                result,
                receipt,
            });
            if let Some(event) = written {
                finished.push(event);
            }
        }
        self.stage(finished);
        Ok(())
    }

    fn has_unsafe_open_call(&self) -> bool {
        self.journal
            .state
            .open_calls
            .values()
            .any(|c| !c.effect.safe_to_retry())
    }

    /// Call a tool through the registry.
    pub(crate) async fn execute(&self, name: &str, input: &serde_json::Value) -> Outcome {
        let Some(tool) = self.tools.get(name) else {
            let err = serde_json::json!({"error": {"kind": "not-found", "message": format!("no tool `{}`", cut_name(name))}});
            return Outcome {
                ok: false,
                result: err.to_string().into_bytes(),
                receipt: serde_json::Value::Null,
            };
        };
        tool.call(&self.call_cx(), input).await
    }
}

impl Ctx<'_> {
    /// Whether the judge is the role in the conversation: it is offered
    /// only read-only tools of toolsets that allow it.
    fn judging(&self) -> bool {
        self.journal
            .state
            .conversation
            .as_ref()
            .is_some_and(|c| c.role == crate::core::state::JUDGE)
    }

    /// Whether `name` is a tool whose calls run as child sessions.
    fn runs_as_child(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|t| t.runs_as_child())
    }
}

/// A model-chosen tool name, cut for an error message.
fn cut_name(name: &str) -> &str {
    &name[..name.floor_char_boundary(256)]
}
