//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
//!
//! The same wire format is served by OpenAI, Azure-style gateways,
//! OpenRouter, Ollama (`http://localhost:11434/v1`), vLLM and the llama.cpp
//! server, so the base URL and the key are configuration and the key is
//! optional. Translation, both ways:
//!
//! - `system` → a leading `{"role":"system"}` message (omitted when empty);
//! - tools → `{"type":"function","function":{name, description, parameters}}`
//!   (the `tools` field is omitted when there are none: OpenAI rejects `[]`);
//! - assistant tool calls ↔ `tool_calls[].function.{name, arguments}`. An
//!   answer's arguments are read untouched; a history's are sent as the
//!   model wrote them when they are a JSON object, and as the stand-in of
//!   [`ToolCall::wire_arguments`] when not (llama.cpp's server parses every
//!   earlier call's arguments and refuses the whole request over one);
//! - tool results → `{"role":"tool","tool_call_id":…}` messages. The format
//!   has no error flag, so an error result's content is prefixed `[error] `;
//! - consecutive user messages (the goal, then the note on trimmed items;
//!   an operator's note after the last result's turn) are sent as one, and
//!   an assistant text with no calls followed by another answer is joined
//!   to it: chat templates of local models (Mistral's, Gemma's) refuse a
//!   conversation whose roles do not alternate.
//!
//! What each model family accepts ([`Family::reasoning`], by default
//! [`is_reasoning_model`](super::is_reasoning_model)): a reasoning model
//! (o1, o3, o4, gpt-5…) gets `max_completion_tokens`, `reasoning_effort`
//! when set, and no `temperature` (it accepts only the default); any other
//! model gets `max_tokens` — the name every compatible server understands,
//! where older local servers ignore `max_completion_tokens` — and the
//! temperature asked for. The format carries no reasoning between turns
//! (OpenAI keeps it server-side; use `openai-responses` to carry it).
//!
//! Streaming (`stream: true`, the default) reads SSE `data:` chunks,
//! concatenating `delta.content` and assembling `delta.tool_calls`
//! fragments by their `index`, until `data: [DONE]`; usage comes from the
//! last chunk (`stream_options.include_usage`). A stream that ends before
//! both `[DONE]` and any `finish_reason` is a truncated answer:
//! [`ModelError::BadResponse`]. Usage: `prompt_tokens` (cached ones
//! included), `prompt_tokens_details.cached_tokens`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::ModelError;
use super::http::{HttpProvider, Redactor, StreamFold, Wire, event_json};
use super::spec::{OPENAI_BASE_URL, ReasoningEffort};
use super::sse::SseEvent;
use super::types::{Message, ModelRequest, ModelResponse, StopReason, ToolCall, Usage, WireFormat};

/// A [`ModelProvider`](super::ModelProvider) for OpenAI-compatible
/// chat-completions servers.
pub type OpenAiProvider = HttpProvider<Chat>;

/// What the two OpenAI wire formats send for a model's family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Family {
    /// The model is a reasoning model
    /// ([`is_reasoning_model`](super::is_reasoning_model)): it gets the
    /// effort and no temperature, and chat completions names its limit
    /// `max_completion_tokens`. Default false.
    pub reasoning: bool,
    /// The effort asked for; sent to reasoning models only. Default none.
    pub effort: Option<ReasoningEffort>,
}

impl Family {
    /// The effort to send, if any.
    pub(crate) fn effort(self) -> Option<&'static str> {
        self.effort
            .filter(|_| self.reasoning)
            .map(ReasoningEffort::as_str)
    }
}

/// The chat-completions wire format, for a model family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chat(pub Family);

impl Wire for Chat {
    type Fold = ChatFold;
    const FORMAT: WireFormat = WireFormat::OpenAiChat;
    const DEFAULT_BASE_URL: &'static str = OPENAI_BASE_URL;
    const PATH: &'static str = "/chat/completions";
    const KEY_HEADER: (&'static str, &'static str) = ("authorization", "Bearer ");

    fn body(&self, model: &str, stream: bool, req: &ModelRequest) -> Value {
        let mut messages: Vec<Value> = Vec::with_capacity(req.messages.len() + 1);
        if !req.system.is_empty() {
            messages.push(json!({"role": "system", "content": req.system}));
        }
        for m in &req.messages {
            let message = match m {
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant {
                    text, tool_calls, ..
                } => {
                    let content = match text {
                        Some(t) => Value::String(t.clone()),
                        None if tool_calls.is_empty() => Value::String(String::new()),
                        None => Value::Null,
                    };
                    let mut o = json!({"role": "assistant", "content": content});
                    if !tool_calls.is_empty() {
                        o["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": c.wire_arguments()},
                                })
                            })
                            .collect();
                    }
                    o
                }
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                } => json!({"role": "tool", "tool_call_id": call_id,
                            "content": error_prefixed(content, *is_error)}),
            };
            push_alternating(&mut messages, message);
        }
        let mut body = json!({"model": model, "messages": messages, "stream": stream});
        if self.0.reasoning {
            body["max_completion_tokens"] = json!(req.max_tokens);
            if let Some(e) = self.0.effort() {
                body["reasoning_effort"] = json!(e);
            }
        } else {
            body["max_tokens"] = json!(req.max_tokens);
            if let Some(t) = req.temperature {
                body["temperature"] = json!(t);
            }
        }
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.input_schema,
                        },
                    })
                })
                .collect();
        }
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    fn parse(&self, v: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError> {
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(body_error(err, redact));
        }
        let choice = v["choices"]
            .get(0)
            .ok_or_else(|| ModelError::BadResponse("response has no choices".into()))?;
        let msg = &choice["message"];
        let text = msg["content"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let mut tool_calls = Vec::new();
        for (i, tc) in msg["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let name = tc["function"]["name"]
                .as_str()
                .ok_or_else(|| ModelError::BadResponse("tool call without a name".into()))?;
            let id = tc["id"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("call_{i}"), str::to_owned);
            tool_calls.push(ToolCall {
                id,
                name: name.to_owned(),
                arguments: arguments_text(&tc["function"]["arguments"]),
            });
        }
        Ok(ModelResponse {
            stop_reason: stop_reason(choice["finish_reason"].as_str(), !tool_calls.is_empty()),
            text,
            tool_calls,
            usage: parse_usage(&v["usage"]),
            reasoning: Vec::new(),
        })
    }

    fn fold(&self) -> ChatFold {
        ChatFold::default()
    }
}

/// A tool result's content, marked when it reports an error (the OpenAI
/// formats have no error flag).
pub(crate) fn error_prefixed(content: &str, is_error: bool) -> String {
    if is_error {
        format!("[error] {content}")
    } else {
        content.to_owned()
    }
}

/// Append `message`, joining it to the last one when both are user
/// messages, or when the last is an assistant's text with no calls and
/// this is an assistant's answer: roles then alternate, as strict chat
/// templates require. Texts are joined by a blank line.
fn push_alternating(messages: &mut Vec<Value>, message: Value) {
    if let Some(last) = messages.last_mut() {
        let (a, b) = (last["role"].as_str(), message["role"].as_str());
        let joinable = match (a, b) {
            (Some("user"), Some("user")) => true,
            (Some("assistant"), Some("assistant")) => last.get("tool_calls").is_none(),
            _ => false,
        };
        if joinable {
            let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_owned();
            let (before, after) = (text(last), text(&message));
            let joined = match (before.is_empty(), after.is_empty()) {
                (true, _) => after,
                (_, true) => before,
                _ => format!("{before}\n\n{after}"),
            };
            let calls = message.get("tool_calls").cloned();
            last["content"] = if joined.is_empty() && calls.is_some() {
                Value::Null
            } else {
                Value::String(joined)
            };
            if let Some(calls) = calls {
                last["tool_calls"] = calls;
            }
            return;
        }
    }
    messages.push(message);
}

/// Tool-call arguments as text: some servers send an object, not a string.
fn arguments_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A chat-completions stream being read.
#[derive(Debug, Default)]
pub struct ChatFold {
    text: String,
    calls: BTreeMap<u64, ToolCall>,
    finish: Option<String>,
    usage: Usage,
}

impl StreamFold for ChatFold {
    fn event(&mut self, ev: &SseEvent, redact: Redactor<'_>) -> Result<bool, ModelError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let v = event_json(data, redact)?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(body_error(err, redact));
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = parse_usage(u);
        }
        let Some(choice) = v["choices"].get(0) else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str() {
            self.text.push_str(t);
        }
        for (pos, tc) in delta["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            // Some servers omit `index` when they send each call whole;
            // fall back to the position in this delta.
            let idx = tc["index"].as_u64().unwrap_or(pos as u64);
            let call = self.calls.entry(idx).or_insert_with(|| ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            if let Some(id) = tc["id"].as_str().filter(|s| !s.is_empty())
                && call.id.is_empty()
            {
                id.clone_into(&mut call.id);
            }
            if let Some(n) = tc["function"]["name"].as_str().filter(|s| !s.is_empty())
                && call.name.is_empty()
            {
                n.clone_into(&mut call.name);
            }
            call.arguments
                .push_str(&arguments_text(&tc["function"]["arguments"]));
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            self.finish = Some(f.to_owned());
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelResponse, ModelError> {
        // Some servers close the stream after the finish reason without
        // `[DONE]`; the answer is whole then (only usage may be missing).
        if !complete && self.finish.is_none() {
            return Err(ModelError::BadResponse("truncated stream".into()));
        }
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                c
            })
            .collect();
        Ok(ModelResponse {
            stop_reason: stop_reason(self.finish.as_deref(), !tool_calls.is_empty()),
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            usage: self.usage,
            reasoning: Vec::new(),
        })
    }
}

fn parse_usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: u["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        cache_write_tokens: 0,
    }
}

/// `finish_reason` → [`StopReason`]. Servers that say `stop` while making
/// tool calls (several local ones do) are read as `ToolUse`: the calls are
/// what the loop must act on.
fn stop_reason(finish: Option<&str>, has_calls: bool) -> StopReason {
    match finish {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        _ if has_calls => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_owned()),
    }
}

/// An `{"error":{…}}` object sent with a 2xx status (in a stream, or by
/// gateways such as OpenRouter). A numeric HTTP-like `code` is mapped like
/// the status it names; anything else is a bad response. Shared with the
/// Responses format, whose error objects have the same shape.
pub(crate) fn body_error(err: &Value, redact: Redactor<'_>) -> ModelError {
    let text = err.to_string();
    let code = err["code"]
        .as_u64()
        .or_else(|| err["code"].as_str().and_then(|c| c.parse().ok()));
    match code {
        Some(code @ 400..=599) => {
            redact.status(code as u16, &reqwest::header::HeaderMap::new(), &text)
        }
        _ => match err["code"].as_str().or(err["type"].as_str()) {
            Some("rate_limit_exceeded") => ModelError::RateLimited { retry_after: None },
            Some("server_error") => ModelError::Server {
                status: 500,
                body: redact.clean(&text),
            },
            _ => ModelError::BadResponse(format!("error in response: {}", redact.clean(&text))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::http::{ApiKey, HttpConfig};
    use crate::model::testing::{sample_request, text_only};

    /// (Here rather than in `http`, whose tests would otherwise name this
    /// wire format above it.)
    #[test]
    fn a_provider_never_prints_its_key() {
        let mut cfg = HttpConfig::new("m");
        cfg.api_key = Some(ApiKey::new(crate::model::testing::CANARY));
        let p = HttpProvider::with_wire(cfg, Chat::default()).unwrap();
        crate::model::testing::assert_no_canary(&p, "");
        // An empty base URL is the wire format's public API.
        assert_eq!(p.url(), "https://api.openai.com/v1/chat/completions");
    }

    #[test]
    fn body_translates_every_message_kind() {
        let b = Chat::default().body("gpt-test", false, &sample_request());
        assert_eq!(b["model"], "gpt-test");
        assert_eq!(b["stream"], false);
        assert_eq!(b["max_tokens"], 256);
        assert_eq!(b["temperature"], json!(0.5));
        assert!(b.get("stream_options").is_none());
        assert_eq!(
            b["tools"],
            json!([{"type": "function", "function": {
                "name": "fs__read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]},
            }}])
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Read a.txt and c.txt"},
                {"role": "assistant", "content": "Reading.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "fs__read", "arguments": "{\"path\":\"a.txt\"}"}},
                    {"id": "call_c", "type": "function",
                     "function": {"name": "fs__read", "arguments": "{\"_raw_arguments\":\"{\\\"path\\\":\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
                {"role": "tool", "tool_call_id": "call_c",
                 "content": "[error] arguments are not valid JSON"},
            ])
        );
        let b = Chat::default().body("gpt-test", true, &text_only());
        assert_eq!(b["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(b.get("tools").is_none() && b.get("temperature").is_none());
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn reasoning_models_get_max_completion_tokens_effort_and_no_temperature() {
        let wire = Chat(Family {
            reasoning: true,
            effort: Some(ReasoningEffort::High),
        });
        let b = wire.body("o3", false, &sample_request());
        assert_eq!(b["max_completion_tokens"], 256);
        assert_eq!(b["reasoning_effort"], "high");
        assert!(b.get("max_tokens").is_none());
        assert!(b.get("temperature").is_none(), "{b}");
        // Without an effort none is sent: the API's default holds.
        let b = Chat(Family {
            reasoning: true,
            effort: None,
        })
        .body("o3", false, &sample_request());
        assert!(b.get("reasoning_effort").is_none());
        // A non-reasoning model (Ollama, vLLM) never gets the new names.
        let b = Chat(Family {
            reasoning: false,
            effort: Some(ReasoningEffort::High),
        })
        .body("llama3.1", false, &sample_request());
        assert_eq!(b["max_tokens"], 256);
        assert!(b.get("max_completion_tokens").is_none() && b.get("reasoning_effort").is_none());
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(stop_reason(Some("length"), false), StopReason::MaxTokens);
        assert_eq!(stop_reason(Some("stop"), true), StopReason::ToolUse);
        assert_eq!(
            stop_reason(Some("content_filter"), false),
            StopReason::Other("content_filter".into())
        );
    }
}
