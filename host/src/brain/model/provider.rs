//! Which provider, and building it: the one list of provider names
//! ([`ProviderKind`]) that `agent.toml`, `--model` and construction share,
//! the rule that says which OpenAI models are reasoning models, and
//! [`build_provider`], which turns a validated [`ModelConfig`] into a
//! [`ModelProvider`].
//!
//! It reads no environment itself: keys come through the caller's lookup
//! function, so the CLI passes the process environment and tests pass a
//! map.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::anthropic::Anthropic;
use super::http::{ApiKey, HttpConfig, HttpProvider};
use super::openai::{Chat, Family};
use super::responses::Responses;
use super::{ModelError, ModelProvider, ReplayProvider};
use crate::brain::config::{BASE_URL_EXAMPLE, ModelConfig, check_base_url};

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
    fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => Some(OPENAI_BASE_URL),
            ProviderKind::Anthropic => Some(ANTHROPIC_BASE_URL),
            ProviderKind::Replay | ProviderKind::Script => None,
        }
    }

    /// The variable the key is read from unless `api_key_env` names
    /// another.
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Replay | ProviderKind::Script => None,
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

/// A `--model PROVIDER:MODEL[@BASE_URL]` flag, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFlag {
    /// An HTTP provider (`openai`, `openai-responses` or `anthropic`).
    pub provider: ProviderKind,
    /// The model name.
    pub model: String,
    /// The base URL, checked with [`check_base_url`]; `None` for the
    /// provider's public API.
    pub base_url: Option<String>,
}

impl FromStr for ModelFlag {
    type Err = String;

    fn from_str(flag: &str) -> Result<Self, Self::Err> {
        let (provider, rest) = flag
            .split_once(':')
            .ok_or("--model takes PROVIDER:MODEL, e.g. openai:gpt-4o-mini")?;
        let provider = ProviderKind::from_str(provider)
            .ok()
            .filter(|k| k.is_http())
            .ok_or_else(|| {
                format!(
                    "--model provider `{provider}` is not openai, openai-responses or anthropic \
                     (use --cassette to replay)"
                )
            })?;
        let (model, base_url) = match rest.split_once('@') {
            Some((n, b)) => (n, Some(b.to_owned())),
            None => (rest, None),
        };
        if model.is_empty() {
            return Err(format!("--model needs a model name after `{provider}:`"));
        }
        if let Some(base) = &base_url {
            check_base_url(base).map_err(|e| {
                format!("--model {flag}: {e}; e.g. --model openai:llama3.1@{BASE_URL_EXAMPLE}")
            })?;
        }
        Ok(Self {
            provider,
            model: model.to_owned(),
            base_url,
        })
    }
}

impl ModelFlag {
    /// Points `config` at this provider, model and URL. A key variable
    /// named for another provider is forgotten (the new one's default is
    /// read), and so is a cassette.
    pub fn apply(self, config: &mut ModelConfig) {
        if config.provider != self.provider {
            config.api_key_env = None;
        }
        config.provider = self.provider;
        config.model = self.model;
        config.base_url = self.base_url;
        config.cassette = None;
    }
}

/// Building a provider failed; the caller refuses to start (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The public API was named without a key.
    #[error(
        "the {provider} provider needs an API key for {url}: export {var} (or set model.api_key_env; a local base_url needs none)"
    )]
    MissingKey {
        /// The provider.
        provider: ProviderKind,
        /// The API it would have called.
        url: String,
        /// The variable that was read.
        var: String,
    },
    /// `replay` or `script` without its file.
    #[error("model.provider = \"{0}\" needs a file (model.cassette)")]
    MissingFile(ProviderKind),
    /// The cassette cannot be read.
    #[error(transparent)]
    Cassette(#[from] super::replay::CassetteError),
    /// The script cannot be read.
    #[error("{0}")]
    Script(String),
    /// The HTTP client could not be built.
    #[error("model: {0}")]
    Client(#[from] ModelError),
}

/// Builds the provider `config` names. `env` looks up a variable (the key).
///
/// An HTTP provider pointed at its public API (`api.openai.com`,
/// `api.anthropic.com`) with no key is refused here, naming the variable
/// to set, rather than at the first request; any other base URL (Ollama,
/// vLLM, a gateway that adds the key) may go without one.
pub fn build_provider(
    config: &ModelConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ModelProvider>, BuildError> {
    let kind = config.provider;
    let file = || {
        config
            .cassette
            .as_deref()
            .ok_or(BuildError::MissingFile(kind))
    };
    let Some(default_url) = kind.default_base_url() else {
        return Ok(match kind {
            ProviderKind::Script => Arc::new(
                super::script::ScriptProvider::open(file()?).map_err(BuildError::Script)?,
            ),
            _ => Arc::new(ReplayProvider::open(file()?)?),
        });
    };
    let var = config
        .api_key_env
        .clone()
        .or_else(|| kind.default_key_env().map(str::to_owned))
        .unwrap_or_default();
    let api_key = env(&var).filter(|v| !v.is_empty()).map(ApiKey::new);
    let base_url = config
        .base_url
        .clone()
        .unwrap_or_else(|| default_url.to_owned());
    if api_key.is_none() && is_public_api(&base_url, default_url) {
        return Err(BuildError::MissingKey {
            provider: kind,
            url: base_url,
            var,
        });
    }
    let http = HttpConfig {
        base_url,
        api_key,
        model: config.model.clone(),
        stream: config.stream,
        deadline: config.request_deadline,
        idle_timeout: config.request_timeout,
    };
    let family = Family {
        reasoning: config
            .reasoning_model
            .unwrap_or_else(|| is_reasoning_model(&config.model)),
        effort: config.reasoning_effort,
    };
    Ok(match kind {
        ProviderKind::OpenAi => Arc::new(HttpProvider::with_wire(http, Chat(family))?),
        ProviderKind::OpenAiResponses => {
            Arc::new(HttpProvider::with_wire(http, Responses(family))?)
        }
        _ => Arc::new(HttpProvider::with_wire(
            http,
            Anthropic {
                thinking_budget: config.thinking_budget.or_else(|| {
                    config
                        .reasoning_effort
                        .map(|e| e.thinking_budget(config.max_tokens))
                }),
                prompt_cache: config.prompt_cache,
            },
        )?),
    })
}

/// Whether `url` is on the same host as the public API `public`.
fn is_public_api(url: &str, public: &str) -> bool {
    let host = |u: &str| {
        reqwest::Url::parse(u)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    };
    host(url).is_some() && host(url) == host(public)
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

    #[test]
    fn model_flags() {
        let f: ModelFlag = "openai-responses:o3@http://127.0.0.1:8000/v1"
            .parse()
            .unwrap();
        assert_eq!(f.provider, ProviderKind::OpenAiResponses);
        assert_eq!(f.model, "o3");
        assert_eq!(f.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
        for bad in [
            "gpt-4o",
            "replay:x",
            "script:x",
            "bedrock:x",
            "openai:",
            "openai:gpt@notaurl",
            "openai:gpt@",
            "openai:gpt@ftp://host/v1",
        ] {
            assert!(bad.parse::<ModelFlag>().is_err(), "{bad}");
        }
    }

    fn config(text: &str) -> ModelConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_public_api_without_a_key_is_refused_for_every_provider() {
        let none = |_: &str| None;
        for (kind, var) in [
            ("openai", "OPENAI_API_KEY"),
            ("openai-responses", "OPENAI_API_KEY"),
            ("anthropic", "ANTHROPIC_API_KEY"),
        ] {
            let c = config(&format!("provider = \"{kind}\"\nmodel = \"m\""));
            let e = build_provider(&c, none).err().unwrap().to_string();
            assert!(e.contains(var) && e.contains(kind), "{e}");
            // The same with a key, or against a local server without one.
            assert!(build_provider(&c, |_| Some("k".into())).is_ok());
            let c = config(&format!(
                "provider = \"{kind}\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:1/v1\""
            ));
            assert!(build_provider(&c, none).is_ok(), "{kind}");
        }
        let c = config("provider = \"openai\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"");
        let e = build_provider(&c, none).err().unwrap().to_string();
        assert!(e.contains("MY_KEY"), "{e}");
        let b = build_provider(&c, |v| (v == "MY_KEY").then(|| "k".into())).unwrap();
        assert_eq!(b.name(), "openai");
    }

    #[test]
    fn built_providers_are_named_by_their_wire_format() {
        for kind in ["openai", "openai-responses", "anthropic"] {
            let c = config(&format!(
                "provider = \"{kind}\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:1\""
            ));
            let p = build_provider(&c, |_| None).unwrap();
            assert_eq!(p.name(), kind);
            assert_eq!(p.model(), "m");
        }
        let c = config("provider = \"replay\"\nmodel = \"m\"");
        assert!(matches!(
            build_provider(&c, |_| None),
            Err(BuildError::MissingFile(ProviderKind::Replay))
        ));
    }
}
