//! Longhand as an MCP client: other people's MCP servers, contained.
//!
//! A [`Server`] is one long-lived session with one server for as long as
//! the agent session runs (not one per call: stateful servers keep their
//! state), over stdio ([`stdio`]: the server runs under `exec`'s sandbox)
//! or Streamable HTTP ([`http`]: through the guest's door out, with the
//! same host, address and secret rules). When the session ends — the
//! server crashed, flooded us, closed its pipe — the call in flight fails,
//! and the next call starts a new session after a backoff that doubles
//! with each failure in a row (0.5 s to 30 s).
//!
//! What the server says is hostile input: its tool definitions are parsed
//! under bounds ([`defs`]), every message is bounded, its requests for
//! sampling or elicitation are refused, and a result reaches the model as
//! bounded JSON with binary content replaced by its size.
//!
//! What this module must not do: decide which definitions are approved
//! (the brain's pins do), or which effect a call is recorded with.

pub mod defs;
mod http;
mod rpc;
mod stdio;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

pub use defs::{Listed, ToolDefinition};

use crate::CallError;
use crate::grants::{DirGrant, HostPattern, SecretGrant};
use crate::programs::ProgramGrant;

/// Protocol versions this client speaks, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How long `initialize` may take, at most (a server's `timeout` may be
/// shorter).
const INITIALIZE_WITHIN: Duration = Duration::from_secs(30);

/// Longest wait between two starts of a failing server.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One server, as the operator granted it.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Its name: its tools are `<name>__<tool>`.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Time one call (and `initialize`, and one listing) may take.
    pub timeout: Duration,
    /// Bytes of a result given to the model.
    pub max_output: u64,
}

/// How a server is reached.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A program started under the sandbox, speaking on stdin and stdout.
    Stdio(Box<StdioSpec>),
    /// A Streamable HTTP endpoint.
    Http(HttpSpec),
}

/// A stdio server's grants.
#[derive(Debug, Clone)]
pub struct StdioSpec {
    /// The program (`command[0]`), resolved and hashed.
    pub program: ProgramGrant,
    /// `command[1..]`.
    pub args: Vec<String>,
    /// Directories it sees, at their guest paths; offered as its roots.
    pub dirs: Vec<DirGrant>,
    /// Host directories it sees read-only at their own paths.
    pub toolchains: Vec<PathBuf>,
    /// Its environment, exactly.
    pub env: Vec<(String, String)>,
    /// Address space of each of its processes, bytes.
    pub memory: u64,
    /// Processes it may have at once.
    pub processes: u64,
    /// Largest file it may write, bytes.
    pub file_size: u64,
    /// Whether its `dirs` are offered as MCP roots.
    pub roots: bool,
}

/// An HTTP server's grants.
#[derive(Debug, Clone)]
pub struct HttpSpec {
    /// The endpoint.
    pub url: String,
    /// Hosts it may be reached at (its URL's own host).
    pub hosts: Vec<HostPattern>,
    /// Secrets the host adds to requests (a bearer token).
    pub secrets: Vec<SecretGrant>,
}

/// Why a server's tools could not be listed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    /// The server's name.
    pub server: String,
    /// What went wrong and what to do.
    pub message: String,
}

/// What a call did, beside its result: for the receipt.
#[derive(Debug, Clone, Default, Serialize)]
pub struct McpReceipt {
    /// Wall time, microseconds.
    pub wall_us: u64,
    /// The server.
    pub server: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Bytes of the result as the server sent it (its JSON).
    pub bytes_in: u64,
    /// Limits the call reached (`timeout`, `output`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits_hit: Vec<String>,
    /// The server's log lines at the end of the call (its last few).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    /// Whether this call started (or restarted) the server's session.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub started_server: bool,
}

/// The live session and what is known of past failures.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<rpc::Conn>>,
    /// The listing of the live session.
    listed: Option<Arc<Listed>>,
    failures: u32,
    not_before: Option<Instant>,
}

/// One server for one agent session.
pub struct Server {
    spec: ServerSpec,
    slot: tokio::sync::Mutex<Slot>,
}

impl Server {
    /// A server not yet started (it starts at the first listing or call).
    pub fn new(spec: ServerSpec) -> Self {
        Server {
            spec,
            slot: tokio::sync::Mutex::new(Slot::default()),
        }
    }

    /// Its grants.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    fn error(&self, message: impl Into<String>) -> McpError {
        McpError {
            server: self.spec.name.clone(),
            message: message.into(),
        }
    }

    fn transport_name(&self) -> &'static str {
        match self.spec.transport {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
        }
    }

    /// Bytes one message from the server may be: four times the result
    /// given to the model (JSON escaping, content blocks), at least 1 MiB.
    fn max_message(&self) -> usize {
        usize::try_from(self.spec.max_output.saturating_mul(4))
            .unwrap_or(usize::MAX)
            .max(1 << 20)
    }

    /// The tools the server offers now, listing them again when it said
    /// its list changed (or the session was restarted).
    pub async fn tools(&self) -> Result<Arc<Listed>, McpError> {
        let mut slot = self.slot.lock().await;
        self.live(&mut slot).await?;
        self.listing(&mut slot).await
    }

    /// The live session, started when there is none (after the backoff).
    async fn live(&self, slot: &mut Slot) -> Result<(Arc<rpc::Conn>, bool), McpError> {
        if let Some(conn) = &slot.conn
            && conn.closed_reason().is_none()
        {
            return Ok((Arc::clone(conn), false));
        }
        slot.conn = None;
        slot.listed = None;
        if let Some(at) = slot.not_before {
            let wait = at.saturating_duration_since(Instant::now());
            if wait > self.spec.timeout {
                return Err(self.error(format!(
                    "it failed {} times in a row and is restarted in {} s",
                    slot.failures,
                    wait.as_secs()
                )));
            }
            tokio::time::sleep(wait).await;
        }
        match self.connect().await {
            Ok(conn) => {
                slot.conn = Some(Arc::clone(&conn));
                slot.failures = 0;
                slot.not_before = None;
                Ok((conn, true))
            }
            Err(e) => {
                slot.failures += 1;
                let backoff = Duration::from_millis(500)
                    .saturating_mul(1 << slot.failures.min(8))
                    .min(MAX_BACKOFF);
                slot.not_before = Some(Instant::now() + backoff);
                Err(e)
            }
        }
    }

    /// Start a session: the transport, then `initialize`.
    async fn connect(&self) -> Result<Arc<rpc::Conn>, McpError> {
        let roots = match &self.spec.transport {
            Transport::Stdio(s) if s.roots => {
                s.dirs.iter().map(|d| d.guest_path().to_owned()).collect()
            }
            Transport::Stdio(_) => Vec::new(),
            Transport::Http(_) => Vec::new(),
        };
        let (conn, outbox) = rpc::Conn::new(roots);
        let negotiated = match &self.spec.transport {
            Transport::Stdio(spec) => {
                stdio::start(spec, &conn, outbox, self.max_message())
                    .await
                    .map_err(|e| self.error(format!("cannot start it: {e}")))?;
                None
            }
            Transport::Http(spec) => Some(
                http::start(spec, &conn, outbox, self.max_message()).map_err(|e| self.error(e))?,
            ),
        };
        let mut capabilities = json!({});
        if conn.has_roots() {
            capabilities["roots"] = json!({"listChanged": false});
        }
        let within = self.spec.timeout.min(INITIALIZE_WITHIN);
        let answer = conn
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSIONS[0],
                    "capabilities": capabilities,
                    "clientInfo": {"name": "longhand", "version": env!("CARGO_PKG_VERSION")},
                }),
                within,
            )
            .await;
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                conn.close("initialize failed".into());
                return Err(self.error(format!("it did not initialize: {e}")));
            }
        };
        let version = answer
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !PROTOCOL_VERSIONS.contains(&version) {
            conn.close("unsupported protocol version".into());
            return Err(self.error(format!(
                "it speaks MCP version {:?}; Longhand speaks {}",
                crate::bound::visible(version, 64),
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
        if let Some(n) = negotiated {
            n.set_version(version);
        }
        conn.notify("notifications/initialized", json!({}));
        Ok(conn)
    }

    /// The live session's listing: cached until the server says its list
    /// changed.
    async fn listing(&self, slot: &mut Slot) -> Result<Arc<Listed>, McpError> {
        let Some(conn) = slot.conn.clone() else {
            return Err(self.error("it is not running"));
        };
        if let Some(listed) = &slot.listed
            && !conn.tools_changed.load(Ordering::Relaxed)
        {
            return Ok(Arc::clone(listed));
        }
        conn.tools_changed.store(false, Ordering::Relaxed);
        let mut raw = Vec::new();
        let mut cursor: Option<Value> = None;
        for page in 0.. {
            if page == defs::MAX_PAGES {
                return Err(self.error(format!(
                    "its tool list goes on past {} pages; Longhand reads at most that many",
                    defs::MAX_PAGES
                )));
            }
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let answer = conn
                .request("tools/list", params, self.spec.timeout)
                .await
                .map_err(|e| self.error(format!("cannot list its tools: {e}")))?;
            let Some(tools) = answer.get("tools").and_then(Value::as_array) else {
                return Err(self.error("its tools/list answer has no `tools` list"));
            };
            raw.extend(tools.iter().cloned());
            if raw.len() > defs::MAX_TOOLS {
                conn.close("too many tools".into());
                return Err(self.error(format!(
                    "it offers more than {} tools; Longhand takes at most that many from one \
                     server",
                    defs::MAX_TOOLS
                )));
            }
            cursor = answer.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        let listed = Arc::new(defs::parse(&self.spec.name, raw));
        slot.listed = Some(Arc::clone(&listed));
        Ok(listed)
    }

    /// Call `tool` with `input`, if its definition still has `hash` (the
    /// one approved): a tool the server changed since is refused, not
    /// run. The input is checked against the tool's schema first.
    pub async fn call(
        &self,
        tool: &str,
        hash: &str,
        input: &Value,
    ) -> (Result<Value, CallError>, McpReceipt) {
        let started = Instant::now();
        let mut receipt = McpReceipt {
            server: self.spec.name.clone(),
            transport: self.transport_name(),
            ..McpReceipt::default()
        };
        let result = self.call_inner(tool, hash, input, &mut receipt).await;
        receipt.wall_us = started.elapsed().as_micros() as u64;
        (result, receipt)
    }

    async fn call_inner(
        &self,
        tool: &str,
        hash: &str,
        input: &Value,
        receipt: &mut McpReceipt,
    ) -> Result<Value, CallError> {
        let host = |message: String| CallError::Host { message };
        let (conn, definition) = {
            let mut slot = self.slot.lock().await;
            let (conn, started) = self
                .live(&mut slot)
                .await
                .map_err(|e| host(e.to_string()))?;
            receipt.started_server = started;
            let listed = self
                .listing(&mut slot)
                .await
                .map_err(|e| host(e.to_string()))?;
            let Some(definition) = listed.get(tool).cloned() else {
                return Err(CallError::NotFound {
                    message: format!(
                        "MCP server `{}` no longer offers tool `{}`",
                        self.spec.name,
                        crate::bound::name(tool)
                    ),
                });
            };
            (conn, definition)
        };
        if definition.hash != hash {
            return Err(CallError::Refused {
                message: format!(
                    "MCP server `{}` changed the definition of `{tool}` since it was approved \
                     ({hash} → {}); the tool is held until the operator runs `longhand mcp \
                     approve AGENT {}`",
                    self.spec.name, definition.hash, self.spec.name
                ),
            });
        }
        match definition.schema.validate(input) {
            Ok(()) => {}
            Err(crate::schema::Rejection::Invalid(errors)) => {
                return Err(CallError::InvalidInput {
                    message: errors.join("; "),
                });
            }
            Err(crate::schema::Rejection::Limit(message)) => {
                receipt.limits_hit.push(message.clone());
                return Err(CallError::Limit { message });
            }
        }
        let answer = conn
            .request(
                "tools/call",
                json!({"name": tool, "arguments": input}),
                self.spec.timeout,
            )
            .await;
        receipt.logs = conn.recent_logs(8);
        let answer = match answer {
            Ok(answer) => answer,
            Err(rpc::RpcError::Server { code, message }) => {
                return Err(if code == -32602 {
                    CallError::InvalidInput { message }
                } else {
                    CallError::Failed {
                        message: format!("the MCP server answered error {code}: {message}"),
                    }
                });
            }
            Err(rpc::RpcError::TooLarge(message)) => {
                receipt.limits_hit.push("output".into());
                return Err(CallError::Limit { message });
            }
            Err(rpc::RpcError::Unreadable(message)) => {
                return Err(CallError::Failed { message });
            }
            Err(rpc::RpcError::Closed(why)) => {
                if why.starts_with("no answer to") {
                    receipt.limits_hit.push("timeout".into());
                    return Err(CallError::Limit {
                        message: format!(
                            "MCP server `{}` gave no answer within {} (the call was cancelled; \
                             whether it had any effect is not known)",
                            self.spec.name,
                            humantime::format_duration(self.spec.timeout)
                        ),
                    });
                }
                return Err(CallError::Crashed {
                    message: format!(
                        "{why}; the call's outcome is not known (it may have taken effect), and \
                         the server is started again at the next call"
                    ),
                });
            }
        };
        receipt.bytes_in = serde_json::to_string(&answer).map_or(0, |s| s.len() as u64);
        let (ok, value) = result_value(&answer, self.spec.max_output, receipt);
        if ok {
            Ok(value)
        } else {
            Err(CallError::Failed {
                message: serde_json::to_string(&value).unwrap_or_default(),
            })
        }
    }
}

/// A `tools/call` result as the model reads it: `structuredContent` when
/// the server gave one, else the content blocks, text kept and binary data
/// replaced by its type and size; bounded to `max_output` bytes of JSON.
/// Whether the server said it failed (`isError`).
fn result_value(answer: &Value, max_output: u64, receipt: &mut McpReceipt) -> (bool, Value) {
    let failed = answer.get("isError").and_then(Value::as_bool) == Some(true);
    let blocks: Vec<Value> = answer
        .get("content")
        .and_then(Value::as_array)
        .map(|items| items.iter().take(256).map(block).collect())
        .unwrap_or_default();
    let mut value = json!({"content": blocks});
    if let Some(structured) = answer.get("structuredContent").filter(|s| !s.is_null()) {
        value["structuredContent"] = structured.clone();
    }
    let limit = usize::try_from(max_output).unwrap_or(usize::MAX);
    let size = serde_json::to_string(&value).map_or(0, |s| s.len());
    if size > limit {
        receipt.limits_hit.push("output".into());
        // The text of the blocks, head and tail, in the room there is.
        let text: String = blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        let room = limit.saturating_sub(256) / 2;
        let head_end = text.floor_char_boundary(room.min(text.len()));
        let tail_start = text.ceil_char_boundary(text.len().saturating_sub(room).max(head_end));
        let cut = size - (head_end + text.len() - tail_start);
        value = json!({
            "content": [{"type": "text", "text": format!(
                "{}\n[… {cut} bytes cut: the result was {size} bytes, over the {limit}-byte limit …]\n{}",
                &text[..head_end], &text[tail_start..]
            )}],
            "truncated_bytes": cut,
        });
    }
    (!failed, value)
}

/// One content block for the model.
fn block(item: &Value) -> Value {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => json!({"type": "text", "text": item.get("text").cloned().unwrap_or_default()}),
        "image" | "audio" => json!({
            "type": kind,
            "mimeType": item.get("mimeType").cloned().unwrap_or_default(),
            "omitted_bytes": item.get("data").and_then(Value::as_str).map_or(0, |d| d.len() * 3 / 4),
        }),
        "resource_link" => json!({
            "type": kind,
            "uri": item.get("uri").cloned().unwrap_or_default(),
            "name": item.get("name").cloned().unwrap_or_default(),
        }),
        "resource" => {
            let resource = item.get("resource").cloned().unwrap_or_default();
            match resource.get("text") {
                Some(text) => {
                    json!({"type": kind, "uri": resource.get("uri").cloned().unwrap_or_default(), "text": text})
                }
                None => json!({
                    "type": kind,
                    "uri": resource.get("uri").cloned().unwrap_or_default(),
                    "omitted_bytes": resource.get("blob").and_then(Value::as_str).map_or(0, |d| d.len() * 3 / 4),
                }),
            }
        }
        _ => json!({"type": "unsupported", "was": crate::bound::visible(kind, 64)}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_text_drop_binary_and_are_bounded() {
        let mut receipt = McpReceipt::default();
        let answer = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
        ]});
        let (ok, value) = result_value(&answer, 1 << 20, &mut receipt);
        assert!(ok);
        assert_eq!(value["content"][0]["text"], "hello");
        assert_eq!(value["content"][1]["omitted_bytes"], 3);
        assert!(value["content"][1].get("data").is_none());

        let big =
            json!({"isError": true, "content": [{"type": "text", "text": "x".repeat(100_000)}]});
        let (ok, value) = result_value(&big, 4096, &mut receipt);
        assert!(!ok);
        assert!(serde_json::to_string(&value).unwrap().len() <= 4096 + 200);
        assert!(value["truncated_bytes"].as_u64().unwrap() > 90_000);
        assert_eq!(receipt.limits_hit, vec!["output".to_owned()]);
    }
}
