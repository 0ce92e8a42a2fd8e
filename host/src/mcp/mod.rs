//! The MCP server: sandboxed tools offered to other agents over the Model
//! Context Protocol.
//!
//! A [`Toolbox`] is the set of tools served: either an agent's tools with
//! the agent's grants (bound the way `longhand run` binds them), or one
//! component with the grants of `longhand tool call`'s flags. Every
//! `tools/call` runs through [`Hands::call`] exactly as `tool call` does: a
//! fresh instance, the grants and limits, secrets added by the host, a
//! receipt. Nothing here widens what a tool may reach; an MCP client gets
//! the operator's grants, never more.
//!
//! - [`protocol`]: JSON-RPC framing, the versions spoken, error codes.
//! - [`server`]: one MCP session — the lifecycle, `tools/list`,
//!   `tools/call` (concurrent, cancellable), `ping` — over any transport.
//! - [`stdio`]: newline-delimited JSON-RPC on stdin/stdout.
//! - [`http`]: Streamable HTTP (POST answering JSON or SSE, sessions,
//!   version and Origin checks), loopback only.
//!
//! Written here rather than taken from an SDK: the protocol is small, and
//! what a remote client may do (which methods exist, what an error leaks,
//! when a call stops) is the security surface, so it stays in our hands.
//!
//! What this module must not do: know about sessions, models or the agent
//! loop beyond binding an agent's tools; record anything in a session log.

pub mod http;
pub mod protocol;
pub mod server;
pub mod stdio;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use longhand_brain::RunError;
use longhand_brain::agent::config::{AgentConfig, ApprovePolicy, ConfigError, approve_policy};
use longhand_hands::{
    Effect, Grants, Hands, LoadError, LoadedTool, ToolSource, ToolSpec, bound, caps,
};

/// One tool as MCP clients see it, bound to its component and grants.
#[derive(Clone)]
pub struct ServedTool {
    /// The MCP tool name: the tool's own name for a single component, the
    /// model's name (`fs__read`) for an agent's tools.
    pub name: String,
    /// The tool's name inside its component.
    pub tool: String,
    /// The component that runs it.
    pub component: Arc<LoadedTool>,
    /// What each call is granted.
    pub grants: Arc<Grants>,
    /// Its `describe` entry.
    pub spec: ToolSpec,
}

impl ServedTool {
    /// The MCP `Tool` object: name, description, input schema, and — from
    /// protocol 2025-03-26 on, which introduced them — annotations.
    pub fn to_mcp(&self, annotations: bool) -> Value {
        let mut tool = json!({
            "name": self.name,
            "description": self.spec.description,
            "inputSchema": self.spec.input_schema,
        });
        if annotations {
            tool["annotations"] = self.annotations();
        }
        tool
    }

    /// Hints from the tool's effect and grants (see docs/mcp.md):
    /// `read-only` is read-only and idempotent; `idempotent` writes
    /// (overwrites) and is idempotent; `writes` is destructive and not
    /// idempotent. `openWorldHint` is true only when the grants let the tool
    /// reach hosts: a tool granted only directories works in a closed world.
    pub fn annotations(&self) -> Value {
        let (read_only, destructive, idempotent) = match self.spec.effect {
            Effect::ReadOnly => (true, false, true),
            Effect::Idempotent => (false, true, true),
            Effect::Writes => (false, true, false),
        };
        json!({
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": !self.grants.hosts.is_empty(),
        })
    }
}

/// Why a toolbox could not be built. Every variant is the operator's to
/// fix (exit 2), except a component refused for its imports (exit 3, as
/// `tool call` exits).
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    /// The agent file is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Freezing or binding the agent failed (a component, a grant).
    #[error(transparent)]
    Agent(#[from] RunError),
    /// The component could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `--only` names a tool the component does not offer.
    #[error(
        "{} has no tool `{}`; it offers: {offered}",
        bound::cut_str(.component, bound::MAX_PATH_BYTES),
        bound::name(.name)
    )]
    UnknownTool {
        /// The component.
        component: String,
        /// The name given.
        name: String,
        /// What it offers.
        offered: String,
    },
    /// `--only` names a tool that can only fail under the grants given:
    /// it declares a write effect and nothing granted lets it change
    /// anything (see [`caps::can_change_anything`]).
    #[error(
        "`{}` writes, but these grants let it change nothing (every directory is read-only and \
         no host is allowed), so every call would fail; grant a read-write directory \
         (--dir PATH:GUEST:rw) or a host, or leave it out of --only",
        bound::name(.0)
    )]
    CannotChange(String),
    /// Nothing would be served.
    #[error("no tool to serve: {0}")]
    Empty(String),
}

/// The tools one server offers, in a fixed order.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Vec<ServedTool>,
    /// Tools not served because they can only fail (see
    /// [`Toolbox::left_out`]).
    inert: Vec<String>,
}

/// Whether a tool can do what it declares under its grants: a read-only
/// tool always can; a tool with a write effect only when some capability
/// its component imports lets it change something (a read-write
/// directory, an allowed host). The rule follows the capability table, so
/// a new capability brings its own answer; no tool is named here.
fn can_act(component: &LoadedTool, grants: &Grants, spec: &ToolSpec) -> bool {
    spec.effect == Effect::ReadOnly || caps::can_change_anything(component.capabilities(), grants)
}

impl Toolbox {
    /// The tools, in listing order.
    pub fn tools(&self) -> &[ServedTool] {
        &self.tools
    }

    /// Tools left out because they declare a write effect and their
    /// grants let them change nothing, so every call could only fail
    /// (`fs`'s `write` and `edit` with read-only directories). Offering
    /// them would only invite a client to try.
    pub fn left_out(&self) -> &[String] {
        &self.inert
    }

    /// The tool an MCP client calls `name`.
    pub fn get(&self, name: &str) -> Option<&ServedTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// One component's tools (all, or those in `only`) under `grants`,
    /// named as the component names them.
    pub fn component(
        component: Arc<LoadedTool>,
        grants: Grants,
        only: Option<&[String]>,
    ) -> Result<Self, ToolboxError> {
        let offered = component.tool_names();
        if let Some(only) = only
            && let Some(unknown) = only.iter().find(|n| !offered.contains(&n.as_str()))
        {
            return Err(ToolboxError::UnknownTool {
                component: component.label().to_owned(),
                name: unknown.clone(),
                offered: offered.join(", "),
            });
        }
        let mut tools = Vec::new();
        let mut inert = Vec::new();
        let grants = Arc::new(grants);
        for spec in &component.info().tools {
            if only.is_some_and(|o| !o.contains(&spec.name)) {
                continue;
            }
            if !can_act(&component, &grants, spec) {
                // Named on purpose: say why rather than serve a tool that
                // fails every call.
                if only.is_some() {
                    return Err(ToolboxError::CannotChange(spec.name.clone()));
                }
                inert.push(spec.name.clone());
                continue;
            }
            tools.push(ServedTool {
                name: spec.name.clone(),
                tool: spec.name.clone(),
                component: component.clone(),
                grants: grants.clone(),
                spec: spec.clone(),
            });
        }
        if tools.is_empty() {
            return Err(ToolboxError::Empty(format!(
                "every tool of {} writes and these grants let it change nothing ({}); \
                 grant a read-write directory (--dir PATH:GUEST:rw) or a host",
                bound::cut_str(component.label(), bound::MAX_PATH_BYTES),
                inert.join(", ")
            )));
        }
        Ok(Self { tools, inert })
    }

    /// An agent's tools with its grants, loaded and bound as `longhand run`
    /// binds them (digests pinned, `{run}` directories created, `only`
    /// honoured). `lookup` reads environment variables (env grants and
    /// secrets).
    ///
    /// A tool the agent's `approve` table holds for a person's approval is
    /// left out, and named in the returned list: an MCP call has no one to
    /// approve it, and serving it would skip the approval the operator
    /// asked for.
    pub async fn agent(
        hands: &Hands,
        dir: &Path,
        lookup: impl Fn(&str) -> Option<String> + Copy + Send + Sync,
    ) -> Result<(Self, Vec<String>), ToolboxError> {
        let (config, base) = AgentConfig::load(dir)?;
        let frozen = longhand_brain::freeze(hands, &config, &base, lookup).await?;
        let bound = longhand_brain::bind(hands, frozen, lookup).await?;
        let approve = &bound.frozen().approve;
        let mut tools = Vec::new();
        let mut held = Vec::new();
        let mut inert = Vec::new();
        for (name, component, grants, spec) in bound.bound_tools() {
            if !can_act(component, grants, spec) {
                inert.push(name.to_owned());
                continue;
            }
            let needs_approval = match approve_policy(approve, name) {
                ApprovePolicy::Never => false,
                ApprovePolicy::Writes => spec.effect != Effect::ReadOnly,
                ApprovePolicy::Always => true,
            };
            if needs_approval {
                held.push(name.to_owned());
                continue;
            }
            tools.push(ServedTool {
                name: name.to_owned(),
                tool: spec.name.clone(),
                component: component.clone(),
                grants: Arc::new(grants.clone()),
                spec: spec.clone(),
            });
        }
        if tools.is_empty() {
            let name = bound::name(&config.name);
            let mut why = Vec::new();
            if !held.is_empty() {
                why.push(format!("held for approval: {}", held.join(", ")));
            }
            if !inert.is_empty() {
                why.push(format!(
                    "writing, with grants that let them change nothing: {}",
                    inert.join(", ")
                ));
            }
            return Err(ToolboxError::Empty(if why.is_empty() {
                format!("{name} has no tools")
            } else {
                format!("no tool of {name} can be served ({})", why.join("; "))
            }));
        }
        Ok((Self { tools, inert }, held))
    }

    /// Load a component by name (built-in) or path, as `tool call` does.
    pub async fn load(hands: &Hands, component: &str) -> Result<Arc<LoadedTool>, LoadError> {
        let source = if component.ends_with(".wasm") || component.contains('/') {
            ToolSource::File(Path::new(component))
        } else {
            ToolSource::Builtin(component)
        };
        hands.load(source).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhand_hands::Access;

    #[tokio::test]
    async fn annotations_follow_effects_and_grants() {
        let hands = Hands::new(longhand_hands::HandsConfig::default()).unwrap();
        let fs = Toolbox::load(&hands, "fs").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let box_ = Toolbox::component(fs, dir_grant(dir.path(), Access::ReadWrite), None).unwrap();
        let hint = |name: &str, key: &str| box_.get(name).unwrap().annotations()[key].clone();
        assert_eq!(hint("read", "readOnlyHint"), json!(true));
        assert_eq!(hint("read", "destructiveHint"), json!(false));
        assert_eq!(hint("write", "readOnlyHint"), json!(false));
        assert_eq!(hint("write", "idempotentHint"), json!(true));
        assert_eq!(hint("edit", "idempotentHint"), json!(false));
        assert_eq!(hint("edit", "destructiveHint"), json!(true));
        // No host granted: a closed world.
        assert_eq!(hint("read", "openWorldHint"), json!(false));

        let http = Toolbox::load(&hands, "http").await.unwrap();
        let grants = longhand_hands::GrantSpec {
            hosts: vec!["example.com".to_owned()],
            ..Default::default()
        }
        .resolve(Path::new("/"), |_| None)
        .unwrap();
        let box_ = Toolbox::component(http, grants, Some(&["get".to_owned()])).unwrap();
        assert_eq!(box_.tools().len(), 1);
        assert_eq!(
            box_.get("get").unwrap().annotations()["openWorldHint"],
            json!(true)
        );
        // 2024-11-05 had no annotations.
        assert!(
            box_.get("get")
                .unwrap()
                .to_mcp(false)
                .get("annotations")
                .is_none()
        );
    }

    fn dir_grant(path: &Path, access: Access) -> Grants {
        longhand_hands::GrantSpec {
            dirs: vec![longhand_hands::DirSpec {
                host_path: path.to_owned(),
                guest_path: "/workspace".to_owned(),
                access,
                symlinks: false,
            }],
            ..Default::default()
        }
        .resolve(Path::new("/"), |_| None)
        .unwrap()
    }

    #[tokio::test]
    async fn tools_that_can_only_fail_are_left_out() {
        let hands = Hands::new(longhand_hands::HandsConfig::default()).unwrap();
        let fs = Toolbox::load(&hands, "fs").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let names = |b: &Toolbox| b.tools().iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        for grants in [Grants::default(), dir_grant(dir.path(), Access::ReadOnly)] {
            let box_ = Toolbox::component(fs.clone(), grants.clone(), None).unwrap();
            assert!(!names(&box_).is_empty());
            assert!(
                box_.tools()
                    .iter()
                    .all(|t| t.spec.effect == Effect::ReadOnly)
            );
            assert!(box_.left_out().contains(&"write".to_owned()));
            assert!(box_.left_out().contains(&"edit".to_owned()));
            let only = Toolbox::component(fs.clone(), grants, Some(&["edit".to_owned()]));
            let err = only.err().unwrap();
            assert!(matches!(err, ToolboxError::CannotChange(_)), "{err}");
        }
        let rw = Toolbox::component(fs, dir_grant(dir.path(), Access::ReadWrite), None).unwrap();
        assert!(names(&rw).contains(&"write".to_owned()));
        assert!(rw.left_out().is_empty());

        // A tool that writes through the network needs a host, not a
        // directory.
        let http = Toolbox::load(&hands, "http").await.unwrap();
        let writes_over_http = http
            .info()
            .tools
            .iter()
            .filter(|t| t.effect != Effect::ReadOnly)
            .map(|t| t.name.clone())
            .collect::<Vec<_>>();
        assert!(!writes_over_http.is_empty());
        let closed =
            Toolbox::component(http.clone(), dir_grant(dir.path(), Access::ReadWrite), None)
                .unwrap();
        assert_eq!(closed.left_out(), writes_over_http.as_slice());
        let open = longhand_hands::GrantSpec {
            hosts: vec!["example.com".to_owned()],
            ..Default::default()
        }
        .resolve(Path::new("/"), |_| None)
        .unwrap();
        let open = Toolbox::component(http, open, None).unwrap();
        assert!(open.left_out().is_empty());
    }

    #[tokio::test]
    async fn only_names_a_tool_the_component_offers() {
        let hands = Hands::new(longhand_hands::HandsConfig::default()).unwrap();
        let fs = Toolbox::load(&hands, "fs").await.unwrap();
        let err = Toolbox::component(fs, Grants::default(), Some(&["rm".to_owned()]))
            .err()
            .unwrap();
        assert!(err.to_string().contains("has no tool `rm`"), "{err}");
    }
}
