//! Model providers: the one place the brain talks to a language model.
//!
//! The agent loop builds a provider-neutral [`ModelRequest`], calls
//! [`ModelProvider::complete`] through [`retrying`] — the one retry loop,
//! by the rule of [`Attempts`] — whose [`RetryCaller`] is where the loop
//! writes each failed attempt (`model_failed`) and stops waiting when the
//! operator pauses or cancels, records the [`ModelResponse`] in the
//! session log, and carries on ([`complete_with_retry`] is the same loop
//! for a caller that only watches the failures). This module owns:
//!
//! - [`types`]: the request/response types, stored in the event log;
//! - `model_provider`: the [`ModelProvider`] trait every provider
//!   implements; `error`: [`ModelError`] (whose docs say who acts on each
//!   failure);
//! - [`spec`]: what a model is — `[model]`'s settings ([`ModelConfig`]),
//!   the one list of providers ([`ProviderKind`]), base URLs, reasoning
//!   settings and the OpenAI reasoning-model rule; the leaf every other
//!   file here reads;
//! - [`provider`]: `--model` and [`build_provider`];
//! - [`script`]: the scripted provider of `run --script` (answer *k* is
//!   the script's *k*-th);
//! - `http`: the one HTTP provider ([`HttpProvider`]): headers, idle
//!   timeout and deadline, status mapping, key redaction, SSE reading,
//!   shared by the three wire formats, each a small `Wire` implementation
//!   that only builds bodies and reads answers:
//! - [`openai`]: any OpenAI-compatible chat-completions server (OpenAI,
//!   Ollama, vLLM, llama.cpp, OpenRouter…);
//! - [`responses`]: the OpenAI Responses API (reasoning items carried
//!   across tool turns);
//! - [`anthropic`]: the Anthropic Messages API (thinking blocks carried
//!   across tool turns, prompt caching);
//! - [`replay`]: cassettes — recording real answers and replaying them
//!   offline, statelessly, for tests, examples and crash/resume checks;
//! - [`retry`]: backoff with jitter that honours `Retry-After`;
//! - [`pairing`]: the rule every API enforces between tool calls and
//!   their results, and the repair applied to every request the loop
//!   sends;
//! - `conformance` (tests): one suite run over every wire format against
//!   the local wire-format test server (`testing`).
//!
//! Inside the room an import points down, and a file imports the sibling
//! that owns an item, never this door: `types`, `error` and `spec` at the
//! bottom; `model_provider` on them; `sse`, `pairing`, `ratelimit`,
//! `retry`, `replay`, `script` and `http` above it; the three wire formats
//! on `http` (`responses` also on `openai`'s shared error reading);
//! `provider` (building one from `--model`) on the formats; `testing` on
//! `types` and `pairing` only, so every file's tests may use it.
//!
//! `replay::canonical_json` is hand-written where `serde_jcs` exists, and
//! stays: recorded cassettes are keyed by digests of its exact bytes (keys
//! sorted by byte, serde_json's number form), which JCS (UTF-16 key order,
//! ECMAScript numbers) would change.
//!
//! It must not touch the session store or the tool host, nor import
//! anything of `brain/` outside `model/` (the loop and the agent's
//! configuration read it, never the reverse): a provider turns
//! one request into one answer or one error, and keeps nothing between
//! calls (the recorder's cassette file is its only state). API keys are
//! held in [`ApiKey`], which never prints, and are redacted from anything a
//! server echoes into an error.

pub mod anthropic;
#[cfg(test)]
mod conformance;
mod error;
mod http;
mod model_provider;
pub mod openai;
pub mod pairing;
pub mod provider;
pub mod ratelimit;
pub mod replay;
pub mod responses;
pub mod retry;
pub mod script;
pub mod spec;
mod sse;
pub mod types;

#[cfg(test)]
mod testing;

pub use anthropic::AnthropicProvider;
pub use error::{Clock, ErrorKind, ModelError};
pub use http::{ApiKey, HttpConfig, HttpProvider};
pub use model_provider::ModelProvider;
pub use openai::OpenAiProvider;
pub use provider::{BuildError, ModelFlag, build_provider};
pub use replay::{RecordingProvider, ReplayProvider};
pub use responses::ResponsesProvider;
pub use retry::{Attempts, Retried, RetryCaller, RetryPolicy, complete_with_retry, retrying};
pub use spec::{ModelConfig, ProviderKind, ReasoningEffort, is_reasoning_model};
pub use types::{
    MAX_CALLS_PER_ANSWER, Message, ModelRequest, ModelResponse, ReasoningBlock, StopReason,
    ToolCall, ToolDef, Usage, WireFormat, valid_tool_name,
};
