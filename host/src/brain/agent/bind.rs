//! Freezing an agent file into a session and binding it to loaded tools.
//!
//! [`freeze`] turns an agent file into the [`Frozen`] agent recorded in the
//! session's first event (component digests, pinned directory grants);
//! [`bind`] loads a frozen agent's components again, refuses any whose
//! digest changed, and grants them. A resumed session always runs with
//! what it was frozen with, whatever the agent file says by then.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::config::{
    AgentConfig, CompletionCheck, ModelConfig, PlanConfig, RUN_PLACEHOLDER, SessionLimits,
    ToolConfig,
};
use crate::brain::model::ToolDef;
use crate::brain::plan::Plan;
use crate::brain::runner::{AgentError, RunError};
use crate::hands::{Grants, Hands, LoadedTool, ToolSource, ToolSpec};

/// Separator between component and tool in the names the model sees.
pub const NAME_SEPARATOR: &str = "__";

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
    pub roles: super::config::RolesConfig,
    /// Command checks by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checks: BTreeMap<String, crate::checks::resolve::CommandCheckConfig>,
    /// Memory scopes.
    #[serde(default)]
    pub memory: super::config::MemoryConfig,
    /// Approval policies (`[approve]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approve: BTreeMap<String, super::config::ApprovePolicy>,
    /// `run --priority`: workers run higher first. Default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    /// Child agents `delegate` may start, frozen with their slices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, FrozenChild>,
    /// Delegation caps.
    #[serde(default)]
    pub delegation: super::config::DelegationConfig,
    /// How deep this agent runs in a tree of sub-agents (0: started by
    /// `run`).
    #[serde(default)]
    pub depth: u32,
    /// Skills, read and checked at start (bodies included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<super::skills::Skill>,
    /// Prices of the models it calls, by `provider/model`, frozen at start
    /// (see `brain::pricing`): a later price file does not change what a
    /// session's past cost. Empty when none is known.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, crate::brain::pricing::ModelPrice>,
}

impl Frozen {
    /// Freeze the prices of the models this agent (and its roles) call.
    pub fn freeze_prices(&mut self, prices: &crate::brain::pricing::Prices) {
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
    pub fn fill_missing_prices(&mut self, prices: &crate::brain::pricing::Prices) {
        for (key, price) in self.priced_by(prices) {
            self.prices.entry(key).or_insert(price);
        }
        for child in self.agents.values_mut() {
            child.frozen.fill_missing_prices(prices);
        }
    }

    fn priced_by(
        &self,
        prices: &crate::brain::pricing::Prices,
    ) -> Vec<(String, crate::brain::pricing::ModelPrice)> {
        self.models()
            .into_iter()
            .filter_map(|(_, m)| {
                let provider = m.provider.as_str();
                prices
                    .freeze_for(provider, &m.model)
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
                .find(|(_, m)| !self.prices.contains_key(&price_key(m)))
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
            "model `{model}` (provider {provider}, the {role} of {agent}) has no price, so              max_cost_micros = {limit} cannot be counted and would not hold. Give it a price in              {file}:\n\n  as_of = \"YYYY-MM-DD\"\n  [{provider}.\"{model}\"]\n  input = <USD per              million prompt tokens>\n  output = <USD per million generated tokens>\n\nor remove              max_cost_micros{slice}",
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

fn is_zero(n: &i64) -> bool {
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
    pub dirs: Option<Vec<crate::hands::DirGrant>>,
}

/// A tool the model can call, bound to its component and grants.
#[derive(Clone)]
pub(in crate::brain) struct BoundTool {
    pub(in crate::brain) component: usize,
    pub(in crate::brain) spec: ToolSpec,
}

#[derive(Clone)]
pub(in crate::brain) struct BoundComponent {
    pub(in crate::brain) prefix: String,
    pub(in crate::brain) loaded: Arc<LoadedTool>,
    pub(in crate::brain) grants: Grants,
}

/// The agent with its components loaded and granted.
#[derive(Clone)]
pub struct BoundAgent {
    pub(in crate::brain) frozen: Frozen,
    pub(in crate::brain) components: Vec<BoundComponent>,
    pub(in crate::brain) tools: BTreeMap<String, BoundTool>,
    pub(in crate::brain) defs: Vec<ToolDef>,
}

impl BoundAgent {
    /// Tool definitions as the model sees them.
    pub fn tool_defs(&self) -> &[ToolDef] {
        &self.defs
    }

    /// The frozen agent.
    pub fn frozen(&self) -> &Frozen {
        &self.frozen
    }

    /// Each tool as the model names it (`fs__read`), with its component,
    /// its grants and its spec: what `longhand mcp --agent` serves.
    pub fn bound_tools(
        &self,
    ) -> impl Iterator<Item = (&str, &Arc<LoadedTool>, &Grants, &ToolSpec)> {
        self.tools.iter().filter_map(|(name, tool)| {
            let component = self.components.get(tool.component)?;
            Some((
                name.as_str(),
                &component.loaded,
                &component.grants,
                &tool.spec,
            ))
        })
    }
}

fn source_of<'a>(component: &'a str, base: &Path, owned: &'a mut PathBuf) -> ToolSource<'a> {
    if component.ends_with(".wasm") || component.contains('/') {
        *owned = base.join(component);
        ToolSource::File(owned)
    } else {
        ToolSource::Builtin(component)
    }
}

fn prefix_of(component: &str) -> String {
    let stem = Path::new(component)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(component);
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    cleaned.trim_matches('_').chars().take(24).collect()
}

/// Freeze one agent file (no children): read instructions, load every
/// component to learn its digest, resolve paths.
async fn freeze_one(
    hands: &Hands,
    config: &AgentConfig,
    base: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy,
    run_dir: &str,
) -> Result<Frozen, RunError> {
    let base_dir = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_owned());
    let instructions = config
        .instructions_text(&base_dir)
        .map_err(AgentError::Instructions)?;
    let mut model = config.model.clone();
    if let Some(c) = &model.cassette {
        model.cassette = Some(base_dir.join(c));
    }
    let mut tools = Vec::new();
    // What a skill may ask for: the agent's tools and grants.
    let mut view = super::skills::AgentView::default();
    for tool in &config.tools {
        let mut tool = tool.clone();
        for dir in &mut tool.dirs {
            if dir.host_text().contains(RUN_PLACEHOLDER) {
                *dir = dir.with_run(run_dir);
                let host = dir.host_text();
                std::fs::create_dir_all(base_dir.join(&host))
                    .map_err(|source| AgentError::RunDir { path: host, source })?;
            }
        }
        let tool = &tool;
        let mut owned = PathBuf::new();
        let loaded = hands
            .load(source_of(&tool.component, &base_dir, &mut owned))
            .await
            .map_err(AgentError::Load)?;
        // `only` is a list of promises about the component; a name it does
        // not offer is a typo (or a tool since renamed) that would otherwise
        // silently shrink the agent's tools.
        if let Some(only) = &tool.only {
            let offered: Vec<&str> = loaded
                .info()
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            if let Some(unknown) = only.iter().find(|n| !offered.contains(&n.as_str())) {
                return Err(AgentError::UnknownTool {
                    component: tool.component.clone(),
                    name: unknown.clone(),
                    offered: offered.join(", "),
                }
                .into());
            }
        }
        // Validate grants now (env and secrets must be set) so a bad config
        // is refused at start, not at the first call. The directories are
        // resolved and pinned here, once: a resumed session gets exactly
        // these directories or a refusal, whatever their paths name later.
        let grants = tool
            .grants(&base_dir, lookup)
            .map_err(|source| AgentError::Grant {
                component: tool.component.clone(),
                source,
            })?;
        let prefix = prefix_of(&tool.component);
        for spec in &loaded.info().tools {
            if tool.only.as_ref().is_none_or(|o| o.contains(&spec.name)) {
                view.tools
                    .push(format!("{prefix}{NAME_SEPARATOR}{}", spec.name));
            }
        }
        if let Ok(spec) = tool.grant_spec(&base_dir) {
            view.add_grants(&spec);
        }
        tools.push(FrozenTool {
            prefix: prefix_of(&tool.component),
            digest: loaded.digest().to_owned(),
            config: tool.clone(),
            dirs: Some(grants.dirs),
        });
    }
    let skills_dir = base_dir.join(config.skills_dir.as_deref().unwrap_or(Path::new("skills")));
    if config.skills_dir.is_some() && !skills_dir.is_dir() {
        return Err(AgentError::Instructions(format!(
            "skills_dir {} is not a directory",
            skills_dir.display()
        ))
        .into());
    }
    let skills = super::skills::discover(&skills_dir)
        .map_err(|e| AgentError::Instructions(format!("skills: {e}")))?;
    for skill in &skills {
        super::skills::check_against(skill, &view).map_err(|errors| {
            AgentError::Instructions(format!(
                "skill {} asks for more than this agent holds: {}",
                skill.name,
                errors.join("; ")
            ))
        })?;
    }
    let mut roles = config.roles.clone();
    for model in [&mut roles.planner, &mut roles.judge].into_iter().flatten() {
        if let Some(c) = &model.cassette {
            model.cassette = Some(base_dir.join(c));
        }
    }
    // Command checks resolve against the directories just pinned: a bad
    // one (a writable path in a read-only grant, a program not found) is
    // refused now, not when a task first runs it.
    let dirs = granted_dirs(tools.iter().flat_map(|t| t.dirs.iter().flatten()));
    for (name, check) in &config.checks {
        crate::checks::resolve::resolve(name, check, &dirs, lookup)
            .map_err(|e| AgentError::Plan(e.to_string()))?;
    }
    let plan = match &config.plan {
        None => None,
        Some(plan_config) => {
            let operator = match &plan_config.file {
                None => None,
                Some(file) => {
                    let plan =
                        crate::brain::plan::load_file(&base_dir.join(file)).map_err(AgentError::Plan)?;
                    let names = plan_names(&tools, hands, &base_dir, config).await?;
                    let mut errors = plan.validate(names.names(), false);
                    errors.extend(crate::brain::tasks::predicate_errors(hands, &plan).await);
                    if !errors.is_empty() {
                        return Err(AgentError::Plan(format!(
                            "plan file {}: {}",
                            file.display(),
                            errors.join("; ")
                        ))
                        .into());
                    }
                    Some(plan)
                }
            };
            Some(FrozenPlan {
                config: plan_config.clone(),
                operator,
            })
        }
    };
    Ok(Frozen {
        name: config.name.clone(),
        instructions,
        model,
        limits: config.limits.clone(),
        tools,
        completion: config.completion.clone(),
        base_dir,
        plan,
        roles,
        checks: config.checks.clone(),
        memory: config.memory.clone(),
        approve: config.approve.clone(),
        priority: 0,
        agents: BTreeMap::new(),
        delegation: config.delegation,
        depth: 0,
        skills,
        prices: BTreeMap::new(),
    })
}

/// Freeze an agent file: read instructions, load every component to learn
/// its digest, resolve paths — and, below it, its child agents down to the
/// delegation depth, each frozen from its own file with its limits cut to
/// its slice. `lookup` reads environment variables.
pub async fn freeze(
    hands: &Hands,
    config: &AgentConfig,
    base: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy + Send + Sync,
) -> Result<Frozen, RunError> {
    // One `{run}` name for the whole tree: a child's `out/{run}` is its
    // parent's, so a narrower grant of it can pass attenuation.
    let run_dir = format!(
        "{}-{}",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "-"),
        std::process::id()
    );
    freeze_at(
        hands,
        config,
        base,
        lookup,
        0,
        config.delegation.max_depth,
        &run_dir,
    )
    .await
}

fn freeze_at<'a, L>(
    hands: &'a Hands,
    config: &'a AgentConfig,
    base: &'a Path,
    lookup: L,
    depth: u32,
    max_depth: u32,
    run_dir: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Frozen, RunError>> + Send + 'a>>
where
    L: Fn(&str) -> Option<String> + Copy + Send + Sync + 'a,
{
    Box::pin(async move {
        let mut frozen = freeze_one(hands, config, base, lookup, run_dir).await?;
        frozen.depth = depth;
        frozen.delegation.max_depth = max_depth;
        if depth >= max_depth {
            return Ok(frozen);
        }
        for (name, child) in &config.agents {
            let (child_config, child_base) = AgentConfig::load(&frozen.base_dir.join(&child.path))
                .map_err(|e| AgentError::Instructions(format!("[agents.{name}]: {e}")))?;
            let mut child_frozen = freeze_at(
                hands,
                &child_config,
                &child_base,
                lookup,
                depth + 1,
                max_depth,
                run_dir,
            )
            .await?;
            let limits = &mut child_frozen.limits;
            limits.max_steps = limits.max_steps.min(child.max_steps);
            limits.max_tool_calls = limits.max_tool_calls.min(child.max_tool_calls);
            limits.max_input_tokens = limits.max_input_tokens.min(child.max_input_tokens);
            limits.max_output_tokens = limits.max_output_tokens.min(child.max_output_tokens);
            // Money: a parent with a cost limit hands each child a slice of
            // it (0 is "no limit", so the smaller non-zero one wins).
            if config.limits.max_cost_micros > 0 && child.max_cost_micros == 0 {
                return Err(AgentError::Instructions(format!(
                    "[agents.{name}]: this agent has max_cost_micros = {}, so each child needs \
                     its slice: set max_cost_micros in [agents.{name}]",
                    config.limits.max_cost_micros
                ))
                .into());
            }
            if child.max_cost_micros > 0 {
                limits.max_cost_micros = match limits.max_cost_micros {
                    0 => child.max_cost_micros,
                    own => own.min(child.max_cost_micros),
                };
            }
            let description = child.description.clone().unwrap_or_else(|| {
                child_frozen
                    .instructions
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect()
            });
            let result_schema = match &child.result_schema {
                None => None,
                Some(file) => {
                    let path = frozen.base_dir.join(file);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        AgentError::Instructions(format!(
                            "[agents.{name}] result_schema {}: {e}",
                            path.display()
                        ))
                    })?;
                    crate::hands::schema::SchemaLoader::new()
                        .compile(&text)
                        .map_err(|e| {
                            AgentError::Instructions(format!(
                                "[agents.{name}] result_schema {}: {e}",
                                path.display()
                            ))
                        })?;
                    Some(text)
                }
            };
            frozen.agents.insert(
                name.clone(),
                FrozenChild {
                    description,
                    result_schema,
                    frozen: Box::new(child_frozen),
                },
            );
        }
        Ok(frozen)
    })
}

/// Directory grants as command checks see them: host path, guest path,
/// and whether any grant of it is read-write.
pub(in crate::brain) fn granted_dirs<'a>(
    grants: impl Iterator<Item = &'a crate::hands::DirGrant>,
) -> Vec<crate::checks::resolve::GrantedDir> {
    let mut dirs: Vec<crate::checks::resolve::GrantedDir> = Vec::new();
    for dir in grants {
        let writable = dir.access() == crate::hands::Access::ReadWrite;
        match dirs.iter_mut().find(|d| d.guest == dir.guest_path()) {
            Some(known) => known.writable |= writable,
            None => dirs.push(crate::checks::resolve::GrantedDir {
                host: dir.host_path().to_owned(),
                guest: dir.guest_path().to_owned(),
                writable,
            }),
        }
    }
    dirs
}

/// What a plan may name: read-only tools (the only ones a tool check may
/// call: a check must not change what it checks) and command checks.
pub struct PlanNames {
    /// Read-only tools, as the model knows them.
    pub tools: BTreeSet<String>,
    /// `[checks.*]` names.
    pub commands: BTreeSet<String>,
}

impl PlanNames {
    /// For [`Plan::validate`].
    pub fn names(&self) -> crate::brain::plan::Names<'_> {
        crate::brain::plan::Names {
            tools: &self.tools,
            commands: &self.commands,
        }
    }

    /// From a bound agent.
    pub fn of(agent: &BoundAgent) -> Self {
        Self {
            tools: agent
                .tools
                .iter()
                .filter(|(_, t)| t.spec.effect == crate::hands::Effect::ReadOnly)
                .map(|(name, _)| name.clone())
                .collect(),
            commands: agent.frozen.checks.keys().cloned().collect(),
        }
    }
}

async fn plan_names(
    tools: &[FrozenTool],
    hands: &Hands,
    base_dir: &Path,
    config: &AgentConfig,
) -> Result<PlanNames, RunError> {
    let mut names = BTreeSet::new();
    for ft in tools {
        let mut owned = PathBuf::new();
        let loaded = hands
            .load(source_of(&ft.config.component, base_dir, &mut owned))
            .await
            .map_err(AgentError::Load)?;
        for spec in &loaded.info().tools {
            if ft
                .config
                .only
                .as_ref()
                .is_some_and(|o| !o.contains(&spec.name))
            {
                continue;
            }
            if spec.effect == crate::hands::Effect::ReadOnly {
                names.insert(format!("{}{NAME_SEPARATOR}{}", ft.prefix, spec.name));
            }
        }
    }
    Ok(PlanNames {
        tools: names,
        commands: config.checks.keys().cloned().collect(),
    })
}

/// Load and grant a frozen agent's components, refusing changed binaries.
pub async fn bind(
    hands: &Hands,
    frozen: Frozen,
    lookup: impl Fn(&str) -> Option<String> + Copy,
) -> Result<BoundAgent, RunError> {
    let mut components = Vec::new();
    let mut tools = BTreeMap::new();
    let mut defs = Vec::new();
    for (index, ft) in frozen.tools.iter().enumerate() {
        let mut owned = PathBuf::new();
        let loaded = hands
            .load(source_of(
                &ft.config.component,
                &frozen.base_dir,
                &mut owned,
            ))
            .await
            .map_err(AgentError::Load)?;
        if loaded.digest() != ft.digest {
            return Err(AgentError::Changed {
                component: ft.config.component.clone(),
                was: ft.digest.clone(),
                now: loaded.digest().to_owned(),
            }
            .into());
        }
        // Pinned directories are used as frozen, not resolved again: a
        // directory replaced since is refused call by call, naming it.
        let mut config = ft.config.clone();
        if ft.dirs.is_some() {
            config.dirs.clear();
        }
        let mut grants =
            config
                .grants(&frozen.base_dir, lookup)
                .map_err(|source| AgentError::Grant {
                    component: ft.config.component.clone(),
                    source,
                })?;
        grants.component_digest = Some(ft.digest.clone());
        if let Some(pinned) = &ft.dirs {
            grants.dirs = pinned.clone();
        }
        for spec in &loaded.info().tools {
            if let Some(only) = &ft.config.only
                && !only.contains(&spec.name)
            {
                continue;
            }
            let name = format!("{}{NAME_SEPARATOR}{}", ft.prefix, spec.name);
            defs.push(ToolDef {
                name: name.clone(),
                description: spec.description.clone(),
                input_schema: spec.input_schema.clone(),
            });
            tools.insert(
                name,
                BoundTool {
                    component: index,
                    spec: spec.clone(),
                },
            );
        }
        components.push(BoundComponent {
            prefix: ft.prefix.clone(),
            loaded,
            grants,
        });
    }
    Ok(BoundAgent {
        frozen,
        components,
        tools,
        defs,
    })
}
