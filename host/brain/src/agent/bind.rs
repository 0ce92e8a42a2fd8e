//! Binding a frozen agent to loaded tools ([`bind`]): load its
//! components again, refuse any whose digest changed, and grant them —
//! the [`BoundAgent`] a runner calls tools through. Also what a plan may
//! name of it ([`PlanNames`]).
//!
//! It never reads the agent file: a resumed session binds what it was
//! frozen with ([`Frozen`]), whatever the file says by then.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::NAME_SEPARATOR;
use super::frozen::Frozen;
use crate::error::{AgentError, RunError};
use crate::model::ToolDef;
use longhand_hands::{Grants, Hands, LoadedTool, PinnedLoadError, ToolSource, ToolSpec};

/// A tool the model can call, bound to its component and grants.
#[derive(Clone)]
pub(crate) struct BoundTool {
    pub(crate) component: usize,
    pub(crate) spec: ToolSpec,
}

#[derive(Clone)]
pub(crate) struct BoundComponent {
    pub(crate) prefix: String,
    pub(crate) loaded: Arc<LoadedTool>,
    pub(crate) grants: Grants,
}

/// The agent with its components loaded and granted.
#[derive(Clone)]
pub struct BoundAgent {
    pub(crate) frozen: Frozen,
    /// Its `[[mcp]]` servers (not started until a call needs one), each
    /// with the tools it is offered, in `frozen.mcp`'s order.
    pub(crate) mcp: Vec<(
        Arc<longhand_hands::mcp::Server>,
        Vec<super::mcp::FrozenMcpTool>,
    )>,
    pub(crate) components: Vec<BoundComponent>,
    pub(crate) tools: BTreeMap<String, BoundTool>,
    pub(crate) defs: Vec<ToolDef>,
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

/// Load `component` (a path relative to `base`, or a name), pinned to
/// `digest` when one is given: a component that is not the pinned one is
/// refused from its hash, before its imports are read, and is never
/// compiled or cached.
pub(super) async fn load_component(
    hands: &Hands,
    component: &str,
    base: &Path,
    digest: Option<&str>,
) -> Result<Arc<LoadedTool>, AgentError> {
    let mut owned = PathBuf::new();
    let source = source_of(component, base, &mut owned);
    let Some(pin) = digest else {
        return Ok(hands.load(source).await?);
    };
    hands.load_pinned(source, pin).await.map_err(|e| match e {
        PinnedLoadError::Load(e) => AgentError::Load(e),
        mismatch @ PinnedLoadError::Mismatch { .. } => AgentError::Pinned {
            component: component.to_owned(),
            reason: mismatch.to_string(),
        },
    })
}

/// A name (no `/`, no `.wasm`) is a built-in or an installed tool (the
/// hands resolve it, built-ins first); anything else is a file.
pub(super) fn source_of<'a>(
    component: &'a str,
    base: &Path,
    owned: &'a mut PathBuf,
) -> ToolSource<'a> {
    if component.ends_with(".wasm") || component.contains('/') {
        *owned = base.join(component);
        ToolSource::File(owned)
    } else {
        ToolSource::Builtin(component)
    }
}

pub(super) fn prefix_of(component: &str) -> String {
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
    pub fn names(&self) -> crate::work::plan::Names<'_> {
        crate::work::plan::Names {
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
                .filter(|(_, t)| t.spec.effect == longhand_hands::Effect::ReadOnly)
                .map(|(name, _)| name.clone())
                .collect(),
            commands: agent.frozen.checks.keys().cloned().collect(),
        }
    }
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
        // The frozen digest is the pin: a changed binary is refused from
        // its hash, never compiled.
        let mut owned = PathBuf::new();
        let source = source_of(&ft.config.component, &frozen.base_dir, &mut owned);
        let loaded = hands
            .load_pinned(source, &ft.digest)
            .await
            .map_err(|e| match e {
                PinnedLoadError::Load(e) => AgentError::Load(e),
                PinnedLoadError::Mismatch { actual, .. } => AgentError::Changed {
                    component: ft.config.component.clone(),
                    was: ft.digest.clone(),
                    now: actual,
                },
            })?;
        // Pinned directories are used as frozen, not resolved again: a
        // directory replaced since is refused call by call, naming it.
        let mut config = ft.config.clone();
        if ft.dirs.is_some() {
            config.dirs.clear();
        }
        // Programs likewise: the files hashed at start, checked again now
        // (a changed one refuses the session, naming both hashes) and
        // before every run.
        if let Some(programs) = &ft.programs {
            config.programs.clear();
            for program in programs {
                program.verify().map_err(|e| AgentError::Grant {
                    component: ft.config.component.clone(),
                    source: longhand_hands::GrantError::Program(e),
                })?;
            }
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
        if let Some(pinned) = &ft.programs {
            grants.programs = pinned.clone();
        }
        for spec in &loaded.info().tools {
            if let Some(only) = &ft.config.only
                && !only.contains(&spec.name)
            {
                continue;
            }
            // A tool that declares a write but whose capabilities, under
            // these grants, can change nothing (`exec` with no read-write
            // directory) is read-only: re-run after a crash, usable in a
            // check.
            // One whose write could only be refused (a database tool's
            // `execute` on a read-only grant) is not offered at all.
            let mut spec = spec.clone();
            spec.effect = ft.config.effect_of(&loaded, &spec);
            if spec.effect != longhand_hands::Effect::ReadOnly
                && !longhand_hands::caps::can_change_anything(loaded.capabilities(), &grants)
            {
                if !longhand_hands::caps::useful_read_only(loaded.capabilities()) {
                    continue;
                }
                spec.effect = longhand_hands::Effect::ReadOnly;
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
                    spec,
                },
            );
        }
        components.push(BoundComponent {
            prefix: ft.prefix.clone(),
            loaded,
            grants,
        });
    }
    let mut mcp = Vec::new();
    for server in &frozen.mcp {
        let bound = super::mcp::bind_server(server, &frozen.base_dir, lookup)
            .await
            .map_err(AgentError::Mcp)?;
        mcp.push(bound);
    }
    Ok(BoundAgent {
        frozen,
        mcp,
        components,
        tools,
        defs,
    })
}
