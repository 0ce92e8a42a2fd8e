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
//!
//! This file holds the types, their defaults and [`ConfigError`]: the
//! bottom of `agent/`, importing nothing of it. Loading and checking a
//! file is `check`'s, which sits on this one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::model::spec::{
    BASE_URL_EXAMPLE, DEFAULT_CONTEXT_WINDOW, ModelConfig, check_base_url, duration_text,
};
use longhand_hands::{DirSpec, GrantError, GrantSpec, Grants, LimitSpec};

/// In a directory grant's host path, replaced by a fresh directory name per
/// session (created at start), e.g. `out/{run}:/out:rw`.
pub const RUN_PLACEHOLDER: &str = "{run}";

/// File name looked for when `run` is given a directory.
pub const AGENT_FILE: &str = "agent.toml";

/// A bad agent file: which field, and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// The agent file.
    pub path: PathBuf,
    /// What is wrong, naming the field.
    pub message: String,
}

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
    /// The model. Default none (provider `none`): a tools-only or scripted
    /// agent needs no model; running one live without `--script`,
    /// `--cassette` or `--model` is refused before anything is created.
    #[serde(default = "ModelConfig::none")]
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
    /// Run the goal as a plan of tasks with checks (`[plan]`). Default:
    /// none, a single loop.
    #[serde(default)]
    pub plan: Option<PlanConfig>,
    /// Models of the other roles (`[roles.planner]`, `[roles.judge]`);
    /// each defaults to `[model]`.
    #[serde(default)]
    pub roles: RolesConfig,
    /// Native command checks a plan may name (`[checks.<name>]`): the
    /// operator writes the argv here; a plan only names it.
    #[serde(default)]
    pub checks: std::collections::BTreeMap<String, crate::checks::resolve::CommandCheckConfig>,
    /// Memory scopes read into contexts and granted to the memory tools.
    /// Default: none.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// Which tool calls wait for a person's approval, by tool name
    /// (`fs__write`), component (`fs`) or `*`, most specific first:
    /// `never` (default), `writes` (calls whose effect is not read-only) or
    /// `always`.
    #[serde(default)]
    pub approve: std::collections::BTreeMap<String, ApprovePolicy>,
    /// Named child agents the worker may start with the `delegate` tool
    /// (`[agents.<name>]`). Default none.
    #[serde(default)]
    pub agents: std::collections::BTreeMap<String, ChildAgentConfig>,
    /// Caps on delegation.
    #[serde(default)]
    pub delegation: DelegationConfig,
    /// Skills: one directory per skill with a `SKILL.md` (see
    /// `brain::skills`). Default `skills/` beside this file, when present.
    #[serde(default)]
    pub skills_dir: Option<PathBuf>,
    /// `[[triggers]]`: timers and webhooks that start sessions of this
    /// agent (see [`super::trigger`]).
    #[serde(default)]
    pub triggers: Vec<super::trigger::TriggerConfig>,
    /// `[[mcp]]`: external MCP servers whose tools the agent uses, each
    /// under its grants (see [`super::mcp`]). Default none.
    #[serde(default)]
    pub mcp: Vec<McpConfig>,
}

/// `[agents.<name>]`: a child agent and the budget slice each child
/// session gets out of what the parent has left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildAgentConfig {
    /// Its agent file or directory, relative to this file.
    pub path: PathBuf,
    /// What it is for, shown to the model. Default: its instructions' first line.
    #[serde(default)]
    pub description: Option<String>,
    /// Model turns per child session. Default 10.
    #[serde(default = "default_child_max_steps")]
    pub max_steps: u64,
    /// Tool calls per child session. Default 20.
    #[serde(default = "default_child_max_tool_calls")]
    pub max_tool_calls: u64,
    /// Input tokens per child session. Default 200,000.
    #[serde(default = "default_child_max_input_tokens")]
    pub max_input_tokens: u64,
    /// Output tokens per child session. Default 20,000.
    #[serde(default = "default_child_max_output_tokens")]
    pub max_output_tokens: u64,
    /// Money per child session, micro-dollars. Required (above 0) when the
    /// parent has a `max_cost_micros`: its children's costs are then slices
    /// of it. Default 0: none given.
    #[serde(default)]
    pub max_cost_micros: u64,
    /// A JSON Schema file (relative to this file) the child's answer must
    /// match: its answer is read as JSON and checked, and one that does
    /// not match is returned to the parent as an error. Default none: the
    /// answer's text is returned as is.
    #[serde(default)]
    pub result_schema: Option<PathBuf>,
}

fn default_child_max_steps() -> u64 {
    10
}
fn default_child_max_tool_calls() -> u64 {
    20
}
fn default_child_max_input_tokens() -> u64 {
    200_000
}
fn default_child_max_output_tokens() -> u64 {
    20_000
}

/// `[delegation]`: how deep and how wide a tree of sub-agents may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DelegationConfig {
    /// Levels of children below the session started by `run`. Default 2.
    pub max_depth: u32,
    /// Children one session may start, in all. Default 8.
    pub max_children: u32,
    /// Children of one answer run side by side, this many at a time.
    /// Default 4.
    pub max_concurrent: u32,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        Self {
            max_depth: 2,
            max_children: 8,
            max_concurrent: 4,
        }
    }
}

/// When a tool call waits for a person; see [`AgentConfig::approve`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovePolicy {
    /// Never.
    #[default]
    Never,
    /// Calls that change something (effect `idempotent` or `writes`).
    Writes,
    /// Every call.
    Always,
}

/// Separator between component and tool in the names the model sees.
pub const NAME_SEPARATOR: &str = "__";

/// The policy for the tool the model calls `name` (`<component>__<tool>`):
/// its own entry, else its component's, else `*`'s, else never. Beside the
/// type, not in the loop: it is what the `[approve]` table's keys mean,
/// and the loop's gate only asks it.
pub fn approve_policy(
    table: &std::collections::BTreeMap<String, ApprovePolicy>,
    name: &str,
) -> ApprovePolicy {
    let component = name.split_once(NAME_SEPARATOR).map_or(name, |(c, _)| c);
    table
        .get(name)
        .or_else(|| table.get(component))
        .or_else(|| table.get("*"))
        .copied()
        .unwrap_or_default()
}

/// `[plan]`: how a planned session runs. Its presence turns planning on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanConfig {
    /// The operator's plan (`plan.toml`, relative to the agent file).
    /// Default none: the planner writes the plan.
    pub file: Option<PathBuf>,
    /// What the planner role does: `off`, `create` (write the plan when
    /// there is no file) or `extend` (add to the file's plan before work
    /// starts). Default `create` without a file, `off` with one. A planner
    /// also revises the plan after a task fails, unless `off`.
    pub planner: Option<PlannerMode>,
    /// Attempts per task before it fails (a task may set its own).
    /// Default 3.
    pub max_attempts: u32,
    /// Worker answers in one attempt before the harness runs the task's
    /// checks without being asked. Default 40.
    pub steps_per_attempt: u64,
    /// Allow a revision to remove or change a check. Default false: such
    /// a revision is refused (and logged).
    pub allow_weaken: bool,
    /// Planner revisions accepted before a further failure pauses the
    /// session for a person. Default 5.
    pub max_revisions: u32,
    /// Tasks run side by side, each in a child session of its own (its
    /// own log, worker and checks). Default 1: one at a time, in this
    /// session. At most [`MAX_PARALLEL_TASKS`].
    pub max_parallel_tasks: u32,
    /// Replace the worker's context with a handoff once the provider
    /// reports it this full, as a fraction of `[model] context_window`.
    /// Default 0.6.
    pub handoff_at: f64,
    /// Progress notes shown in a fresh context (the newest). Default 10.
    pub progress_notes: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            file: None,
            planner: None,
            max_attempts: 3,
            steps_per_attempt: 40,
            allow_weaken: false,
            max_revisions: 5,
            max_parallel_tasks: 1,
            handoff_at: 0.6,
            progress_notes: 10,
        }
    }
}

/// The most tasks `max_parallel_tasks` may run side by side.
pub const MAX_PARALLEL_TASKS: u32 = 16;

/// What the planner role does; see [`PlanConfig::planner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlannerMode {
    /// No planner: the operator's plan only; a failed task pauses.
    Off,
    /// The planner writes the plan when there is no file.
    Create,
    /// The planner extends the operator's plan before work starts.
    Extend,
}

impl PlanConfig {
    /// The planner mode with its default filled in.
    pub fn planner_mode(&self) -> PlannerMode {
        self.planner.unwrap_or(if self.file.is_some() {
            PlannerMode::Off
        } else {
            PlannerMode::Create
        })
    }
}

/// `[roles.*]`: a model per role; each defaults to `[model]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolesConfig {
    /// Writes and revises the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<ModelConfig>,
    /// Grades tasks against their rubrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<ModelConfig>,
}

/// `[memory]`: which memory scopes the agent reads and writes. Scope names
/// are free text such as `agent:ralph-fix`, `project:acme` or `user:ana`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Scopes whose most relevant entries are put into each fresh context.
    pub read: Vec<String>,
    /// Scopes `memory__search` may search; the tool exists only when set.
    pub search: Vec<String>,
    /// The scope `memory__remember` writes to; the tool exists only when set.
    pub remember: Option<String>,
    /// Entries put into a fresh context. Default 5.
    pub top: Option<usize>,
}

impl MemoryConfig {
    /// Entries per fresh context.
    pub fn top(&self) -> usize {
        self.top.unwrap_or(5)
    }
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
    /// Context budget in tokens for a request: the system prompt, the tool
    /// definitions and the history together (the history gets what the
    /// others leave; see `SessionState::history_budget`). Default 100,000.
    pub context_tokens: u64,
    /// Bytes all tool calls together may write into granted directories
    /// (each call also has its own `max_write`). Default 1 GiB.
    pub max_write_bytes: u64,
    /// Worker answers in a row without progress — a check that passed or a
    /// call that changed something — before the session pauses (the
    /// no-progress breaker). 0 turns it off. Default 0.
    pub max_steps_without_progress: u64,
    /// Answer a read-only call the session already made (same component,
    /// tool, arguments and grants) from its recorded result, until a call
    /// that changes something. Default false.
    pub cache_read_only: bool,
    /// Money the model answers may cost, in micro-dollars (1,000,000 =
    /// 1 USD), by the prices frozen at start. 0: no limit. Default 0.
    pub max_cost_micros: u64,
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
            max_write_bytes: 1 << 30,
            max_steps_without_progress: 0,
            cache_read_only: false,
            max_cost_micros: 0,
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
        "context_tokens",
        "max_write_bytes",
        "max_steps_without_progress",
        "max_cost_micros",
    ];

    /// Set limit `name` to `value`. Beside the fields, not in the CLI:
    /// [`NAMES`](Self::NAMES) and this match are the one table from a
    /// limit's name to its field, which `--limit`, `--raise` and the
    /// fuzzed agent files all go through.
    pub fn set(&mut self, name: &str, value: u64) -> Result<(), String> {
        let slot = match name {
            "max_steps" => &mut self.max_steps,
            "max_input_tokens" => &mut self.max_input_tokens,
            "max_output_tokens" => &mut self.max_output_tokens,
            "max_tool_calls" => &mut self.max_tool_calls,
            "max_wall_secs" => &mut self.max_wall_secs,
            "max_consecutive_failures" => &mut self.max_consecutive_failures,
            "max_repeated_failure" => &mut self.max_repeated_failure,
            "context_tokens" => &mut self.context_tokens,
            "max_write_bytes" => &mut self.max_write_bytes,
            "max_steps_without_progress" => &mut self.max_steps_without_progress,
            "max_cost_micros" => &mut self.max_cost_micros,
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
    /// A built-in name (`fs`, `http`, `json`), the name of a tool
    /// installed with `longhand tool install`, or a path to a `.wasm`.
    pub component: String,
    /// Pin the component's digest (`sha256:…`). Default: not pinned; the
    /// digest seen at session start is frozen into the session either way.
    #[serde(default)]
    pub digest: Option<String>,
    /// Only expose these tools of the component. Default all.
    #[serde(default)]
    pub only: Option<Vec<String>>,
    /// Directories: `"HOST_PATH[:GUEST_PATH][:ro|:rw]"` or a table
    /// `{ host = "PATH", guest = "/workspace", mode = "ro" | "rw", symlinks =
    /// false }` (the table form has no ambiguity: use it for paths holding
    /// `:`). Host paths are relative to the agent file; `{run}` in one
    /// becomes a new directory per session. Default none.
    #[serde(default)]
    pub dirs: Vec<DirConfig>,
    /// Outbound host patterns.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Environment variable names passed through.
    #[serde(default)]
    pub env: Vec<String>,
    /// `ENV_VAR@HOST_PATTERN[:HEADER]`.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Memory limit in MiB, 1 to 4096. Default 256.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// Per-call timeout, e.g. `30s`. Default 30 s.
    #[serde(default, with = "opt_duration_text")]
    pub timeout: Option<Duration>,
    /// Output limit in bytes. Default 1 MiB.
    #[serde(default)]
    pub max_output: Option<u64>,
    /// Bytes one call may write into granted directories. Default 256 MiB.
    #[serde(default)]
    pub max_write: Option<u64>,
    /// Fuel per call, about one unit per wasm instruction. Default 20
    /// billion. Left out of the frozen config when unset, so an agent file
    /// that does not set it freezes (and digests) as it did before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Host memory one call may make the host hold, in MiB. Default 4 ×
    /// `memory_mib`. Left out of the frozen config when unset, as `fuel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory_mib: Option<u64>,
    /// Native programs the component may run (`exec`): names on PATH or
    /// absolute paths, resolved and hashed when the session starts; a
    /// program changed on disk is refused at resume. Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// Directories granted programs see read-only at their own paths (a
    /// toolchain). Relative to the agent file. Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<PathBuf>,
    /// Processes a granted program may have at once. Default 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Address space of each process a granted program starts, in MiB.
    /// Default 8192.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_memory_mib: Option<u64>,
    /// Databases the host connects to for the tool, by name:
    /// `"NAME=ENV_VAR[,mode=rw][,allow=ADDRESS]"`, the variable holding a
    /// `postgres://` URL on the host (the tool never sees it). Default
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub databases: Vec<String>,
    /// What each tool of a component written for another host does to the
    /// world, by tool name or `*` for every other one: `read-only`,
    /// `idempotent` or `writes`. Such a component exports plain functions
    /// and no `longhand:tool` world, so it cannot say; default `writes`
    /// for each (never re-run after a crash). Refused for a component that
    /// exports the world: it declares its own. Left out of the frozen
    /// config when empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub effects: std::collections::BTreeMap<String, longhand_hands::Effect>,
}

impl ToolConfig {
    /// The effect tool `spec` of `loaded` has in this agent: what the
    /// component declared, or, for one whose tools were derived from its
    /// exported functions, what `effects` says (default `writes`).
    pub fn effect_of(
        &self,
        loaded: &longhand_hands::LoadedTool,
        spec: &longhand_hands::ToolSpec,
    ) -> longhand_hands::Effect {
        if loaded.info().derived.is_none() {
            return spec.effect;
        }
        self.effects
            .get(&spec.name)
            .or_else(|| self.effects.get("*"))
            .copied()
            .unwrap_or(longhand_hands::Effect::Writes)
    }

    /// Check `effects` against the loaded component: only for derived
    /// tools, and only names it offers (or `*`). `Err`: why.
    pub fn check_effects(&self, loaded: &longhand_hands::LoadedTool) -> Result<(), String> {
        if self.effects.is_empty() {
            return Ok(());
        }
        if loaded.info().derived.is_none() {
            return Err(
                "this component exports the longhand:tool world and declares the \
                        effect of each tool itself; `effects` is only for components written \
                        for other hosts"
                    .to_owned(),
            );
        }
        let offered = loaded.tool_names();
        match self
            .effects
            .keys()
            .find(|k| *k != "*" && !offered.contains(&k.as_str()))
        {
            Some(unknown) => Err(format!(
                "`{}` is not one of its tools; it offers: {}",
                longhand_hands::bound::name(unknown),
                offered.join(", ")
            )),
            None => Ok(()),
        }
    }
}

/// One directory grant in `agent.toml`: the short string form or a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum DirConfig {
    /// `HOST_PATH[:GUEST_PATH][:ro|:rw]`.
    Short(String),
    /// `{ host, guest, mode, symlinks }`.
    Table(DirSpec),
}

impl DirConfig {
    /// The spec, with relative host paths left for [`DirSpec::resolve`].
    /// The short form is refused when it could be read two ways under
    /// `base`, as `--dir` is under the current directory.
    pub fn spec(&self, base: &Path) -> Result<DirSpec, GrantError> {
        match self {
            Self::Short(text) => DirSpec::parse(text, base),
            Self::Table(spec) => Ok(spec.clone()),
        }
    }

    /// The host path as written (for the `{run}` placeholder).
    pub fn host_text(&self) -> String {
        match self {
            Self::Short(text) => text.split(':').next().unwrap_or_default().to_owned(),
            Self::Table(spec) => spec.host_path.to_string_lossy().into_owned(),
        }
    }

    /// Replace `{run}` in the host path.
    pub fn with_run(&self, run: &str) -> Self {
        match self {
            Self::Short(text) => Self::Short(text.replace(RUN_PLACEHOLDER, run)),
            Self::Table(spec) => Self::Table(DirSpec {
                host_path: PathBuf::from(
                    spec.host_path
                        .to_string_lossy()
                        .replace(RUN_PLACEHOLDER, run),
                ),
                ..spec.clone()
            }),
        }
    }
}

impl<'de> Deserialize<'de> for DirConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = DirConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "\"HOST_PATH[:GUEST_PATH][:ro|:rw]\" or { host = \"PATH\", guest = \"/workspace\", \
                     mode = \"ro\" | \"rw\", symlinks = false }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DirConfig, E> {
                Ok(DirConfig::Short(v.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<DirConfig, A::Error> {
                DirSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(DirConfig::Table)
            }
        }
        d.deserialize_any(Visitor)
    }
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

impl ToolConfig {
    /// This tool's grant in the shape `longhand tool call` flags also
    /// produce; short-form directories are parsed against `base`.
    pub fn grant_spec(&self, base: &Path) -> Result<GrantSpec, GrantError> {
        Ok(GrantSpec {
            digest: self.digest.clone(),
            dirs: self
                .dirs
                .iter()
                .map(|d| d.spec(base))
                .collect::<Result<_, _>>()?,
            hosts: self.allow_hosts.clone(),
            env: self.env.clone(),
            secrets: self.secrets.clone(),
            programs: self.programs.clone(),
            toolchains: self.toolchains.clone(),
            databases: self.databases.clone(),
            limits: LimitSpec {
                memory_mib: self.memory_mib,
                timeout: self.timeout,
                fuel: self.fuel,
                max_output: self.max_output,
                max_write: self.max_write,
                host_memory_mib: self.host_memory_mib,
                command_memory_mib: self.command_memory_mib,
                processes: self.processes,
            },
        })
    }

    /// Resolve and validate this tool's grants (see
    /// [`GrantSpec::resolve`]); `lookup` reads environment variables.
    pub fn grants(
        &self,
        base: &Path,
        lookup: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<Grants, GrantError> {
        self.grant_spec(base)?.resolve(base, lookup)
    }
}

/// Default time one call of a server's tool may take.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[[mcp]]` table: an external MCP server and its grants (see
/// [`super::mcp`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// The server's name: its tools are `<name>__<tool>`.
    pub name: String,
    /// A stdio server: the program and its arguments. `command[0]` must be
    /// one of `programs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// A Streamable HTTP server's endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Programs a stdio server may run, as for `exec`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// Directories a stdio server sees (and is offered as roots).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<DirConfig>,
    /// Environment variables passed to a stdio server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Directories a stdio server sees read-only at their own paths (a
    /// `node_modules`, a toolchain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<PathBuf>,
    /// Only offer these of its tools. Default all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
    /// Secrets the host sends to an HTTP server (`ENV_VAR@HOST[:HEADER]`;
    /// `Authorization: Bearer …` by default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Hosts an HTTP server may also be reached at, beyond its URL's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    /// Time one call may take. Default 60 s.
    #[serde(default, with = "opt_duration_text")]
    pub timeout: Option<Duration>,
    /// Bytes of a result given to the model. Default 1 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output: Option<u64>,
    /// Address space of each process of a stdio server, MiB. Default 8192.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_memory_mib: Option<u64>,
    /// Processes a stdio server may have at once. Default 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Offer a stdio server its `dirs` as MCP roots (their guest paths).
    /// Default true. Roots are advice to the server; the sandbox is what
    /// holds it to its grant either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<bool>,
}

impl McpConfig {
    /// The form checks: a name, one transport, fields that fit it.
    pub fn check(&self) -> Result<(), String> {
        let at = format!("[[mcp]] `{}`", longhand_hands::bound::name(&self.name));
        if self.name.is_empty()
            || self.name.len() > 32
            || self.name.contains("__")
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "{at}: `name` is 1 to 32 letters, digits, `_` or `-` (no `__`): its tools are \
                 named `<name>__<tool>`"
            ));
        }
        match (self.command.is_empty(), &self.url) {
            (true, None) => {
                return Err(format!(
                    "{at}: give `command = [\"program\", \"arg\", …]` (a stdio server) or `url = \
                     \"https://…/mcp\"` (Streamable HTTP)"
                ));
            }
            (false, Some(_)) => {
                return Err(format!("{at}: give `command` or `url`, not both"));
            }
            (false, None) => {
                if !self.secrets.is_empty() || !self.allow_hosts.is_empty() {
                    return Err(format!(
                        "{at}: a stdio server runs with no network, so `secrets` and \
                         `allow_hosts` do not apply; an HTTP server is given by `url`"
                    ));
                }
                let first = &self.command[0];
                if !self.programs.iter().any(|p| names_program(first, p)) {
                    return Err(format!(
                        "{at}: `command` starts with `{}`, which is not in `programs`; grant it: \
                         programs = [\"{}\"]",
                        longhand_hands::bound::name(first),
                        longhand_hands::bound::name(first)
                    ));
                }
            }
            (true, Some(url)) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| format!("{at}: `url` {url:?} is not a URL: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                    return Err(format!(
                        "{at}: `url` must be http:// or https:// with a host, e.g. \
                         https://mcp.example.com/mcp"
                    ));
                }
                if !self.programs.is_empty()
                    || !self.dirs.is_empty()
                    || !self.env.is_empty()
                    || !self.toolchains.is_empty()
                {
                    return Err(format!(
                        "{at}: `programs`, `dirs`, `env` and `toolchains` are for a stdio server \
                         (`command`); an HTTP server runs elsewhere"
                    ));
                }
            }
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(format!("{at}: `timeout` must be above zero"));
        }
        Ok(())
    }

    /// The grant, as a component's would be written.
    pub fn grant_spec(&self, base: &Path) -> Result<GrantSpec, String> {
        let mut hosts = self.allow_hosts.clone();
        if let Some(url) = &self.url
            && let Ok(url) = reqwest::Url::parse(url)
            && let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default())
        {
            hosts.push(format!("{host}:{port}"));
        }
        Ok(GrantSpec {
            digest: None,
            dirs: self
                .dirs
                .iter()
                .map(|d| d.spec(base))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            hosts,
            env: self.env.clone(),
            secrets: self.secrets.clone(),
            programs: self.programs.clone(),
            toolchains: self.toolchains.clone(),
            databases: Vec::new(),
            limits: LimitSpec {
                timeout: Some(self.timeout.unwrap_or(DEFAULT_MCP_TIMEOUT)),
                max_output: self.max_output,
                command_memory_mib: self.command_memory_mib,
                processes: self.processes,
                ..LimitSpec::default()
            },
        })
    }
}

/// Whether a stdio server's `command[0]` names the `programs` entry
/// `entry`: the entry itself, its file name (`node` for `/usr/bin/node`),
/// or an absolute path with the entry's file name. The one rule the check
/// and the server's start both use, so the program started is the one
/// the check found.
pub fn names_program(first: &str, entry: &str) -> bool {
    first == entry
        || Path::new(entry).file_name().and_then(|n| n.to_str()) == Some(first)
        || Path::new(first).is_absolute()
            && Path::new(first).file_name() == Path::new(entry).file_name()
}

pub(crate) mod opt_duration_text {
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

#[cfg(test)]
mod dir_tests {
    use super::*;
    use longhand_hands::Access;

    #[derive(Deserialize)]
    struct Dirs {
        dirs: Vec<DirConfig>,
    }

    #[test]
    fn base_urls_are_absolute_http_with_a_host() {
        for good in ["http://127.0.0.1:11434/v1", "https://api.openai.com/v1"] {
            assert_eq!(check_base_url(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("", "is empty"),
            ("  ", "is empty"),
            ("notaurl", "is not a URL"),
            ("http://", "is not a URL"),
            ("ftp://host/v1", "must be http or https, not `ftp`"),
            ("file:///etc", "must be http or https"),
        ] {
            let err = check_base_url(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn dirs_take_the_short_and_the_table_form() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("data:2024")).unwrap();
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        let parsed: Dirs = toml::from_str(
            r#"dirs = ["src:/src:rw", { host = "data:2024", guest = "/data", mode = "ro" },
                       { host = "src", mode = "rw", symlinks = true }]"#,
        )
        .unwrap();
        let grants: Vec<_> = parsed
            .dirs
            .iter()
            .map(|d| d.spec(tmp.path()).unwrap().resolve(tmp.path()).unwrap())
            .collect();
        assert_eq!(grants[0].guest_path(), "/src");
        assert_eq!(grants[0].access(), Access::ReadWrite);
        assert!(grants[1].host_path().ends_with("data:2024"));
        assert_eq!(grants[2].guest_path(), "/workspace");
        assert!(grants[2].symlinks());
        // A typo in the table form is named.
        let err = toml::from_str::<Dirs>(r#"dirs = [{ host = "src", gest = "/x" }]"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("gest"), "{err}");
        // Symlink creation needs a read-write grant.
        let ro: Dirs = toml::from_str(r#"dirs = [{ host = "src", symlinks = true }]"#).unwrap();
        let err = ro.dirs[0].spec(tmp.path()).unwrap().resolve(tmp.path());
        assert!(err.is_err());
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use crate::model::{ProviderKind, ReasoningEffort};

    fn model(fields: &str) -> ModelConfig {
        toml::from_str(&format!("provider = \"openai\"\nmodel = \"m\"\n{fields}")).unwrap()
    }

    #[test]
    fn timeouts_default_and_old_files_still_load() {
        let m = model("");
        assert_eq!(m.request_timeout, Duration::from_secs(120));
        assert_eq!(m.request_deadline, Duration::from_secs(30 * 60));
        // A file from before `request_deadline` existed: its
        // `request_timeout` is now the idle timeout.
        let m = model("request_timeout = \"5s\"");
        assert_eq!(m.request_timeout, Duration::from_secs(5));
        assert_eq!(m.request_deadline, Duration::from_secs(30 * 60));
        let m = model("request_timeout = \"1s\"\nrequest_deadline = \"2h\"");
        assert_eq!(m.request_timeout, Duration::from_secs(1));
        assert_eq!(m.request_deadline, Duration::from_secs(7200));
        let err = toml::from_str::<ModelConfig>(
            "provider = \"openai\"\nmodel = \"m\"\nidle_timeout = \"1s\"",
        )
        .unwrap_err();
        assert!(err.to_string().contains("idle_timeout"), "{err}");
    }

    /// `[model]` fields checked as `AgentConfig::load` does.
    fn checked(fields: &str) -> Result<ModelConfig, String> {
        let m: ModelConfig = toml::from_str(fields).map_err(|e| e.to_string())?;
        m.check().map(|()| m)
    }

    #[test]
    fn providers_are_one_list() {
        for ok in ["openai", "openai-responses", "anthropic"] {
            let m = checked(&format!("provider = \"{ok}\"\nmodel = \"m\"")).unwrap();
            assert_eq!(m.provider.as_str(), ok);
        }
        let err = checked("provider = \"bedrock\"\nmodel = \"m\"").unwrap_err();
        assert!(err.contains("openai-responses"), "{err}");
        let err = checked("provider = \"script\"\nmodel = \"m\"").unwrap_err();
        assert!(err.contains("--script"), "{err}");
        let err = checked("provider = \"replay\"\nmodel = \"m\"").unwrap_err();
        assert!(err.contains("cassette"), "{err}");
    }

    #[test]
    fn reasoning_settings_are_checked_against_provider_and_model() {
        let ok = |f: &str| checked(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let refused = |f: &str, why: &str| {
            let e = checked(f)
                .err()
                .unwrap_or_else(|| panic!("{f} was accepted"));
            assert!(e.contains(why), "{f}: {e}");
        };
        let m = ok("provider = \"openai\"\nmodel = \"o3\"\nreasoning_effort = \"high\"");
        assert_eq!(m.reasoning_effort, Some(ReasoningEffort::High));
        ok("provider = \"openai-responses\"\nmodel = \"gpt-5\"\nreasoning_effort = \"minimal\"");
        ok(
            "provider = \"openai\"\nmodel = \"my-deploy\"\nreasoning_model = true\n\
            reasoning_effort = \"low\"",
        );
        ok("provider = \"openai\"\nmodel = \"gpt-4o\"\ntemperature = 0.2");
        refused(
            "provider = \"openai\"\nmodel = \"o3\"\nreasoning_effort = \"max\"",
            "reasoning_effort",
        );
        refused(
            "provider = \"openai\"\nmodel = \"gpt-4o\"\nreasoning_effort = \"low\"",
            "not a reasoning model",
        );
        refused(
            "provider = \"openai\"\nmodel = \"o4-mini\"\ntemperature = 0.2",
            "default temperature",
        );
        refused(
            "provider = \"anthropic\"\nmodel = \"c\"\nreasoning_model = true",
            "reasoning_model",
        );
        refused(
            "provider = \"openai\"\nmodel = \"o3\"\nthinking_budget = 2000",
            "thinking_budget",
        );
        // Anthropic: an effort or a budget turns thinking on; the budget
        // must fit under max_tokens and no temperature goes with it.
        ok("provider = \"anthropic\"\nmodel = \"c\"\nthinking_budget = 2048");
        ok("provider = \"anthropic\"\nmodel = \"c\"\nreasoning_effort = \"low\"");
        ok("provider = \"anthropic\"\nmodel = \"c\"\nreasoning_effort = \"high\"");
        refused(
            "provider = \"anthropic\"\nmodel = \"c\"\nthinking_budget = 4096",
            "raise max_tokens",
        );
        refused(
            "provider = \"anthropic\"\nmodel = \"c\"\nreasoning_effort = \"minimal\"\n\
             max_tokens = 1000",
            "raise max_tokens",
        );
        refused(
            "provider = \"anthropic\"\nmodel = \"c\"\nthinking_budget = 500",
            "1024",
        );
        refused(
            "provider = \"anthropic\"\nmodel = \"c\"\nthinking_budget = 2048\n\
             temperature = 0.5",
            "temperature",
        );
    }

    #[test]
    fn frozen_configs_of_before_read_and_write_the_same() {
        // A session_created model section from before the new keys.
        let old = serde_json::json!({
            "provider": "openai", "model": "gpt-4o-mini", "base_url": null,
            "api_key_env": null, "cassette": null, "max_tokens": 4096,
            "temperature": null, "stream": true,
            "request_timeout": "2m", "request_deadline": "30m"
        });
        let m: ModelConfig = serde_json::from_value(old).unwrap();
        assert_eq!(m.provider, ProviderKind::OpenAi);
        assert!(m.prompt_cache);
        assert_eq!((m.reasoning_effort, m.thinking_budget), (None, None));
        let again = serde_json::to_value(&m).unwrap();
        for key in [
            "reasoning_effort",
            "reasoning_model",
            "thinking_budget",
            "prompt_cache",
        ] {
            assert!(again.get(key).is_none(), "{key} written by default");
        }
    }

    #[test]
    fn zero_timeouts_are_refused_at_load() {
        for field in ["request_timeout", "request_deadline"] {
            let text = format!(
                "name = \"a\"\ninstructions = \"i\"\n[model]\nprovider = \"openai\"\n\
                 model = \"m\"\n{field} = \"0s\"\n"
            );
            let config: AgentConfig = toml::from_str(&text).unwrap();
            let err = config.check(Path::new(".")).unwrap_err();
            assert!(err.contains(field) && err.contains("zero"), "{err}");
        }
    }
}

#[cfg(test)]
mod fuzz {
    //! Property tests over `agent.toml` as an operator (or a tool writing
    //! into a checked-out agent directory) might hand it over: any text is
    //! parsed or refused with a message, and any parsed config is checked
    //! or refused with a message — never a panic. Case counts are fixed so
    //! CI spends a second or two here; `PROPTEST_RNG_SEED` replays a run.

    use proptest::prelude::*;
    use toml::{Table, Value};

    use super::*;

    fn cases(cases: u32) -> ProptestConfig {
        ProptestConfig {
            cases,
            failure_persistence: None,
            max_shrink_iters: 256,
            ..ProptestConfig::default()
        }
    }

    /// Strings that mean something somewhere in an agent file, and noise.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => prop::sample::select(vec![
                "", " ", "fs", "json", "http", "openai", "anthropic", "replay", "script",
                "{run}", "out/{run}:/out:rw", "data:rw", "data:/w:ro", "data:/w:rw:rw", ":", "::",
                "..", "../..", "/", "/etc:/etc", "work:/w:rw", "x:relative", "work:/a/../b",
                "1s", "0s", "30s", "999999999999999999h", "1ns", "-1s", "sha256:00",
                "KEY@api.example.com", "KEY@*.example.com:x-api-key", "KEY@", "@host",
                "*.example.com", "*", "example.com:99999", "[::1]:80", "LANG", "A=B", "\0",
                "fs__read", "max_steps", "\u{1b}[2J", "\u{202e}",
            ])
            .prop_map(str::to_owned),
            2 => "\\PC{0,24}",
            1 => any::<String>(),
        ]
    }

    /// Any TOML value, nested a little.
    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            text().prop_map(Value::String),
            any::<i64>().prop_map(Value::Integer),
            prop_oneof![Just(0i64), Just(1), Just(-1), Just(1 << 44), Just(i64::MAX)]
                .prop_map(Value::Integer),
            any::<bool>().prop_map(Value::Boolean),
            any::<f64>().prop_map(Value::Float),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(text(), inner, 0..4)
                    .prop_map(|m| Value::Table(m.into_iter().collect())),
            ]
        })
    }

    fn string() -> BoxedStrategy<Value> {
        text().prop_map(Value::String).boxed()
    }

    /// Usually one of `likely`, sometimes any text.
    fn one_of(likely: &[&'static str]) -> BoxedStrategy<Value> {
        prop_oneof![
            9 => prop::sample::select(likely.to_vec()).prop_map(|s| Value::String(s.to_owned())),
            1 => string(),
        ]
        .boxed()
    }

    /// Usually a duration humantime reads, sometimes one it refuses.
    fn duration() -> BoxedStrategy<Value> {
        prop_oneof![
            12 => prop::sample::select(vec!["1s", "30s", "2m", "500ms", "0s", "1ns", "1h 5m"])
                .prop_map(|s| Value::String(s.to_owned())),
            1 => one_of(&["999999999999999999h", "-1s", "1 fortnight", ""]),
        ]
        .boxed()
    }

    fn list(item: BoxedStrategy<Value>, most: usize) -> BoxedStrategy<Value> {
        prop::collection::vec(item, 0..=most)
            .prop_map(Value::Array)
            .boxed()
    }

    fn integer() -> BoxedStrategy<Value> {
        prop_oneof![
            1 => any::<i64>(),
            60 => 0i64..100_000,
            2 => prop::sample::select(vec![0i64, 1, -1, 1 << 44, (1 << 44) + 256, i64::MAX]),
        ]
        .prop_map(Value::Integer)
        .boxed()
    }

    /// A table with each of `fields` present (four times in five) or not;
    /// a name ending in `!` is required, so always present (as the name
    /// without the `!`).
    fn table(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
        let (names, values): (Vec<_>, Vec<_>) = fields
            .into_iter()
            .map(|(name, value)| match name.strip_suffix('!') {
                Some(name) => (name, value.prop_map(Some).boxed()),
                None => (
                    name,
                    prop_oneof![4 => value.prop_map(Some), 1 => Just(None)].boxed(),
                ),
            })
            .unzip();
        values
            .prop_map(move |values| {
                let t: Table = names
                    .iter()
                    .zip(values)
                    .filter_map(|(n, v)| Some(((*n).to_owned(), v?)))
                    .collect();
                Value::Table(t)
            })
            .boxed()
    }

    /// One wrong field refuses a whole file, so a generated file is well
    /// typed except, in some cases, for one corruption: a field of one of
    /// its tables replaced by any value, or an unknown field added.
    #[derive(Debug, Clone)]
    struct Corruption {
        table: prop::sample::Index,
        field: prop::sample::Index,
        replace: bool,
        key: String,
        value: Value,
    }

    fn corruption() -> impl Strategy<Value = Option<Corruption>> {
        let one = (
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            any::<bool>(),
            text(),
            any_value(),
        )
            .prop_map(|(table, field, replace, key, value)| Corruption {
                table,
                field,
                replace,
                key,
                value,
            });
        prop::option::weighted(0.3, one)
    }

    fn count_tables(value: &Value) -> usize {
        match value {
            Value::Table(t) => 1 + t.values().map(count_tables).sum::<usize>(),
            Value::Array(a) => a.iter().map(count_tables).sum(),
            _ => 0,
        }
    }

    /// Call `edit` on table number `n` of `value`, depth first.
    fn visit(value: &mut Value, n: &mut Option<usize>, edit: &mut dyn FnMut(&mut Table)) {
        match value {
            Value::Table(t) => {
                match n {
                    Some(0) => {
                        edit(t);
                        *n = None;
                        return;
                    }
                    Some(k) => *k -= 1,
                    None => return,
                }
                for (_, child) in t.iter_mut() {
                    visit(child, n, edit);
                }
            }
            Value::Array(a) => {
                for child in a {
                    visit(child, n, edit);
                }
            }
            _ => {}
        }
    }

    fn corrupt(mut doc: Value, c: Option<Corruption>) -> Value {
        let Some(c) = c else { return doc };
        let mut n = Some(c.table.index(count_tables(&doc)));
        visit(&mut doc, &mut n, &mut |t: &mut Table| {
            let existing = if c.replace && !t.is_empty() {
                t.keys().nth(c.field.index(t.len())).cloned()
            } else {
                None
            };
            t.insert(existing.unwrap_or_else(|| c.key.clone()), c.value.clone());
        });
        doc
    }

    fn dir() -> BoxedStrategy<Value> {
        let short = one_of(&[
            "work",
            "work:rw",
            "work:/w",
            "work:/w:rw",
            "work:/w:ro",
            "data:/d:rw",
            "data:rw",
            "out/{run}:/out:rw",
            "work:/w:rw:rw",
            "work:w",
            "missing:/m",
            "work:/a/../b",
        ]);
        let long = table(vec![
            (
                "host!",
                one_of(&["work", "data", "data:rw", "out/{run}", "missing", "/"]),
            ),
            ("guest", one_of(&["/w", "/d", "/", "w", "/a/../b", "/w/"])),
            ("mode", one_of(&["ro", "rw", "RW", "read-write"])),
            ("symlinks", any::<bool>().prop_map(Value::Boolean).boxed()),
        ]);
        prop_oneof![3 => short, 1 => long].boxed()
    }

    fn tool() -> BoxedStrategy<Value> {
        table(vec![
            (
                "component!",
                one_of(&["fs", "json", "http", "nope", "./x.wasm"]),
            ),
            ("digest", string()),
            ("only", list(string(), 3)),
            ("dirs", list(dir(), 3)),
            (
                "allow_hosts",
                list(
                    one_of(&[
                        "example.com",
                        "*.example.com",
                        "example.com:443",
                        "*",
                        "[::1]:80",
                    ]),
                    3,
                ),
            ),
            ("env", list(string(), 2)),
            (
                "secrets",
                list(
                    one_of(&["KEY@api.example.com", "KEY@*.example.com:x-api-key", "KEY@"]),
                    2,
                ),
            ),
            ("memory_mib", integer()),
            ("timeout", duration()),
            ("max_output", integer()),
            ("max_write", integer()),
            ("fuel", integer()),
        ])
    }

    /// An agent file built field by field, so most cases get past the
    /// TOML syntax and the types into `check`.
    fn agent() -> impl Strategy<Value = Value> {
        let model = table(vec![
            (
                "provider!",
                one_of(&["openai", "anthropic", "replay", "script"]),
            ),
            ("model!", string()),
            // Mostly good URLs: a bad one refuses the file, and random
            // text nearly always is one.
            (
                "base_url",
                one_of(&[
                    "http://127.0.0.1:11434/v1",
                    "https://api.example.com/v1",
                    "http://127.0.0.1:11434/v1",
                    "https://api.example.com/v1",
                    "notaurl",
                    "",
                    "ftp://host/v1",
                ]),
            ),
            ("api_key_env", string()),
            ("cassette", string()),
            ("max_tokens", integer()),
            ("temperature", any::<f64>().prop_map(Value::Float).boxed()),
            ("stream", any::<bool>().prop_map(Value::Boolean).boxed()),
            ("request_timeout", duration()),
            ("request_deadline", duration()),
        ]);
        let limits = table(
            SessionLimits::NAMES
                .iter()
                .map(|n| (*n, integer()))
                .collect(),
        );
        let agent = table(vec![
            ("name!", string()),
            ("goal", string()),
            ("model!", model),
            ("limits", limits),
            ("tools", list(tool(), 3)),
            (
                "completion",
                table(vec![("tool!", string()), ("input", any_value().boxed())]),
            ),
        ]);
        // Exactly one of the two, mostly: both or neither is one refusal.
        let instructions = prop_oneof![
            8 => Just(vec!["instructions"]),
            2 => Just(vec!["instructions_file"]),
            1 => Just(vec!["instructions", "instructions_file"]),
            1 => Just(vec![]),
        ];
        (agent, instructions, string(), corruption()).prop_map(|(mut agent, keys, text, c)| {
            if let Value::Table(t) = &mut agent {
                for key in keys {
                    t.insert(key.to_owned(), text.clone());
                }
            }
            corrupt(agent, c)
        })
    }

    /// Parse and check as `AgentConfig::load` does, in a directory holding
    /// `work/` and `data/` so some directory grants resolve. Returns how far
    /// the text got.
    fn parse_and_check(text: &str) -> Reached {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let Ok(config) = toml::from_str::<AgentConfig>(text) else {
            return Reached::Parse;
        };
        if let Err(message) = config.check(dir.path()) {
            assert!(!message.is_empty());
            return Reached::Check;
        }
        // An accepted config resolves into grants the hands accept. `{run}`
        // directories exist only once a session creates them at start, so,
        // as `check` does, they are left out here.
        for tool in &config.tools {
            let mut tool = tool.clone();
            tool.dirs
                .retain(|d| !d.host_text().contains(RUN_PLACEHOLDER));
            tool.databases.clear();
            let grants = tool
                .grants(dir.path(), |name| Some(format!("<{name}>")))
                .unwrap();
            grants.validate().unwrap();
        }
        let _ = config.instructions_text(dir.path());
        Reached::Accepted
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Reached {
        Parse,
        Check,
        Accepted,
    }

    proptest! {
        #![proptest_config(cases(256))]

        #[test]
        fn any_text_is_parsed_or_refused(text in prop_oneof![any::<String>(), "\\PC{0,200}"]) {
            parse_and_check(&text);
        }

        #[test]
        fn raising_any_limit_by_name_never_panics(name in text(), value in any::<u64>()) {
            let mut limits = SessionLimits::default();
            let known = SessionLimits::NAMES.contains(&name.as_str());
            prop_assert_eq!(limits.set(&name, value).is_ok(), known);
        }
    }

    #[test]
    fn any_structured_agent_file_is_checked_or_refused() {
        use proptest::test_runner::TestRunner;
        // Run by hand rather than with `proptest!` to count how far cases
        // got: a generator whose cases all die in the TOML parser would
        // test nothing past it.
        let mut runner = TestRunner::new(cases(256));
        let reached = std::cell::RefCell::new(std::collections::BTreeMap::new());
        runner
            .run(&agent(), |agent| {
                let Value::Table(table) = agent else {
                    unreachable!("agent() makes a table")
                };
                // A table TOML cannot spell is no file anyone can hand over.
                let Ok(text) = toml::to_string(&table) else {
                    return Ok(());
                };
                *reached
                    .borrow_mut()
                    .entry(parse_and_check(&text))
                    .or_insert(0) += 1;
                Ok(())
            })
            .unwrap();
        let reached = reached.into_inner();
        for stage in [Reached::Parse, Reached::Check, Reached::Accepted] {
            assert!(
                reached.get(&stage).copied().unwrap_or(0) >= 5,
                "too few cases stopped at {stage:?}: {reached:?}"
            );
        }
    }
}
