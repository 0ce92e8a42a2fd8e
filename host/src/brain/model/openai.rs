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
//! - assistant tool calls ↔ `tool_calls[].function.{name, arguments}`, the
//!   arguments string passed through untouched both ways;
//! - tool results → `{"role":"tool","tool_call_id":…}` messages. The format
//!   has no error flag, so an error result's content is prefixed `[error] `.
//!
//! Streaming (`stream: true`, the default) reads SSE `data:` chunks,
//! concatenating `delta.content` and assembling `delta.tool_calls`
//! fragments by their `index`, until `data: [DONE]`; usage comes from the
//! last chunk (`stream_options.include_usage`). A stream that ends before
//! both `[DONE]` and any `finish_reason` is a truncated answer:
//! [`ModelError::BadResponse`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::http::{self, ApiKey, Redactor};
use super::sse::SseParser;
use super::{
    Message, ModelError, ModelProvider, ModelRequest, ModelResponse, StopReason, ToolCall, Usage,
};

/// Which request field carries `max_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every compatible server; OpenAI's
    /// reasoning models reject it. The default.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's current name, required by its
    /// reasoning models; older local servers ignore it.
    MaxCompletionTokens,
}

/// Settings of an [`OpenAiProvider`].
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// API root, without `/chat/completions`. Default
    /// [`OpenAiConfig::DEFAULT_BASE_URL`].
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>`. Default `None` (for local
    /// servers that need none).
    pub api_key: Option<ApiKey>,
    /// The model name, as the server knows it. No default.
    pub model: String,
    /// Stream the answer. Default `true`: a long answer keeps the
    /// connection busy (so idle proxies do not cut it) and a stall is
    /// caught by `idle_timeout` instead of waiting out `deadline`.
    pub stream: bool,
    /// Bound on one whole request, connect to last byte, however lively
    /// the stream. Default 30 min: long enough for a long answer from a
    /// reasoning model; a stall is `idle_timeout`'s job.
    pub deadline: Duration,
    /// Bound on every wait for the next byte of the answer: connecting and
    /// waiting for the status line, then each gap between chunks of the
    /// body (streamed or not). Default 120 s.
    pub idle_timeout: Duration,
    /// Default [`MaxTokensField::MaxTokens`].
    pub max_tokens_field: MaxTokensField,
}

impl OpenAiConfig {
    /// OpenAI's own API.
    pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

    /// The defaults above, for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: Self::DEFAULT_BASE_URL.into(),
            api_key: None,
            model: model.into(),
            stream: true,
            deadline: Duration::from_secs(30 * 60),
            idle_timeout: Duration::from_secs(120),
            max_tokens_field: MaxTokensField::default(),
        }
    }
}

/// A [`ModelProvider`] for OpenAI-compatible servers.
#[derive(Debug)]
pub struct OpenAiProvider {
    cfg: OpenAiConfig,
    url: String,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// Builds the provider (and its HTTP client); sends nothing.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, ModelError> {
        let url = format!("{}/chat/completions", http::trim_base(&cfg.base_url));
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
        let mut messages = Vec::with_capacity(req.messages.len() + 1);
        if !req.system.is_empty() {
            messages.push(json!({"role": "system", "content": req.system}));
        }
        for m in &req.messages {
            messages.push(match m {
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant { text, tool_calls } => {
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
                                    "function": {"name": c.name, "arguments": c.arguments},
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
                } => {
                    let content = if *is_error {
                        format!("[error] {content}")
                    } else {
                        content.clone()
                    };
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
            });
        }
        let mut body = json!({
            "model": self.cfg.model,
            "messages": messages,
            "stream": self.cfg.stream,
        });
        let field = match self.cfg.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body[field] = json!(req.max_tokens);
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
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
        if self.cfg.stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    async fn stream(&self, mut resp: reqwest::Response) -> Result<ModelResponse, ModelError> {
        let redact = self.redactor();
        let mut sse = SseParser::default();
        let mut text = String::new();
        let mut calls: BTreeMap<u64, ToolCall> = BTreeMap::new();
        let mut finish: Option<String> = None;
        let mut usage = Usage::default();
        let mut done = false;
        'read: while let Some(chunk) =
            http::next_chunk(&mut resp, self.cfg.idle_timeout, redact).await?
        {
            for ev in sse.push(&chunk)? {
                let data = ev.data.trim();
                if data == "[DONE]" {
                    done = true;
                    break 'read;
                }
                let v: Value = serde_json::from_str(data).map_err(|e| {
                    ModelError::BadResponse(format!(
                        "unparseable stream chunk ({e}): {}",
                        redact.clean(data)
                    ))
                })?;
                if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
                    return Err(body_error(err, redact));
                }
                if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                    usage = parse_usage(u);
                }
                let Some(choice) = v["choices"].get(0) else {
                    continue;
                };
                let delta = &choice["delta"];
                if let Some(t) = delta["content"].as_str() {
                    text.push_str(t);
                }
                for (pos, tc) in delta["tool_calls"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                {
                    // Some servers omit `index` when they send each call
                    // whole; fall back to the position in this delta.
                    let idx = tc["index"].as_u64().unwrap_or(pos as u64);
                    let call = calls.entry(idx).or_insert_with(|| ToolCall {
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
                    match &tc["function"]["arguments"] {
                        Value::String(a) => call.arguments.push_str(a),
                        Value::Null => {}
                        other => call.arguments.push_str(&other.to_string()),
                    }
                }
                if let Some(f) = choice["finish_reason"].as_str() {
                    finish = Some(f.to_owned());
                }
            }
        }
        if !done && finish.is_none() {
            return Err(ModelError::BadResponse("truncated stream".into()));
        }
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                c
            })
            .collect();
        Ok(ModelResponse {
            stop_reason: stop_reason(finish.as_deref(), !tool_calls.is_empty()),
            text: (!text.is_empty()).then_some(text),
            tool_calls,
            usage,
        })
    }
}

#[async_trait::async_trait]
impl ModelProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
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
            .body(body);
        if let Some(k) = &self.cfg.api_key {
            rb = rb.header(reqwest::header::AUTHORIZATION, k.header("Bearer ")?);
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

/// Parses a non-streamed chat completion.
fn parse_response(v: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError> {
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
        let arguments = match &tc["function"]["arguments"] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            // Some servers send the arguments as an object.
            other => other.to_string(),
        };
        let id = tc["id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map_or_else(|| format!("call_{i}"), str::to_owned);
        tool_calls.push(ToolCall {
            id,
            name: name.to_owned(),
            arguments,
        });
    }
    Ok(ModelResponse {
        stop_reason: stop_reason(choice["finish_reason"].as_str(), !tool_calls.is_empty()),
        text,
        tool_calls,
        usage: parse_usage(&v["usage"]),
    })
}

fn parse_usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
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
/// the status it names; anything else is a bad response.
fn body_error(err: &Value, redact: Redactor<'_>) -> ModelError {
    let text = err.to_string();
    match err["code"].as_u64() {
        Some(code @ 400..=599) => {
            redact.status(code as u16, &reqwest::header::HeaderMap::new(), &text)
        }
        _ => ModelError::BadResponse(format!("error in response: {}", redact.clean(&text))),
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

    fn provider(server: &TestServer, stream: bool) -> OpenAiProvider {
        let mut cfg = OpenAiConfig::new("gpt-test");
        cfg.base_url = format!("{}/v1/", server.url);
        cfg.api_key = Some(ApiKey::new(CANARY));
        cfg.stream = stream;
        cfg.deadline = Duration::from_secs(1);
        cfg.idle_timeout = Duration::from_millis(500);
        OpenAiProvider::new(cfg).unwrap()
    }

    fn completion(message: Value, finish: &str) -> Value {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        })
    }

    fn chunk(delta: Value, finish: Option<&str>) -> (&'static str, Value) {
        (
            "",
            json!({
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }),
        )
    }

    fn usage_chunk() -> (&'static str, Value) {
        (
            "",
            json!({"id": "chatcmpl-1", "choices": [],
                   "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}),
        )
    }

    fn done() -> String {
        "data: [DONE]\n\n".into()
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
        let server = TestServer::start(vec![Reply::ok(completion(
            json!({"role": "assistant", "content": "Hello there"}),
            "stop",
        ))])
        .await;
        let r = provider(&server, false)
            .complete(&text_only())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello there"));
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 5
            }
        );
        let got = &server.received()[0];
        assert_eq!(got.path, "/v1/chat/completions");
        assert_eq!(
            got.header("authorization"),
            Some(&*format!("Bearer {CANARY}"))
        );
        assert_eq!(got.body["model"], "gpt-test");
        assert_eq!(got.body["stream"], false);
        assert_eq!(got.body["max_tokens"], 100);
        assert_eq!(
            got.body["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
        assert!(got.body.get("tools").is_none());
        assert!(got.body.get("temperature").is_none());
        assert!(got.body.get("stream_options").is_none());
    }

    #[tokio::test]
    async fn tool_call_round_trip() {
        let server = TestServer::start(vec![Reply::ok(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_b", "type": "function",
                 "function": {"name": "fs__read", "arguments": "{\"path\":\"b.txt\"}"}}
            ]}),
            "tool_calls",
        ))])
        .await;
        let r = provider(&server, false)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.text, None);
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(
            r.tool_calls,
            vec![ToolCall {
                id: "call_b".into(),
                name: "fs__read".into(),
                arguments: "{\"path\":\"b.txt\"}".into()
            }]
        );

        let got = &server.received()[0];
        assert_eq!(
            got.header("authorization"),
            Some(&*format!("Bearer {CANARY}"))
        );
        assert_eq!(got.body["temperature"], json!(0.5));
        assert_eq!(
            got.body["tools"],
            json!([{"type": "function", "function": {
                "name": "fs__read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]},
            }}])
        );
        assert_eq!(
            got.body["messages"],
            json!([
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Read a.txt and c.txt"},
                {"role": "assistant", "content": "Reading.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "fs__read", "arguments": "{\"path\":\"a.txt\"}"}},
                    {"id": "call_c", "type": "function",
                     "function": {"name": "fs__read", "arguments": "{\"path\":"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
                {"role": "tool", "tool_call_id": "call_c",
                 "content": "[error] arguments are not valid JSON"},
            ])
        );
    }

    #[tokio::test]
    async fn streamed_text() {
        let mut chunks = sse(&[
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": "Hel"}), None),
            chunk(json!({"content": "lo wörld"}), None),
            chunk(json!({}), Some("stop")),
            usage_chunk(),
        ]);
        chunks.push(done());
        let server = TestServer::start(vec![Reply::Sse(chunks)]).await;
        let r = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello wörld"));
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 9,
                output_tokens: 4
            }
        );
        let got = &server.received()[0];
        assert_eq!(got.body["stream"], true);
        assert_eq!(got.body["stream_options"], json!({"include_usage": true}));
    }

    #[tokio::test]
    async fn streamed_tool_calls_fragmented() {
        let mut chunks = sse(&[
            chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": "call_1", "type": "function",
                 "function": {"name": "fs__read", "arguments": ""}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [
                {"index": 0, "function": {"arguments": "th\": \"a.t"}},
                {"index": 1, "id": "call_2", "type": "function",
                 "function": {"name": "fs__list", "arguments": "{\"dir"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 1, "function": {"arguments": "\":\".\"}"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "xt\"}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
            usage_chunk(),
        ]);
        chunks.push(done());
        // Split raw bytes further, mid-event, to exercise the SSE buffer.
        let raw: String = chunks.concat();
        let pieces: Vec<String> = raw
            .as_bytes()
            .chunks(37)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        let server = TestServer::start(vec![Reply::Sse(pieces)]).await;
        let r = provider(&server, true)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.text, None);
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "call_1".into(),
                    name: "fs__read".into(),
                    arguments: "{\"path\": \"a.txt\"}".into()
                },
                ToolCall {
                    id: "call_2".into(),
                    name: "fs__list".into(),
                    arguments: "{\"dir\":\".\"}".into()
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
                body: json!({"error": {"message": "slow down", "type": "rate_limit"}}).to_string(),
            },
            Reply::ok(completion(
                json!({"role": "assistant", "content": "ok"}),
                "stop",
            )),
        ])
        .await;
        let p = provider(&server, false);
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        let mut failures = Vec::new();
        let start = Instant::now();
        let r = complete_with_retry(&p, &text_only(), &policy, |n, e, d| {
            failures.push((n, e.clone(), d))
        })
        .await
        .unwrap();
        let elapsed = start.elapsed();
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        assert_eq!(failures.len(), 1);
        assert_eq!(
            failures[0].1,
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(1))
            }
        );
        assert!(failures[0].2.unwrap() >= Duration::from_secs(1));
    }

    #[tokio::test]
    async fn server_error_then_ok() {
        let server = TestServer::start(vec![
            Reply::status(500, "{\"error\":{\"message\":\"boom\"}}"),
            Reply::ok(completion(
                json!({"role": "assistant", "content": "ok"}),
                "stop",
            )),
        ])
        .await;
        let p = provider(&server, false);
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        let mut failures = Vec::new();
        let r = complete_with_retry(&p, &text_only(), &policy, |n, e, _| {
            failures.push((n, e.clone()))
        })
        .await
        .unwrap();
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert_eq!(failures.len(), 1);
        assert!(matches!(
            failures[0],
            (1, ModelError::Server { status: 500, .. })
        ));
        assert_eq!(server.received().len(), 2);
    }

    #[tokio::test]
    async fn hang_times_out() {
        let server = TestServer::start(vec![Reply::Hang]).await;
        let start = Instant::now();
        let e = provider(&server, false)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(e, ModelError::Timeout);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn stalled_stream_times_out() {
        let server = TestServer::start(vec![Reply::SseThenStall(sse(&[chunk(
            json!({"content": "Hel"}),
            None,
        )]))])
        .await;
        let start = Instant::now();
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(e, ModelError::Timeout);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    /// A provider with the given idle timeout and deadline.
    fn clocked(
        server: &TestServer,
        stream: bool,
        idle_ms: u64,
        deadline_ms: u64,
    ) -> OpenAiProvider {
        let mut cfg = OpenAiConfig::new("gpt-test");
        cfg.base_url = format!("{}/v1/", server.url);
        cfg.stream = stream;
        cfg.idle_timeout = Duration::from_millis(idle_ms);
        cfg.deadline = Duration::from_millis(deadline_ms);
        OpenAiProvider::new(cfg).unwrap()
    }

    /// Seven text chunks and the terminator: 8 events, so 2.4 s of stream
    /// at a 300 ms gap.
    fn slow_answer() -> Vec<String> {
        let mut events: Vec<(&str, Value)> = (0..6)
            .map(|_| chunk(json!({"content": "ab"}), None))
            .collect();
        events.push(chunk(json!({"content": "c"}), Some("stop")));
        let mut events = sse(&events);
        events.push(done());
        events
    }

    #[tokio::test]
    async fn live_stream_longer_than_the_idle_timeout_succeeds() {
        // The issue-7 defect: an event every 2 s under a 5 s timeout timed
        // out. Scaled down: every 300 ms for 2.4 s, idle timeout 1 s.
        let server = TestServer::start(vec![Reply::SsePaced(paced(
            slow_answer(),
            Duration::from_millis(300),
        ))])
        .await;
        let t0 = Instant::now();
        let r = clocked(&server, true, 1000, 10_000)
            .complete(&text_only())
            .await
            .unwrap();
        assert_eq!(r.text.as_deref(), Some("ababababababc"));
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn stall_mid_stream_past_the_idle_timeout_times_out() {
        let mut chunks = paced(slow_answer(), Duration::from_millis(50));
        chunks[3].0 = Duration::from_secs(2);
        let server = TestServer::start(vec![Reply::SsePaced(chunks)]).await;
        let t0 = Instant::now();
        let e = clocked(&server, true, 1000, 10_000)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_timed_out(&e, t0, Duration::from_millis(1000), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn deadline_ends_a_live_stream() {
        let server = TestServer::start(vec![Reply::SsePaced(paced(
            slow_answer(),
            Duration::from_millis(300),
        ))])
        .await;
        let t0 = Instant::now();
        let e = clocked(&server, true, 1000, 800)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_timed_out(&e, t0, Duration::from_millis(800), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn idle_timeout_bounds_the_first_byte() {
        // Hang never answers; the deadline is far away, so only the idle
        // timeout can end this quickly, streamed or not.
        for stream in [false, true] {
            let server = TestServer::start(vec![Reply::Hang]).await;
            let t0 = Instant::now();
            let e = clocked(&server, stream, 300, 30_000)
                .complete(&text_only())
                .await
                .unwrap_err();
            assert_eq!(e, ModelError::Timeout);
            assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        }
    }

    #[tokio::test]
    async fn truncated_stream_is_bad_response() {
        let server = TestServer::start(vec![Reply::Sse(sse(&[
            chunk(json!({"content": "Hel"}), None),
            chunk(json!({"content": "lo"}), None),
        ]))])
        .await;
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(e, ModelError::BadResponse("truncated stream".into()));
        assert!(e.retryable());
    }

    #[tokio::test]
    async fn invalid_json_arguments_pass_through() {
        let server = TestServer::start(vec![
            Reply::ok(completion(
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_x", "type": "function",
                     "function": {"name": "fs__read", "arguments": "{\"path\": 'a.txt'"}}]}),
                "tool_calls",
            )),
            Reply::Sse({
                let mut c = sse(&[
                    chunk(
                        json!({"tool_calls": [{"index": 0, "id": "call_y",
                        "function": {"name": "fs__read", "arguments": "{path: "}}]}),
                        None,
                    ),
                    chunk(
                        json!({"tool_calls": [{"index": 0,
                        "function": {"arguments": "a.txt"}}]}),
                        Some("tool_calls"),
                    ),
                ]);
                c.push(done());
                c
            }),
        ])
        .await;
        let r = provider(&server, false)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.tool_calls[0].arguments, "{\"path\": 'a.txt'");
        let r = provider(&server, true)
            .complete(&sample_request())
            .await
            .unwrap();
        assert_eq!(r.tool_calls[0].arguments, "{path: a.txt");
    }

    #[tokio::test]
    async fn error_inside_stream() {
        let server = TestServer::start(vec![Reply::Sse(sse(&[
            chunk(json!({"content": "Hel"}), None),
            (
                "",
                json!({"error": {"message": "upstream overloaded", "code": 502}}),
            ),
        ]))])
        .await;
        let e = provider(&server, true)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert!(matches!(e, ModelError::Server { status: 502, .. }), "{e:?}");
    }

    #[tokio::test]
    async fn auth_failure_is_final_and_never_shows_the_key() {
        let server = TestServer::start(vec![Reply::status(
            401,
            &json!({"error": {"message": format!("Incorrect API key provided: {CANARY}")}})
                .to_string(),
        )])
        .await;
        let p = provider(&server, false);
        let mut n = 0;
        let e = complete_with_retry(&p, &text_only(), &RetryPolicy::default(), |_, _, _| n += 1)
            .await
            .unwrap_err();
        assert!(matches!(e, ModelError::Auth { status: 401, .. }), "{e:?}");
        assert!(!e.retryable());
        assert_eq!(n, 1);
        assert_eq!(server.received().len(), 1);
        assert_no_canary(&e, &e.to_string());
        assert!(e.to_string().contains("[redacted]"));
        assert_no_canary(&p, "");
    }

    #[tokio::test]
    async fn local_server_without_key() {
        let server = TestServer::start(vec![Reply::ok(completion(
            json!({"role": "assistant", "content": "hi"}),
            "stop",
        ))])
        .await;
        let mut cfg = OpenAiConfig::new("llama3");
        cfg.base_url = server.url.clone();
        cfg.stream = false;
        cfg.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        let p = OpenAiProvider::new(cfg).unwrap();
        p.complete(&text_only()).await.unwrap();
        let got = &server.received()[0];
        assert_eq!(got.path, "/chat/completions");
        assert_eq!(got.header("authorization"), None);
        assert_eq!(got.body["max_completion_tokens"], 100);
        assert!(got.body.get("max_tokens").is_none());
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
