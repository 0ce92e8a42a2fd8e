//! Components as a [`Toolset`]: each component the agent froze, loaded and
//! granted (`agent::bind`), offers the tools its `only` list keeps, named
//! `<prefix>__<tool>`, with the effect the component declares. A call runs
//! in the hands, in a fresh instance with the component's grants; its
//! receipt is trimmed to fit the log.

use std::sync::Arc;

use serde_json::Value;

use super::{CallCx, Offer, Offered, Outcome, Registered, Toolset};
use crate::agent::bind::BoundAgent;
use crate::agent::frozen::Frozen;
use crate::model::ToolDef;
use longhand_hands::{Grants, LoadedTool, ToolSpec};

/// One bound component.
struct Component {
    prefix: String,
    loaded: Arc<LoadedTool>,
    grants: Grants,
    /// Its entry of the frozen agent, as JSON: what an approval covers.
    frozen_grants: Value,
    /// Its tools the agent keeps, as the model names them, in order.
    tools: Vec<(String, ToolSpec)>,
}

/// The toolsets of `agent`'s components, in the order it lists them.
pub fn sets(agent: &BoundAgent) -> Vec<Arc<dyn Toolset>> {
    agent
        .components
        .iter()
        .enumerate()
        .map(|(index, component)| {
            let tools: Vec<(String, ToolSpec)> = agent
                .defs
                .iter()
                .filter_map(|def| {
                    let tool = agent.tools.get(&def.name)?;
                    (tool.component == index).then(|| (def.name.clone(), tool.spec.clone()))
                })
                .collect();
            Arc::new(Component {
                prefix: component.prefix.clone(),
                loaded: Arc::clone(&component.loaded),
                grants: component.grants.clone(),
                frozen_grants: agent
                    .frozen
                    .tools
                    .get(index)
                    .map(|f| serde_json::to_value(f).unwrap_or_default())
                    .unwrap_or_default(),
                tools,
            }) as Arc<dyn Toolset>
        })
        .collect()
}

#[async_trait::async_trait]
impl Toolset for Component {
    fn component(&self) -> &str {
        &self.prefix
    }

    fn digest(&self) -> &str {
        self.loaded.digest()
    }

    fn offer(&self, _: &Offer<'_>) -> Vec<Offered> {
        self.tools
            .iter()
            .map(|(name, spec)| Offered {
                def: ToolDef {
                    name: name.clone(),
                    description: spec.description.clone(),
                    input_schema: spec.input_schema.clone(),
                },
                tool: spec.name.clone(),
                effect: spec.effect,
            })
            .collect()
    }

    fn fingerprint_parts(&self, _: &Frozen) -> (String, Value) {
        (self.loaded.digest().to_owned(), self.frozen_grants.clone())
    }

    fn judge_may_use(&self) -> bool {
        true
    }

    async fn call(&self, cx: &CallCx<'_>, tool: &Registered, input: &Value) -> Outcome {
        let outcome = cx
            .hands
            .call(&self.loaded, &self.grants, &tool.tool, input)
            .await;
        let receipt = trim_receipt(serde_json::to_value(&outcome.receipt).unwrap_or_default());
        Outcome::of(outcome.result, receipt)
    }
}

/// The most a trimmed receipt takes in `tool_finished`, as JSON: about
/// 32 KiB (the count of removed entries adds a few bytes).
const MAX_RECEIPT_JSON: usize = 32 * 1024;

/// Keep the receipt small in the log: stdio and logs are cut.
fn trim_receipt(mut receipt: Value) -> Value {
    for key in ["stdout", "stderr"] {
        if let Some(text) = receipt.pointer_mut(&format!("/{key}/text"))
            && let Some(s) = text.as_str()
            && s.len() > 1024
        {
            let end = s.floor_char_boundary(1024);
            *text = Value::String(format!("{}…", &s[..end]));
        }
    }
    if let Some(logs) = receipt.get_mut("logs").and_then(|l| l.as_array_mut()) {
        logs.truncate(16);
    }
    // The hands bound each entry (4 KiB) and each list (64 entries), but
    // not their sum: 64 uses of 8 KiB of guest-chosen paths, escaped, would
    // make `tool_finished` too large to store. Drop entries from the ends
    // of the lists until the receipt fits, and say how many.
    let json_len = |v: &Value| serde_json::to_string(v).map_or(0, |s| s.len());
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
