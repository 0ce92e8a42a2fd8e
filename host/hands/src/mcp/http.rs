//! An MCP server over Streamable HTTP, through the same door out as a
//! guest's `wasi:http` ([`crate::net::HttpPolicy::send`]): the server's
//! host must be granted, its addresses pass the same rules (loopback,
//! private and metadata addresses only when the grant names them), the
//! bearer secret is added by the host (never over plain HTTP to another
//! machine) and every echo of it is redacted from the answer before
//! anything reads it, and each answer is bounded.
//!
//! Each message we send is one POST; the answer is either one JSON message
//! or an event stream carrying the server's requests, notifications and,
//! last, the answer. The session id the server gives at `initialize` is
//! sent with every later message. What is not done: the optional GET
//! stream for messages the server starts on its own (a changed tool list
//! over HTTP is seen at the next listing, on resume or reconnect).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tokio::sync::mpsc;

use super::HttpSpec;
use super::rpc::{Conn, Outgoing, RpcError};
use crate::budget::HostBudget;
use crate::net::HttpPolicy;
use crate::receipt::Journal;

/// What the POSTs of one session share.
struct Session {
    url: http::Uri,
    policy: Arc<HttpPolicy>,
    journal: Arc<Mutex<Journal>>,
    /// `Mcp-Session-Id`, once the server gave one.
    id: Mutex<Option<String>>,
    /// `MCP-Protocol-Version`, once negotiated.
    version: Mutex<Option<String>>,
    max_message: usize,
}

/// Handle to set the negotiated protocol version after `initialize`.
#[derive(Clone)]
pub(crate) struct Negotiated(Arc<Session>);

impl Negotiated {
    pub(crate) fn set_version(&self, version: &str) {
        if let Ok(mut v) = self.0.version.lock() {
            *v = Some(version.to_owned());
        }
    }
}

/// Wire `conn`'s outbox to POSTs to the server.
pub(crate) fn start(
    spec: &HttpSpec,
    conn: &Arc<Conn>,
    mut outbox: mpsc::UnboundedReceiver<Outgoing>,
    max_message: usize,
) -> Result<Negotiated, String> {
    let url: http::Uri = spec
        .url
        .parse()
        .map_err(|e| format!("`{}` is not a URL: {e}", spec.url))?;
    let journal = Arc::new(Mutex::new(Journal::default()));
    let policy = Arc::new(HttpPolicy {
        hosts: spec.hosts.clone(),
        secrets: spec.secrets.clone(),
        max_response_bytes: (max_message as u64).saturating_mul(4),
        max_requests: u32::MAX,
        journal: Arc::clone(&journal),
        budget: Arc::new(HostBudget::new(u64::MAX, 64, Arc::clone(&journal))),
    });
    let session = Arc::new(Session {
        url,
        policy,
        journal,
        id: Mutex::new(None),
        version: Mutex::new(None),
        max_message,
    });
    let negotiated = Negotiated(Arc::clone(&session));
    let conn = Arc::clone(conn);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                next = outbox.recv() => {
                    let Some(out) = next else { break };
                    let session = Arc::clone(&session);
                    let conn = Arc::clone(&conn);
                    tokio::spawn(async move {
                        if let Err(error) = post(&session, &conn, &out.message).await
                            && let Some(id) = out.id
                        {
                            conn.fail(id, error);
                        }
                    });
                }
                _ = conn.ended() => break,
            }
        }
    });
    Ok(negotiated)
}

/// The last denial the door out recorded, for an error message.
fn last_denial(session: &Session) -> Option<String> {
    let journal = session.journal.lock().ok()?;
    journal
        .denied
        .last()
        .map(|d| format!("{}: {}", d.resource, d.reason))
}

/// POST one message and hand what comes back to `conn`.
async fn post(session: &Session, conn: &Arc<Conn>, message: &Value) -> Result<(), RpcError> {
    let closed = |why: String| RpcError::Closed(why);
    let body = Full::new(Bytes::from(serde_json::to_vec(message).unwrap_or_default()))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut request = http::Request::post(session.url.clone())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(id) = session.id.lock().ok().and_then(|i| i.clone()) {
        request = request.header("mcp-session-id", id);
    }
    if let Some(v) = session.version.lock().ok().and_then(|v| v.clone()) {
        request = request.header("mcp-protocol-version", v);
    }
    let request = request
        .body(body)
        .map_err(|e| closed(format!("cannot build the request: {e}")))?;
    let response = Arc::clone(&session.policy)
        .send(request)
        .await
        .map_err(|e| {
            closed(match last_denial(session) {
                Some(denial) => format!("the request to the MCP server was refused: {denial}"),
                None => format!("cannot reach the MCP server: {e}"),
            })
        })?;
    let status = response.status();
    if let Some(id) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        && let Ok(mut slot) = session.id.lock()
        && slot.is_none()
    {
        *slot = Some(id.chars().take(256).collect());
    }
    let event_stream = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut body = response.into_body();
    if status == http::StatusCode::ACCEPTED {
        return Ok(());
    }
    if !status.is_success() {
        let mut text = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                text.extend_from_slice(&data[..data.len().min(1024 - text.len().min(1024))]);
            }
            if text.len() >= 1024 {
                break;
            }
        }
        let said = crate::bound::visible(String::from_utf8_lossy(&text).trim(), 512);
        let why = match status.as_u16() {
            401 | 403 => format!(
                "the MCP server refused the credentials (HTTP {status}): check the secret granted \
                 for it; it said: {said}"
            ),
            404 if session.id.lock().ok().is_some_and(|i| i.is_some()) => {
                conn.close("the MCP server ended its session (HTTP 404)".into());
                "the MCP server ended its session (HTTP 404)".into()
            }
            _ => format!("the MCP server answered HTTP {status}: {said}"),
        };
        return Err(closed(why));
    }
    let mut buffer: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            RpcError::TooLarge(format!(
                "the MCP server's answer could not be read whole: {e} (over {} bytes, or cut \
                 off)",
                session.max_message
            ))
        })?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        buffer.extend_from_slice(data);
        if event_stream {
            while let Some(end) = event_end(&buffer) {
                let event: Vec<u8> = buffer.drain(..end.1).collect();
                if let Some(message) = event_data(&event[..end.0]) {
                    conn.incoming(message);
                }
            }
        }
        if buffer.len() > session.max_message {
            return Err(RpcError::TooLarge(format!(
                "the MCP server's answer is over the {}-byte limit on one message",
                session.max_message
            )));
        }
    }
    if event_stream {
        if let Some(message) = event_data(&buffer) {
            conn.incoming(message);
        }
    } else if !buffer.is_empty() {
        let message: Value = serde_json::from_slice(&buffer)
            .map_err(|e| closed(format!("the MCP server's answer is not JSON: {e}")))?;
        conn.incoming(message);
    }
    Ok(())
}

/// Where the first complete event of a stream ends: (end of its text,
/// end including the blank line).
fn event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The JSON message in one event's `data:` lines, if any.
fn event_data(event: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(event);
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data.join("\n")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_split_and_their_data_read() {
        let stream =
            b"event: message\ndata: {\"id\":1}\n\n: comment\r\n\r\ndata: {\"a\":\ndata: 2}\n\n";
        let (end, next) = event_end(stream).unwrap();
        assert_eq!(
            event_data(&stream[..end]),
            Some(serde_json::json!({"id": 1}))
        );
        let rest = &stream[next..];
        let (end, next) = event_end(rest).unwrap();
        assert_eq!(event_data(&rest[..end]), None);
        let rest = &rest[next..];
        let (end, _) = event_end(rest).unwrap();
        assert_eq!(event_data(&rest[..end]), Some(serde_json::json!({"a": 2})));
    }
}
