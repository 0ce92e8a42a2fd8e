//! Tool calls: started (open), finished or in doubt; the calls of the last
//! answer still to run, the read-only cache, the failure counters the
//! breaker reads, and the inputs of changing calls the judge is shown.

use super::{
    CHECK_PREFIX, CachedResult, HistoryItem, MAX_CACHED, MAX_CHANGES, OpenCall, SessionState,
    effect_of, failure_key,
};
use longhand_hands::Effect;
use longhand_session::Event;

impl SessionState {
    /// Fold an event of this concern, recorded at `seq`.
    pub(super) fn fold_calls(&mut self, seq: u64, event: &Event) {
        match event {
            Event::ToolStarted {
                step,
                call_id,
                component,
                tool,
                effect,
                input,
                ..
            } => {
                self.pending_calls.retain(|c| c != call_id);
                let effect = effect_of(effect);
                if effect != Effect::ReadOnly {
                    if self.changes.len() >= MAX_CHANGES {
                        self.changes.remove(0);
                    }
                    if !self.changes.contains(input) {
                        self.changes.push(input.clone());
                    }
                }
                self.open_calls.insert(
                    call_id.clone(),
                    OpenCall {
                        step: *step,
                        component: component.clone(),
                        tool: tool.clone(),
                        effect,
                        input: input.clone(),
                    },
                );
            }
            Event::ToolFinished {
                call_id,
                ok,
                result,
                receipt,
                ..
            } => {
                let open = self.open_calls.remove(call_id);
                self.pending_calls.retain(|c| c != call_id);
                if call_id.starts_with(CHECK_PREFIX) {
                    self.check_passed = Some(*ok);
                    if *ok {
                        self.steps_since_progress = 0;
                    }
                }
                match &open {
                    // A change: progress, and what reads saw may differ now.
                    Some(o) if o.effect != Effect::ReadOnly => {
                        self.read_cache.clear();
                        if *ok {
                            self.steps_since_progress = 0;
                        }
                    }
                    Some(_) if *ok => {
                        if let Some(key) = receipt.get("cache_key").and_then(|k| k.as_str())
                            && self.read_cache.len() < MAX_CACHED
                        {
                            self.read_cache.insert(
                                key.to_owned(),
                                CachedResult {
                                    call_id: call_id.clone(),
                                    ok: *ok,
                                    result: result.clone(),
                                },
                            );
                        }
                    }
                    _ => {}
                }
                // The harness's completion check is not a call the model
                // made: it counts toward no limit the model's calls do,
                // and an answer the check refused is no tool failure (the
                // no-progress breaker and `max_steps` bound a model that
                // keeps saying it is done).
                let harness = call_id.starts_with(CHECK_PREFIX);
                if !harness {
                    self.tool_calls += 1;
                }
                self.bytes_written += receipt
                    .get("bytes_written")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0);
                self.active_ms +=
                    receipt.get("wall_us").and_then(|v| v.as_u64()).unwrap_or(0) / 1000;
                if *ok && !harness {
                    self.consecutive_failures = 0;
                } else if !harness {
                    self.consecutive_failures += 1;
                    if let Some(open) = &open {
                        *self
                            .repeated_failures
                            .entry(failure_key(&open.component, &open.tool, &open.input))
                            .or_default() += 1;
                    }
                }
                self.push_history(HistoryItem::ToolResult {
                    seq,
                    call_id: call_id.clone(),
                    ok: *ok,
                    result: Some(result.clone()),
                    note: None,
                });
            }
            Event::ToolInDoubt {
                call_id, reason, ..
            } => {
                self.open_calls.remove(call_id);
                self.pending_calls.retain(|c| c != call_id);
                self.in_doubt.push(call_id.clone());
                if !call_id.starts_with(CHECK_PREFIX) {
                    self.tool_calls += 1;
                }
                self.push_history(HistoryItem::ToolResult {
                    seq,
                    call_id: call_id.clone(),
                    ok: false,
                    result: None,
                    note: Some(reason.clone()),
                });
            }
            _ => {}
        }
    }
}
