//! `longhand mcp list AGENT` and `longhand mcp approve AGENT NAME`: the
//! operator's view of an agent's `[[mcp]]` servers and the one way to
//! accept a server's changed tool definitions (see docs/agent.md,
//! "MCP servers").
//!
//! Both start each server under its grants, as a session would, list its
//! tools and compare their hashes with the pins file beside the agent
//! (`longhand.mcp.lock`). Descriptions are the server's text: printed
//! through [`super::term`], never raw.

use std::path::Path;

use anyhow::Context;

use super::term::{json_line, one_line};
use super::{Outcome, usage};
use longhand_brain::agent::config::AgentConfig;
use longhand_brain::agent::mcp::{self, Pins, Standing};

fn lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn load(agent: &Path) -> anyhow::Result<(AgentConfig, std::path::PathBuf)> {
    let (config, base) = AgentConfig::load(agent)?;
    let base = std::fs::canonicalize(&base).unwrap_or(base);
    Ok((config, base))
}

/// `longhand mcp list AGENT [--json]`.
pub async fn list(agent: &Path, json: bool) -> anyhow::Result<Outcome> {
    let (config, base) = load(agent)?;
    if config.mcp.is_empty() {
        return Err(usage(format!("{} has no [[mcp]] servers", agent.display())));
    }
    let pins = Pins::load(&base).map_err(usage)?;
    let mut failed = false;
    for server in &config.mcp {
        let approved = pins.servers.get(&server.name);
        let listed = match mcp::list_server(server, &base, lookup).await {
            Ok(listed) => listed,
            Err(e) => {
                failed = true;
                if json {
                    println!(
                        "{}",
                        json_line(&serde_json::json!({"server": server.name, "error": e}))
                    );
                } else {
                    println!("{}: cannot list: {}", server.name, one_line(&e));
                }
                continue;
            }
        };
        if !json {
            println!(
                "{} ({}){}",
                server.name,
                if server.url.is_some() {
                    "http"
                } else {
                    "stdio"
                },
                if approved.is_none() {
                    " — no definitions approved yet: the next session pins these"
                } else {
                    ""
                }
            );
        }
        for tool in &listed.tools {
            let standing = approved.map(|a| mcp::standing(a, &tool.name, &tool.hash));
            let word = standing.map_or("unpinned", Standing::word);
            let offered = server.only.as_ref().is_none_or(|o| o.contains(&tool.name));
            if json {
                println!(
                    "{}",
                    json_line(&serde_json::json!({
                        "server": server.name,
                        "tool": tool.name,
                        "hash": tool.hash,
                        "effect": tool.effect,
                        "standing": word,
                        "offered": offered,
                        "description": tool.description,
                    }))
                );
            } else {
                let first = tool.description.lines().next().unwrap_or("");
                println!(
                    "  {}__{:<28} {:<10} {} {}{}",
                    server.name,
                    tool.name,
                    serde_json::to_value(tool.effect)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    &tool.hash[..tool.hash.len().min(19)],
                    word,
                    if offered { "" } else { " (not in `only`)" }
                );
                if standing != Some(Standing::Approved) {
                    println!(
                        "      {}",
                        one_line(&longhand_hands::bound::visible(first, 300))
                    );
                }
            }
        }
        if let Some(approved) = approved {
            for gone in approved.keys().filter(|n| listed.get(n).is_none()) {
                if json {
                    println!(
                        "{}",
                        json_line(
                            &serde_json::json!({"server": server.name, "tool": gone, "standing": "gone"})
                        )
                    );
                } else {
                    println!("  {}__{gone}: approved, no longer offered", server.name);
                }
            }
        }
        for refused in &listed.refused {
            if json {
                println!(
                    "{}",
                    json_line(
                        &serde_json::json!({"server": server.name, "tool": refused.name, "standing": "refused", "reason": refused.reason})
                    )
                );
            } else {
                println!(
                    "  {} not offered: {}",
                    one_line(&refused.name),
                    one_line(&refused.reason)
                );
            }
        }
    }
    if failed {
        return Err(anyhow::anyhow!(
            "some servers could not be listed (see above)"
        ));
    }
    Ok(Outcome::Done)
}

/// `longhand mcp approve AGENT NAME`: accept every definition server
/// NAME offers now.
pub async fn approve(agent: &Path, name: &str) -> anyhow::Result<Outcome> {
    let (config, base) = load(agent)?;
    let Some(server) = config.mcp.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = config.mcp.iter().map(|s| s.name.as_str()).collect();
        return Err(usage(format!(
            "{} has no [[mcp]] server named `{}`; it has: {}",
            agent.display(),
            one_line(name),
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        )));
    };
    let listed = mcp::list_server(server, &base, lookup)
        .await
        .map_err(|e| anyhow::anyhow!(e))
        .context("listing the server's tools")?;
    let mut pins = Pins::load(&base).map_err(usage)?;
    let before = pins.servers.get(name).cloned().unwrap_or_default();
    let now: std::collections::BTreeMap<String, String> = listed
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.hash.clone()))
        .collect();
    let mut changes = 0;
    for tool in &listed.tools {
        match mcp::standing(&before, &tool.name, &tool.hash) {
            Standing::Approved => {}
            standing => {
                changes += 1;
                eprintln!(
                    "approved {}__{} ({}): {}",
                    name,
                    tool.name,
                    if standing == Standing::New {
                        "new"
                    } else {
                        "changed"
                    },
                    one_line(&longhand_hands::bound::visible(
                        tool.description.lines().next().unwrap_or(""),
                        300
                    ))
                );
            }
        }
    }
    for gone in before.keys().filter(|n| !now.contains_key(*n)) {
        changes += 1;
        eprintln!("removed {name}__{gone}: no longer offered");
    }
    pins.version = 1;
    pins.servers.insert(name.to_owned(), now);
    let path = pins.save(&base).map_err(|e| anyhow::anyhow!(e))?;
    eprintln!(
        "{} definitions of `{name}` approved in {} ({changes} changed)",
        listed.tools.len(),
        path.display()
    );
    Ok(Outcome::Done)
}
