//! What a session runs with: the [`Frozen`] agent recorded in its first
//! event (component digests, pinned directory grants, child agents, the
//! plan settings, prices), and the price helpers that read it. A resumed
//! session always runs with what it was frozen with, whatever the agent
//! file says by then.
//!
//! Plain data: making one is [`freeze`](super::freeze)'s, loading its tools
//! [`bind`](super::bind)'s; nothing here reads a file or loads a tool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config::{
    ApprovePolicy, CompletionCheck, DelegationConfig, MemoryConfig, ModelConfig, PlanConfig,
    RolesConfig, SessionLimits, ToolConfig,
};
use crate::model::ProviderKind;
use crate::pricing::{ModelPrice, Prices};
use crate::work::plan::Plan;

/// The agent as frozen into the session's first event: what a resumed
/// session runs with, whatever the agent file says by then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frozen {
    /// Agent name.
    pub name: String,
    /// System instructions (text).
    pub instructions: String,
    /// Model settings (no key: only the name of its variable).
    pub model: ModelConfig,
    /// Session limits as configured (raises are events).
    pub limits: SessionLimits,
    /// Tools, each with the digest seen at start.
    pub tools: Vec<FrozenTool>,
    /// Completion check.
    pub completion: Option<CompletionCheck>,
    /// Directory relative paths are resolved against.
    pub base_dir: PathBuf,
    /// `[plan]` and the operator's plan, in a planned session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<FrozenPlan>,
    /// Models of the other roles.
    #[serde(default)]
    pub roles: RolesConfig,
    /// Command checks by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checks: BTreeMap<String, crate::checks::resolve::CommandCheckConfig>,
    /// Memory scopes.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// Approval policies (`[approve]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approve: BTreeMap<String, ApprovePolicy>,
    /// `run --priority`: workers run higher first. Default 0.
    #[serde(default, skip_serializing_if = "is_default_priority")]
    pub priority: i64,
    /// Child agents `delegate` may start, frozen with their slices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, FrozenChild>,
    /// Delegation caps.
    #[serde(default)]
    pub delegation: DelegationConfig,
    /// How deep this agent runs in a tree of sub-agents (0: started by
    /// `run`).
    #[serde(default)]
    pub depth: u32,
    /// Skills, read and checked at start (bodies included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<super::skills::types::Skill>,
    /// Prices of the models it calls, by `provider/model`, frozen at start
    /// (see `brain::pricing`): a later price file does not change what a
    /// session's past cost. Empty when none is known.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, ModelPrice>,
    /// External MCP servers, each with its grants as pinned and the tool
    /// definitions approved when the session started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<super::mcp::FrozenMcp>,
}

impl Frozen {
    /// Freeze the prices of the models this agent (and its roles) call.
    pub fn freeze_prices(&mut self, prices: &Prices) {
        let found = self.priced_by(prices);
        self.prices.extend(found);
        for child in self.agents.values_mut() {
            child.frozen.freeze_prices(prices);
        }
    }

    /// Give a price from `prices` to each model this agent (and its roles
    /// and children) calls that has none frozen; frozen prices stay. For a
    /// session woken after its operator priced a model it was started
    /// without: answers already recorded keep the cost they were recorded
    /// with (unknown), later ones are counted.
    pub fn fill_missing_prices(&mut self, prices: &Prices) {
        for (key, price) in self.priced_by(prices) {
            self.prices.entry(key).or_insert(price);
        }
        for child in self.agents.values_mut() {
            child.frozen.fill_missing_prices(prices);
        }
    }

    fn priced_by(&self, prices: &Prices) -> Vec<(String, ModelPrice)> {
        self.models()
            .into_iter()
            .filter_map(|(_, m)| {
                let provider = m.provider.as_str();
                prices
                    .freeze_served(provider, &m.model, m.base_url.as_deref())
                    .map(|p| (price_key(m), p))
            })
            .collect()
    }

    /// The models this agent's answers are priced by, with the role each
    /// answers for: the worker's, and the planner's and judge's when they
    /// have their own (the same choice the loop prices an answer by).
    pub fn models(&self) -> Vec<(&'static str, &ModelConfig)> {
        let mut models = vec![("worker", &self.model)];
        models.extend(self.roles.planner.iter().map(|m| ("planner", m)));
        models.extend(self.roles.judge.iter().map(|m| ("judge", m)));
        models
    }

    /// The first model this agent, or a child it may start, would call
    /// under a money limit without a price: its answers' cost could not be
    /// counted, so the limit could not hold. `raised` is the limit a
    /// `--raise` put in place of this agent's own, if any. `None` when
    /// every limited model is priced (or nothing has a money limit).
    pub fn unpriced(&self, raised: Option<u64>) -> Option<Unpriced> {
        self.unpriced_at(raised, "this agent")
    }

    fn unpriced_at(&self, raised: Option<u64>, agent: &str) -> Option<Unpriced> {
        let limit = raised.unwrap_or(self.limits.max_cost_micros);
        if limit > 0
            && let Some((role, model)) = self
                .models()
                .into_iter()
                // A model that is not there (provider `none`) is never
                // called: its run is refused for want of one, not a price.
                .find(|(_, m)| {
                    m.provider != ProviderKind::None && !self.prices.contains_key(&price_key(m))
                })
        {
            return Some(Unpriced {
                agent: agent.to_owned(),
                role,
                provider: model.provider.as_str().to_owned(),
                model: model.model.clone(),
                limit,
            });
        }
        self.agents.iter().find_map(|(name, child)| {
            let path = if agent == "this agent" {
                format!("[agents.{name}]")
            } else {
                format!("{agent} → [agents.{name}]")
            };
            child.frozen.unpriced_at(None, &path)
        })
    }
}

/// The key a model's frozen price is kept under: `provider/model`.
pub fn price_key(model: &ModelConfig) -> String {
    format!("{}/{}", model.provider.as_str(), model.model)
}

/// A model called under a money limit with no known price (see
/// [`Frozen::unpriced`]). The operator acts: give the model a price or
/// remove the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpriced {
    /// Which agent: `this agent`, or the path to a child (`[agents.x]`).
    pub agent: String,
    /// The role the model answers for (`worker`, `planner`, `judge`).
    pub role: &'static str,
    /// Its provider, as the price file's section names it.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The money limit in force there, micro-dollars.
    pub limit: u64,
}

impl Unpriced {
    /// What is wrong and the two ways out, naming `file` as the place for
    /// a price.
    pub fn advice(&self, file: &Path) -> String {
        format!(
            "model `{model}` (provider {provider}, the {role} of {agent}) has no price, so \
             max_cost_micros = {limit} cannot be counted and would not hold. Give it a price in \
             {file} (a model you run yourself costs nothing: give it input = 0 and output = 0):\n\n  \
             as_of = \"YYYY-MM-DD\"\n  [{provider}.\"{model}\"]\n  input = <USD per million prompt \
             tokens>\n  output = <USD per million generated tokens>\n\nor remove max_cost_micros{slice}",
            model = self.model,
            provider = self.provider,
            role = self.role,
            agent = self.agent,
            limit = self.limit,
            file = file.display(),
            slice = if self.agent == "this agent" {
                String::new()
            } else {
                " (the parent's, and the child's slice)".to_owned()
            },
        )
    }
}

/// A child agent as frozen into its parent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrozenChild {
    /// What it is for, for the model.
    pub description: String,
    /// The JSON Schema its answer must match (text), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<String>,
    /// The child agent, its limits already cut to the slice.
    pub frozen: Box<Frozen>,
}

/// Priority 0 is the default, and is not written.
fn is_default_priority(n: &i64) -> bool {
    *n == 0
}

/// A planned agent's settings as frozen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrozenPlan {
    /// `[plan]`.
    pub config: PlanConfig,
    /// The operator's plan file, read and checked at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<Plan>,
}

/// One tool component of a frozen agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrozenTool {
    /// Prefix of its tools' names for the model (`fs` → `fs__read`).
    pub prefix: String,
    /// Digest seen when the session started; a different binary is refused.
    pub digest: String,
    /// Grants and limits as configured.
    pub config: ToolConfig,
    /// Directory grants as resolved and pinned at start (identity
    /// included). `None` in sessions frozen before grants were pinned:
    /// those resolve `config.dirs` when they wake.
    #[serde(default)]
    pub dirs: Option<Vec<longhand_hands::DirGrant>>,
    /// Programs as resolved and hashed at start: a resumed session runs
    /// these files or none (a changed one is refused when it wakes).
    /// Absent when the tool is granted no program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs: Option<Vec<longhand_hands::programs::ProgramGrant>>,
}
