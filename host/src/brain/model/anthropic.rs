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
//!   arguments are sent back as `{"_raw_arguments": "<text>"}` so the model
//!   still sees what it wrote next to the error its tool result reports
//!   (empty arguments become `{}`);
//! - tool results → `tool_result` blocks (`tool_use_id`, `content`,
//!   `is_error`) in a user message. Consecutive messages of one role are
//!   merged into one message (the API wants roles to alternate and all the
//!   results of one assistant turn in the next user message).
//!
//! Streaming (`stream: true`, the default) reads the SSE events
//! `message_start` (input usage), `content_block_start` (a `text` block, or
//! a `tool_use` block with its id and name), `content_block_delta`
//! (`text_delta`, or `input_json_delta` whose `partial_json` pieces are
//! concatenated raw), `content_block_stop`, `message_delta` (stop reason,
//! output usage), `message_stop`, `ping` and `error`; unknown events and
//! block types (thinking, server tools) are skipped, as the API's
//! versioning policy asks. A stream that ends before `message_stop` is
//! [`ModelError::BadResponse`]`("truncated stream")`.
//!
//! Usage: `input_tokens` counts every prompt token, cached or not
//! (`input_tokens + cache_creation_input_tokens + cache_read_input_tokens`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::http::{self, ApiKey, Redactor};
use super::sse::SseParser;
use super::{
    Message, ModelError, ModelProvider, ModelRequest, ModelResponse, StopReason, ToolCall, Usage,
};

/// The API version we speak (the `anthropic-version` header).
pub const API_VERSION: &str = "2023-06-01";

/// Settings of an [`AnthropicProvider`].
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// API root, without `/v1/messages`. Default
    /// [`AnthropicConfig::DEFAULT_BASE_URL`].
    pub base_url: String,
    /// Sent as `x-api-key`. Default `None` (only useful behind a gateway
    /// that adds the key itself).
    pub api_key: Option<ApiKey>,
    /// The model name, e.g. `claude-sonnet-4-5`. No default.
    pub model: String,
    /// Stream the answer. Default `true` (Anthropic recommends streaming
    /// for long answers; a stall is caught by `idle_timeout`).
    pub stream: bool,
    /// Bound on one whole request, connect to last byte, however lively
    /// the stream. Default 30 min: long enough for a long answer from a
    /// reasoning model; a stall is `idle_timeout`'s job.
    pub deadline: Duration,
    /// Bound on every wait for the next byte of the answer: connecting and
    /// waiting for the status line, then each gap between chunks of the
    /// body (streamed or not). Default 120 s. The API pings while a stream is
    /// idle, so a healthy stream never comes near it.
    pub idle_timeout: Duration,
}

impl AnthropicConfig {
    /// Anthropic's own API.
    pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

    /// The defaults above, for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: Self::DEFAULT_BASE_URL.into(),
            api_key: None,
            model: model.into(),
            stream: true,
            deadline: Duration::from_secs(30 * 60),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// A [`ModelProvider`] for the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    cfg: AnthropicConfig,
    url: String,
    client: reqwest::Client,
}

impl AnthropicProvider {
    /// Builds the provider (and its HTTP client); sends nothing.
    pub fn new(cfg: AnthropicConfig) -> Result<Self, ModelError> {
        let url = format!("{}/v1/messages", http::trim_base(&cfg.base_url));
        Ok(Self {
            cfg,
            url,
            client: http::client()?,
        })
    }

    fn redactor(&self) -> Redactor<'_> {
        Redactor(self.cfg.api_key.as_ref())
    }

    /// The request body for `req`.
    fn body(&self, req: &ModelRequest) -> Value {
        let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
        for m in &req.messages {
            let (role, blocks) = match m {
                Message::User { text } => ("user", text_block(text).into_iter().collect()),
                Message::Assistant { text, tool_calls } => {
                    let mut blocks: Vec<Value> =
                        text.as_deref().and_then(text_block).into_iter().collect();
                    blocks.extend(tool_calls.iter().map(|c| {
                        json!({"type": "tool_use", "id": c.id, "name": c.name,
                               "input": tool_input(&c.arguments)})
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
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": self.cfg.model,
            "max_tokens": req.max_tokens,
            "messages": messages,
            "stream": self.cfg.stream,
        });
        if !req.system.is_empty() {
            body["system"] = json!(req.system);
        }
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                           "input_schema": t.input_schema})
                })
                .collect();
        }
        body
    }

    async fn stream(&self, mut resp: reqwest::Response) -> Result<ModelResponse, ModelError> {
        let redact = self.redactor();
        let mut sse = SseParser::default();
        let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
        let mut usage = Usage::default();
        let mut stop: Option<String> = None;
        let mut stopped = false;
        'read: while let Some(chunk) =
            http::next_chunk(&mut resp, self.cfg.idle_timeout, redact).await?
        {
            for ev in sse.push(&chunk)? {
                let v: Value = serde_json::from_str(&ev.data).map_err(|e| {
                    ModelError::BadResponse(format!(
                        "unparseable stream event ({e}): {}",
                        redact.clean(&ev.data)
                    ))
                })?;
                let kind = v["type"].as_str().unwrap_or(&ev.event);
                match kind {
                    "message_start" => {
                        let u = &v["message"]["usage"];
                        usage.input_tokens = input_tokens(u);
                        usage.output_tokens = u["output_tokens"].as_u64().unwrap_or(0);
                    }
                    "content_block_start" => {
                        let index = block_index(&v)?;
                        let cb = &v["content_block"];
                        let block = match cb["type"].as_str() {
                            Some("text") => Block::Text(cb["text"].as_str().unwrap_or("").into()),
                            Some("tool_use") => Block::Tool {
                                id: cb["id"].as_str().unwrap_or("").into(),
                                name: cb["name"].as_str().unwrap_or("").into(),
                                initial: cb["input"].clone(),
                                json: String::new(),
                            },
                            _ => Block::Skipped,
                        };
                        blocks.insert(index, block);
                    }
                    "content_block_delta" => {
                        let index = block_index(&v)?;
                        let d = &v["delta"];
                        match (blocks.get_mut(&index), d["type"].as_str()) {
                            (Some(Block::Text(t)), Some("text_delta")) => {
                                t.push_str(d["text"].as_str().unwrap_or(""));
                            }
                            (Some(Block::Tool { json, .. }), Some("input_json_delta")) => {
                                json.push_str(d["partial_json"].as_str().unwrap_or(""));
                            }
                            (None, _) => {
                                return Err(ModelError::BadResponse(format!(
                                    "delta for content block {index}, which never started"
                                )));
                            }
                            _ => {} // thinking, signature, citations…
                        }
                    }
                    "message_delta" => {
                        if let Some(s) = v["delta"]["stop_reason"].as_str() {
                            stop = Some(s.to_owned());
                        }
                        let u = &v["usage"];
                        if let Some(o) = u["output_tokens"].as_u64() {
                            usage.output_tokens = o;
                        }
                        if u.get("input_tokens").is_some_and(|i| !i.is_null()) {
                            usage.input_tokens = input_tokens(u);
                        }
                    }
                    "message_stop" => {
                        stopped = true;
                        break 'read;
                    }
                    "error" => return Err(api_error(&v["error"], redact)),
                    _ => {} // ping, content_block_stop, future events
                }
            }
        }
        if !stopped {
            return Err(ModelError::BadResponse("truncated stream".into()));
        }
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for b in blocks.into_values() {
            match b {
                Block::Text(t) => text.push_str(&t),
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
                    tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                Block::Skipped => {}
            }
        }
        Ok(ModelResponse {
            stop_reason: stop_reason(stop.as_deref(), !tool_calls.is_empty()),
            text: (!text.is_empty()).then_some(text),
            tool_calls,
            usage,
        })
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
    Skipped,
}

#[async_trait::async_trait]
impl ModelProvider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.cfg.model
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let redact = self.redactor();
        let body = serde_json::to_vec(&self.body(req)).map_err(|e| ModelError::BadRequest {
            status: 0,
            body: format!("request does not serialize: {e}"),
        })?;
        let mut rb = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("anthropic-version", API_VERSION)
            .body(body);
        if let Some(k) = &self.cfg.api_key {
            rb = rb.header("x-api-key", k.header("")?);
        }
        let idle = self.cfg.idle_timeout;
        http::within_deadline(self.cfg.deadline, async {
            let resp = http::send(rb, idle, redact).await?;
            if self.cfg.stream {
                self.stream(resp).await
            } else {
                parse_response(&http::json_body(resp, idle, redact).await?, redact)
            }
        })
        .await
    }
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A tool call's raw arguments as the object `tool_use.input` must be.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw_arguments": arguments}),
    }
}

fn block_index(v: &Value) -> Result<u64, ModelError> {
    v["index"]
        .as_u64()
        .ok_or_else(|| ModelError::BadResponse("content block event without an index".into()))
}

fn input_tokens(u: &Value) -> u64 {
    [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .iter()
    .filter_map(|k| u[k].as_u64())
    .sum()
}

/// Parses a non-streamed message.
fn parse_response(v: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError> {
    if v["type"] == "error" {
        return Err(api_error(&v["error"], redact));
    }
    let content = v["content"]
        .as_array()
        .ok_or_else(|| ModelError::BadResponse("message has no content array".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for b in content {
        match b["type"].as_str() {
            Some("text") => text.push_str(b["text"].as_str().unwrap_or("")),
            Some("tool_use") => tool_calls.push(ToolCall {
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
            _ => {}
        }
    }
    Ok(ModelResponse {
        stop_reason: stop_reason(v["stop_reason"].as_str(), !tool_calls.is_empty()),
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: Usage {
            input_tokens: input_tokens(&v["usage"]),
            output_tokens: v["usage"]["output_tokens"].as_u64().unwrap_or(0),
        },
    })
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
        "timeout_error" => ModelError::Timeout,
        "authentication_error" => ModelError::Auth { status: 401, body },
        "permission_error" => ModelError::Auth { status: 403, body },
        "invalid_request_error" => ModelError::BadRequest { status: 400, body },
        "not_found_error" => ModelError::BadRequest { status: 404, body },
        "request_too_large" => ModelError::BadRequest { status: 413, body },
        _ => ModelError::BadResponse(format!("error event: {body}")),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::brain::model::testing::{
        CANARY, Reply, TestServer, assert_no_canary, assert_timed_out, paced, sample_request, sse,
    };
    use crate::brain::model::{RetryPolicy, complete_with_retry};

    fn provider(server: &TestServer, stream: bool) -> AnthropicProvider {
        let mut cfg = AnthropicConfig::new("claude-test");
        cfg.base_url = server.url.clone();
        cfg.api_key = Some(ApiKey::new(CANARY));
        cfg.stream = stream;
        cfg.deadline = Duration::from_secs(1);
        cfg.idle_timeout = Duration::from_millis(500);
        AnthropicProvider::new(cfg).unwrap()
    }

    fn message(content: Value, stop: &str) -> Value {
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 5,
                      "cache_creation_input_tokens": 0, "output_tokens": 7},
        })
    }

    fn start() -> (&'static str, Value) {
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "claude-test", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        )
    }

    fn block_start(index: u64, block: Value) -> (&'static str, Value) {
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        )
    }

    fn delta(index: u64, delta: Value) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    }

    fn text_delta(index: u64, t: &str) -> (&'static str, Value) {
        delta(index, json!({"type": "text_delta", "text": t}))
    }

    fn json_delta(index: u64, j: &str) -> (&'static str, Value) {
        delta(
            index,
            json!({"type": "input_json_delta", "partial_json": j}),
        )
    }

    fn block_stop(index: u64) -> (&'static str, Value) {
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )
    }

    fn end(stop: &str) -> [(&'static str, Value); 2] {
        [
            (
                "message_delta",
                json!({"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": null},
                       "usage": {"output_tokens": 15}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]
    }

    fn ping() -> (&'static str, Value) {
        ("ping", json!({"type": "ping"}))
    }

    fn text_only() -> ModelRequest {
        ModelRequest {
            system: String::new(),
            messages: vec![Message::User { text: "hi".into() }],
            tools: vec![],
            max_tokens: 100,
            temperature: None,
            step: 0,
        }
    }

    #[tokio::test]
    async fn text_non_streaming() {
        let server = TestServer::start(vec![Reply::ok(message(
            json!([{"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}]),
            "end_turn",
        ))])
        .await;
        let r = provider(&server, false)
            .complete(&text_only())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello there"));
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 25,
                output_tokens: 7
            }
        );
        let got = &server.received()[0];
        assert_eq!(got.path, "/v1/messages");
        assert_eq!(got.header("x-api-key"), Some(CANARY));
        assert_eq!(got.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(got.header("authorization"), None);
        assert_eq!(
            got.body,
            json!({"model": "claude-test", "max_tokens": 100, "stream": false,
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
        );
    }

    #[tokio::test]
    async fn tool_call_round_trip() {
        let server = TestServer::start(vec![Reply::ok(message(
            json!([
                {"type": "text", "text": "Reading b."},
                {"type": "tool_use", "id": "toolu_b", "name": "fs__read",
                 "input": {"path": "b.txt"}},
            ]),
            "tool_use",
        ))])
        .await;
        let r = provider(&server, false)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Reading b."));
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "toolu_b".into(),
                name: "fs__read".into(),
                arguments: "{\"path\":\"b.txt\"}".into()
            }]
        );
        let got = &server.received()[0];
        assert_eq!(got.header("x-api-key"), Some(CANARY));
        assert_eq!(got.body["system"], "You are terse.");
        assert_eq!(got.body["temperature"], json!(0.5));
        assert_eq!(got.body["max_tokens"], 256);
        assert_eq!(
            got.body["tools"],
            json!([{"name": "fs__read", "description": "Read a file",
                    "input_schema": {"type": "object",
                                     "properties": {"path": {"type": "string"}},
                                     "required": ["path"]}}])
        );
        assert_eq!(
            got.body["messages"],
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

    #[tokio::test]
    async fn streamed_text() {
        let mut events = vec![
            start(),
            block_start(0, json!({"type": "text", "text": ""})),
            ping(),
            text_delta(0, "Hel"),
            text_delta(0, "lo wörld"),
            block_stop(0),
        ];
        events.extend(end("end_turn"));
        let server = TestServer::start(vec![Reply::Sse(sse(&events))]).await;
        let r = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello wörld"));
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 25,
                output_tokens: 15
            }
        );
        assert_eq!(server.received()[0].body["stream"], true);
    }

    #[tokio::test]
    async fn streamed_tool_calls_fragmented() {
        let mut events = vec![
            start(),
            block_start(0, json!({"type": "text", "text": ""})),
            text_delta(0, "Let me look."),
            block_stop(0),
            block_start(
                1,
                json!({"type": "tool_use", "id": "toolu_1", "name": "fs__read", "input": {}}),
            ),
            json_delta(1, ""),
            json_delta(1, "{\"pa"),
            json_delta(1, "th\": \"a.t"),
            ping(),
            json_delta(1, "xt\"}"),
            block_stop(1),
            block_start(
                2,
                json!({"type": "tool_use", "id": "toolu_2", "name": "fs__list", "input": {}}),
            ),
            block_stop(2),
        ];
        events.extend(end("tool_use"));
        let raw: String = sse(&events).concat();
        let pieces: Vec<String> = raw
            .as_bytes()
            .chunks(41)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        let server = TestServer::start(vec![Reply::Sse(pieces)]).await;
        let r = provider(&server, true)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Let me look."));
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "toolu_1".into(),
                    name: "fs__read".into(),
                    arguments: "{\"path\": \"a.txt\"}".into()
                },
                ToolCall {
                    id: "toolu_2".into(),
                    name: "fs__list".into(),
                    arguments: "{}".into()
                },
            ]
        );
    }

    #[tokio::test]
    async fn rate_limited_then_ok_honours_retry_after() {
        let server = TestServer::start(vec![
            Reply::Json {
                status: 429,
                headers: vec![("retry-after", "1".into())],
                body: json!({"type": "error",
                             "error": {"type": "rate_limit_error", "message": "slow"}})
                .to_string(),
            },
            Reply::ok(message(json!([{"type": "text", "text": "ok"}]), "end_turn")),
        ])
        .await;
        let p = provider(&server, false);
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        let mut failures = Vec::new();
        let t0 = Instant::now();
        let r = complete_with_retry(&p, &text_only(), &policy, |n, e, d| {
            failures.push((n, e.clone(), d))
        })
        .await
        .unwrap();
        let elapsed = t0.elapsed();
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        assert_eq!(failures.len(), 1);
        assert_eq!(
            (failures[0].0, &failures[0].1),
            (
                1,
                &ModelError::RateLimited {
                    retry_after: Some(Duration::from_secs(1))
                }
            )
        );
        assert!(failures[0].2.unwrap() >= Duration::from_secs(1));
    }

    #[tokio::test]
    async fn server_error_then_ok() {
        let server = TestServer::start(vec![
            Reply::status(
                529,
                &json!({"type": "error", "error": {"type": "overloaded_error"}}).to_string(),
            ),
            Reply::status(500, "{}"),
            Reply::Sse(sse(&{
                let mut e = vec![
                    start(),
                    block_start(0, json!({"type": "text", "text": "ok"})),
                ];
                e.extend(end("end_turn"));
                e
            })),
        ])
        .await;
        let p = provider(&server, true);
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        let mut statuses = Vec::new();
        let r = complete_with_retry(&p, &text_only(), &policy, |_, e, _| {
            if let ModelError::Server { status, .. } = e {
                statuses.push(*status)
            }
        })
        .await
        .unwrap();
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert_eq!(statuses, vec![529, 500]);
    }

    #[tokio::test]
    async fn hang_times_out() {
        let server = TestServer::start(vec![Reply::Hang]).await;
        let t0 = Instant::now();
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(e, ModelError::Timeout);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn stalled_stream_times_out() {
        let server = TestServer::start(vec![Reply::SseThenStall(sse(&[
            start(),
            block_start(0, json!({"type": "text", "text": ""})),
        ]))])
        .await;
        let t0 = Instant::now();
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(e, ModelError::Timeout);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    /// A streaming provider with the given idle timeout and deadline.
    fn clocked(server: &TestServer, idle_ms: u64, deadline_ms: u64) -> AnthropicProvider {
        let mut cfg = AnthropicConfig::new("claude-test");
        cfg.base_url = server.url.clone();
        cfg.idle_timeout = Duration::from_millis(idle_ms);
        cfg.deadline = Duration::from_millis(deadline_ms);
        AnthropicProvider::new(cfg).unwrap()
    }

    /// A whole text answer in 10 events: 3 s of stream at a 300 ms gap.
    fn slow_answer() -> Vec<String> {
        let mut events = vec![start(), block_start(0, json!({"type": "text", "text": ""}))];
        events.extend((0..5).map(|_| text_delta(0, "ab")));
        events.push(block_stop(0));
        events.extend(end("end_turn"));
        sse(&events)
    }

    #[tokio::test]
    async fn live_stream_longer_than_the_idle_timeout_succeeds() {
        let server = TestServer::start(vec![Reply::SsePaced(paced(
            slow_answer(),
            Duration::from_millis(250),
        ))])
        .await;
        let t0 = Instant::now();
        let r = clocked(&server, 1000, 10_000)
            .complete(&text_only())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("ababababab"));
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn stall_mid_stream_past_the_idle_timeout_times_out() {
        let mut chunks = paced(slow_answer(), Duration::from_millis(50));
        chunks[4].0 = Duration::from_secs(2);
        let server = TestServer::start(vec![Reply::SsePaced(chunks)]).await;
        let t0 = Instant::now();
        let e = clocked(&server, 1000, 10_000)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_timed_out(&e, t0, Duration::from_millis(1000), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn deadline_ends_a_live_stream() {
        let server = TestServer::start(vec![Reply::SsePaced(paced(
            slow_answer(),
            Duration::from_millis(250),
        ))])
        .await;
        let t0 = Instant::now();
        let e = clocked(&server, 1000, 800)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_timed_out(&e, t0, Duration::from_millis(800), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn truncated_stream_is_bad_response() {
        let server = TestServer::start(vec![Reply::Sse(sse(&[
            start(),
            block_start(0, json!({"type": "text", "text": ""})),
            text_delta(0, "Hel"),
            block_stop(0),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                       "usage": {"output_tokens": 3}}),
            ),
        ]))])
        .await;
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(e, ModelError::BadResponse("truncated stream".into()));
    }

    #[tokio::test]
    async fn invalid_json_arguments_pass_through() {
        let mut events = vec![
            start(),
            block_start(
                0,
                json!({"type": "tool_use", "id": "toolu_x", "name": "fs__read", "input": {}}),
            ),
            json_delta(0, "{\"path\": "),
            json_delta(0, "'a.txt'"),
            block_stop(0),
        ];
        events.extend(end("tool_use"));
        let server = TestServer::start(vec![Reply::Sse(sse(&events))]).await;
        let r = provider(&server, true)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.tool_calls[0].arguments, "{\"path\": 'a.txt'");
        assert_eq!(r.stop_reason, StopReason::ToolUse);
    }

    #[tokio::test]
    async fn error_event_mid_stream() {
        let server = TestServer::start(vec![Reply::Sse(sse(&[
            start(),
            ping(),
            (
                "error",
                json!({"type": "error",
                       "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        ]))])
        .await;
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert!(matches!(e, ModelError::Server { status: 529, .. }), "{e:?}");
        assert!(e.retryable());
    }

    #[tokio::test]
    async fn auth_failure_never_shows_the_key() {
        let server = TestServer::start(vec![Reply::status(
            401,
            &json!({"type": "error", "error": {"type": "authentication_error",
                    "message": format!("invalid x-api-key {CANARY}")}})
            .to_string(),
        )])
        .await;
        let p = provider(&server, true);
        let e = complete_with_retry(&p, &text_only(), &RetryPolicy::default(), |_, _, _| {})
            .await
            .unwrap_err();
        assert!(matches!(e, ModelError::Auth { status: 401, .. }), "{e:?}");
        assert_eq!(server.received().len(), 1);
        assert_no_canary(&e, &e.to_string());
        assert_no_canary(&p, "");
    }

    #[test]
    fn tool_inputs() {
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(tool_input("[1]"), json!({"_raw_arguments": "[1]"}));
    }
}
