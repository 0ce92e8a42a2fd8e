//! One JSON-RPC session with an MCP server, whatever carries it: requests
//! waiting for their answers, what the server asks of us, what it
//! notifies, and the end of the session.
//!
//! A transport ([`super::stdio`], [`super::http`]) hands every message the
//! server sends to [`Conn::incoming`] and sends what [`Conn`] puts in its
//! outbox. Everything the server sends is bounded here: notifications past
//! [`MAX_NOTIFICATIONS_PER_SECOND`] end the session (a server flooding us
//! would otherwise hold a core), log lines are kept in a small ring, and a
//! request of ours dropped before its answer (a cancelled or timed-out
//! call) is followed by `notifications/cancelled`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

/// Most notifications (and requests) a server may send in one second
/// before the session is ended.
pub const MAX_NOTIFICATIONS_PER_SECOND: u32 = 1000;
/// Log lines of the server kept (its `notifications/message` and, over
/// stdio, its stderr), each cut to [`MAX_LOG_LINE`] bytes.
const MAX_LOG_LINES: usize = 32;
const MAX_LOG_LINE: usize = 1024;

/// How a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RpcError {
    /// The server answered with a JSON-RPC error.
    #[error("the server answered error {code}: {message}")]
    Server { code: i64, message: String },
    /// The session ended before the answer (the reason says how).
    #[error("{0}")]
    Closed(String),
    /// The answer was larger than the session accepts.
    #[error("{0}")]
    TooLarge(String),
    /// The answer could not be read as JSON (nested too deep, malformed).
    #[error("{0}")]
    Unreadable(String),
}

/// One message for the transport to send; `id` is set for our requests, so
/// a transport that fails to deliver one can fail that request.
pub struct Outgoing {
    pub message: Value,
    pub id: Option<u64>,
}

/// The session.
pub struct Conn {
    outbox: mpsc::UnboundedSender<Outgoing>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next_id: AtomicU64,
    /// Why the session ended, once it has.
    closed: watch::Sender<Option<String>>,
    /// Set when the server says its tool list changed.
    pub tools_changed: AtomicBool,
    logs: Mutex<VecDeque<String>>,
    flood: Mutex<(Instant, u32)>,
    /// Roots offered to the server on `roots/list` (file URIs).
    roots: Vec<Value>,
}

impl Conn {
    /// A session whose outgoing messages go to the returned receiver.
    pub fn new(roots: Vec<String>) -> (Arc<Self>, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let roots = roots
            .into_iter()
            .map(|guest| {
                let name = guest.rsplit('/').find(|s| !s.is_empty()).unwrap_or("/");
                json!({"uri": format!("file://{guest}"), "name": name})
            })
            .collect();
        let conn = Arc::new(Conn {
            outbox: tx,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: watch::channel(None).0,
            tools_changed: AtomicBool::new(false),
            logs: Mutex::new(VecDeque::new()),
            flood: Mutex::new((Instant::now(), 0)),
            roots,
        });
        (conn, rx)
    }

    /// Whether roots are offered (the `roots` capability is declared).
    pub fn has_roots(&self) -> bool {
        !self.roots.is_empty()
    }

    /// Why the session ended, if it has.
    pub fn closed_reason(&self) -> Option<String> {
        self.closed.borrow().clone()
    }

    /// Resolves when the session ends, with the reason.
    pub async fn ended(&self) -> String {
        let mut rx = self.closed.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return "the session was dropped".into();
            }
        }
    }

    /// End the session: every request waiting fails with `reason`, and the
    /// transport stops (it watches [`Conn::ended`]). The first reason
    /// stays.
    pub fn close(&self, reason: String) {
        self.closed.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason.clone());
                true
            } else {
                false
            }
        });
        let reason = self.closed_reason().unwrap_or(reason);
        self.fail_all(RpcError::Closed(reason));
    }

    /// The server's log lines seen since `from` lines ago (the ring's last
    /// ones), newest last.
    pub fn recent_logs(&self, last: usize) -> Vec<String> {
        self.logs
            .lock()
            .map(|l| l.iter().rev().take(last).rev().cloned().collect())
            .unwrap_or_default()
    }

    /// Keep a log line of the server's.
    pub fn log(&self, line: &str) {
        if let Ok(mut logs) = self.logs.lock() {
            if logs.len() == MAX_LOG_LINES {
                logs.pop_front();
            }
            logs.push_back(crate::bound::visible(line, MAX_LOG_LINE));
        }
    }

    /// Send a notification.
    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.outbox.send(Outgoing {
            message: json!({"jsonrpc": "2.0", "method": method, "params": params}),
            id: None,
        });
    }

    /// Send a request and wait for its answer, at most `within`. Dropping
    /// the returned future before the answer (or the time running out)
    /// sends `notifications/cancelled` for it.
    pub async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        within: Duration,
    ) -> Result<Value, RpcError> {
        if let Some(reason) = self.closed_reason() {
            return Err(RpcError::Closed(reason));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        let guard = Unanswered {
            conn: Arc::clone(self),
            id,
            method: method.to_owned(),
            answered: false,
        };
        let sent = self.outbox.send(Outgoing {
            message: json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            id: Some(id),
        });
        if sent.is_err() {
            return Err(RpcError::Closed("the session's transport is gone".into()));
        }
        let answer = tokio::time::timeout(within, rx).await;
        match answer {
            Ok(Ok(result)) => {
                let mut guard = guard;
                guard.answered = true;
                result
            }
            Ok(Err(_)) => Err(RpcError::Closed(
                self.closed_reason()
                    .unwrap_or_else(|| "the session ended".into()),
            )),
            Err(_) => Err(RpcError::Closed(format!(
                "no answer to {method} within {}",
                humantime::format_duration(within)
            ))),
        }
    }

    /// Fail request `id` (a transport could not deliver it, or its answer
    /// was too large to read).
    pub fn fail(&self, id: u64, error: RpcError) {
        let tx = self.pending.lock().ok().and_then(|mut p| p.remove(&id));
        if let Some(tx) = tx {
            let _ = tx.send(Err(error));
        }
    }

    /// Fail every request waiting (an answer too large to read whose id
    /// could not be told).
    pub fn fail_all(&self, error: RpcError) {
        let waiting: Vec<_> = self
            .pending
            .lock()
            .map(|mut p| p.drain().collect())
            .unwrap_or_default();
        for (_, tx) in waiting {
            let _ = tx.send(Err(error.clone()));
        }
    }

    /// Ids of the requests waiting.
    pub fn waiting(&self) -> Vec<u64> {
        self.pending
            .lock()
            .map(|p| p.keys().copied().collect())
            .unwrap_or_default()
    }

    /// One message from the server (or a batch of them).
    pub fn incoming(&self, message: Value) {
        if let Value::Array(batch) = message {
            for m in batch.into_iter().take(1024) {
                self.incoming(m);
            }
            return;
        }
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|i| !i.is_null());
        match (method, id) {
            (None, Some(id)) => {
                let Some(id) = id.as_u64() else { return };
                let tx = self.pending.lock().ok().and_then(|mut p| p.remove(&id));
                let Some(tx) = tx else { return };
                let answer = if let Some(error) = message.get("error") {
                    Err(RpcError::Server {
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: crate::bound::visible(
                            error.get("message").and_then(Value::as_str).unwrap_or(""),
                            4096,
                        ),
                    })
                } else {
                    Ok(message.get("result").cloned().unwrap_or(Value::Null))
                };
                let _ = tx.send(answer);
            }
            (Some(method), id) => {
                if !self.within_rate() {
                    self.close(format!(
                        "the server sent more than {MAX_NOTIFICATIONS_PER_SECOND} messages in \
                         a second; its session was ended"
                    ));
                    return;
                }
                match id {
                    Some(id) => self.answer(id.clone(), method),
                    None => self.notified(method, message.get("params")),
                }
            }
            (None, None) => {}
        }
    }

    fn within_rate(&self) -> bool {
        let Ok(mut flood) = self.flood.lock() else {
            return true;
        };
        let now = Instant::now();
        if now.duration_since(flood.0) >= Duration::from_secs(1) {
            *flood = (now, 0);
        }
        flood.1 += 1;
        flood.1 <= MAX_NOTIFICATIONS_PER_SECOND
    }

    /// Answer a request of the server's. Longhand gives roots (the granted
    /// directories as the server sees them) and answers pings; it does not
    /// sample a model or ask a person for a server (`sampling`,
    /// `elicitation`): the model's context and the operator are the
    /// session's, not a tool's.
    fn answer(&self, id: Value, method: &str) {
        let reply = match method {
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "roots/list" if self.has_roots() => {
                json!({"jsonrpc": "2.0", "id": id, "result": {"roots": self.roots}})
            }
            other => {
                let why = match other {
                    "sampling/createMessage" => {
                        "Longhand does not let an MCP server sample the model (sampling is not \
                         supported)"
                    }
                    "elicitation/create" => {
                        "Longhand does not let an MCP server ask the user for input (elicitation \
                         is not supported)"
                    }
                    _ => "method not supported by this client",
                };
                self.log(&format!(
                    "refused the server's request {}: {why}",
                    crate::bound::visible(other, 128)
                ));
                json!({"jsonrpc": "2.0", "id": id,
                       "error": {"code": -32601, "message": why}})
            }
        };
        let _ = self.outbox.send(Outgoing {
            message: reply,
            id: None,
        });
    }

    fn notified(&self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/tools/list_changed" => {
                self.tools_changed.store(true, Ordering::Relaxed);
                self.log("the server says its tool list changed");
            }
            "notifications/message" => {
                let params = params.cloned().unwrap_or(Value::Null);
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .unwrap_or("info");
                let data = match params.get("data") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => {
                        let text = other.to_string();
                        crate::bound::cut_str(&text, MAX_LOG_LINE).into_owned()
                    }
                    None => String::new(),
                };
                self.log(&format!("{}: {data}", crate::bound::visible(level, 16)));
            }
            _ => {}
        }
    }
}

/// A request not yet answered: dropping it tells the server to stop.
struct Unanswered {
    conn: Arc<Conn>,
    id: u64,
    method: String,
    answered: bool,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        let was_waiting = self
            .conn
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(&self.id))
            .is_some();
        if !self.answered && was_waiting && self.method != "initialize" {
            self.conn.notify(
                "notifications/cancelled",
                json!({"requestId": self.id, "reason": "the call was cancelled or timed out"}),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_errors_and_a_dropped_request_sends_cancelled() {
        let (conn, mut out) = Conn::new(vec!["/workspace".into()]);
        let c = Arc::clone(&conn);
        let call = tokio::spawn(async move {
            c.request("tools/call", json!({}), Duration::from_millis(200))
                .await
        });
        let sent = out.recv().await.unwrap();
        assert_eq!(sent.id, Some(1));
        // Time runs out: the request fails and the server is told.
        let err = call.await.unwrap().unwrap_err();
        assert!(err.to_string().contains("no answer to tools/call"), "{err}");
        let cancel = out.recv().await.unwrap();
        assert_eq!(cancel.message["method"], "notifications/cancelled");
        assert_eq!(cancel.message["params"]["requestId"], 1);

        let c = Arc::clone(&conn);
        let call = tokio::spawn(async move {
            c.request("tools/list", json!({}), Duration::from_secs(5))
                .await
        });
        let sent = out.recv().await.unwrap();
        conn.incoming(json!({"jsonrpc": "2.0", "id": sent.id,
                             "error": {"code": -32602, "message": "bad\u{1b}[2J"}}));
        let err = call.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("-32602") && err.contains("\\x1b"), "{err}");
    }

    #[tokio::test]
    async fn server_requests_get_roots_ping_and_a_refusal_of_sampling() {
        let (conn, mut out) = Conn::new(vec!["/workspace".into()]);
        conn.incoming(json!({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}));
        let reply = out.recv().await.unwrap().message;
        assert_eq!(reply["result"]["roots"][0]["uri"], "file:///workspace");
        conn.incoming(json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage"}));
        let reply = out.recv().await.unwrap().message;
        assert_eq!(reply["error"]["code"], -32601);
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("sampling")
        );
        conn.incoming(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        assert!(conn.tools_changed.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn a_flood_of_notifications_ends_the_session_and_fails_what_waits() {
        let (conn, _out) = Conn::new(vec![]);
        let c = Arc::clone(&conn);
        let call = tokio::spawn(async move {
            c.request("tools/call", json!({}), Duration::from_secs(30))
                .await
        });
        tokio::task::yield_now().await;
        for _ in 0..=MAX_NOTIFICATIONS_PER_SECOND {
            conn.incoming(json!({"jsonrpc": "2.0", "method": "notifications/message",
                                 "params": {"level": "info", "data": "x"}}));
        }
        let err = call.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("more than 1000 messages"), "{err}");
        assert!(conn.closed_reason().is_some());
    }
}
