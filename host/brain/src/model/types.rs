//! Provider-neutral request and response types.
//!
//! These are what the agent loop builds and what the session log stores (as
//! JSON blobs), so they are plain serde data with a stable, documented shape.
//! Each provider translates them to and from its own wire format; nothing
//! provider-specific leaks in here.

use serde::{Deserialize, Serialize};

/// The most calls of one answer the loop records and runs. More is not a
/// plan but a flood; the rest are answered as refused. Here, below the
/// loop, because the scripted provider keeps a script's answers to the
/// same bound.
pub const MAX_CALLS_PER_ANSWER: usize = 1024;

/// One call to a model: the whole context, rebuilt by the loop every step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt. Empty means "none" (no system message is sent).
    pub system: String,
    /// The conversation, oldest first. Tool results answer the tool calls of
    /// the assistant message before them, by `call_id`.
    pub messages: Vec<Message>,
    /// Tools the model may call. Empty means tools are not offered at all.
    pub tools: Vec<ToolDef>,
    /// Upper bound on the tokens the model may produce in this answer.
    pub max_tokens: u32,
    /// Sampling temperature; `None` leaves the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The loop's turn number (1 for the first answer). Never sent on the
    /// wire and not part of the request's digest: it lets a stateless
    /// script answer by turn even after old turns were dropped from
    /// `messages` to fit the context window.
    #[serde(skip)]
    pub step: u64,
    /// The agent asking (its name), for a script that answers several
    /// agents of a tree by name. Never sent, not part of the digest.
    #[serde(skip)]
    pub agent: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The name the model calls the tool by.
    ///
    /// OpenAI and Anthropic both restrict tool names to
    /// `^[a-zA-Z0-9_-]{1,64}$`: no dots, slashes, colons or spaces. The loop
    /// therefore names a component's tool `<component>__<tool>` (for example
    /// `fs__read`) and maps it back when dispatching. Providers send names
    /// as given and do not rewrite them; see [`valid_tool_name`].
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's input (an object schema).
    pub input_schema: serde_json::Value,
}

/// Whether `name` is accepted as a tool name by the OpenAI and Anthropic
/// APIs (`^[a-zA-Z0-9_-]{1,64}$`).
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One message of the conversation.
///
/// Serialized with a `role` tag: `{"role":"user","text":…}`,
/// `{"role":"assistant","text":…,"tool_calls":[…]}`,
/// `{"role":"tool_result","call_id":…,"content":…,"is_error":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Text from the user (or from the loop speaking for the operator).
    User {
        /// The text.
        text: String,
    },
    /// A previous answer of the model, replayed as context.
    Assistant {
        /// Text the model wrote, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Tool calls the model made, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The provider's reasoning that led to this answer, sent back
        /// exactly as received to the wire format that produced it (and to
        /// no other). Absent in answers from before it existed and from
        /// providers that return none, so those serialize (and hash into a
        /// cassette's request digest) as they always did.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning: Vec<ReasoningBlock>,
    },
    /// The outcome of one tool call, sent back to the model.
    ToolResult {
        /// The [`ToolCall::id`] this answers.
        call_id: String,
        /// The tool's output, or the error the model should act on.
        content: String,
        /// Whether `content` describes a failure.
        #[serde(default)]
        is_error: bool,
    },
}

impl From<&ModelResponse> for Message {
    /// The answer as it is replayed to the model in later requests.
    fn from(response: &ModelResponse) -> Self {
        Message::Assistant {
            text: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
            reasoning: response.reasoning.clone(),
        }
    }
}

/// Opaque reasoning a provider returned with an answer and needs back
/// with the next request of the same conversation: an Anthropic
/// `thinking` or `redacted_thinking` block (its text and signature), or an
/// OpenAI Responses `reasoning` item (its id and `encrypted_content`).
///
/// The loop never reads it. Each block is tagged with the wire format that
/// produced it, and a provider sends back only its own: a signature from
/// one API means nothing to another, which would reject the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningBlock {
    /// The wire format the block came from and may be sent back to.
    pub format: WireFormat,
    /// The block or item, exactly as the provider sent it.
    pub item: serde_json::Value,
}

/// A model API's wire format. Serialized as `"openai"` (chat
/// completions), `"openai-responses"` or `"anthropic"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WireFormat {
    /// OpenAI-compatible chat completions (`/chat/completions`).
    #[serde(rename = "openai")]
    OpenAiChat,
    /// The OpenAI Responses API (`/responses`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// The Anthropic Messages API (`/v1/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
}

impl WireFormat {
    /// The name, as serialized; also the provider's name in events.
    pub fn as_str(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat => "openai",
            WireFormat::OpenAiResponses => "openai-responses",
            WireFormat::Anthropic => "anthropic",
        }
    }

    /// The items of `blocks` that came from this wire format, in order.
    pub fn own(self, blocks: &[ReasoningBlock]) -> impl Iterator<Item = &serde_json::Value> {
        blocks
            .iter()
            .filter(move |b| b.format == self)
            .map(|b| &b.item)
    }
}

/// A tool call as the model produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; tool results refer to it.
    pub id: String,
    /// The tool's name (see [`ToolDef::name`]).
    pub name: String,
    /// The arguments, as the raw text the model produced. It may be invalid
    /// JSON: providers pass it through untouched and the loop parses it,
    /// reporting a parse error back to the model as a tool result, because
    /// the model can fix its own mistake and a provider error could not.
    pub arguments: String,
}

impl ToolCall {
    /// The arguments as the JSON object every wire format's history must
    /// carry. A server that checks a request's history (llama.cpp parses
    /// every earlier call's arguments and answers HTTP 500 to the whole
    /// request when one does not parse; Anthropic wants `input` to be an
    /// object) would otherwise refuse every later request of a session
    /// whose model once wrote arguments that do not parse, such as an
    /// answer cut by `max_tokens` half-way through a call. Arguments that
    /// are not an object are sent as `{"_raw_arguments": "<text>"}`, so the
    /// model still sees what it wrote, next to the error result the loop
    /// recorded for that call; empty arguments are `{}`.
    pub fn input_object(&self) -> serde_json::Value {
        if self.arguments.trim().is_empty() {
            return serde_json::Value::Object(serde_json::Map::new());
        }
        match serde_json::from_str::<serde_json::Value>(&self.arguments) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            _ => serde_json::json!({ "_raw_arguments": self.arguments }),
        }
    }

    /// [`Self::input_object`] as the text a wire format that carries
    /// arguments as a string sends: the model's own text, byte for byte,
    /// when it already is a JSON object (so a conversation the APIs
    /// accepted is sent exactly as before), the stand-in otherwise.
    pub fn wire_arguments(&self) -> std::borrow::Cow<'_, str> {
        match serde_json::from_str::<serde_json::Value>(&self.arguments) {
            Ok(serde_json::Value::Object(_)) => std::borrow::Cow::Borrowed(&self.arguments),
            _ => std::borrow::Cow::Owned(self.input_object().to_string()),
        }
    }
}

/// A model's answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Text the model wrote, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls, in the order the model made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Tokens spent.
    pub usage: Usage,
    /// Reasoning to send back with the next request (see
    /// [`ReasoningBlock`]). Default empty; absent from answers stored
    /// before it existed, which still decode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<ReasoningBlock>,
}

/// Why the model stopped producing output.
///
/// Serialized as `"end_turn"`, `"tool_use"`, `"max_tokens"` or
/// `{"other":"<provider's reason>"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn. The default.
    #[default]
    EndTurn,
    /// The model wants its tool calls run.
    ToolUse,
    /// The answer hit `max_tokens` and is cut off.
    MaxTokens,
    /// Anything else, with the provider's own word for it (content filter,
    /// stop sequence, refusal…).
    Other(String),
}

/// Tokens spent by one call.
///
/// The same definitions for every provider: `input_tokens` is the whole
/// prompt, cached or not (Anthropic reports its uncached part alone as
/// `input_tokens`; we add its cache reads and writes back), and the two
/// cache counts are parts of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, including any the provider served from its cache or
    /// wrote to it.
    pub input_tokens: u64,
    /// Tokens the model generated (reasoning tokens included).
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache
    /// (OpenAI `cached_tokens`, Anthropic `cache_read_input_tokens`).
    /// Default 0; left out of the JSON when 0, so usage stored before it
    /// existed reads and writes the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Of `input_tokens`, those written to the prompt cache (Anthropic
    /// `cache_creation_input_tokens`; OpenAI caches without reporting it).
    /// Default 0, left out when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names() {
        assert!(valid_tool_name("fs__read"));
        assert!(valid_tool_name("a-b_C9"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("fs.read"));
        assert!(!valid_tool_name("fs/read"));
        assert!(!valid_tool_name(&"x".repeat(65)));
    }

    /// Answers and conversations stored before reasoning and cache counts
    /// existed decode, and ones without them still serialize as they did.
    #[test]
    fn old_blobs_decode_and_new_fields_stay_out_when_empty() {
        let old = serde_json::json!({
            "text": "x", "stop_reason": "tool_use",
            "tool_calls": [{"id": "c1", "name": "fs__read", "arguments": "{}"}],
            "usage": {"input_tokens": 10, "output_tokens": 2},
        });
        let r: ModelResponse = serde_json::from_value(old.clone()).unwrap();
        assert!(r.reasoning.is_empty());
        assert_eq!(r.usage.cached_input_tokens, 0);
        assert_eq!(r.usage.cache_write_tokens, 0);
        assert_eq!(serde_json::to_value(&r).unwrap(), old);
        let m = Message::from(&r);
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            serde_json::json!({"role": "assistant", "text": "x",
                               "tool_calls": [{"id": "c1", "name": "fs__read", "arguments": "{}"}]})
        );

        let with = ModelResponse {
            reasoning: vec![ReasoningBlock {
                format: WireFormat::OpenAiResponses,
                item: serde_json::json!({"type": "reasoning", "id": "rs_1"}),
            }],
            usage: Usage {
                cached_input_tokens: 8,
                ..r.usage
            },
            ..r
        };
        let v = serde_json::to_value(&with).unwrap();
        assert_eq!(v["reasoning"][0]["format"], "openai-responses");
        assert_eq!(v["usage"]["cached_input_tokens"], 8);
        assert_eq!(serde_json::from_value::<ModelResponse>(v).unwrap(), with);
        let Message::Assistant { reasoning, .. } = Message::from(&with) else {
            unreachable!("an answer becomes an assistant message")
        };
        assert_eq!(reasoning, with.reasoning);
    }

    #[test]
    fn serde_shape() {
        let m = vec![
            Message::User { text: "hi".into() },
            Message::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "fs__read".into(),
                    arguments: "{\"path\":".into(),
                }],
                reasoning: vec![],
            },
            Message::ToolResult {
                call_id: "c1".into(),
                content: "bad json".into(),
                is_error: true,
            },
        ];
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v[0], serde_json::json!({"role":"user","text":"hi"}));
        assert_eq!(v[1]["role"], "assistant");
        assert_eq!(v[1]["tool_calls"][0]["arguments"], "{\"path\":");
        assert_eq!(v[2]["role"], "tool_result");
        let back: Vec<Message> = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);

        let r = ModelResponse {
            text: Some("x".into()),
            tool_calls: vec![],
            stop_reason: StopReason::Other("content_filter".into()),
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                ..Usage::default()
            },
            reasoning: vec![],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["stop_reason"],
            serde_json::json!({"other":"content_filter"})
        );
        assert_eq!(serde_json::from_value::<ModelResponse>(v).unwrap(), r);
    }
}
