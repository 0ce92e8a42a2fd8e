//! `agent.toml`: what an agent is — model, instructions, tools with their
//! grants and limits, session limits and an optional completion check.
//!
//! Parsing is strict (`deny_unknown_fields`): a typo is refused at start
//! with the field and the reason, never ignored. Paths in the file are
//! relative to the file's directory. Validation resolves everything that can
//! be checked before a session starts (directories exist, host patterns
//! parse, env vars named for keys and secrets are set); what is resolved is
//! frozen into the session's first event, so a resumed session runs with the
//! configuration it started with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::hands::{DirGrant, Grants, HostPattern, Limits, SecretGrant};

/// In a directory grant's host path, replaced by a fresh directory name per
/// session (created at start), e.g. `out/{run}:/out:rw`.
pub const RUN_PLACEHOLDER: &str = "{run}";

/// File name looked for when `run` is given a directory.
pub const AGENT_FILE: &str = "agent.toml";

/// A parsed, unresolved `agent.toml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Agent name, shown in `longhand sessions`.
    pub name: String,
    /// System instructions, inline. Exactly one of `instructions` and
    /// `instructions_file` must be set.
    #[serde(default)]
    pub instructions: Option<String>,
    /// System instructions from a file (relative to the agent file).
    #[serde(default)]
    pub instructions_file: Option<PathBuf>,
    /// Default goal when `--goal` is not given.
    #[serde(default)]
    pub goal: Option<String>,
    /// The model.
    pub model: ModelConfig,
    /// Session limits. Defaults: see [`SessionLimits`].
    #[serde(default)]
    pub limits: SessionLimits,
    /// Tool components and their grants. Default none.
    #[serde(default)]
    pub tools: Vec<ToolConfig>,
    /// A tool call that must succeed for the session to finish. Default none:
    /// the session finishes when the model stops calling tools.
    #[serde(default)]
    pub completion: Option<CompletionCheck>,
}

/// Which model, where, with which key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// `openai` (any OpenAI-compatible server), `anthropic` or `replay`.
    pub provider: String,
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
    #[serde(default = "yes")]
    pub stream: bool,
    /// Per-request timeout. Default 120 s.
    #[serde(default = "default_request_timeout", with = "duration_text")]
    pub request_timeout: Duration,
}

fn default_max_tokens() -> u32 {
    4096
}

fn yes() -> bool {
    true
}

fn default_request_timeout() -> Duration {
    Duration::from_secs(120)
}

/// Limits of one session. Hitting one pauses the session with the reason;
/// `longhand resume --raise NAME=VALUE` continues it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionLimits {
    /// Model turns. Default 50.
    pub max_steps: u64,
    /// Input tokens summed over turns. Default 2,000,000.
    pub max_input_tokens: u64,
    /// Output tokens summed over turns. Default 200,000.
    pub max_output_tokens: u64,
    /// Tool calls. Default 200.
    pub max_tool_calls: u64,
    /// Wall time the session has been running, in seconds. Default 3600.
    pub max_wall_secs: u64,
    /// Consecutive failed tool calls or model errors before the circuit
    /// breaker pauses the session. Default 5.
    pub max_consecutive_failures: u64,
    /// The same failing call (tool + input) repeated this many times trips
    /// the breaker. Default 3.
    pub max_repeated_failure: u64,
    /// Context budget in tokens for history sent to the model. Default 100,000.
    pub context_tokens: u64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_steps: 50,
            max_input_tokens: 2_000_000,
            max_output_tokens: 200_000,
            max_tool_calls: 200,
            max_wall_secs: 3600,
            max_consecutive_failures: 5,
            max_repeated_failure: 3,
            context_tokens: 100_000,
        }
    }
}

impl SessionLimits {
    /// Names accepted by `--raise NAME=VALUE`.
    pub const NAMES: &'static [&'static str] = &[
        "max_steps",
        "max_input_tokens",
        "max_output_tokens",
        "max_tool_calls",
        "max_wall_secs",
        "max_consecutive_failures",
        "max_repeated_failure",
    ];

    /// Set limit `name` to `value`.
    pub fn set(&mut self, name: &str, value: u64) -> Result<(), String> {
        let slot = match name {
            "max_steps" => &mut self.max_steps,
            "max_input_tokens" => &mut self.max_input_tokens,
            "max_output_tokens" => &mut self.max_output_tokens,
            "max_tool_calls" => &mut self.max_tool_calls,
            "max_wall_secs" => &mut self.max_wall_secs,
            "max_consecutive_failures" => &mut self.max_consecutive_failures,
            "max_repeated_failure" => &mut self.max_repeated_failure,
            other => {
                return Err(format!(
                    "unknown limit `{other}`; one of: {}",
                    Self::NAMES.join(", ")
                ));
            }
        };
        *slot = value;
        Ok(())
    }
}

/// One tool component and what it is granted.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// A built-in name (`fs`, `http`, `json`) or a path to a `.wasm`.
    pub component: String,
    /// Pin the component's digest (`sha256:…`). Default: not pinned; the
    /// digest seen at session start is frozen into the session either way.
    #[serde(default)]
    pub digest: Option<String>,
    /// Only expose these tools of the component. Default all.
    #[serde(default)]
    pub only: Option<Vec<String>>,
    /// `HOST_PATH[:GUEST_PATH][:ro|:rw]`, host paths relative to the agent
    /// file. `{run}` in a host path becomes a new directory per session.
    #[serde(default)]
    pub dirs: Vec<String>,
    /// Outbound host patterns.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Environment variable names passed through.
    #[serde(default)]
    pub env: Vec<String>,
    /// `ENV_VAR@HOST_PATTERN[:HEADER]`.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Memory limit in MiB. Default 256.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// Per-call timeout, e.g. `30s`. Default 30 s.
    #[serde(default, with = "opt_duration_text")]
    pub timeout: Option<Duration>,
    /// Output limit in bytes. Default 1 MiB.
    #[serde(default)]
    pub max_output: Option<u64>,
}

/// A tool call whose success means the task is done.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionCheck {
    /// Tool name as the model sees it, e.g. `fs__stat`.
    pub tool: String,
    /// Its input.
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// A bad agent file: which field, and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// The agent file.
    pub path: PathBuf,
    /// What is wrong, naming the field.
    pub message: String,
}

impl AgentConfig {
    /// Read `agent.toml` (or `<dir>/agent.toml`). Returns the config and the
    /// directory its relative paths are resolved against.
    pub fn load(path: &Path) -> Result<(Self, PathBuf), ConfigError> {
        let file = if path.is_dir() {
            path.join(AGENT_FILE)
        } else {
            path.to_owned()
        };
        let err = |message: String| ConfigError {
            path: file.clone(),
            message,
        };
        let text = std::fs::read_to_string(&file).map_err(|e| err(format!("cannot read: {e}")))?;
        let config: Self = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let base = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        config.check(&base).map_err(err)?;
        Ok((config, base))
    }

    fn check(&self, base: &Path) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("`name` is empty".to_owned());
        }
        match (&self.instructions, &self.instructions_file) {
            (Some(_), Some(_)) => {
                return Err("set `instructions` or `instructions_file`, not both".to_owned());
            }
            (None, None) => {
                return Err("set `instructions` (inline) or `instructions_file`".to_owned());
            }
            _ => {}
        }
        match self.model.provider.as_str() {
            "openai" | "anthropic" => {}
            "replay" => {
                if self.model.cassette.is_none() {
                    return Err(
                        "model.cassette is required when model.provider = \"replay\"".to_owned(),
                    );
                }
            }
            other => {
                return Err(format!(
                    "model.provider `{other}` is not one of openai, anthropic, replay"
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, tool) in self.tools.iter().enumerate() {
            // `{run}` directories are created when the session starts.
            let mut tool = tool.clone();
            tool.dirs.retain(|d| !d.contains(RUN_PLACEHOLDER));
            let grants = tool
                .grants(base, |name| Some(format!("<value of {name}>")))
                .map_err(|e| format!("tools[{i}] ({}): {e}", tool.component))?;
            grants
                .validate()
                .map_err(|e| format!("tools[{i}] ({}): {e}", tool.component))?;
            if !seen.insert(tool.component.clone()) {
                return Err(format!(
                    "tools[{i}]: component `{}` is listed twice",
                    tool.component
                ));
            }
        }
        Ok(())
    }

    /// The instructions text.
    pub fn instructions_text(&self, base: &Path) -> Result<String, String> {
        match (&self.instructions, &self.instructions_file) {
            (Some(text), _) => Ok(text.clone()),
            (None, Some(file)) => std::fs::read_to_string(base.join(file))
                .map_err(|e| format!("instructions_file {}: {e}", file.display())),
            (None, None) => Err("no instructions".to_owned()),
        }
    }
}

impl ToolConfig {
    /// Resolve this tool's grants; `lookup` reads environment variables.
    pub fn grants(
        &self,
        base: &Path,
        lookup: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<Grants, String> {
        let mut grants = Grants {
            component_digest: self.digest.clone(),
            ..Grants::default()
        };
        for spec in &self.dirs {
            let mut dir = DirGrant::parse(spec).map_err(|e| e.to_string())?;
            if dir.host_path.is_relative() {
                dir.host_path = base.join(&dir.host_path);
            }
            grants.dirs.push(dir);
        }
        for spec in &self.allow_hosts {
            grants
                .hosts
                .push(HostPattern::parse(spec).map_err(|e| e.to_string())?);
        }
        let mut env = BTreeMap::new();
        for name in &self.env {
            let value = lookup(name).ok_or_else(|| format!("env {name} is not set"))?;
            env.insert(name.clone(), value);
        }
        grants.env = env;
        for spec in &self.secrets {
            grants
                .secrets
                .push(SecretGrant::parse(spec, lookup).map_err(|e| e.to_string())?);
        }
        let d = Limits::default();
        grants.limits = Limits {
            memory_bytes: self.memory_mib.map(|m| m << 20).unwrap_or(d.memory_bytes),
            timeout: self.timeout.unwrap_or(d.timeout),
            max_output_bytes: self.max_output.unwrap_or(d.max_output_bytes),
            ..d
        };
        Ok(grants)
    }
}

mod duration_text {
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

mod opt_duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| humantime::parse_duration(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}
