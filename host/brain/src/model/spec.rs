//! What a model is: the settings of `[model]` ([`ModelConfig`]), the one
//! list of providers ([`ProviderKind`]), their public base URLs, the
//! reasoning settings and the rule that says which OpenAI models reason,
//! and the check of a base URL.
//!
//! This is the model room's leaf: the provider builder, the three wire
//! formats and the agent's configuration all read it, and it imports
//! nothing of theirs (nor anything outside `model/`), so none of them
//! imports another to learn a constant. The provider rules of
//! [`ModelConfig::check`] live here, with the providers they are about,
//! rather than in the agent file's validation.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A model provider, by the name `agent.toml` (`[model] provider`),
/// `--model PROVIDER:MODEL` and the session log use for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProviderKind {
    /// `openai`: any OpenAI-compatible chat-completions server (OpenAI,
    /// Ollama, vLLM, llama.cpp, OpenRouter…).
    #[serde(rename = "openai")]
    OpenAi,
    /// `openai-responses`: the OpenAI Responses API (`/responses`), which
    /// carries a reasoning model's reasoning across tool turns.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// `anthropic`: the Anthropic Messages API.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// `replay`: answers from a cassette (`model.cassette`).
    #[serde(rename = "replay")]
    Replay,
    /// `script`: answers turn *k* with the *k*-th response of a script
    /// file; set by `run --script`, not accepted in an agent file.
    #[serde(rename = "script")]
    Script,
    /// `none`: the agent file names no model (it has no `[model]`). It
    /// loads, can be locked and described, and runs once `--script`,
    /// `--cassette` or `--model` gives it one; a run without them is
    /// refused before anything is created.
    #[serde(rename = "none")]
    None,
}

impl ProviderKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [ProviderKind; 5] = [
        ProviderKind::OpenAi,
        ProviderKind::OpenAiResponses,
        ProviderKind::Anthropic,
        ProviderKind::Replay,
        ProviderKind::Script,
    ];

    /// The name, as written in `agent.toml` and `--model`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiResponses => "openai-responses",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Replay => "replay",
            ProviderKind::Script => "script",
            ProviderKind::None => "none",
        }
    }

    /// Whether the kind calls a model over HTTP (and so takes a model
    /// name, a base URL and a key): what `--model` accepts.
    pub fn is_http(self) -> bool {
        matches!(
            self,
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses | ProviderKind::Anthropic
        )
    }

    /// Whether the kind speaks one of OpenAI's wire formats.
    pub fn is_openai(self) -> bool {
        matches!(self, ProviderKind::OpenAi | ProviderKind::OpenAiResponses)
    }

    /// The public API's base URL.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => Some(OPENAI_BASE_URL),
            ProviderKind::Anthropic => Some(ANTHROPIC_BASE_URL),
            ProviderKind::Replay | ProviderKind::Script | ProviderKind::None => None,
        }
    }

    /// The variable the key is read from unless `api_key_env` names
    /// another.
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Replay | ProviderKind::Script | ProviderKind::None => None,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// So call sites and tests can compare with a name.
impl PartialEq<&str> for ProviderKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// An unknown provider name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a model provider (one of openai, openai-responses, anthropic, replay, script)"
)]
pub struct UnknownProvider(pub String);

impl FromStr for ProviderKind {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownProvider(s.to_owned()))
    }
}

/// OpenAI's public API.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's public API.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// How hard a reasoning model thinks: `[model] reasoning_effort`.
///
/// Sent as `reasoning_effort` (chat completions) or `reasoning.effort`
/// (Responses); for Anthropic it picks an extended-thinking budget (see
/// [`ReasoningEffort::thinking_budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// `minimal`.
    Minimal,
    /// `low`.
    Low,
    /// `medium` (OpenAI's default when none is sent).
    Medium,
    /// `high`.
    High,
}

impl ReasoningEffort {
    /// The name on the wire and in `agent.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }

    /// The Anthropic `thinking.budget_tokens` an effort stands for when
    /// `thinking_budget` is not set, as a share of the answer's
    /// `max_tokens` (thinking counts toward it, and the budget must stay
    /// below it): `minimal` 1,024 (the API's minimum), `low` a quarter,
    /// `medium` half, `high` three quarters — never under 1,024.
    pub fn thinking_budget(self, max_tokens: u32) -> u32 {
        let share = match self {
            ReasoningEffort::Minimal => 0,
            ReasoningEffort::Low => max_tokens / 4,
            ReasoningEffort::Medium => max_tokens / 2,
            ReasoningEffort::High => max_tokens / 4 * 3,
        };
        share.max(1024)
    }
}

/// Whether an OpenAI model name is a reasoning model: its family accepts
/// `max_completion_tokens` (not `max_tokens`), `reasoning_effort`, and only
/// the default temperature.
///
/// The rule, on the name after any `vendor/` prefix (OpenRouter's
/// `openai/o3`), case-insensitively: `o1`, `o3` and `o4`, alone or followed
/// by `-…` (`o1-mini`, `o3-2025-04-16`, `o4-mini`), and every `gpt-5…`
/// except the chat snapshots (`gpt-5-chat-latest`: a name containing
/// `-chat`). Anything else (gpt-4o, llama3.1, qwen…) is not. `[model]
/// reasoning_model = true|false` overrides the rule for names it cannot
/// know (an Azure deployment's, a fine-tune's).
pub fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let o_series = ["o1", "o3", "o4"]
        .iter()
        .any(|p| name == *p || name.strip_prefix(p).is_some_and(|r| r.starts_with('-')));
    o_series || (name.starts_with("gpt-5") && !name.contains("-chat"))
}

/// Which model, where, with which key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// `openai` (any OpenAI-compatible chat-completions server),
    /// `openai-responses` (the OpenAI Responses API), `anthropic` or
    /// `replay`. No default.
    pub provider: ProviderKind,
    /// Model name, e.g. `gpt-4o-mini`, `claude-sonnet-4-5`, `llama3.1`.
    pub model: String,
    /// Base URL; default the provider's public API.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key. Default `OPENAI_API_KEY`
    /// or `ANTHROPIC_API_KEY` by provider; a local server may need none.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Cassette for `replay` (relative to the agent file).
    #[serde(default)]
    pub cassette: Option<PathBuf>,
    /// Most tokens per answer. Default 4096.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Sampling temperature. Default: the provider's.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Stream responses. Default true.
    #[serde(default = "default_stream")]
    pub stream: bool,
    /// Idle timeout: the longest wait for the next byte of an answer,
    /// the first byte included (connecting, sending, waiting for the
    /// status line), then each gap in the body or stream. Default 120 s.
    /// The name is kept from when it bounded the whole request, so old
    /// agent files still load; a whole request is `request_deadline`'s.
    #[serde(default = "default_request_timeout", with = "duration_text")]
    pub request_timeout: Duration,
    /// The longest one request may take as a whole, stream included, however
    /// lively. Default 30 min: a long answer from a reasoning model streams
    /// for minutes, and a stall is caught by `request_timeout` well before.
    #[serde(default = "default_request_deadline", with = "duration_text")]
    pub request_deadline: Duration,
    /// `minimal`, `low`, `medium` or `high`: how hard a reasoning model
    /// thinks. Default none (the API's own default). OpenAI: sent as
    /// `reasoning_effort` (chat) or `reasoning.effort` (Responses), and
    /// refused at load for a model that is not a reasoning model.
    /// Anthropic: turns on extended thinking with the budget
    /// [`ReasoningEffort::thinking_budget`] names, unless `thinking_budget`
    /// sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Whether an OpenAI model is a reasoning model (sent
    /// `max_completion_tokens` instead of `max_tokens`, and no
    /// `temperature`). Default: by name, see
    /// [`is_reasoning_model`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_model: Option<bool>,
    /// Anthropic extended thinking: `thinking.budget_tokens`, at least
    /// 1024 and below `max_tokens`. Default none: thinking is off unless
    /// `reasoning_effort` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Anthropic prompt caching: cache breakpoints on the system prompt,
    /// the tools and the last two user turns. Default true: over a long
    /// session most input is a prefix already sent, read back at a tenth
    /// of the price. OpenAI caches prefixes by itself.
    #[serde(
        default = "default_prompt_cache",
        skip_serializing_if = "is_default_prompt_cache"
    )]
    pub prompt_cache: bool,
    /// The model's context window in tokens, which a planned session's
    /// handoff threshold is a fraction of. Default 128,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// The window assumed when `context_window` is not set.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

impl ModelConfig {
    /// What an agent file without `[model]` has: provider `none`, every
    /// knob at its default. See [`ProviderKind::None`].
    pub fn none() -> Self {
        Self {
            provider: ProviderKind::None,
            model: String::new(),
            base_url: None,
            api_key_env: None,
            cassette: None,
            max_tokens: default_max_tokens(),
            temperature: None,
            stream: default_stream(),
            request_timeout: default_request_timeout(),
            request_deadline: default_request_deadline(),
            reasoning_effort: None,
            reasoning_model: None,
            thinking_budget: None,
            prompt_cache: default_prompt_cache(),
            context_window: None,
        }
    }

    /// Checks what can be checked of the model before a session starts;
    /// the message names the field.
    pub fn check(&self) -> Result<(), String> {
        match self.provider {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses | ProviderKind::Anthropic => {}
            ProviderKind::Replay => {
                if self.cassette.is_none() {
                    return Err(
                        "model.cassette is required when model.provider = \"replay\"".to_owned(),
                    );
                }
            }
            ProviderKind::Script => {
                return Err(
                    "model.provider `script` is set by `run --script FILE`, not in an agent file"
                        .to_owned(),
                );
            }
            ProviderKind::None => return Ok(()),
        }
        for (name, value) in [
            ("request_timeout", self.request_timeout),
            ("request_deadline", self.request_deadline),
        ] {
            if value.is_zero() {
                return Err(format!(
                    "model.{name} is zero: every request would time out at once; e.g. \
                     {name} = \"120s\""
                ));
            }
        }
        if let Some(url) = &self.base_url {
            check_base_url(url).map_err(|e| {
                format!("model.base_url: {e}; e.g. base_url = \"{BASE_URL_EXAMPLE}\"")
            })?;
        }
        self.check_reasoning()
    }

    /// Reasoning settings fit the provider and the model.
    fn check_reasoning(&self) -> Result<(), String> {
        let kind = self.provider;
        if self.reasoning_model.is_some() && !kind.is_openai() {
            return Err(format!(
                "model.reasoning_model is for the openai providers, not `{kind}`"
            ));
        }
        if self.thinking_budget.is_some() && kind != ProviderKind::Anthropic {
            return Err(format!(
                "model.thinking_budget is for the anthropic provider, not `{kind}` \
                 (use reasoning_effort)"
            ));
        }
        if kind.is_openai() {
            let reasoning = self
                .reasoning_model
                .unwrap_or_else(|| is_reasoning_model(&self.model));
            if reasoning && self.temperature.is_some() {
                return Err(format!(
                    "model.temperature: `{}` is a reasoning model, which accepts only the \
                     default temperature; remove temperature (or set reasoning_model = false)",
                    self.model
                ));
            }
            if !reasoning && self.reasoning_effort.is_some() {
                return Err(format!(
                    "model.reasoning_effort: `{}` is not a reasoning model by name \
                     (o1, o3, o4, gpt-5…); set reasoning_model = true if it is one",
                    self.model
                ));
            }
        }
        if kind == ProviderKind::Anthropic {
            let budget = self.thinking_budget.or_else(|| {
                self.reasoning_effort
                    .map(|e| e.thinking_budget(self.max_tokens))
            });
            if let Some(budget) = budget {
                if budget < 1024 {
                    return Err(format!(
                        "model.thinking_budget is {budget}; the API's minimum is 1024"
                    ));
                }
                if budget >= self.max_tokens {
                    return Err(format!(
                        "model.max_tokens ({}) must exceed the thinking budget ({budget}): \
                         thinking counts toward max_tokens; raise max_tokens",
                        self.max_tokens
                    ));
                }
                if self.temperature.is_some() {
                    return Err(
                        "model.temperature: extended thinking accepts only the default \
                         temperature; remove temperature"
                            .to_owned(),
                    );
                }
            }
        }
        Ok(())
    }
}

/// Prompt caching is on unless turned off; only `false` is written.
fn is_default_prompt_cache(on: &bool) -> bool {
    *on
}

fn default_prompt_cache() -> bool {
    true
}

fn default_max_tokens() -> u32 {
    4096
}

fn default_stream() -> bool {
    true
}

fn default_request_timeout() -> Duration {
    Duration::from_secs(120)
}

fn default_request_deadline() -> Duration {
    Duration::from_secs(30 * 60)
}

/// An example base URL for messages about a bad one.
pub const BASE_URL_EXAMPLE: &str = "http://127.0.0.1:11434/v1";

/// Check a model base URL before anything uses it: an absolute `http` or
/// `https` URL with a host. A bad one is a configuration error, refused at
/// start; left to the provider it would only fail at the first request,
/// after a session was created and retries were spent on it. The message
/// says what is wrong; callers add an example in their own syntax.
pub fn check_base_url(url: &str) -> Result<(), String> {
    if url.trim().is_empty() {
        return Err("the base URL is empty (leave it out for the provider's public API)".into());
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "the scheme of `{url}` must be http or https, not `{}`",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{url}` names no host"));
    }
    Ok(())
}

/// A duration written as text (`"120s"`, `"5m"`), as humantime writes and
/// reads it: `#[serde(with = "…::duration_text")]`.
pub mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_by_name() {
        for k in ProviderKind::ALL {
            assert_eq!(k.as_str().parse::<ProviderKind>(), Ok(k));
            assert_eq!(k.to_string(), k.as_str());
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.as_str())
            );
        }
        assert!("bedrock".parse::<ProviderKind>().is_err());
        assert!("OpenAI".parse::<ProviderKind>().is_err());
    }

    #[test]
    fn reasoning_families() {
        for yes in [
            "o1",
            "o1-mini",
            "o3",
            "o3-2025-04-16",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
            "GPT-5-nano",
            "openai/o3-mini",
        ] {
            assert!(is_reasoning_model(yes), "{yes}");
        }
        for no in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1",
            "gpt-5-chat-latest",
            "llama3.1",
            "o1x",
            "oo3",
            "qwen3:o3",
            "",
        ] {
            assert!(!is_reasoning_model(no), "{no}");
        }
    }

    #[test]
    fn efforts_map_to_thinking_budgets_under_max_tokens() {
        use ReasoningEffort::*;
        assert_eq!(
            [Minimal, Low, Medium, High].map(|e| e.thinking_budget(16_000)),
            [1024, 4000, 8000, 12_000]
        );
        assert_eq!(High.thinking_budget(1200), 1024);
        for e in [Minimal, Low, Medium, High] {
            assert!(e.thinking_budget(4096) < 4096);
        }
    }
}
