//! Freezing an agent file into what a session runs with ([`freeze`]):
//! read its instructions, load every component to learn its digest, pin
//! its directory grants, check its skills and plan against it, and freeze
//! its child agents below it down to the delegation depth.
//!
//! Its one side effect on the file system, creating the `{run}`
//! directories an agent's grants name, is [`create_run_dirs`], apart.
//! It must not start a session or write the log: the runner records what
//! this returns.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::bind::{PlanNames, load_component, prefix_of};
use super::config::{AgentConfig, NAME_SEPARATOR, RUN_PLACEHOLDER, ToolConfig};
use super::frozen::{Frozen, FrozenChild, FrozenPlan, FrozenTool};
use super::skills::{AgentView, Skill};
use crate::error::{AgentError, RunError};
use longhand_hands::Hands;

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
    let (tools, view) = freeze_tools(hands, config, &base_dir, lookup, run_dir).await?;
    let skills = freeze_skills(config, &base_dir, &view)?;
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
    let checks: BTreeMap<_, _> = config
        .checks
        .iter()
        .map(|(name, check)| (name.clone(), check.anchored(&base_dir)))
        .collect();
    for (name, check) in &checks {
        crate::checks::resolve::resolve(name, check, &dirs, lookup)
            .map_err(|e| AgentError::Plan(e.to_string()))?;
    }
    let plan = freeze_plan(hands, config, &base_dir, &tools).await?;
    let mut mcp = Vec::new();
    for server in &config.mcp {
        let mut server = server.clone();
        for dir in &mut server.dirs {
            if dir.host_text().contains(RUN_PLACEHOLDER) {
                *dir = dir.with_run(run_dir);
                let host = dir.host_text();
                std::fs::create_dir_all(base_dir.join(&host))
                    .map_err(|source| AgentError::RunDir { path: host, source })?;
            }
        }
        let (frozen, notes) = super::mcp::freeze_server(&server, &base_dir, lookup)
            .await
            .map_err(AgentError::Mcp)?;
        for note in notes {
            tracing::warn!("{note}");
        }
        mcp.push(frozen);
    }
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
        checks,
        memory: config.memory.clone(),
        approve: config.approve.clone(),
        priority: 0,
        agents: BTreeMap::new(),
        delegation: config.delegation,
        depth: 0,
        skills,
        prices: BTreeMap::new(),
        mcp,
    })
}

/// The tools step: load every component to learn its digest (and check
/// `only` against what it offers), check and pin its grants, and gather
/// what a skill may ask for (the agent's tool names and grants).
async fn freeze_tools(
    hands: &Hands,
    config: &AgentConfig,
    base_dir: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy,
    run_dir: &str,
) -> Result<(Vec<FrozenTool>, AgentView), RunError> {
    let mut tools = Vec::new();
    // What a skill may ask for: the agent's tools and grants.
    let mut view = AgentView::default();
    for tool in &config.tools {
        let mut tool = tool.clone();
        create_run_dirs(&mut tool, base_dir, run_dir)?;
        let tool = &tool;
        let loaded =
            load_component(hands, &tool.component, base_dir, tool.digest.as_deref()).await?;
        // `only` is a list of promises about the component; a name it does
        // not offer is a typo (or a tool since renamed) that would otherwise
        // silently shrink the agent's tools.
        if let Some(only) = &tool.only {
            let offered = loaded.tool_names();
            if let Some(unknown) = only.iter().find(|n| !offered.contains(&n.as_str())) {
                return Err(AgentError::UnknownTool {
                    component: tool.component.clone(),
                    name: unknown.clone(),
                    offered: offered.join(", "),
                }
                .into());
            }
        }
        tool.check_effects(&loaded)
            .map_err(|reason| AgentError::Effects {
                component: tool.component.clone(),
                reason,
            })?;
        // Validate grants now (env and secrets must be set) so a bad config
        // is refused at start, not at the first call. The directories are
        // resolved and pinned here, once: a resumed session gets exactly
        // these directories or a refusal, whatever their paths name later.
        let grants = tool
            .grants(base_dir, lookup)
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
        if let Ok(spec) = tool.grant_spec(base_dir) {
            view.add_grants(&spec);
        }
        tools.push(FrozenTool {
            prefix: prefix_of(&tool.component),
            digest: loaded.digest().to_owned(),
            config: tool.clone(),
            dirs: Some(grants.dirs),
            programs: (!grants.programs.is_empty()).then_some(grants.programs),
        });
    }
    Ok((tools, view))
}

/// The one side effect of freezing: name this run in `tool`'s `{run}`
/// directories and create them (under `base_dir`), so the grant can be
/// resolved and pinned. Apart, so the rest of freezing only reads.
fn create_run_dirs(
    tool: &mut ToolConfig,
    base_dir: &Path,
    run_dir: &str,
) -> Result<(), AgentError> {
    for dir in &mut tool.dirs {
        if dir.host_text().contains(RUN_PLACEHOLDER) {
            *dir = dir.with_run(run_dir);
            let host = dir.host_text();
            std::fs::create_dir_all(base_dir.join(&host))
                .map_err(|source| AgentError::RunDir { path: host, source })?;
        }
    }
    Ok(())
}

/// The skills step: discover the skills and refuse one that needs more
/// than `view` (the agent) holds.
fn freeze_skills(
    config: &AgentConfig,
    base_dir: &Path,
    view: &AgentView,
) -> Result<Vec<Skill>, RunError> {
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
        super::skills::check_against(skill, view).map_err(|errors| {
            AgentError::Instructions(format!(
                "skill {} asks for more than this agent holds: {}",
                skill.name,
                errors.join("; ")
            ))
        })?;
    }
    Ok(skills)
}

/// The plan step: `[plan]` as frozen, with the operator's plan file read
/// and checked against what the agent's tools and checks can name.
async fn freeze_plan(
    hands: &Hands,
    config: &AgentConfig,
    base_dir: &Path,
    tools: &[FrozenTool],
) -> Result<Option<FrozenPlan>, RunError> {
    let plan = match &config.plan {
        None => None,
        Some(plan_config) => {
            let operator = match &plan_config.file {
                None => None,
                Some(file) => {
                    let plan = crate::work::plan::load_file(&base_dir.join(file))
                        .map_err(AgentError::Plan)?;
                    let names = plan_names(tools, hands, base_dir, config).await?;
                    let mut errors = plan.validate(names.names(), false);
                    errors.extend(crate::work::plan::predicate_errors(hands, &plan).await);
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
    Ok(plan)
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
                    longhand_hands::schema::SchemaLoader::new()
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
pub(crate) fn granted_dirs<'a>(
    grants: impl Iterator<Item = &'a longhand_hands::DirGrant>,
) -> Vec<crate::checks::resolve::GrantedDir> {
    let mut dirs: Vec<crate::checks::resolve::GrantedDir> = Vec::new();
    for dir in grants {
        let writable = dir.access() == longhand_hands::Access::ReadWrite;
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

async fn plan_names(
    tools: &[FrozenTool],
    hands: &Hands,
    base_dir: &Path,
    config: &AgentConfig,
) -> Result<PlanNames, RunError> {
    let mut names = BTreeSet::new();
    for ft in tools {
        let loaded =
            load_component(hands, &ft.config.component, base_dir, Some(&ft.digest)).await?;
        for spec in &loaded.info().tools {
            if ft
                .config
                .only
                .as_ref()
                .is_some_and(|o| !o.contains(&spec.name))
            {
                continue;
            }
            if ft.config.effect_of(&loaded, spec) == longhand_hands::Effect::ReadOnly {
                names.insert(format!("{}{NAME_SEPARATOR}{}", ft.prefix, spec.name));
            }
        }
    }
    Ok(PlanNames {
        tools: names,
        commands: config.checks.keys().cloned().collect(),
    })
}
