//! Building a provider: the `--model` flag ([`ModelFlag`]) and
//! [`build_provider`], which turns a validated [`ModelConfig`] into a
//! [`ModelProvider`]. What the names mean ([`ProviderKind`], base URLs,
//! reasoning settings) is [`spec`](super::spec)'s, below this and the wire
//! formats it builds.
//!
//! It reads no environment itself: keys come through the caller's lookup
//! function, so the CLI passes the process environment and tests pass a
//! map.

use std::str::FromStr;
use std::sync::Arc;

use super::anthropic::Anthropic;
use super::error::ModelError;
use super::http::{ApiKey, HttpConfig, HttpProvider};
use super::model_provider::ModelProvider;
use super::openai::{Chat, Family};
use super::replay::ReplayProvider;
use super::responses::Responses;
use super::spec::{
    BASE_URL_EXAMPLE, ModelConfig, ProviderKind, check_base_url, is_reasoning_model,
};

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
    /// The agent file names no model and no flag gave it one.
    #[error(
        "the agent has no [model]: add one to agent.toml (e.g. [model] provider = \"openai\", \
         model = \"gpt-4o-mini\"), or run it with --model PROVIDER:MODEL, --script FILE or \
         --cassette FILE"
    )]
    NoModel,
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
    if kind == ProviderKind::None {
        return Err(BuildError::NoModel);
    }
    let file = || {
        config
            .cassette
            .as_deref()
            .ok_or(BuildError::MissingFile(kind))
    };
    let Some(default_url) = kind.default_base_url() else {
        return Ok(match kind {
            ProviderKind::Script => {
                Arc::new(super::script::ScriptProvider::open(file()?).map_err(BuildError::Script)?)
            }
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
