//! External MCP servers as a [`Toolset`]: each `[[mcp]]` server of the
//! agent offers the tools approved for it (`agent::mcp`), named
//! `<server>__<tool>`, with the effect their annotations claim. A call
//! goes to the server's one long-lived session (`hands::mcp::Server`),
//! which refuses it if the server now defines the tool otherwise than the
//! hash this session was started with.
//!
//! The judge is never offered these tools: their effects are the
//! server's own claims.

use std::sync::Arc;

use serde_json::Value;

use super::{CallCx, Offer, Offered, Outcome, Registered, Toolset};
use crate::agent::bind::BoundAgent;
use crate::agent::frozen::Frozen;
use crate::agent::mcp::FrozenMcpTool;
use crate::model::ToolDef;
use longhand_hands::mcp::Server;

/// One server.
struct McpServer {
    name: String,
    digest: String,
    server: Arc<Server>,
    tools: Vec<FrozenMcpTool>,
    /// Its entry of the frozen agent, as JSON: what an approval covers.
    frozen: Value,
}

/// The toolsets of `agent`'s MCP servers, in the order it lists them.
pub fn sets(agent: &BoundAgent) -> Vec<Arc<dyn Toolset>> {
    agent
        .frozen
        .mcp
        .iter()
        .zip(&agent.mcp)
        .map(|(frozen, (server, tools))| {
            Arc::new(McpServer {
                name: frozen.config.name.clone(),
                digest: frozen.digest(),
                server: Arc::clone(server),
                tools: tools.clone(),
                frozen: serde_json::to_value(&frozen.config).unwrap_or_default(),
            }) as Arc<dyn Toolset>
        })
        .collect()
}

#[async_trait::async_trait]
impl Toolset for McpServer {
    fn component(&self) -> &str {
        &self.name
    }

    fn digest(&self) -> &str {
        &self.digest
    }

    fn offer(&self, _: &Offer<'_>) -> Vec<Offered> {
        self.tools
            .iter()
            .map(|tool| Offered {
                def: ToolDef {
                    name: format!(
                        "{}{}{}",
                        self.name,
                        crate::agent::config::NAME_SEPARATOR,
                        tool.name
                    ),
                    description: tool.description.clone(),
                    input_schema: tool.input_schema.clone(),
                },
                tool: tool.name.clone(),
                effect: tool.effect,
            })
            .collect()
    }

    fn fingerprint_parts(&self, _: &Frozen) -> (String, Value) {
        (self.digest.clone(), self.frozen.clone())
    }

    async fn call(&self, _cx: &CallCx<'_>, tool: &Registered, input: &Value) -> Outcome {
        let hash = self
            .tools
            .iter()
            .find(|t| t.name == tool.tool)
            .map(|t| t.hash.as_str())
            .unwrap_or_default();
        let (result, receipt) = self.server.call(&tool.tool, hash, input).await;
        Outcome::of(result, serde_json::to_value(&receipt).unwrap_or_default())
    }
}
