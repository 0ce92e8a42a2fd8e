//! The Anthropic Messages API: `POST {base_url}/v1/messages`.
//!
//! Headers `x-api-key` and `anthropic-version: 2023-06-01`. Translation,
//! both ways:
//!
//! - `system` → the top-level `system` field (omitted when empty);
//! - tools → `{name, description, input_schema}`;
//! - assistant text and tool calls ↔ `text` and `tool_use` content blocks.
//!   A `tool_use` block's `input` must be a JSON object, but our
//!   [`ToolCall::arguments`] is raw model text that may not parse; such
//!   arguments are sent back as [`ToolCall::input_object`] makes them
//!   (`{"_raw_arguments": "<text>"}`), as on every wire;
//! - tool results → `tool_result` blocks (`tool_use_id`, `content`,
//!   `is_error`) in a user message. Consecutive messages of one role are
//!   merged into one message (the API wants roles to alternate and all the
//!   results of one assistant turn in the next user message).
//!
//! Streaming (`stream: true`, the default) reads the SSE events
//! `message_start` (input usage), `content_block_start` (a `text`,
//! `tool_use`, `thinking` or `redacted_thinking` block), `content_block_delta`
//! (`text_delta`; `input_json_delta` whose `partial_json` pieces are
//! concatenated raw; `thinking_delta`, `signature_delta`),
//! `content_block_stop`, `message_delta` (stop reason, output usage),
//! `message_stop`, `ping` and `error`; unknown events and block types
//! (server tools, citations) are skipped, as the API's versioning policy
//! asks. A stream that ends before `message_stop` is
//! [`ModelError::BadResponse`]`("truncated stream")`.
//!
//! **Thinking.** With a thinking budget ([`Anthropic::thinking_budget`])
//! the request carries `thinking: {type: "enabled", budget_tokens}` and no
//! temperature (thinking accepts only the default). Every `thinking` block
//! (its text and signature) and `redacted_thinking` block of an answer is
//! kept, exactly as received, in [`ModelResponse::reasoning`], and sent
//! back first in that assistant turn's content: the API requires the
//! thinking of a tool-use turn back, unmodified, with its tool results.
//! Blocks are kept in the answer's order but ahead of its text and tool
//! calls, so interleaved thinking (a beta) would be reordered.
//!
//! **Prompt caching** ([`Anthropic::prompt_cache`], default on): an
//! `ephemeral` `cache_control` breakpoint on the system prompt (sent as
//! one text block), on the last tool, and on the last block of each of the
//! last two user turns — at most four, the API's limit. The newest
//! breakpoint writes this request's prefix to the cache; the one before
//! it reads back what the previous request wrote.
//!
//! Usage: `input_tokens` counts every prompt token, cached or not
//! (`input_tokens + cache_creation_input_tokens + cache_read_input_tokens`:
//! the API's own `input_tokens` excludes the cached parts);
//! `cached_input_tokens` is `cache_read_input_tokens` and
//! `cache_write_tokens` is `cache_creation_input_tokens`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::{Clock, ModelError};
use super::http::{HttpProvider, Redactor, StreamFold, Wire, event_json};
use super::spec::ANTHROPIC_BASE_URL;
use super::sse::SseEvent;
use super::types::{
    Message, ModelRequest, ModelResponse, ReasoningBlock, StopReason, ToolCall, Usage, WireFormat,
};

/// The API version we speak (the `anthropic-version` header).
pub const API_VERSION: &str = "2023-06-01";

/// A [`ModelProvider`](super::ModelProvider) for the Anthropic Messages
/// API.
pub type AnthropicProvider = HttpProvider<Anthropic>;

/// The Messages wire format and its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anthropic {
    /// Extended thinking's `budget_tokens`. Default `None`: thinking off.
    pub thinking_budget: Option<u32>,
    /// Send cache breakpoints (see the module docs). Default true.
    pub prompt_cache: bool,
}

impl Default for Anthropic {
    fn default() -> Self {
        Self {
            thinking_budget: None,
            prompt_cache: true,
        }
    }
}

/// The breakpoint every cached prefix ends with.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

impl Wire for Anthropic {
    type Fold = AnthropicFold;
    const FORMAT: WireFormat = WireFormat::Anthropic;
    const DEFAULT_BASE_URL: &'static str = ANTHROPIC_BASE_URL;
    const PATH: &'static str = "/v1/messages";
    const KEY_HEADER: (&'static str, &'static str) = ("x-api-key", "");
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", API_VERSION)];

    fn body(&self, model: &str, stream: bool, req: &ModelRequest) -> Value {
        let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
        for m in &req.messages {
            let (role, blocks) = match m {
                Message::User { text } => ("user", text_block(text).into_iter().collect()),
                Message::Assistant {
                    text,
                    tool_calls,
                    reasoning,
                } => {
                    // Thinking first, as the API returned it: a tool-use
                    // turn must begin with its thinking.
                    let mut blocks: Vec<Value> =
                        WireFormat::Anthropic.own(reasoning).cloned().collect();
                    blocks.extend(text.as_deref().and_then(text_block));
                    blocks.extend(tool_calls.iter().map(|c| {
                        json!({"type": "tool_use", "id": c.id, "name": c.name,
                               "input": c.input_object()})
                    }));
                    ("assistant", blocks)
                }
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                } => (
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": call_id,
                                "content": content, "is_error": is_error})],
                ),
            };
            if blocks.is_empty() {
                continue; // the API rejects empty messages and empty text blocks
            }
            match turns.last_mut() {
                Some((r, b)) if *r == role => b.extend(blocks),
                _ => turns.push((role, blocks)),
            }
        }
        if self.prompt_cache {
            for (_, blocks) in turns.iter_mut().rev().filter(|(r, _)| *r == "user").take(2) {
                if let Some(last) = blocks.last_mut() {
                    last["cache_control"] = ephemeral();
                }
            }
        }
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": model,
            "max_tokens": req.max_tokens,
            "messages": messages,
            "stream": stream,
        });
        if !req.system.is_empty() {
            body["system"] = if self.prompt_cache {
                json!([{"type": "text", "text": req.system, "cache_control": ephemeral()}])
            } else {
                json!(req.system)
            };
        }
        match self.thinking_budget {
            Some(budget) => {
                body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            }
            None => {
                if let Some(t) = req.temperature {
                    body["temperature"] = json!(t);
                }
            }
        }
        if !req.tools.is_empty() {
            let mut tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                           "input_schema": t.input_schema})
                })
                .collect();
            if self.prompt_cache
                && let Some(last) = tools.last_mut()
            {
                last["cache_control"] = ephemeral();
            }
            body["tools"] = Value::Array(tools);
        }
        body
    }

    fn parse(&self, v: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError> {
        if v["type"] == "error" {
            return Err(api_error(&v["error"], redact));
        }
        let content = v["content"]
            .as_array()
            .ok_or_else(|| ModelError::BadResponse("message has no content array".into()))?;
        let mut answer = Answer::default();
        for b in content {
            match b["type"].as_str() {
                Some("text") => answer.text.push_str(b["text"].as_str().unwrap_or("")),
                Some("tool_use") => answer.tool_calls.push(ToolCall {
                    id: b["id"].as_str().unwrap_or("").to_owned(),
                    name: b["name"]
                        .as_str()
                        .ok_or_else(|| ModelError::BadResponse("tool_use without a name".into()))?
                        .to_owned(),
                    arguments: match &b["input"] {
                        Value::Null => "{}".to_owned(),
                        input => input.to_string(),
                    },
                }),
                Some("thinking" | "redacted_thinking") => answer.reasoning(b.clone()),
                _ => {}
            }
        }
        Ok(answer.response(v["stop_reason"].as_str(), usage(&v["usage"])))
    }

    fn fold(&self) -> AnthropicFold {
        AnthropicFold::default()
    }
}

/// An answer being put together from content blocks.
#[derive(Default)]
struct Answer {
    text: String,
    tool_calls: Vec<ToolCall>,
    reasoning: Vec<ReasoningBlock>,
}

impl Answer {
    fn reasoning(&mut self, item: Value) {
        self.reasoning.push(ReasoningBlock {
            format: WireFormat::Anthropic,
            item,
        });
    }

    fn response(self, stop: Option<&str>, usage: Usage) -> ModelResponse {
        ModelResponse {
            stop_reason: stop_reason(stop, !self.tool_calls.is_empty()),
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls: self.tool_calls,
            usage,
            reasoning: self.reasoning,
        }
    }
}

/// A content block being streamed.
enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        initial: Value,
        json: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    /// A block passed back whole (`redacted_thinking`).
    Opaque(Value),
    Skipped,
}

/// A Messages stream being read.
#[derive(Default)]
pub struct AnthropicFold {
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop: Option<String>,
}

impl StreamFold for AnthropicFold {
    fn event(&mut self, ev: &SseEvent, redact: Redactor<'_>) -> Result<bool, ModelError> {
        let v = event_json(&ev.data, redact)?;
        let kind = v["type"].as_str().unwrap_or(&ev.event);
        match kind {
            "message_start" => self.usage = usage(&v["message"]["usage"]),
            "content_block_start" => {
                let index = block_index(&v)?;
                let cb = &v["content_block"];
                let s = |k: &str| cb[k].as_str().unwrap_or("").to_owned();
                let block = match cb["type"].as_str() {
                    Some("text") => Block::Text(s("text")),
                    Some("tool_use") => Block::Tool {
                        id: s("id"),
                        name: s("name"),
                        initial: cb["input"].clone(),
                        json: String::new(),
                    },
                    Some("thinking") => Block::Thinking {
                        thinking: s("thinking"),
                        signature: s("signature"),
                    },
                    Some("redacted_thinking") => Block::Opaque(cb.clone()),
                    _ => Block::Skipped,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = block_index(&v)?;
                let d = &v["delta"];
                let piece = |k: &str| d[k].as_str().unwrap_or("");
                match (self.blocks.get_mut(&index), d["type"].as_str()) {
                    (Some(Block::Text(t)), Some("text_delta")) => t.push_str(piece("text")),
                    (Some(Block::Tool { json, .. }), Some("input_json_delta")) => {
                        json.push_str(piece("partial_json"));
                    }
                    (Some(Block::Thinking { thinking, .. }), Some("thinking_delta")) => {
                        thinking.push_str(piece("thinking"));
                    }
                    (Some(Block::Thinking { signature, .. }), Some("signature_delta")) => {
                        signature.push_str(piece("signature"));
                    }
                    (None, _) => {
                        return Err(ModelError::BadResponse(format!(
                            "delta for content block {index}, which never started"
                        )));
                    }
                    _ => {} // citations…
                }
            }
            "message_delta" => {
                if let Some(s) = v["delta"]["stop_reason"].as_str() {
                    self.stop = Some(s.to_owned());
                }
                let u = &v["usage"];
                if let Some(o) = u["output_tokens"].as_u64() {
                    self.usage.output_tokens = o;
                }
                if u.get("input_tokens").is_some_and(|i| !i.is_null()) {
                    self.usage = Usage {
                        output_tokens: self.usage.output_tokens,
                        ..usage(u)
                    };
                }
            }
            "message_stop" => return Ok(true),
            "error" => return Err(api_error(&v["error"], redact)),
            _ => {} // ping, content_block_stop, future events
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelResponse, ModelError> {
        if !complete {
            return Err(ModelError::BadResponse("truncated stream".into()));
        }
        let mut answer = Answer::default();
        for b in self.blocks.into_values() {
            match b {
                Block::Text(t) => answer.text.push_str(&t),
                Block::Tool {
                    id,
                    name,
                    initial,
                    json,
                } => {
                    let arguments = if !json.is_empty() {
                        json
                    } else if initial.as_object().is_some_and(|o| !o.is_empty()) {
                        initial.to_string()
                    } else {
                        "{}".to_owned()
                    };
                    answer.tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                Block::Thinking {
                    thinking,
                    signature,
                } => answer.reasoning(
                    json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                ),
                Block::Opaque(item) => answer.reasoning(item),
                Block::Skipped => {}
            }
        }
        Ok(answer.response(self.stop.as_deref(), self.usage))
    }
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn block_index(v: &Value) -> Result<u64, ModelError> {
    v["index"]
        .as_u64()
        .ok_or_else(|| ModelError::BadResponse("content block event without an index".into()))
}

/// The API's usage object in our terms: its `input_tokens` excludes the
/// tokens read from or written to the cache, ours includes them.
fn usage(u: &Value) -> Usage {
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens")
            + n("cache_creation_input_tokens")
            + n("cache_read_input_tokens"),
        output_tokens: n("output_tokens"),
        cached_input_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
    }
}

fn stop_reason(stop: Option<&str>, has_calls: bool) -> StopReason {
    match stop {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_owned()),
        None if has_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    }
}

/// An `error` event (or error body) by its published `type`.
fn api_error(err: &Value, redact: Redactor<'_>) -> ModelError {
    let body = redact.clean(&err.to_string());
    match err["type"].as_str().unwrap_or("") {
        "rate_limit_error" => ModelError::RateLimited { retry_after: None },
        "overloaded_error" => ModelError::Server { status: 529, body },
        "api_error" => ModelError::Server { status: 500, body },
        "timeout_error" => ModelError::Timeout(Clock::Server),
        "authentication_error" => ModelError::Auth { status: 401, body },
        "permission_error" => ModelError::Auth { status: 403, body },
        "invalid_request_error" if super::error::says_context_overflow(&body) => {
            ModelError::ContextOverflow { status: 400, body }
        }
        "invalid_request_error" => ModelError::BadRequest { status: 400, body },
        "not_found_error" => ModelError::BadRequest { status: 404, body },
        "request_too_large" => ModelError::BadRequest { status: 413, body },
        _ => ModelError::BadResponse(format!("error event: {body}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{sample_request, text_only};

    #[test]
    fn body_translates_every_message_kind() {
        let wire = Anthropic {
            prompt_cache: false,
            ..Anthropic::default()
        };
        let b = wire.body("claude-test", false, &text_only());
        assert_eq!(
            b,
            json!({"model": "claude-test", "max_tokens": 100, "stream": false,
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
        );
        let b = wire.body("claude-test", true, &sample_request());
        assert_eq!(b["system"], "You are terse.");
        assert_eq!(b["temperature"], json!(0.5));
        assert_eq!(b["max_tokens"], 256);
        assert_eq!(
            b["tools"],
            json!([{"name": "fs__read", "description": "Read a file",
                    "input_schema": {"type": "object",
                                     "properties": {"path": {"type": "string"}},
                                     "required": ["path"]}}])
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "Read a.txt and c.txt"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "call_a", "name": "fs__read",
                     "input": {"path": "a.txt"}},
                    {"type": "tool_use", "id": "call_c", "name": "fs__read",
                     "input": {"_raw_arguments": "{\"path\":"}},
                ]},
                // Both results merged into one user message.
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_a",
                     "content": "contents of a", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "call_c",
                     "content": "arguments are not valid JSON", "is_error": true},
                ]},
            ])
        );
    }

    /// Where `cache_control` sits in a body, as JSON pointers.
    fn breakpoints(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.contains_key("cache_control") {
                    assert_eq!(m["cache_control"], ephemeral());
                    out.push(at.to_owned());
                }
                for (k, x) in m {
                    breakpoints(x, &format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    breakpoints(x, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn cache_breakpoints_on_system_last_tool_and_last_two_user_turns() {
        let mut req = sample_request();
        req.messages.push(Message::Assistant {
            text: Some("Done.".into()),
            tool_calls: vec![],
            reasoning: vec![],
        });
        req.messages.push(Message::User {
            text: "More.".into(),
        });
        let b = Anthropic::default().body("claude-test", false, &req);
        let mut at = Vec::new();
        breakpoints(&b, "", &mut at);
        assert_eq!(
            at,
            vec![
                "/messages/2/content/1", // the tool results' user turn
                "/messages/4/content/0", // the last user turn
                "/system/0",
                "/tools/0",
            ]
        );
        assert_eq!(b["system"][0]["text"], "You are terse.");
        // Never more than four, whatever the conversation's length.
        let mut long = req.clone();
        for i in 0..20 {
            long.messages.push(Message::User {
                text: format!("u{i}"),
            });
            long.messages.push(Message::Assistant {
                text: Some(format!("a{i}")),
                tool_calls: vec![],
                reasoning: vec![],
            });
        }
        let mut at = Vec::new();
        breakpoints(&Anthropic::default().body("m", false, &long), "", &mut at);
        assert_eq!(at.len(), 4);
    }

    #[test]
    fn thinking_is_requested_and_carried_back_first_and_only_to_anthropic() {
        let wire = Anthropic {
            thinking_budget: Some(2048),
            prompt_cache: false,
        };
        let thinking = json!({"type": "thinking", "thinking": "hmm", "signature": "sig=="});
        let redacted = json!({"type": "redacted_thinking", "data": "opaque"});
        let mut req = sample_request();
        let Message::Assistant { reasoning, .. } = &mut req.messages[1] else {
            unreachable!("the sample's second message is the assistant's")
        };
        *reasoning = vec![
            ReasoningBlock {
                format: WireFormat::Anthropic,
                item: thinking.clone(),
            },
            ReasoningBlock {
                format: WireFormat::OpenAiResponses,
                item: json!({"type": "reasoning", "id": "rs_1"}),
            },
            ReasoningBlock {
                format: WireFormat::Anthropic,
                item: redacted.clone(),
            },
        ];
        let b = wire.body("claude-test", false, &req);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert!(b.get("temperature").is_none());
        let content = b["messages"][1]["content"].as_array().unwrap();
        assert_eq!(content[0], thinking);
        assert_eq!(content[1], redacted);
        assert_eq!(content[2]["type"], "text");
        assert_eq!(content.len(), 5, "the foreign reasoning item was dropped");
    }

    #[test]
    fn tool_inputs() {
        let input = |arguments: &str| {
            ToolCall {
                id: "c".into(),
                name: "t".into(),
                arguments: arguments.into(),
            }
            .input_object()
        };
        assert_eq!(input(""), json!({}));
        assert_eq!(input("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(input("[1]"), json!({"_raw_arguments": "[1]"}));
    }
}
