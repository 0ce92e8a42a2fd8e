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

use futures_util::future::join_all;

use super::ask::calls_by_id;
use crate::agent::config::NAME_SEPARATOR;
use crate::control::approvals::Gate;
use crate::core::ctx::Ctx;
use crate::core::state::{CHECK_PREFIX, OpenCall, effect_name};
use crate::error::{LogError, RunError, json_error};
use crate::host_tools::{self, HostCtx, Runs};
use crate::model::ToolCall;
use longhand_hands::{CallError, Effect};
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
            // A call of a host tool that runs as a child session: recorded
            // under its component, and a tool it serves to this agent.
            let child = host_tools::REGISTRY.iter().any(|host| {
                host.runs() == Runs::AsChild
                    && host.name() == call.component
                    && host.effect(&self.host_ctx(), &call.tool).is_some()
            });
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
        let name = format!("{}{NAME_SEPARATOR}{}", call.component, call.tool);
        let (ok, result, receipt) = self.execute(&name, &input).await;
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
        let judging = self
            .journal
            .state
            .conversation
            .as_ref()
            .is_some_and(|c| c.role == crate::core::state::JUDGE);
        // Host tools (`memory__*`) are the worker's only.
        let host = self.host_tool(&call.name).filter(|_| !judging);
        let effect = match (self.agent.tools.get(&call.name), host) {
            (Some(tool), _) => tool.spec.effect,
            (None, Some(effect)) => effect,
            (None, None) => {
                let mut available: Vec<String> = self.agent.tools.keys().cloned().collect();
                if !judging {
                    let ctx = self.host_ctx();
                    available.extend(
                        host_tools::REGISTRY
                            .iter()
                            .filter(|host| host.runs() == Runs::Inline)
                            .flat_map(|host| host.defs(&ctx))
                            .map(|d| d.name),
                    );
                }
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
        if judging && effect != Effect::ReadOnly {
            return Err(serde_json::json!({
                "kind": "denied",
                "message": format!(
                    "the judge may only use read-only tools; `{}` changes things",
                    cut_name(&call.name)
                ),
            }));
        }
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
            if let Some((host, effect)) = host_tools::find(&self.host_ctx(), &ready.name) {
                // Host tools are named `<component>__<tool>` too
                // (`memory__search`, `skill__load`), the component being the
                // host tool's name: recovery rebuilds the name from the two.
                let component = host.name();
                started.push(Event::ToolStarted {
                    step,
                    call_id: ready.id.clone(),
                    component: component.to_owned(),
                    component_digest: format!("host:{component}"),
                    tool: ready
                        .name
                        .split_once(NAME_SEPARATOR)
                        .map_or(ready.name.as_str(), |(_, t)| t)
                        .to_owned(),
                    effect: effect_name(effect).to_owned(),
                    input: BlobRef::of(&[]),
                });
                continue;
            }
            let Some(tool) = self.agent.tools.get(&ready.name) else {
                continue;
            };
            let component = &self.agent.components[tool.component];
            let effect = effect_name(tool.spec.effect);
            started.push(Event::ToolStarted {
                step,
                call_id: ready.id.clone(),
                component: component.prefix.clone(),
                component_digest: component.loaded.digest().to_owned(),
                tool: tool.spec.name.clone(),
                effect: effect.to_owned(),
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
                let effect = self
                    .agent
                    .tools
                    .get(&r.name)
                    .map(|t| t.spec.effect)
                    .or_else(|| self.host_tool(&r.name))?;
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
                (Some((ok, bytes, mut receipt)), None) => {
                    if let (Some(key), Some(object)) = (key, receipt.as_object_mut()) {
                        object.insert("cache_key".to_owned(), key.into());
                    }
                    let written = if ok {
                        host_tools::find(&self.host_ctx(), &ready.name)
                            .and_then(|(host, _)| host.followed_by(&ready.name, &ready.id, &bytes))
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

    /// Call a tool; returns (ok, result JSON bytes, trimmed receipt).
    pub(crate) async fn execute(
        &self,
        name: &str,
        input: &serde_json::Value,
    ) -> (bool, Vec<u8>, serde_json::Value) {
        let ctx = self.host_ctx();
        if let Some((host, _)) = host_tools::find(&ctx, name) {
            let started = std::time::Instant::now();
            let (ok, value) = host.call(&ctx, name, input).await;
            let receipt = serde_json::json!({"wall_us": started.elapsed().as_micros() as u64});
            return (ok, value.to_string().into_bytes(), receipt);
        }
        let Some(tool) = self.agent.tools.get(name) else {
            let err = serde_json::json!({"error": {"kind": "not-found", "message": format!("no tool `{name}`")}});
            return (false, err.to_string().into_bytes(), serde_json::Value::Null);
        };
        let component = &self.agent.components[tool.component];
        let outcome = self
            .hands
            .call(&component.loaded, &component.grants, &tool.spec.name, input)
            .await;
        let receipt = trim_receipt(serde_json::to_value(&outcome.receipt).unwrap_or_default());
        match outcome.result {
            Ok(output) => (true, output.to_string().into_bytes(), receipt),
            Err(error) => {
                let value = serde_json::json!({ "error": error_value(&error) });
                (false, value.to_string().into_bytes(), receipt)
            }
        }
    }
}

impl Ctx<'_> {
    /// What a host tool's call sees of this runner.
    pub(crate) fn host_ctx(&self) -> HostCtx<'_> {
        HostCtx {
            frozen: &self.agent.frozen,
            memory: self.kit.memory.as_ref(),
            session: self.session.as_str(),
            seq: self.journal.state.last_seq,
        }
    }

    /// The effect of a host tool (memory, skills, delegate) this worker
    /// may call, from the registry: only what the agent is granted.
    fn host_tool(&self, name: &str) -> Option<Effect> {
        host_tools::find(&self.host_ctx(), name).map(|(_, effect)| effect)
    }

    /// Whether `name` is a host tool whose calls run as child sessions.
    fn runs_as_child(&self, name: &str) -> bool {
        host_tools::find(&self.host_ctx(), name)
            .is_some_and(|(host, _)| host.runs() == Runs::AsChild)
    }
}

/// A model-chosen tool name, cut for an error message.
fn cut_name(name: &str) -> &str {
    &name[..name.floor_char_boundary(256)]
}

fn error_value(error: &CallError) -> serde_json::Value {
    serde_json::to_value(error)
        .unwrap_or_else(|_| serde_json::json!({"message": error.to_string()}))
}

/// The most a trimmed receipt takes in `tool_finished`, as JSON: about
/// 32 KiB (the count of removed entries adds a few bytes).
const MAX_RECEIPT_JSON: usize = 32 * 1024;

/// Keep the receipt small in the log: stdio and logs are cut.
fn trim_receipt(mut receipt: serde_json::Value) -> serde_json::Value {
    for key in ["stdout", "stderr"] {
        if let Some(text) = receipt.pointer_mut(&format!("/{key}/text"))
            && let Some(s) = text.as_str()
            && s.len() > 1024
        {
            let end = s.floor_char_boundary(1024);
            *text = serde_json::Value::String(format!("{}…", &s[..end]));
        }
    }
    if let Some(logs) = receipt.get_mut("logs").and_then(|l| l.as_array_mut()) {
        logs.truncate(16);
    }
    // The hands bound each entry (4 KiB) and each list (64 entries), but
    // not their sum: 64 uses of 8 KiB of guest-chosen paths, escaped, would
    // make `tool_finished` too large to store. Drop entries from the ends
    // of the lists until the receipt fits, and say how many.
    let json_len = |v: &serde_json::Value| serde_json::to_string(v).map_or(0, |s| s.len());
    let mut size = json_len(&receipt);
    let mut dropped = 0u64;
    for key in ["logs", "used", "denied", "limits_hit"] {
        let Some(items) = receipt.get_mut(key).and_then(|l| l.as_array_mut()) else {
            continue;
        };
        while size > MAX_RECEIPT_JSON {
            let Some(item) = items.pop() else { break };
            size = size.saturating_sub(json_len(&item) + 1);
            dropped += 1;
        }
    }
    if dropped > 0
        && let Some(object) = receipt.as_object_mut()
    {
        object.insert("entries_dropped".to_owned(), dropped.into());
    }
    receipt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_of_many_large_entries_is_trimmed_to_fit() {
        let entry = serde_json::json!({
            "capability": "fs",
            "resource": "\u{1}".repeat(4096),
            "detail": "\u{1}".repeat(4096),
        });
        let receipt = serde_json::json!({
            "wall_us": 7,
            "bytes_written": 3,
            "used": vec![entry.clone(); 64],
            "denied": vec![entry; 64],
            "logs": [],
        });
        assert!(receipt.to_string().len() > longhand_session::MAX_EVENT_JSON);
        let trimmed = trim_receipt(receipt);
        assert!(trimmed.to_string().len() <= MAX_RECEIPT_JSON);
        // What the fold and `log` read is kept; what went is counted.
        assert_eq!(trimmed["wall_us"], 7);
        assert_eq!(trimmed["bytes_written"], 3);
        let kept = trimmed["used"].as_array().map_or(0, Vec::len)
            + trimmed["denied"].as_array().map_or(0, Vec::len);
        assert_eq!(trimmed["entries_dropped"], (128 - kept) as u64);
        // A small receipt is left as it was.
        let small = serde_json::json!({"wall_us": 1, "used": [{"capability": "fs"}]});
        assert_eq!(trim_receipt(small.clone()), small);
    }
}
