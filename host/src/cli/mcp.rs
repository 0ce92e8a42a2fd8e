//! `longhand mcp`: serve sandboxed tools to MCP clients (see docs/mcp.md).
//!
//! stdout belongs to the protocol under `--stdio`: everything this command
//! prints goes to stderr, receipts included (one JSON line per call).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use super::settings::GrantFlags;
use super::term::json_line;
use super::{Outcome, usage};
use crate::mcp::server::Server;
use crate::mcp::{Toolbox, ToolboxError, http, stdio};
use longhand_hands::{Hands, HandsConfig};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
#[command(group(clap::ArgGroup::new("tools").required(true).args(["agent", "tool"])))]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct McpArgs {
    /// An agent's own MCP servers (`[[mcp]]`): list them, approve changed
    /// tool definitions.
    #[command(subcommand)]
    action: Option<McpAction>,
    /// Speak MCP on stdin/stdout (one JSON-RPC message per line).
    #[arg(long)]
    stdio: bool,
    /// Speak Streamable HTTP at http://ADDR/mcp. Loopback addresses only
    /// (there is no authentication); port 0 picks a free port, printed on
    /// stderr.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Browser origin allowed to call the HTTP endpoint besides the
    /// server's own (default none), e.g. http://localhost:6274 for the MCP
    /// Inspector.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    origins: Vec<String>,
    /// Serve an agent's tools with its grants (its agent.toml or its
    /// directory). Tools its `approve` table holds for approval are left
    /// out.
    #[arg(long, value_name = "DIR")]
    agent: Option<PathBuf>,
    /// Serve one component's tools (a built-in name or a .wasm path) with
    /// the grant flags below, as `longhand tool call` would run them.
    #[arg(long, value_name = "COMPONENT")]
    tool: Option<String>,
    /// With --tool: serve only these tools (comma-separated). Default all.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', requires = "tool")]
    only: Option<Vec<String>>,
    /// Calls that may run at once; more wait for a slot.
    #[arg(long, value_name = "N", default_value_t = 16)]
    max_concurrent: u32,
    #[command(flatten)]
    grants: Box<GrantFlags>,
}

/// What `longhand mcp` does with an agent's `[[mcp]]` servers.
#[derive(Debug, clap::Subcommand)]
enum McpAction {
    /// Start each `[[mcp]]` server of AGENT under its grants and list its
    /// tools: hash, effect, and whether the definition is the approved one.
    List {
        /// The agent's directory or agent.toml.
        agent: PathBuf,
        /// One JSON object per tool.
        #[arg(long)]
        json: bool,
    },
    /// Accept every tool definition server NAME offers now (review them
    /// with `mcp list` first): written to longhand.mcp.lock beside the
    /// agent; held tools are offered from the next session (or resume).
    Approve {
        /// The agent's directory or agent.toml.
        agent: PathBuf,
        /// The server's `name` in `[[mcp]]`.
        name: String,
    },
}

fn no_grant_flags(g: &GrantFlags) -> bool {
    g.dirs.is_empty()
        && g.mounts.is_empty()
        && g.hosts.is_empty()
        && g.env.is_empty()
        && g.secrets.is_empty()
        && g.memory.is_none()
        && g.timeout.is_none()
        && g.max_output.is_none()
        && g.max_write.is_none()
        && g.host_memory.is_none()
        && g.fuel.is_none()
        && g.digest.is_none()
}

/// The library error as the type [`super::exit_code`] classifies.
fn for_exit_code(error: ToolboxError) -> anyhow::Error {
    match error {
        ToolboxError::Config(e) => e.into(),
        ToolboxError::Agent(e) => e.into(),
        ToolboxError::Load(e) => e.into(),
        e @ (ToolboxError::UnknownTool { .. }
        | ToolboxError::CannotChange(_)
        | ToolboxError::Empty(_)) => usage(e),
    }
}

pub async fn mcp(args: McpArgs) -> anyhow::Result<Outcome> {
    match &args.action {
        Some(McpAction::List { agent, json }) => {
            return super::mcp_client::list(agent, *json).await;
        }
        Some(McpAction::Approve { agent, name }) => {
            return super::mcp_client::approve(agent, name).await;
        }
        None => {}
    }
    if args.agent.is_some() && !no_grant_flags(&args.grants) {
        return Err(usage(
            "grant flags go with --tool; an agent's grants are in its agent.toml",
        ));
    }
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
    {
        return Err(usage(format!(
            "--http {addr}: only loopback addresses are served (there is no authentication); \
             put an authenticating proxy in front to reach it from elsewhere"
        )));
    }
    if args.max_concurrent == 0 {
        return Err(usage("--max-concurrent must be at least 1"));
    }
    let hands = super::env::with_installed(
        Hands::new(HandsConfig {
            max_concurrent_calls: args.max_concurrent,
            ..super::settings::hands_config()
        })
        .context("cannot start the tool host")?,
    )?;
    let lookup = |name: &str| std::env::var(name).ok();
    let toolbox = match (&args.agent, &args.tool) {
        (Some(dir), _) => {
            let (toolbox, held) = Toolbox::agent(&hands, dir, lookup)
                .await
                .map_err(for_exit_code)?;
            if !held.is_empty() {
                eprintln!(
                    "longhand mcp: not serving {} (the agent holds them for approval)",
                    held.join(", ")
                );
            }
            toolbox
        }
        (None, Some(component)) => {
            let grants = args.grants.resolve()?;
            let loaded = Toolbox::load(&hands, component).await?;
            Toolbox::component(loaded, grants, args.only.as_deref()).map_err(for_exit_code)?
        }
        (None, None) => return Err(usage("pass --agent DIR or --tool COMPONENT")),
    };
    if !toolbox.left_out().is_empty() {
        eprintln!(
            "longhand mcp: not serving {} (they write, and the grants let them change nothing: \
             every directory is read-only and no host is allowed)",
            toolbox.left_out().join(", ")
        );
    }
    let count = toolbox.tools().len();
    let server = Server::new(Arc::new(hands), toolbox).with_receipts(Box::new(|tool, outcome| {
        let line = serde_json::json!({
            "tool": tool.name,
            "ok": outcome.result.is_ok(),
            "error": outcome.result.as_ref().err(),
            "receipt": outcome.receipt,
        });
        eprintln!("receipt {}", json_line(&line));
    }));
    let server = Arc::new(server);
    if args.stdio {
        eprintln!("longhand mcp: serving {count} tools on stdio");
        stdio::serve(server, tokio::io::stdin(), tokio::io::stdout())
            .await
            .context("stdio transport")?;
        return Ok(Outcome::Done);
    }
    let addr = args
        .http
        .ok_or_else(|| usage("pass --stdio or --http ADDR"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| usage(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener.local_addr().context("reading the bound address")?;
    eprintln!("longhand mcp: serving {count} tools at http://{bound}/mcp");
    // SIGINT or SIGTERM ends the server at once: calls in flight are
    // dropped (stopped), as at the end of stdin.
    let stop = async {
        #[cfg(unix)]
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    };
    http::serve(listener, server, args.origins, stop)
        .await
        .context("HTTP transport")?;
    Ok(Outcome::Done)
}
