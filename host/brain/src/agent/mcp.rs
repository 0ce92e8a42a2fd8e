//! `[[mcp]]`: an external MCP server an agent uses, its grants, and the
//! tool definitions approved for it.
//!
//! A server is granted like a component: a stdio server gets `programs`
//! (resolved and hashed), `dirs` (pinned), `env` and limits, and runs
//! under `exec`'s sandbox; an HTTP server gets its URL's host and
//! `secrets` the host sends. Its tool definitions are approved by hash in
//! [`PINS_FILE`] beside the agent file: the first session that meets a
//! server records what it offers (trust on first use, said on stderr);
//! afterwards a tool whose definition changed, or a new one, is held —
//! not offered to the model — until `longhand mcp approve AGENT NAME`.
//! A session freezes the definitions it was started with and offers
//! exactly those; a call of a tool whose server now defines it otherwise
//! is refused (the hands compare hashes at every call).
//!
//! This module reads and writes the pins file and starts servers to list
//! them; the registry's side is `tools::mcp`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use super::config::{DEFAULT_MCP_TIMEOUT, McpConfig};

use longhand_hands::mcp::{HttpSpec, Server, ServerSpec, StdioSpec, Transport};
use longhand_hands::{Effect, Grants};

/// The approved definitions' file, beside the agent file.
pub const PINS_FILE: &str = "longhand.mcp.lock";

/// What reaches the server: its spec for the hands, from resolved grants.
pub fn server_spec(config: &McpConfig, grants: &Grants) -> ServerSpec {
    let transport = match &config.url {
        Some(url) => Transport::Http(HttpSpec {
            url: url.clone(),
            hosts: grants.hosts.clone(),
            secrets: grants.secrets.clone(),
        }),
        None => {
            let first = &config.command[0];
            let program = grants
                .programs
                .iter()
                .find(|p| p.answers_to(first))
                .or_else(|| {
                    grants
                        .programs
                        .iter()
                        .find(|p| super::config::names_program(first, &p.name))
                })
                .cloned()
                .expect("checked: command[0] is a granted program");
            let mut env: Vec<(String, String)> = grants
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !grants.env.contains_key("HOME") {
                env.push(("HOME".into(), "/tmp".into()));
            }
            if !grants.env.contains_key("PATH") {
                env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
            }
            Transport::Stdio(Box::new(StdioSpec {
                roots: config.roots.unwrap_or(true),
                program,
                args: config.command[1..].to_vec(),
                dirs: grants.dirs.clone(),
                toolchains: grants.toolchains.clone(),
                env,
                memory: grants.limits.command_memory_bytes,
                processes: grants.limits.processes,
                file_size: grants.limits.max_write_bytes,
            }))
        }
    };
    ServerSpec {
        name: config.name.clone(),
        transport,
        timeout: grants.limits.timeout,
        max_output: grants.limits.max_output_bytes,
    }
}

/// One tool of a server as a session froze it: what the model reads and
/// the hash the server must still have for a call to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrozenMcpTool {
    /// The server's name for it.
    pub name: String,
    /// Its description, as the model reads it (made visible, bounded).
    pub description: String,
    /// Its input schema.
    pub input_schema: serde_json::Value,
    /// From its annotations.
    pub effect: Effect,
    /// `sha256:…` of its definition.
    pub hash: String,
}

/// One server of a frozen agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrozenMcp {
    /// As configured.
    pub config: McpConfig,
    /// Directories as pinned at start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<longhand_hands::DirGrant>,
    /// Programs as resolved and hashed at start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<longhand_hands::programs::ProgramGrant>,
    /// The approved tools offered, in the server's order.
    pub tools: Vec<FrozenMcpTool>,
}

impl FrozenMcp {
    /// What `tool_started.component_digest` records for its calls: the
    /// server's grants and approved definitions, hashed.
    pub fn digest(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or_default();
        format!("mcp:{}", longhand_hands::mcp::defs::hash(&value))
    }
}

/// The approved definitions of every server of one agent (the pins
/// file): server → tool → hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    /// Format version, 1.
    pub version: u32,
    /// By server name.
    #[serde(default)]
    pub servers: BTreeMap<String, BTreeMap<String, String>>,
}

impl Pins {
    /// The pins beside the agent file in `base_dir`; none when there is no
    /// file. A file that cannot be read is an error (refused at start).
    pub fn load(base_dir: &Path) -> Result<Self, String> {
        let path = base_dir.join(PINS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let pins: Pins = serde_json::from_slice(&bytes).map_err(|e| {
                    format!(
                        "{} is not a pins file ({e}); remove it and run `longhand mcp approve` \
                         for each server",
                        path.display()
                    )
                })?;
                if pins.version != 1 {
                    return Err(format!(
                        "{} has version {}; this Longhand reads version 1",
                        path.display(),
                        pins.version
                    ));
                }
                Ok(pins)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Pins {
                version: 1,
                ..Pins::default()
            }),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Write the pins beside the agent file (atomically).
    pub fn save(&self, base_dir: &Path) -> Result<PathBuf, String> {
        let path = base_dir.join(PINS_FILE);
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        let tmp = base_dir.join(format!(".{PINS_FILE}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }
}

/// How a tool the server offers stands against the pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its hash is the approved one.
    Approved,
    /// Approved with another definition: held.
    Changed,
    /// Not approved at all (the server added it): held.
    New,
}

impl Standing {
    /// As `mcp list` prints it.
    pub fn word(self) -> &'static str {
        match self {
            Standing::Approved => "approved",
            Standing::Changed => "changed (held)",
            Standing::New => "new (held)",
        }
    }
}

/// `tool`'s standing under `approved` (the server's pins).
pub fn standing(approved: &BTreeMap<String, String>, tool: &str, hash: &str) -> Standing {
    match approved.get(tool) {
        Some(h) if h == hash => Standing::Approved,
        Some(_) => Standing::Changed,
        None => Standing::New,
    }
}

/// Freeze one server: resolve its grants, start it, list its tools and
/// keep the approved ones (recording them first when the server has no
/// pins yet). Returns the frozen server and a line per tool held, for
/// the operator.
pub async fn freeze_server(
    config: &McpConfig,
    base_dir: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy,
) -> Result<(FrozenMcp, Vec<String>), String> {
    let at = |e: String| format!("[[mcp]] `{}`: {e}", config.name);
    let grants = config
        .grant_spec(base_dir)
        .map_err(at)?
        .resolve(base_dir, lookup)
        .map_err(|e| at(e.to_string()))?;
    let server = Server::new(server_spec(config, &grants));
    let listed = server.tools().await.map_err(|e| e.to_string())?;
    drop(server);
    let mut notes: Vec<String> = listed
        .refused
        .iter()
        .map(|r| {
            format!(
                "MCP server `{}`: tool `{}` is not offered: {}",
                config.name, r.name, r.reason
            )
        })
        .collect();
    let mut pins = Pins::load(base_dir)?;
    let approved = match pins.servers.get(&config.name) {
        Some(approved) => approved.clone(),
        None => {
            let first: BTreeMap<String, String> = listed
                .tools
                .iter()
                .map(|t| (t.name.clone(), t.hash.clone()))
                .collect();
            pins.servers.insert(config.name.clone(), first.clone());
            match pins.save(base_dir) {
                Ok(path) => notes.push(format!(
                    "MCP server `{}`: first use, its {} tool definitions are pinned in {} (a \
                     later change is held until `longhand mcp approve`)",
                    config.name,
                    first.len(),
                    path.display()
                )),
                Err(e) => notes.push(format!(
                    "MCP server `{}`: its definitions could not be pinned ({e}); this session \
                     holds them",
                    config.name
                )),
            }
            first
        }
    };
    if let Some(only) = &config.only
        && let Some(unknown) = only.iter().find(|n| listed.get(n).is_none())
    {
        let offered: Vec<&str> = listed.tools.iter().map(|t| t.name.as_str()).collect();
        return Err(at(format!(
            "`only` names `{}`, which this server does not offer; it offers: {}",
            longhand_hands::bound::name(unknown),
            offered.join(", ")
        )));
    }
    let mut tools = Vec::new();
    for tool in &listed.tools {
        if config
            .only
            .as_ref()
            .is_some_and(|o| !o.contains(&tool.name))
        {
            continue;
        }
        match standing(&approved, &tool.name, &tool.hash) {
            Standing::Approved => tools.push(FrozenMcpTool {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
                effect: tool.effect,
                hash: tool.hash.clone(),
            }),
            held => notes.push(format!(
                "MCP server `{}`: tool `{}` is {} — its definition is not the approved one; \
                 review it with `longhand mcp list AGENT` and accept it with `longhand mcp \
                 approve AGENT {}`",
                config.name,
                tool.name,
                held.word(),
                config.name
            )),
        }
    }
    Ok((
        FrozenMcp {
            config: config.clone(),
            dirs: grants.dirs,
            programs: grants.programs,
            tools,
        },
        notes,
    ))
}

/// The server of a frozen agent, ready to start, and the tools it is
/// offered: its grants as pinned (directories and programs as frozen,
/// checked again), variables and secrets read now. The tools are the
/// frozen ones, except where the operator approved another definition
/// since (`longhand mcp approve`): then the server is listed and the
/// approved definition it now offers replaces (or joins) the frozen one.
pub async fn bind_server(
    frozen: &FrozenMcp,
    base_dir: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy,
) -> Result<(Arc<Server>, Vec<FrozenMcpTool>), String> {
    let at = |e: String| format!("[[mcp]] `{}`: {e}", frozen.config.name);
    let mut config = frozen.config.clone();
    config.dirs.clear();
    config.programs.clear();
    let mut grants = config
        .grant_spec(base_dir)
        .map_err(at)?
        .resolve(base_dir, lookup)
        .map_err(|e| at(e.to_string()))?;
    grants.dirs = frozen.dirs.clone();
    grants.programs = frozen.programs.clone();
    for program in &grants.programs {
        program.verify().map_err(|e| at(e.to_string()))?;
    }
    let server = Arc::new(Server::new(server_spec(&frozen.config, &grants)));
    let mut tools = frozen.tools.clone();
    let approved = Pins::load(base_dir)
        .ok()
        .and_then(|p| p.servers.get(&frozen.config.name).cloned())
        .unwrap_or_default();
    let approved_since = approved.iter().any(|(name, hash)| {
        frozen.config.only.as_ref().is_none_or(|o| o.contains(name))
            && tools
                .iter()
                .find(|t| &t.name == name)
                .is_none_or(|t| &t.hash != hash)
    });
    if approved_since && let Ok(listed) = server.tools().await {
        for def in &listed.tools {
            if approved.get(&def.name) != Some(&def.hash)
                || frozen
                    .config
                    .only
                    .as_ref()
                    .is_some_and(|o| !o.contains(&def.name))
            {
                continue;
            }
            let tool = FrozenMcpTool {
                name: def.name.clone(),
                description: def.description.clone(),
                input_schema: def.input_schema.clone(),
                effect: def.effect,
                hash: def.hash.clone(),
            };
            match tools.iter_mut().find(|t| t.name == def.name) {
                Some(known) => *known = tool,
                None => tools.push(tool),
            }
        }
    }
    Ok((server, tools))
}

/// Start `config`'s server outside any session and list what it offers
/// now (`longhand mcp list` and `approve`). Directories named with
/// `{run}` are left out: a listing needs no run directory.
pub async fn list_server(
    config: &McpConfig,
    base_dir: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy,
) -> Result<Arc<longhand_hands::mcp::Listed>, String> {
    let mut config = config.clone();
    config
        .dirs
        .retain(|d| !d.host_text().contains(super::config::RUN_PLACEHOLDER));
    let grants = config
        .grant_spec(base_dir)
        .map_err(|e| format!("[[mcp]] `{}`: {e}", config.name))?
        .resolve(base_dir, lookup)
        .map_err(|e| format!("[[mcp]] `{}`: {e}", config.name))?;
    let server = Server::new(server_spec(&config, &grants));
    server.tools().await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_started_is_the_one_command_names_among_several() {
        let config: McpConfig = toml::from_str(
            "name = \"s\"\ncommand = [\"sh\", \"-c\", \"true\"]\nprograms = [\"/bin/ls\", \"/bin/sh\"]\n",
        )
        .unwrap();
        config.check().unwrap();
        let grants = config
            .grant_spec(Path::new("/"))
            .unwrap()
            .resolve(Path::new("/"), |_| None)
            .unwrap();
        let Transport::Stdio(stdio) = server_spec(&config, &grants).transport else {
            panic!("a stdio server");
        };
        assert_eq!(stdio.program.name, "/bin/sh");
    }
}
