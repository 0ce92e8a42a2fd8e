//! One conformance suite, run over every wire format.
//!
//! Each case is written once against [`Fixture`], which knows how one
//! format spells an answer (whole and streamed), an error, and where
//! reasoning sits in a request; the case runs for chat completions,
//! Responses and Anthropic Messages alike against the local test server
//! ([`super::testing`]), and names the format in every failure. Wire
//! specifics (request body shapes, family parameters, cache breakpoints)
//! are unit-tested beside each format.
//!
//! Waits the retry wrapper makes are tested on tokio's paused clock in
//! [`super::retry`]; here the server is real, so retries are asked with no
//! backoff and only the idle-timeout cases take wall time (well under a
//! second each).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::anthropic::Anthropic;
use super::error::{Clock, ErrorKind, ModelError};
use super::http::{Folding, HttpConfig, HttpProvider, Redactor, Wire};
use super::model_provider::ModelProvider;
use super::openai::{Chat, Family};
use super::responses::Responses;
use super::retry::{RetryPolicy, complete_with_retry};
use super::testing::{
    CANARY, Reply, TestServer, assert_no_canary, paced, sample_request, text_only,
};
use super::types::{
    Message, ModelRequest, ModelResponse, ReasoningBlock, StopReason, ToolCall, Usage, WireFormat,
};

/// How the answer ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    End,
    Tool,
    MaxTokens,
}

/// An answer, independent of any format.
#[derive(Clone)]
struct Spec {
    text: Option<&'static str>,
    /// (id, name, arguments)
    calls: Vec<(&'static str, &'static str, &'static str)>,
    reasoning: bool,
    stop: Stop,
}

/// Every answer's usage: 1,200 prompt tokens, 1,000 of them read from the
/// cache and (where the format says) 150 written to it.
const USAGE: Usage = Usage {
    input_tokens: 1200,
    output_tokens: 42,
    cached_input_tokens: 1000,
    cache_write_tokens: 150,
};

impl Spec {
    fn text(t: &'static str) -> Self {
        Spec {
            text: Some(t),
            calls: vec![],
            reasoning: false,
            stop: Stop::End,
        }
    }

    fn calls(calls: Vec<(&'static str, &'static str, &'static str)>) -> Self {
        Spec {
            text: None,
            calls,
            reasoning: false,
            stop: Stop::Tool,
        }
    }

    /// What a provider of `f`'s format must make of this answer.
    fn expected(&self, f: &dyn Fixture) -> ModelResponse {
        ModelResponse {
            text: self.text.map(str::to_owned),
            tool_calls: self
                .calls
                .iter()
                .map(|(id, name, args)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*args).into(),
                })
                .collect(),
            stop_reason: match self.stop {
                Stop::End => StopReason::EndTurn,
                Stop::Tool => StopReason::ToolUse,
                Stop::MaxTokens => StopReason::MaxTokens,
            },
            usage: f.usage(),
            reasoning: match f.reasoning_item() {
                Some(item) if self.reasoning => vec![ReasoningBlock {
                    format: f.format(),
                    item,
                }],
                _ => vec![],
            },
        }
    }
}

/// A string cut in two on a character boundary.
fn halves(s: &str) -> (&str, &str) {
    s.split_at(s.floor_char_boundary(s.len() / 2))
}

/// An SSE event with an `event:` line when `name` is not empty.
fn event(name: &str, data: &Value) -> String {
    if name.is_empty() {
        format!("data: {data}\n\n")
    } else {
        format!("event: {name}\ndata: {data}\n\n")
    }
}

/// One wire format, as the suite needs to know it.
trait Fixture: Sync {
    fn format(&self) -> WireFormat;
    /// A provider of this format with `cfg` (base URL left to the fixture).
    fn provider(&self, server: &TestServer, cfg: HttpConfig) -> Box<dyn ModelProvider>;
    /// The path requests must arrive at.
    fn path(&self) -> &'static str;
    /// The header carrying `key`, and its value.
    fn key_header(&self, key: &str) -> (&'static str, String);
    /// `spec` as a whole answer.
    fn whole(&self, spec: &Spec) -> Value;
    /// `spec` as a stream of SSE events (each one whole).
    fn events(&self, spec: &Spec) -> Vec<String>;
    /// Whether a whole answer can carry arguments that are not JSON
    /// (Anthropic's `input` is an object).
    fn whole_carries_raw_arguments(&self) -> bool {
        true
    }
    /// An error body for `status`.
    fn error_body(&self, status: u16, message: &str) -> String;
    /// An in-stream event reporting an overloaded server.
    fn stream_error(&self) -> String;
    /// The usage every answer reports, in our terms.
    fn usage(&self) -> Usage;
    /// The reasoning item an answer with reasoning carries, if the format
    /// has any.
    fn reasoning_item(&self) -> Option<Value>;
    /// The reasoning items a request body sends back.
    fn reasoning_sent(&self, body: &Value) -> Vec<Value>;
    /// Feeds a stream, split into `chunks`, to this format's fold.
    fn fold(&self, chunks: &[&[u8]]) -> Result<ModelResponse, ModelError>;
}

fn fold_with<W: Wire>(wire: &W, chunks: &[&[u8]]) -> Result<ModelResponse, ModelError> {
    let mut folding = Folding::new(wire.fold());
    for c in chunks {
        if folding.push(c, Redactor(None))? {
            return folding.finish(true);
        }
    }
    folding.finish(false)
}

fn boxed<W: Wire>(cfg: HttpConfig, wire: W) -> Box<dyn ModelProvider> {
    Box::new(HttpProvider::with_wire(cfg, wire).unwrap())
}

struct ChatFx;

impl Fixture for ChatFx {
    fn format(&self) -> WireFormat {
        WireFormat::OpenAiChat
    }
    fn provider(&self, server: &TestServer, mut cfg: HttpConfig) -> Box<dyn ModelProvider> {
        cfg.base_url = format!("{}/v1/", server.url);
        boxed(cfg, Chat::default())
    }
    fn path(&self) -> &'static str {
        "/v1/chat/completions"
    }
    fn key_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }
    fn whole(&self, spec: &Spec) -> Value {
        let mut msg = json!({"role": "assistant", "content": spec.text});
        if !spec.calls.is_empty() {
            msg["tool_calls"] = spec
                .calls
                .iter()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function",
                           "function": {"name": name, "arguments": args}})
                })
                .collect();
        }
        json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
               "choices": [{"index": 0, "message": msg, "finish_reason": chat_finish(spec.stop)}],
               "usage": chat_usage()})
    }
    fn events(&self, spec: &Spec) -> Vec<String> {
        let chunk = |delta: Value, finish: Option<&str>| {
            event(
                "",
                &json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
            )
        };
        let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        if let Some(t) = spec.text {
            let (a, b) = halves(t);
            out.push(chunk(json!({"content": a}), None));
            out.push(chunk(json!({"content": b}), None));
        }
        for (i, (id, name, args)) in spec.calls.iter().enumerate() {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                                       "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let (a, b) = halves(args);
            for piece in [a, b] {
                out.push(chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        out.push(chunk(json!({}), Some(chat_finish(spec.stop))));
        out.push(event(
            "",
            &json!({"id": "chatcmpl-1", "choices": [], "usage": chat_usage()}),
        ));
        out.push("data: [DONE]\n\n".into());
        out
    }
    fn error_body(&self, _status: u16, message: &str) -> String {
        json!({"error": {"message": message, "type": "error", "code": null}}).to_string()
    }
    fn stream_error(&self) -> String {
        event(
            "",
            &json!({"error": {"message": "upstream overloaded", "code": 502}}),
        )
    }
    fn usage(&self) -> Usage {
        Usage {
            cache_write_tokens: 0,
            ..USAGE
        }
    }
    fn reasoning_item(&self) -> Option<Value> {
        None
    }
    fn reasoning_sent(&self, _body: &Value) -> Vec<Value> {
        vec![]
    }
    fn fold(&self, chunks: &[&[u8]]) -> Result<ModelResponse, ModelError> {
        fold_with(&Chat::default(), chunks)
    }
}

fn chat_finish(stop: Stop) -> &'static str {
    match stop {
        Stop::End => "stop",
        Stop::Tool => "tool_calls",
        Stop::MaxTokens => "length",
    }
}

fn chat_usage() -> Value {
    json!({"prompt_tokens": USAGE.input_tokens, "completion_tokens": USAGE.output_tokens,
           "total_tokens": USAGE.input_tokens + USAGE.output_tokens,
           "prompt_tokens_details": {"cached_tokens": USAGE.cached_input_tokens}})
}

struct ResponsesFx;

impl ResponsesFx {
    fn wire() -> Responses {
        Responses(Family {
            reasoning: true,
            effort: None,
        })
    }

    fn output(spec: &Spec) -> Vec<Value> {
        let mut out = Vec::new();
        if spec.reasoning {
            out.extend(ResponsesFx.reasoning_item());
        }
        if let Some(t) = spec.text {
            out.push(
                json!({"type": "message", "id": "msg_1", "status": "completed",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
            );
        }
        for (i, (id, name, args)) in spec.calls.iter().enumerate() {
            out.push(
                json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": id,
                            "name": name, "arguments": args, "status": "completed"}),
            );
        }
        out
    }
}

impl Fixture for ResponsesFx {
    fn format(&self) -> WireFormat {
        WireFormat::OpenAiResponses
    }
    fn provider(&self, server: &TestServer, mut cfg: HttpConfig) -> Box<dyn ModelProvider> {
        cfg.base_url = format!("{}/v1/", server.url);
        boxed(cfg, Self::wire())
    }
    fn path(&self) -> &'static str {
        "/v1/responses"
    }
    fn key_header(&self, key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }
    fn whole(&self, spec: &Spec) -> Value {
        let incomplete = spec.stop == Stop::MaxTokens;
        json!({"id": "resp_1", "object": "response",
               "status": if incomplete { "incomplete" } else { "completed" },
               "incomplete_details": if incomplete {
                   json!({"reason": "max_output_tokens"})
               } else {
                   Value::Null
               },
               "error": null,
               "output": Self::output(spec),
               "usage": {"input_tokens": USAGE.input_tokens,
                         "input_tokens_details": {"cached_tokens": USAGE.cached_input_tokens},
                         "output_tokens": USAGE.output_tokens,
                         "output_tokens_details": {"reasoning_tokens": 7},
                         "total_tokens": USAGE.input_tokens + USAGE.output_tokens}})
    }
    fn events(&self, spec: &Spec) -> Vec<String> {
        let ev = |name: &str, mut data: Value| {
            data["type"] = json!(name);
            event(name, &data)
        };
        let mut out = vec![ev(
            "response.created",
            json!({"response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        )];
        for (i, item) in Self::output(spec).into_iter().enumerate() {
            let mut added = item.clone();
            match item["type"].as_str() {
                Some("message") => added["content"] = json!([]),
                Some("function_call") => added["arguments"] = json!(""),
                _ => {
                    added.as_object_mut().unwrap().remove("encrypted_content");
                }
            }
            out.push(ev(
                "response.output_item.added",
                json!({"output_index": i, "item": added}),
            ));
            let (name, whole) = match item["type"].as_str() {
                Some("message") => (
                    "response.output_text.delta",
                    item["content"][0]["text"].as_str().unwrap(),
                ),
                Some("function_call") => (
                    "response.function_call_arguments.delta",
                    item["arguments"].as_str().unwrap(),
                ),
                _ => ("", ""),
            };
            if !name.is_empty() {
                let (a, b) = halves(whole);
                for d in [a, b] {
                    out.push(ev(name, json!({"output_index": i, "delta": d})));
                }
            }
            out.push(ev(
                "response.output_item.done",
                json!({"output_index": i, "item": item}),
            ));
        }
        let last = if spec.stop == Stop::MaxTokens {
            "response.incomplete"
        } else {
            "response.completed"
        };
        out.push(ev(last, json!({"response": self.whole(spec)})));
        out
    }
    fn error_body(&self, _status: u16, message: &str) -> String {
        json!({"error": {"message": message, "type": "error", "code": null}}).to_string()
    }
    fn stream_error(&self) -> String {
        event(
            "response.failed",
            &json!({"type": "response.failed", "response": {"id": "resp_1", "status": "failed",
                    "error": {"code": "server_error", "message": "overloaded"}}}),
        )
    }
    fn usage(&self) -> Usage {
        Usage {
            cache_write_tokens: 0,
            ..USAGE
        }
    }
    fn reasoning_item(&self) -> Option<Value> {
        Some(json!({"type": "reasoning", "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "Thinking."}],
                    "encrypted_content": "gAAAAB-opaque-reasoning"}))
    }
    fn reasoning_sent(&self, body: &Value) -> Vec<Value> {
        body["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "reasoning")
            .cloned()
            .collect()
    }
    fn fold(&self, chunks: &[&[u8]]) -> Result<ModelResponse, ModelError> {
        fold_with(&Self::wire(), chunks)
    }
}

struct AnthropicFx;

impl AnthropicFx {
    fn usage_json(output: u64) -> Value {
        json!({"input_tokens": USAGE.input_tokens - USAGE.cached_input_tokens
                               - USAGE.cache_write_tokens,
               "cache_read_input_tokens": USAGE.cached_input_tokens,
               "cache_creation_input_tokens": USAGE.cache_write_tokens,
               "output_tokens": output})
    }

    fn stop(stop: Stop) -> &'static str {
        match stop {
            Stop::End => "end_turn",
            Stop::Tool => "tool_use",
            Stop::MaxTokens => "max_tokens",
        }
    }
}

impl Fixture for AnthropicFx {
    fn format(&self) -> WireFormat {
        WireFormat::Anthropic
    }
    fn provider(&self, server: &TestServer, mut cfg: HttpConfig) -> Box<dyn ModelProvider> {
        cfg.base_url.clone_from(&server.url);
        boxed(cfg, Anthropic::default())
    }
    fn path(&self) -> &'static str {
        "/v1/messages"
    }
    fn key_header(&self, key: &str) -> (&'static str, String) {
        ("x-api-key", key.to_owned())
    }
    fn whole(&self, spec: &Spec) -> Value {
        let mut content = Vec::new();
        if spec.reasoning {
            content.extend(self.reasoning_item());
        }
        if let Some(t) = spec.text {
            content.push(json!({"type": "text", "text": t}));
        }
        for (id, name, args) in &spec.calls {
            let input: Value = serde_json::from_str(args).unwrap();
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        }
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": content, "stop_reason": Self::stop(spec.stop), "stop_sequence": null,
               "usage": Self::usage_json(USAGE.output_tokens)})
    }
    fn events(&self, spec: &Spec) -> Vec<String> {
        let ev = |name: &str, mut data: Value| {
            data["type"] = json!(name);
            event(name, &data)
        };
        let mut out = vec![ev(
            "message_start",
            json!({"message": {"id": "msg_1", "type": "message", "role": "assistant",
                               "content": [], "model": "m", "stop_reason": null,
                               "usage": Self::usage_json(1)}}),
        )];
        let mut blocks: Vec<(Value, Vec<Value>)> = Vec::new();
        if spec.reasoning {
            let item = self.reasoning_item().unwrap();
            let (a, b) = halves(item["thinking"].as_str().unwrap());
            blocks.push((
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": a}),
                    json!({"type": "thinking_delta", "thinking": b}),
                    json!({"type": "signature_delta", "signature": item["signature"]}),
                ],
            ));
        }
        if let Some(t) = spec.text {
            let (a, b) = halves(t);
            blocks.push((
                json!({"type": "text", "text": ""}),
                vec![
                    json!({"type": "text_delta", "text": a}),
                    json!({"type": "text_delta", "text": b}),
                ],
            ));
        }
        for (id, name, args) in &spec.calls {
            let (a, b) = halves(args);
            blocks.push((
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                ["", a, b]
                    .iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ));
        }
        for (i, (start, deltas)) in blocks.into_iter().enumerate() {
            out.push(ev(
                "content_block_start",
                json!({"index": i, "content_block": start}),
            ));
            out.push(ev("ping", json!({})));
            for d in deltas {
                out.push(ev("content_block_delta", json!({"index": i, "delta": d})));
            }
            out.push(ev("content_block_stop", json!({"index": i})));
        }
        out.push(ev(
            "message_delta",
            json!({"delta": {"stop_reason": Self::stop(spec.stop), "stop_sequence": null},
                   "usage": {"output_tokens": USAGE.output_tokens}}),
        ));
        out.push(ev("message_stop", json!({})));
        out
    }
    fn whole_carries_raw_arguments(&self) -> bool {
        false
    }
    fn error_body(&self, status: u16, message: &str) -> String {
        let kind = match status {
            401 => "authentication_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            500..=599 => "api_error",
            _ => "invalid_request_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
    }
    fn stream_error(&self) -> String {
        event(
            "error",
            &json!({"type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    }
    fn usage(&self) -> Usage {
        USAGE
    }
    fn reasoning_item(&self) -> Option<Value> {
        Some(
            json!({"type": "thinking", "thinking": "The user wants a.txt; I'll read it.",
                    "signature": "EqQBCgIYAhIM-signature=="}),
        )
    }
    fn reasoning_sent(&self, body: &Value) -> Vec<Value> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .flat_map(|m| m["content"].as_array().unwrap().clone())
            .filter(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
            .collect()
    }
    fn fold(&self, chunks: &[&[u8]]) -> Result<ModelResponse, ModelError> {
        fold_with(&Anthropic::default(), chunks)
    }
}

/// Every wire format.
const FORMATS: [&dyn Fixture; 3] = [&ChatFx, &ResponsesFx, &AnthropicFx];

fn config(key: Option<&str>, stream: bool) -> HttpConfig {
    let mut cfg = HttpConfig::new("m");
    cfg.api_key = key.map(super::http::ApiKey::new);
    cfg.stream = stream;
    cfg.deadline = Duration::from_secs(10);
    cfg.idle_timeout = Duration::from_secs(5);
    cfg
}

/// `spec` answered by `f`, whole or streamed.
fn reply(f: &dyn Fixture, spec: &Spec, stream: bool) -> Reply {
    if stream {
        Reply::Sse(f.events(spec))
    } else {
        Reply::ok(f.whole(spec))
    }
}

/// Asks `req` of a server answering `spec`, both ways, for every format;
/// checks the answer and the request's path and key header.
async fn answers(spec: &Spec, req: &ModelRequest) {
    for f in FORMATS {
        for stream in [false, true] {
            let name = format!("{:?} stream={stream}", f.format());
            let server = TestServer::start(vec![reply(f, spec, stream)]).await;
            let p = f.provider(&server, config(Some(CANARY), stream));
            let got = p
                .complete(req)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, spec.expected(f), "{name}");
            let sent = &server.received()[0];
            assert_eq!(sent.path, f.path(), "{name}");
            let (header, value) = f.key_header(CANARY);
            assert_eq!(sent.header(header), Some(value.as_str()), "{name}");
            assert_eq!(sent.body["model"], "m", "{name}");
            assert_eq!(sent.body["stream"], stream, "{name}");
            assert_eq!(p.name(), f.format().as_str());
        }
    }
}

#[tokio::test]
async fn text_answer() {
    answers(&Spec::text("Hello wörld, in two halves"), &text_only()).await;
}

#[tokio::test]
async fn tool_call() {
    answers(
        &Spec::calls(vec![("call_1", "fs__read", "{\"path\":\"a.txt\"}")]),
        &sample_request(),
    )
    .await;
}

#[tokio::test]
async fn parallel_tool_calls_with_text() {
    let mut spec = Spec::calls(vec![
        ("call_1", "fs__read", "{\"path\":\"a.txt\"}"),
        ("call_2", "fs__list", "{\"dir\":\".\"}"),
        ("call_3", "fs__read", "{\"path\":\"é.txt\"}"),
    ]);
    spec.text = Some("Reading three.");
    answers(&spec, &sample_request()).await;
}

#[tokio::test]
async fn truncation_at_max_tokens() {
    let mut spec = Spec::text("This answer was cut o");
    spec.stop = Stop::MaxTokens;
    answers(&spec, &text_only()).await;
}

#[tokio::test]
async fn malformed_arguments_pass_through_untouched() {
    let spec = Spec::calls(vec![("call_x", "fs__read", "{\"path\": 'a.txt'")]);
    for f in FORMATS {
        let modes: &[bool] = if f.whole_carries_raw_arguments() {
            &[false, true]
        } else {
            &[true]
        };
        for &stream in modes {
            let server = TestServer::start(vec![reply(f, &spec, stream)]).await;
            let got = f
                .provider(&server, config(None, stream))
                .complete(&sample_request())
                .await
                .unwrap();
            assert_eq!(
                got.tool_calls[0].arguments,
                "{\"path\": 'a.txt'",
                "{:?}",
                f.format()
            );
        }
    }
}

/// A history the model left unparseable (arguments cut by `max_tokens`
/// half-way through a call) is still a valid request on every wire:
/// servers that parse earlier calls' arguments (llama.cpp answers HTTP 500
/// to every later request of the session otherwise) get a stand-in object
/// holding the model's text, and the error result stays with it.
#[tokio::test]
async fn unparseable_arguments_in_the_history_are_sent_as_a_valid_object() {
    let mut req = sample_request();
    for cut in [
        "{\"path\":",
        "[1, 2]",
        "not json at all",
        "\"a string\"",
        "",
    ] {
        if let Message::Assistant { tool_calls, .. } = &mut req.messages[1] {
            tool_calls[1].arguments = cut.into();
        }
        for f in FORMATS {
            let name = format!("{:?} {cut:?}", f.format());
            let server = TestServer::start(vec![reply(f, &Spec::text("ok"), false)]).await;
            let got = f
                .provider(&server, config(None, false))
                .complete(&req)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got.text.as_deref(), Some("ok"), "{name}");
            let sent = server.received()[0].body.to_string();
            assert!(
                sent.contains("arguments are not valid JSON"),
                "{name}: {sent}"
            );
            if !cut.is_empty() {
                assert!(sent.contains("_raw_arguments"), "{name}: {sent}");
            }
            // Arguments that parse are sent as the model wrote them.
            let kept = if f.format() == WireFormat::Anthropic {
                r#""input":{"path":"a.txt"}"#
            } else {
                r#"{\"path\":\"a.txt\"}"#
            };
            assert!(sent.contains(kept), "{name}: {sent}");
        }
    }
}

/// Roles alternate on every wire whatever the history holds: the goal
/// followed by the note on trimmed items, an operator's note after a
/// text-only answer, two answers in a row. Strict chat templates (Mistral's,
/// Gemma's in llama.cpp) refuse anything else with a 400.
#[tokio::test]
async fn consecutive_messages_of_one_role_are_sent_as_one() {
    let user = |t: &str| Message::User { text: t.into() };
    let said = |t: &str| Message::Assistant {
        text: Some(t.into()),
        tool_calls: vec![],
        reasoning: vec![],
    };
    let mut req = sample_request();
    req.messages
        .insert(1, user("[4 earlier items were left out]"));
    req.messages
        .push(user("[a message from ana, the operator] hurry"));
    req.messages.push(said("Thinking."));
    req.messages.push(said("Done thinking."));
    req.messages.push(user("And then?"));
    for f in FORMATS {
        let name = format!("{:?}", f.format());
        let server = TestServer::start(vec![reply(f, &Spec::text("ok"), false)]).await;
        let got = f
            .provider(&server, config(None, false))
            .complete(&req)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.text.as_deref(), Some("ok"), "{name}");
        let sent = server.received()[0].body.to_string();
        for part in [
            "Read a.txt",
            "earlier items",
            "hurry",
            "Done thinking",
            "And then?",
        ] {
            assert!(sent.contains(part), "{name}: {part} is sent: {sent}");
        }
    }
    // The chat server refuses the same conversation unjoined.
    let body = serde_json::json!({"messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "goal"},
        {"role": "user", "content": "[note]"},
    ]});
    let refused = super::pairing::check_wire(WireFormat::OpenAiChat, &body).unwrap_err();
    assert!(refused.contains("alternate"), "{refused}");
}

/// A context window overflow is told apart from other 4xx, by each
/// server's published words, so the loop can trim and ask again.
#[tokio::test]
async fn a_context_overflow_is_its_own_error() {
    let bodies = [
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
        r#"{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens)","type":"exceed_context_size_error"}}"#,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
    ];
    for body in bodies {
        for f in FORMATS {
            let name = format!("{:?} {body}", f.format());
            let server = TestServer::start(vec![Reply::status(400, body)]).await;
            let err = f
                .provider(&server, config(None, false))
                .complete(&text_only())
                .await
                .expect_err(&name);
            assert!(
                matches!(err, ModelError::ContextOverflow { status: 400, .. }),
                "{name}: {err:?}"
            );
            assert_eq!(err.kind(), ErrorKind::ContextOverflow);
            assert!(!err.retryable(), "{name}");
        }
    }
    // An unknown model is a plain bad request.
    let server = TestServer::start(vec![Reply::status(
        404,
        r#"{"error":{"message":"model 'x' not found"}}"#,
    )])
    .await;
    let err = ChatFx
        .provider(&server, config(None, false))
        .complete(&text_only())
        .await
        .expect_err("404");
    assert!(matches!(err, ModelError::BadRequest { .. }), "{err:?}");
}

/// The local server is as strict as the APIs about tool calls and their
/// results: a note between an answer's calls and their results is refused
/// with a 400 by every format (not retried), and the same conversation
/// put in order by `pairing::repair` is answered.
#[tokio::test]
async fn a_note_between_calls_and_results_is_refused_until_repaired() {
    let mut broken = sample_request();
    broken.messages.insert(
        3,
        Message::User {
            text: "[a message from the operator] also look at b.txt".into(),
        },
    );
    let repaired = super::pairing::repair(&broken.messages).expect("repaired");
    for f in FORMATS {
        let name = format!("{:?}", f.format());
        let server = TestServer::start(vec![reply(f, &Spec::text("ok"), false)]).await;
        let p = f.provider(&server, config(None, false));
        let err = p.complete(&broken).await.expect_err(&name);
        assert!(
            matches!(err, ModelError::BadRequest { status: 400, .. }),
            "{name}: {err}"
        );
        assert!(!err.retryable(), "{name}");
        let fixed = ModelRequest {
            messages: repaired.clone(),
            ..broken.clone()
        };
        let got = p
            .complete(&fixed)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.text.as_deref(), Some("ok"), "{name}");
        // The note reached the model, after both results.
        let sent = server.received()[1].body.to_string();
        let note = sent.find("also look at b.txt").expect("the note is sent");
        let last_result = sent.find("arguments are not valid JSON").expect("a result");
        assert!(last_result < note, "{name}: {sent}");
    }
}

#[tokio::test]
async fn without_a_key_no_key_header_is_sent() {
    for f in FORMATS {
        let server = TestServer::start(vec![reply(f, &Spec::text("hi"), false)]).await;
        f.provider(&server, config(None, false))
            .complete(&text_only())
            .await
            .unwrap();
        let sent = &server.received()[0];
        assert_eq!(sent.header(f.key_header("").0), None, "{:?}", f.format());
    }
}

/// A stream with reasoning, text, several calls and multi-byte text, cut
/// at every byte boundary (and into single bytes), gives the same answer
/// as uncut. Fed to the fold directly: thousands of HTTP exchanges would
/// test the same bytes more slowly.
#[test]
fn a_stream_split_at_every_byte_boundary_reads_the_same() {
    let mut spec = Spec::calls(vec![
        ("call_1", "fs__read", "{\"path\":\"ä.txt\"}"),
        ("call_2", "fs__list", "{\"dir\":\".\"}"),
    ]);
    spec.text = Some("Lesen: größer → kleiner");
    spec.reasoning = true;
    for f in FORMATS {
        let raw = f.events(&spec).concat().into_bytes();
        let want = spec.expected(f);
        assert_eq!(f.fold(&[&raw]).unwrap(), want, "{:?} whole", f.format());
        for k in 0..=raw.len() {
            let (a, b) = raw.split_at(k);
            assert_eq!(
                f.fold(&[a, b]).unwrap(),
                want,
                "{:?} split at {k}",
                f.format()
            );
        }
        let bytes: Vec<&[u8]> = raw.chunks(1).collect();
        assert_eq!(f.fold(&bytes).unwrap(), want, "{:?} bytewise", f.format());
    }
}

#[test]
fn a_stream_that_ends_early_is_a_retryable_truncation() {
    for f in FORMATS {
        let events = f.events(&Spec::text("Hello there"));
        let cut = events[..events.len() / 2].concat();
        let e = f.fold(&[cut.as_bytes()]).unwrap_err();
        assert_eq!(
            e,
            ModelError::BadResponse("truncated stream".into()),
            "{:?}",
            f.format()
        );
        assert!(e.retryable());
    }
}

#[tokio::test]
async fn an_error_inside_a_stream_is_a_retryable_server_error() {
    for f in FORMATS {
        let mut events = f.events(&Spec::text("Hello there"));
        events.truncate(2);
        events.push(f.stream_error());
        let server = TestServer::start(vec![Reply::Sse(events)]).await;
        let e = f
            .provider(&server, config(None, true))
            .complete(&text_only())
            .await
            .unwrap_err();
        assert!(
            matches!(e, ModelError::Server { .. }) && e.retryable(),
            "{:?}: {e:?}",
            f.format()
        );
    }
}

#[tokio::test]
async fn rate_limited_429_reports_retry_after_and_is_retried() {
    for f in FORMATS {
        let limited = |after: &str| Reply::Json {
            status: 429,
            headers: vec![("retry-after", after.into())],
            body: f.error_body(429, "slow down"),
        };
        let server = TestServer::start(vec![
            limited("7"),
            limited("0"),
            reply(f, &Spec::text("ok"), true),
        ])
        .await;
        let p = f.provider(&server, config(None, true));
        let e = p.complete(&text_only()).await.unwrap_err();
        assert_eq!(
            e,
            ModelError::RateLimited {
                retry_after: Some(Duration::from_secs(7))
            },
            "{:?}",
            f.format()
        );
        // Retry-After: 0, so the retry wrapper asks again at once.
        let mut waits = Vec::new();
        let r = complete_with_retry(&p, &text_only(), &RetryPolicy::default(), |_, e, d| {
            waits.push((e.kind(), d))
        })
        .await
        .unwrap();
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0].0, ErrorKind::RateLimited);
        assert!(waits[0].1.unwrap() < Duration::from_millis(1));
        assert_eq!(server.received().len(), 3);
    }
}

#[tokio::test]
async fn server_error_500_is_retried() {
    let no_wait = RetryPolicy {
        base_delay: Duration::ZERO,
        ..RetryPolicy::default()
    };
    for f in FORMATS {
        let server = TestServer::start(vec![
            Reply::status(500, &f.error_body(500, "boom")),
            reply(f, &Spec::text("ok"), false),
        ])
        .await;
        let p = f.provider(&server, config(None, false));
        let mut failures = Vec::new();
        let r = complete_with_retry(&p, &text_only(), &no_wait, |n, e, _| {
            failures.push((n, e.clone()))
        })
        .await
        .unwrap();
        assert_eq!(r.text.as_deref(), Some("ok"));
        assert!(
            matches!(failures[..], [(1, ModelError::Server { status: 500, .. })]),
            "{:?}: {failures:?}",
            f.format()
        );
    }
}

#[tokio::test]
async fn unauthorized_401_is_not_retried_and_never_shows_the_key() {
    for f in FORMATS {
        let server = TestServer::start(vec![Reply::status(
            401,
            &f.error_body(401, &format!("Incorrect API key provided: {CANARY}")),
        )])
        .await;
        let p = f.provider(&server, config(Some(CANARY), true));
        let mut attempts = 0;
        let e = complete_with_retry(&p, &text_only(), &RetryPolicy::default(), |_, _, d| {
            attempts += 1;
            assert_eq!(d, None, "no wait: nothing follows");
        })
        .await
        .unwrap_err();
        assert!(matches!(e, ModelError::Auth { status: 401, .. }), "{e:?}");
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(!e.retryable());
        assert_eq!((attempts, server.received().len()), (1, 1));
        assert_no_canary(&e, &e.to_string());
        assert!(e.to_string().contains("[redacted]"), "{e}");
    }
}

/// The reasoning of a tool-use answer comes back, unchanged, in the next
/// request (the one carrying the tool's result) — through the loop's one
/// conversion, `Message::from(&ModelResponse)`, and a round trip through
/// the JSON the session log stores.
#[tokio::test]
async fn reasoning_is_carried_into_the_next_request() {
    let mut spec = Spec::calls(vec![("call_1", "fs__read", "{\"path\":\"a.txt\"}")]);
    spec.reasoning = true;
    for f in FORMATS {
        let Some(item) = f.reasoning_item() else {
            continue; // chat completions carries no reasoning
        };
        for stream in [false, true] {
            let server = TestServer::start(vec![
                reply(f, &spec, stream),
                reply(f, &Spec::text("done"), stream),
            ])
            .await;
            let p = f.provider(&server, config(None, stream));
            let mut req = text_only();
            let first = p.complete(&req).await.unwrap();
            assert_eq!(first.reasoning.len(), 1, "{:?}", f.format());
            let stored: ModelResponse =
                serde_json::from_slice(&serde_json::to_vec(&first).unwrap()).unwrap();
            req.messages.push(Message::from(&stored));
            req.messages.push(Message::ToolResult {
                call_id: "call_1".into(),
                content: "contents of a".into(),
                is_error: false,
            });
            p.complete(&req).await.unwrap();
            let sent = server.received();
            assert!(f.reasoning_sent(&sent[0].body).is_empty());
            assert_eq!(
                f.reasoning_sent(&sent[1].body),
                vec![item.clone()],
                "{:?} stream={stream}",
                f.format()
            );
        }
    }
}

/// Reasoning from one format is never sent to another: a session that
/// switched provider (`--model` on a new run of the same history) drops it.
#[tokio::test]
async fn foreign_reasoning_is_not_sent() {
    for f in FORMATS {
        let mut req = text_only();
        req.messages.push(Message::Assistant {
            text: Some("Earlier.".into()),
            tool_calls: vec![],
            reasoning: FORMATS
                .iter()
                .filter(|g| g.format() != f.format())
                .filter_map(|g| {
                    g.reasoning_item().map(|item| ReasoningBlock {
                        format: g.format(),
                        item,
                    })
                })
                .collect(),
        });
        req.messages.push(Message::User {
            text: "Go on.".into(),
        });
        let server = TestServer::start(vec![reply(f, &Spec::text("ok"), false)]).await;
        f.provider(&server, config(None, false))
            .complete(&req)
            .await
            .unwrap();
        let body = &server.received()[0].body;
        assert!(
            f.reasoning_sent(body).is_empty(),
            "{:?}: {body}",
            f.format()
        );
        let own = f
            .reasoning_item()
            .map(|i| i.to_string())
            .unwrap_or_default();
        for marker in ["gAAAAB-opaque", "-signature=="] {
            assert!(
                own.contains(marker) || !body.to_string().contains(marker),
                "{:?} sent {marker}",
                f.format()
            );
        }
    }
}

#[tokio::test]
async fn the_idle_timeout_ends_a_silent_server_and_a_stalled_stream() {
    for f in FORMATS {
        let events = f.events(&Spec::text("Hello there"));
        let server =
            TestServer::start(vec![Reply::Hang, Reply::SseThenStall(events[..2].to_vec())]).await;
        let mut cfg = config(None, true);
        cfg.idle_timeout = Duration::from_millis(300);
        cfg.deadline = Duration::from_secs(30);
        let p = f.provider(&server, cfg);
        for what in ["no first byte", "stall mid-stream"] {
            let t0 = Instant::now();
            let e = p.complete(&text_only()).await.unwrap_err();
            assert_eq!(
                e,
                ModelError::Timeout(Clock::Idle {
                    after: Duration::from_millis(300),
                    streamed: true
                }),
                "{:?} {what}",
                f.format()
            );
            assert!(e.to_string().contains("request_timeout"), "{e}");
            assert!(e.retryable());
            // Far below the 30 s deadline: the idle clock fired.
            assert!(t0.elapsed() < Duration::from_secs(5), "{what}");
        }
    }
}

#[tokio::test]
async fn a_live_stream_outlasts_the_idle_timeout_but_not_the_deadline() {
    for f in FORMATS {
        let events = f.events(&Spec::text("ababab"));
        let n = events.len() as u32;
        let gap = Duration::from_millis(100);
        let server = TestServer::start(vec![
            Reply::SsePaced(paced(events.clone(), gap)),
            Reply::SsePaced(paced(events, gap)),
        ])
        .await;
        // Idle 300 ms, each gap 100 ms: the whole stream lasts longer than
        // the idle timeout and is fine.
        let mut cfg = config(None, true);
        cfg.idle_timeout = Duration::from_millis(300);
        let r = f
            .provider(&server, cfg.clone())
            .complete(&text_only())
            .await
            .unwrap_or_else(|e| panic!("{:?}: {e}", f.format()));
        assert_eq!(r.text.as_deref(), Some("ababab"));
        // A deadline shorter than the stream ends it, however lively.
        cfg.deadline = gap * n / 2;
        let e = f
            .provider(&server, cfg)
            .complete(&text_only())
            .await
            .unwrap_err();
        assert_eq!(
            e,
            ModelError::Timeout(Clock::Deadline { after: gap * n / 2 }),
            "{:?}",
            f.format()
        );
        assert!(e.to_string().contains("request_deadline"), "{e}");
    }
}
