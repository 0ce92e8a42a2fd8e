//! One MCP session over any transport: the lifecycle, the methods served,
//! and the tool calls in flight.
//!
//! A transport hands each incoming message to [`Session::handle`] with an
//! [`Outbox`] that its answers go to; a `tools/call` answers later, from a
//! task of its own, so calls run side by side and a `notifications/cancelled`
//! naming one aborts its task. Aborting drops the call's future, and with it
//! the guest's store and instance (see `hands/exec.rs`): nothing of a
//! cancelled call runs on, and no answer is sent for it, as the spec asks.
//!
//! Methods: `initialize`, `ping`, `tools/list`, `tools/call`; every other
//! method is "method not found" (the server offers the tools capability
//! only). Requests other than `initialize` and `ping` before `initialize`
//! are refused.
//!
//! Tool failures are results, not protocol errors: a bad argument, a denied
//! path or a limit comes back as a `CallToolResult` with `isError: true`
//! and the error's text, which a model can read and act on. Protocol errors
//! (an unknown tool, params of the wrong shape) are JSON-RPC errors.
//!
//! Progress: tools report progress through `longhand:tool/host.progress`,
//! but the hands keep only the last report, in the receipt, once the call
//! is over; there is no live channel out of a running call. So a request
//! with a `progressToken` gets at most one `notifications/progress` — the
//! tool's last report — just before its result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::protocol::{self, Incoming, code};
use super::{ServedTool, Toolbox};
use longhand_hands::{CallOutcome, Hands, bound};

/// One message on its way to the client, serialized once: the transport
/// writes `text` as it is, and nothing else holds the message (a call's
/// output is not kept both as a value and as text while it waits).
pub struct Outgoing {
    /// The JSON text of the message, without a trailing newline.
    pub text: String,
    /// For a response, whether it is a success (`result`); `None` for a
    /// notification.
    pub success: Option<bool>,
    /// Whatever the transport tied to the request this answers (the stdio
    /// transport's pending slot), released when the message is dropped,
    /// that is once it is written.
    _hold: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// Where a session's answers and notifications go, in order.
///
/// A transport may tie something to one request ([`Outbox::holding`]): it
/// lives as long as anything that can still answer that request (the
/// call's task, a queued answer), so a transport can count requests not
/// yet answered and stop reading when too many are (stdio's backpressure).
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Outgoing>,
    hold: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Outbox {
    /// An outbox and the receiving end a transport writes from. Default:
    /// nothing held.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx, hold: None }, rx)
    }

    /// The same outbox, with `hold` kept alive by every message sent
    /// through this copy (and its clones) until the message is dropped.
    pub fn holding(&self, hold: impl std::any::Any + Send + Sync) -> Self {
        Self {
            tx: self.tx.clone(),
            hold: Some(Arc::new(hold)),
        }
    }

    /// Serialize `message` and queue it; false when the transport is gone.
    /// The value is dropped here, so the queue holds the text only.
    pub fn send(&self, message: Value) -> bool {
        let success = message.get("id").map(|_| message.get("result").is_some());
        let text = match serde_json::to_string(&message) {
            Ok(text) => text,
            // A `Value` always serializes (its keys are strings).
            Err(_) => return false,
        };
        drop(message);
        self.tx
            .send(Outgoing {
                text,
                success,
                _hold: self.hold.clone(),
            })
            .is_ok()
    }
}

/// Called with each finished call (tool and outcome with its receipt);
/// the CLI writes receipts to stderr.
pub type ReceiptSink = Box<dyn Fn(&ServedTool, &CallOutcome) + Send + Sync>;

/// What every session of one server shares.
pub struct Server {
    hands: Arc<Hands>,
    toolbox: Toolbox,
    on_receipt: Option<ReceiptSink>,
}

impl Server {
    /// Calls its hands may run at once (`--max-concurrent`).
    pub fn concurrency(&self) -> usize {
        self.hands.concurrency()
    }

    /// A server offering `toolbox`, calling through `hands`. Default: no
    /// receipt sink.
    pub fn new(hands: Arc<Hands>, toolbox: Toolbox) -> Self {
        Self {
            hands,
            toolbox,
            on_receipt: None,
        }
    }

    /// Call `sink` with every finished call.
    pub fn with_receipts(mut self, sink: ReceiptSink) -> Self {
        self.on_receipt = Some(sink);
        self
    }

    /// The tools served.
    pub fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }
}

/// One client's session: its negotiated version and its calls in flight.
pub struct Session {
    server: Arc<Server>,
    version: Mutex<Option<&'static str>>,
    calls: Mutex<HashMap<String, AbortHandle>>,
}

impl Session {
    /// A session not yet initialized.
    pub fn new(server: Arc<Server>) -> Arc<Self> {
        Arc::new(Self {
            server,
            version: Mutex::new(None),
            calls: Mutex::new(HashMap::new()),
        })
    }

    /// The version agreed at `initialize`, if it happened.
    pub fn version(&self) -> Option<&'static str> {
        self.version.lock().ok().and_then(|v| *v)
    }

    /// Calls running now.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// Take one message; answers go to `out` (a call's, later).
    pub fn handle(self: &Arc<Self>, message: Incoming, out: &Outbox) {
        match message {
            Incoming::Request { id, method, params } => self.request(id, &method, params, out),
            Incoming::Notification { method, params } => self.notification(&method, &params),
            Incoming::Response => {}
        }
    }

    fn request(self: &Arc<Self>, id: Value, method: &str, params: Value, out: &Outbox) {
        let answer = |message: Value| {
            let _ = out.send(message);
        };
        let known = matches!(method, "initialize" | "ping" | "tools/list" | "tools/call");
        if !known {
            return answer(protocol::error(
                id,
                code::METHOD_NOT_FOUND,
                format!("method not found: {}", bound::name(method)),
            ));
        }
        if method == "ping" {
            return answer(protocol::result(id, json!({})));
        }
        if method == "initialize" {
            return answer(self.initialize(id, &params));
        }
        let Some(version) = self.version() else {
            return answer(protocol::error(
                id,
                code::INVALID_REQUEST,
                "the session is not initialized: send `initialize` first".to_owned(),
            ));
        };
        match method {
            "tools/list" => {
                let tools: Vec<Value> = self
                    .server
                    .toolbox
                    .tools()
                    .iter()
                    .map(|t| t.to_mcp(protocol::has_annotations(version)))
                    .collect();
                answer(protocol::result(id, json!({ "tools": tools })));
            }
            _ => self.call(id, params, version, out),
        }
    }

    fn initialize(&self, id: Value, params: &Value) -> Value {
        let Ok(mut agreed) = self.version.lock() else {
            return protocol::error(id, code::INVALID_REQUEST, "session state lost".to_owned());
        };
        if agreed.is_some() {
            return protocol::error(
                id,
                code::INVALID_REQUEST,
                "the session is already initialized".to_owned(),
            );
        }
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            return protocol::error(
                id,
                code::INVALID_PARAMS,
                "initialize needs `protocolVersion` (a string)".to_owned(),
            );
        };
        let version = protocol::negotiate(Some(requested));
        *agreed = Some(version);
        protocol::result(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": { "tools": { "listChanged": false } },
                "serverInfo": { "name": "longhand", "version": env!("CARGO_PKG_VERSION") },
                "instructions": "Each tool runs in a fresh WebAssembly sandbox with only the \
                    directories, hosts and limits the operator granted. Errors are results: \
                    read them and fix the input.",
            }),
        )
    }

    fn call(self: &Arc<Self>, id: Value, params: Value, version: &'static str, out: &Outbox) {
        let refuse = |message: String| {
            let _ = out.send(protocol::error(id.clone(), code::INVALID_PARAMS, message));
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return refuse("tools/call needs `name` (a string)".to_owned());
        };
        let Some(tool) = self.server.toolbox.get(name).cloned() else {
            return refuse(format!("unknown tool: {}", bound::name(name)));
        };
        // A missing `arguments` is the input of a tool with no required
        // fields. The spec types `arguments` as an object, so anything else
        // is params of the wrong shape (-32602), not a tool's input; an
        // object goes to the tool's schema check, whose refusal is a
        // result the model reads.
        let mut params = params;
        let arguments = match params.get_mut("arguments").map(Value::take) {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a,
            Some(other) => {
                return refuse(format!(
                    "tools/call `arguments` must be an object, not {}",
                    kind_of(&other)
                ));
            }
        };
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        let key = protocol::id_key(&id);
        let Ok(mut calls) = self.calls.lock() else {
            return refuse("session state lost".to_owned());
        };
        if calls.contains_key(&key) {
            drop(calls);
            let _ = out.send(protocol::error(
                id,
                code::INVALID_REQUEST,
                "a request with this id is still in flight".to_owned(),
            ));
            return;
        }
        let session = self.clone();
        let out = out.clone();
        let task_key = key.clone();
        // The map is locked while the task is spawned and entered, so the
        // task's own removal (which takes the lock) always follows its
        // entry.
        let task = tokio::spawn(async move {
            let server = &session.server;
            let outcome = server
                .hands
                .call(&tool.component, &tool.grants, &tool.tool, &arguments)
                .await;
            // The input is not needed any more; drop it before the answer
            // is made, so a call holds its input or its output, not both.
            drop(arguments);
            if let Some(sink) = &server.on_receipt {
                sink(&tool, &outcome);
            }
            if let (Some(token), Some(p)) = (token, &outcome.receipt.progress) {
                let mut params = json!({"progressToken": token, "progress": p.done});
                if let Some(total) = p.total {
                    params["total"] = json!(total);
                }
                if !p.message.is_empty() && version != "2024-11-05" {
                    params["message"] = json!(p.message);
                }
                let _ = out.send(protocol::notification("notifications/progress", params));
            }
            // Out of the map before the answer goes: a client that reuses
            // the id after the answer must not find it in flight.
            if let Ok(mut calls) = session.calls.lock() {
                calls.remove(&task_key);
            }
            let _ = out.send(protocol::result(id, call_result(outcome, version)));
        });
        calls.insert(key, task.abort_handle());
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled"
            && let Some(id) = params.get("requestId")
        {
            self.cancel(id);
        }
        // `notifications/initialized` and anything else: nothing to do.
    }

    /// Stop the call with request id `id`, if it is running. No answer is
    /// sent for it.
    pub fn cancel(&self, id: &Value) -> bool {
        let handle = self
            .calls
            .lock()
            .ok()
            .and_then(|mut c| c.remove(&protocol::id_key(id)));
        match handle {
            Some(h) => {
                h.abort();
                true
            }
            None => false,
        }
    }

    /// Stop every call in flight (the client went away).
    pub fn cancel_all(&self) {
        if let Ok(mut calls) = self.calls.lock() {
            for (_, h) in calls.drain() {
                h.abort();
            }
        }
    }
}

/// What a JSON value is, for a message about the wrong one.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A `CallToolResult`: the output as JSON text (and, from 2025-06-18, as
/// `structuredContent` when it is an object), or the error's text with
/// `isError`. `_meta` carries the receipt's figures, not its resources:
/// what the call touched is the operator's to read (stderr), not the
/// client's.
///
/// Takes the outcome by value: the output moves into the answer (as
/// `structuredContent`), so it is held once as a value and once as text,
/// and both go when [`Outbox::send`] has serialized the answer.
fn call_result(outcome: CallOutcome, version: &str) -> Value {
    let r = &outcome.receipt;
    let meta = json!({
        "longhand/receipt": {
            "component_digest": r.component_digest,
            "wall_us": r.wall_us,
            "fuel_used": r.fuel_used,
            "peak_memory_bytes": r.peak_memory_bytes,
            "bytes_written": r.bytes_written,
            "limits_hit": r.limits_hit,
        }
    });
    match outcome.result {
        Ok(output) => {
            let mut result = json!({
                "content": [{"type": "text", "text": output.to_string()}],
                "isError": false,
                "_meta": meta,
            });
            if output.is_object() && protocol::has_structured_content(version) {
                result["structuredContent"] = output;
            }
            result
        }
        Err(error) => json!({
            "content": [{"type": "text", "text": error.to_string()}],
            "isError": true,
            "_meta": meta,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhand_hands::{Grants, HandsConfig};

    /// The answers a session sent, parsed back.
    struct Answers(mpsc::UnboundedReceiver<Outgoing>);

    impl Answers {
        async fn recv(&mut self) -> Option<Value> {
            let message = self.0.recv().await?;
            Some(serde_json::from_str(&message.text).unwrap())
        }
    }

    async fn session() -> (Arc<Session>, Answers, Outbox) {
        let hands = Arc::new(Hands::new(HandsConfig::default()).unwrap());
        let json_tool = Toolbox::load(&hands, "json").await.unwrap();
        let toolbox = Toolbox::component(json_tool, Grants::default(), None).unwrap();
        let server = Arc::new(Server::new(hands, toolbox));
        let (tx, rx) = Outbox::new();
        (Session::new(server), Answers(rx), tx)
    }

    fn request(id: i64, method: &str, params: Value) -> Incoming {
        Incoming::Request {
            id: json!(id),
            method: method.to_owned(),
            params,
        }
    }

    #[tokio::test]
    async fn lifecycle_list_and_errors() {
        let (s, mut rx, out) = session().await;
        s.handle(request(1, "tools/list", Value::Null), &out);
        let early = rx.recv().await.unwrap();
        assert_eq!(early["error"]["code"], json!(code::INVALID_REQUEST));
        s.handle(request(2, "ping", Value::Null), &out);
        assert_eq!(rx.recv().await.unwrap()["result"], json!({}));
        s.handle(request(3, "server/discover", Value::Null), &out);
        assert_eq!(
            rx.recv().await.unwrap()["error"]["code"],
            json!(code::METHOD_NOT_FOUND)
        );
        let init = json!({"protocolVersion": "2024-11-05", "capabilities": {}});
        s.handle(request(4, "initialize", init.clone()), &out);
        let answer = rx.recv().await.unwrap();
        assert_eq!(answer["result"]["protocolVersion"], json!("2024-11-05"));
        s.handle(request(5, "initialize", init), &out);
        assert_eq!(
            rx.recv().await.unwrap()["error"]["code"],
            json!(code::INVALID_REQUEST)
        );
        s.handle(request(6, "tools/list", Value::Null), &out);
        let list = rx.recv().await.unwrap();
        let tools = list["result"]["tools"].as_array().unwrap();
        assert!(tools.iter().any(|t| t["name"] == "query"));
        // 2024-11-05 has no annotations.
        assert!(tools.iter().all(|t| t.get("annotations").is_none()));
        s.handle(request(7, "tools/call", json!({"name": "nope"})), &out);
        assert_eq!(
            rx.recv().await.unwrap()["error"]["code"],
            json!(code::INVALID_PARAMS)
        );
        // A bad argument is a result the model reads.
        s.handle(
            request(
                8,
                "tools/call",
                json!({"name": "query", "arguments": {"x": 1}}),
            ),
            &out,
        );
        let bad = rx.recv().await.unwrap();
        assert_eq!(bad["id"], json!(8));
        assert_eq!(bad["result"]["isError"], json!(true));
        let text = bad["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("invalid input"), "{text}");
        // Arguments that are not an object are params of the wrong shape.
        for (i, arguments) in [json!([1]), json!("x"), json!(3), json!(true)]
            .into_iter()
            .enumerate()
        {
            let id = 9 + i as i64;
            let params = json!({"name": "query", "arguments": arguments});
            s.handle(request(id, "tools/call", params), &out);
            let refused = rx.recv().await.unwrap();
            assert_eq!(refused["id"], json!(id));
            assert_eq!(refused["error"]["code"], json!(code::INVALID_PARAMS));
        }
        // Names the client chose are cut in what comes back.
        let long = "m".repeat(1 << 20);
        s.handle(request(20, &long, Value::Null), &out);
        let refused = rx.recv().await.unwrap();
        assert!(refused.to_string().len() < 1024, "{refused}");
        s.handle(request(21, "tools/call", json!({"name": long})), &out);
        let refused = rx.recv().await.unwrap();
        assert!(refused.to_string().len() < 1024, "{refused}");
        assert_eq!(s.calls_in_flight(), 0);
    }

    #[tokio::test]
    async fn a_held_value_lives_until_every_message_is_dropped() {
        let (s, mut rx, out) = session().await;
        let hold = Arc::new(());
        let weak = Arc::downgrade(&hold);
        let held = out.holding(hold);
        s.handle(request(1, "ping", Value::Null), &held);
        drop(held);
        assert!(weak.upgrade().is_some(), "the queued answer holds it");
        let answer = rx.0.recv().await.unwrap();
        assert_eq!(answer.success, Some(true));
        assert!(weak.upgrade().is_some());
        drop(answer);
        assert!(weak.upgrade().is_none(), "written, so released");
    }
}
