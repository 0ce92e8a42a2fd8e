//! The OpenAI Responses API: `POST {base_url}/responses`
//! (`provider = "openai-responses"`).
//!
//! Why a third wire format: a reasoning model's reasoning is lost between
//! turns in chat completions, and re-derived at every tool turn. The
//! Responses API hands it back as `reasoning` items, which this format
//! keeps and returns with the next request. Sessions are stateless on the
//! server (`store: false`): the log, not OpenAI, holds the conversation,
//! so a reasoning item travels as its `encrypted_content` (asked for with
//! `include: ["reasoning.encrypted_content"]`, reasoning models only).
//!
//! Translation, both ways:
//!
//! - `system` → `instructions` (omitted when empty);
//! - a user message → `{"role":"user","content":…}`;
//! - an assistant answer → its reasoning items exactly as received (only
//!   those of this format: [`WireFormat::own`]), then
//!   `{"role":"assistant","content":…}` for its text, then one
//!   `{"type":"function_call","call_id","name","arguments"}` item per call,
//!   the arguments passed through untouched both ways;
//! - a tool result → `{"type":"function_call_output","call_id","output"}`,
//!   prefixed `[error] ` for an error (the format has no error flag);
//! - tools → `{"type":"function","name","description","parameters",
//!   "strict":false}` (strict schemas would reject the optional fields
//!   tools declare).
//!
//! Per family as in chat completions: a reasoning model gets
//! `reasoning.effort` when set and no `temperature`; `max_output_tokens`
//! is the one limit name for every model.
//!
//! Answers: `output` items (`message` with `output_text` parts,
//! `function_call`, `reasoning`), `status` (`incomplete` with
//! `incomplete_details.reason = "max_output_tokens"` is
//! [`StopReason::MaxTokens`]), usage `input_tokens` (cached included),
//! `input_tokens_details.cached_tokens`, `output_tokens`. Streamed, the
//! events are named by `type`: `response.output_item.added` /
//! `.done` (the whole item), `response.output_text.delta`,
//! `response.function_call_arguments.delta`, then `response.completed` or
//! `response.incomplete` carrying the whole response, or
//! `response.failed` / `error`. The completed response's `output` is
//! authoritative; the items and deltas assembled on the way are used when
//! a server sends it empty. A stream that ends before its last event is
//! [`ModelError::BadResponse`]`("truncated stream")`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::ModelError;
use super::http::{HttpProvider, Redactor, StreamFold, Wire, event_json};
use super::openai::{Family, body_error, error_prefixed};
use super::spec::OPENAI_BASE_URL;
use super::sse::SseEvent;
use super::types::{
    Message, ModelRequest, ModelResponse, ReasoningBlock, StopReason, ToolCall, Usage, WireFormat,
};

/// A [`ModelProvider`](super::ModelProvider) for the OpenAI Responses API.
pub type ResponsesProvider = HttpProvider<Responses>;

/// The Responses wire format, for a model family: a reasoning model is
/// also asked for its encrypted reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Responses(pub Family);

impl Wire for Responses {
    type Fold = ResponsesFold;
    const FORMAT: WireFormat = WireFormat::OpenAiResponses;
    const DEFAULT_BASE_URL: &'static str = OPENAI_BASE_URL;
    const PATH: &'static str = "/responses";
    const KEY_HEADER: (&'static str, &'static str) = ("authorization", "Bearer ");

    fn body(&self, model: &str, stream: bool, req: &ModelRequest) -> Value {
        let mut input = Vec::with_capacity(req.messages.len());
        for m in &req.messages {
            match m {
                Message::User { text } => input.push(json!({"role": "user", "content": text})),
                Message::Assistant {
                    text,
                    tool_calls,
                    reasoning,
                } => {
                    input.extend(WireFormat::OpenAiResponses.own(reasoning).cloned());
                    if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                        input.push(json!({"role": "assistant", "content": t}));
                    }
                    input.extend(tool_calls.iter().map(|c| {
                        json!({"type": "function_call", "call_id": c.id, "name": c.name,
                               "arguments": c.wire_arguments()})
                    }));
                }
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                } => input.push(json!({"type": "function_call_output", "call_id": call_id,
                                       "output": error_prefixed(content, *is_error)})),
            }
        }
        let mut body = json!({
            "model": model,
            "input": input,
            "max_output_tokens": req.max_tokens,
            "stream": stream,
            "store": false,
        });
        if !req.system.is_empty() {
            body["instructions"] = json!(req.system);
        }
        if self.0.reasoning {
            body["include"] = json!(["reasoning.encrypted_content"]);
            if let Some(e) = self.0.effort() {
                body["reasoning"] = json!({"effort": e});
            }
        } else if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.input_schema, "strict": false})
                })
                .collect();
        }
        body
    }

    fn parse(&self, v: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError> {
        parse_response(v, redact)
    }

    fn fold(&self) -> ResponsesFold {
        ResponsesFold::default()
    }
}

/// Reads a whole response object.
fn parse_response(v: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(body_error(err, redact));
    }
    let output = v["output"]
        .as_array()
        .ok_or_else(|| ModelError::BadResponse("response has no output array".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut reasoning = Vec::new();
    for item in output {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    match part["type"].as_str() {
                        Some("output_text") => text.push_str(part["text"].as_str().unwrap_or("")),
                        Some("refusal") => text.push_str(part["refusal"].as_str().unwrap_or("")),
                        _ => {}
                    }
                }
            }
            Some("function_call") => tool_calls.push(ToolCall {
                id: item["call_id"].as_str().unwrap_or("").to_owned(),
                name: item["name"]
                    .as_str()
                    .ok_or_else(|| ModelError::BadResponse("function_call without a name".into()))?
                    .to_owned(),
                arguments: item["arguments"].as_str().unwrap_or("").to_owned(),
            }),
            Some("reasoning") => reasoning.push(ReasoningBlock {
                format: WireFormat::OpenAiResponses,
                item: item.clone(),
            }),
            _ => {} // web search and other hosted-tool items
        }
    }
    let stop_reason = match v["status"].as_str() {
        Some("incomplete") => match v["incomplete_details"]["reason"].as_str() {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_owned()),
            None => StopReason::Other("incomplete".into()),
        },
        _ if !tool_calls.is_empty() => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    };
    let u = &v["usage"];
    Ok(ModelResponse {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        stop_reason,
        usage: Usage {
            input_tokens: u["input_tokens"].as_u64().unwrap_or(0),
            output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
            cached_input_tokens: u["input_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
            cache_write_tokens: 0,
        },
        reasoning,
    })
}

/// A Responses stream being read.
#[derive(Debug, Default)]
pub struct ResponsesFold {
    /// Output items by `output_index`: as added, then whole once done.
    items: BTreeMap<u64, Value>,
    /// Items whose `output_item.done` arrived.
    done: std::collections::BTreeSet<u64>,
    /// Text and argument deltas by `output_index`.
    deltas: BTreeMap<u64, String>,
    /// The final response object.
    last: Option<Value>,
}

impl StreamFold for ResponsesFold {
    fn event(&mut self, ev: &SseEvent, redact: Redactor<'_>) -> Result<bool, ModelError> {
        let v = event_json(&ev.data, redact)?;
        let index = v["output_index"].as_u64().unwrap_or(0);
        match v["type"].as_str().unwrap_or(&ev.event) {
            "response.output_item.added" => {
                self.items.insert(index, v["item"].clone());
            }
            "response.output_item.done" => {
                self.items.insert(index, v["item"].clone());
                self.done.insert(index);
            }
            "response.output_text.delta" | "response.function_call_arguments.delta" => {
                self.deltas
                    .entry(index)
                    .or_default()
                    .push_str(v["delta"].as_str().unwrap_or(""));
            }
            "response.completed" | "response.incomplete" => {
                self.last = Some(v["response"].clone());
                return Ok(true);
            }
            "response.failed" => {
                let err = &v["response"]["error"];
                return Err(if err.is_null() {
                    ModelError::BadResponse("response failed without an error".into())
                } else {
                    body_error(err, redact)
                });
            }
            "error" => return Err(body_error(&v, redact)),
            _ => {} // created, in_progress, content parts, summaries, *.done
        }
        Ok(false)
    }

    fn finish(mut self, complete: bool) -> Result<ModelResponse, ModelError> {
        let Some(mut last) = self.last.take().filter(|_| complete) else {
            return Err(ModelError::BadResponse("truncated stream".into()));
        };
        if last["output"].as_array().is_none_or(Vec::is_empty) {
            let items = std::mem::take(&mut self.items);
            last["output"] = items
                .into_iter()
                .map(|(i, mut item)| {
                    if !self.done.contains(&i)
                        && let Some(d) = self.deltas.remove(&i)
                    {
                        match item["type"].as_str() {
                            Some("message") => {
                                item["content"] = json!([{"type": "output_text", "text": d}]);
                            }
                            Some("function_call") => item["arguments"] = json!(d),
                            _ => {}
                        }
                    }
                    item
                })
                .collect();
        }
        parse_response(&last, Redactor(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{sample_request, text_only};

    #[test]
    fn body_translates_every_message_kind() {
        let b = Responses::default().body("gpt-test", false, &sample_request());
        assert_eq!(b["model"], "gpt-test");
        assert_eq!(b["store"], false);
        assert_eq!(b["max_output_tokens"], 256);
        assert_eq!(b["instructions"], "You are terse.");
        assert_eq!(b["temperature"], json!(0.5));
        assert!(b.get("include").is_none() && b.get("reasoning").is_none());
        assert_eq!(
            b["tools"],
            json!([{"type": "function", "name": "fs__read", "description": "Read a file",
                    "parameters": {"type": "object",
                                   "properties": {"path": {"type": "string"}},
                                   "required": ["path"]},
                    "strict": false}])
        );
        assert_eq!(
            b["input"],
            json!([
                {"role": "user", "content": "Read a.txt and c.txt"},
                {"role": "assistant", "content": "Reading."},
                {"type": "function_call", "call_id": "call_a", "name": "fs__read",
                 "arguments": "{\"path\":\"a.txt\"}"},
                {"type": "function_call", "call_id": "call_c", "name": "fs__read",
                 "arguments": "{\"_raw_arguments\":\"{\\\"path\\\":\"}"},
                {"type": "function_call_output", "call_id": "call_a", "output": "contents of a"},
                {"type": "function_call_output", "call_id": "call_c",
                 "output": "[error] arguments are not valid JSON"},
            ])
        );
        let b = Responses::default().body("gpt-test", true, &text_only());
        assert!(b.get("instructions").is_none() && b.get("tools").is_none());
        assert_eq!(b["stream"], true);
    }

    /// A server whose final event carries no output: the answer is built
    /// from the items and deltas streamed before it.
    #[test]
    fn a_completed_event_without_output_falls_back_to_the_streamed_items() {
        let ev = |data: Value| SseEvent {
            event: String::new(),
            data: data.to_string(),
        };
        let mut fold = Responses::default().fold();
        for e in [
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"type": "reasoning", "id": "rs_1"}}),
            json!({"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "e"}}),
            json!({"type": "response.output_item.added", "output_index": 1,
                   "item": {"type": "message", "role": "assistant", "content": []}}),
            json!({"type": "response.output_text.delta", "output_index": 1, "delta": "Hel"}),
            json!({"type": "response.output_text.delta", "output_index": 1, "delta": "lo"}),
            json!({"type": "response.output_item.added", "output_index": 2,
                   "item": {"type": "function_call", "call_id": "c1", "name": "f",
                            "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2,
                   "delta": "{\"a\":"}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2,
                   "delta": "1}"}),
        ] {
            assert!(!fold.event(&ev(e), Redactor(None)).unwrap());
        }
        let done = json!({"type": "response.completed",
                          "response": {"status": "completed", "output": [],
                                       "usage": {"input_tokens": 5, "output_tokens": 1}}});
        assert!(fold.event(&ev(done), Redactor(None)).unwrap());
        let r = fold.finish(true).unwrap();
        assert_eq!(r.text.as_deref(), Some("Hello"));
        assert_eq!(r.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.reasoning[0].item["encrypted_content"], "e");
        assert_eq!(r.usage.input_tokens, 5);
    }

    #[test]
    fn reasoning_models_get_effort_and_encrypted_reasoning_back_but_no_temperature() {
        let wire = Responses(Family {
            reasoning: true,
            effort: Some(crate::model::spec::ReasoningEffort::Minimal),
        });
        let mut req = sample_request();
        let rs = json!({"type": "reasoning", "id": "rs_1", "summary": [],
                        "encrypted_content": "gAAA"});
        let Message::Assistant { reasoning, .. } = &mut req.messages[1] else {
            unreachable!("the sample's second message is the assistant's")
        };
        *reasoning = vec![
            ReasoningBlock {
                format: WireFormat::Anthropic,
                item: json!({"type": "thinking", "thinking": "x", "signature": "s"}),
            },
            ReasoningBlock {
                format: WireFormat::OpenAiResponses,
                item: rs.clone(),
            },
        ];
        let b = wire.body("o3", false, &req);
        assert_eq!(b["reasoning"], json!({"effort": "minimal"}));
        assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
        assert!(b.get("temperature").is_none());
        // The reasoning item precedes the turn's message and calls; the
        // Anthropic block is not sent.
        assert_eq!(b["input"][1], rs);
        assert_eq!(b["input"][2]["role"], "assistant");
        assert_eq!(b["input"].as_array().unwrap().len(), 7);
    }
}
