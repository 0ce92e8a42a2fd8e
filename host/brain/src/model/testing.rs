//! Test support: a tiny HTTP/1.1 server on 127.0.0.1 that plays scripted
//! replies in the providers' wire formats and records what it was sent.
//!
//! Hand-written on a `TcpListener` rather than a server framework: it must
//! do things a well-behaved server never does (hang, cut a stream short),
//! and it is a few dozen lines. Every reply closes the connection, so a
//! streamed body ends exactly where the script ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::types::{Message, ModelRequest, ToolCall, ToolDef};

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A complete response with a body.
    Json {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// `200 text/event-stream`, the chunks written one by one, then the
    /// connection closed: whether the stream is whole is up to the script.
    Sse(Vec<String>),
    /// Like `Sse`, then the server stalls without closing.
    SseThenStall(Vec<String>),
    /// Like `Sse`, waiting the given time before writing each chunk: a
    /// slow but live stream, or one that stalls part-way and resumes.
    SsePaced(Vec<(Duration, String)>),
    /// Read the request, never answer.
    Hang,
}

impl Reply {
    pub fn ok(body: serde_json::Value) -> Self {
        Reply::Json {
            status: 200,
            headers: vec![],
            body: body.to_string(),
        }
    }

    pub fn status(status: u16, body: &str) -> Self {
        Reply::Json {
            status,
            headers: vec![],
            body: body.to_owned(),
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct TestServer {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// Starts a server that plays `replies` in order, one per request (a
    /// 500 once they run out).
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(replies);
        let next = Arc::new(AtomicUsize::new(0));
        let rec = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (rec, replies, next) = (rec.clone(), replies.clone(), next.clone());
                tokio::spawn(async move {
                    serve(sock, rec, replies, next).await;
                });
            }
        });
        TestServer {
            url,
            received,
            task,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut sock: TcpStream,
    rec: Arc<Mutex<Vec<Received>>>,
    replies: Arc<Vec<Reply>>,
    next: Arc<AtomicUsize>,
) {
    let Some(req) = read_request(&mut sock).await else {
        return;
    };
    // Strict, as the real APIs are: a request that breaks the pairing of
    // tool calls and results is refused with a 400 (and takes no scripted
    // reply), so every test of every format runs against the rule.
    let refused = super::pairing::format_of_path(&req.path)
        .and_then(|format| super::pairing::check_wire(format, &req.body).err());
    rec.lock().unwrap().push(req);
    let reply = match refused {
        Some(why) => Reply::status(
            400,
            &serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": why}})
                .to_string(),
        ),
        None => {
            let i = next.fetch_add(1, Ordering::SeqCst);
            replies
                .get(i)
                .cloned()
                .unwrap_or_else(|| Reply::status(500, "test server: no more scripted replies"))
        }
    };
    match reply {
        Reply::Json {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            let _ = sock.shutdown().await;
        }
        Reply::SseThenStall(chunks) => {
            write_sse(&mut sock, chunks).await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            let _ = sock.shutdown().await;
        }
        Reply::Sse(chunks) => {
            write_sse(&mut sock, chunks).await;
            let _ = sock.shutdown().await;
        }
        Reply::SsePaced(chunks) => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.flush().await;
            for (wait, c) in chunks {
                tokio::time::sleep(wait).await;
                let _ = sock.write_all(c.as_bytes()).await;
                let _ = sock.flush().await;
            }
            let _ = sock.shutdown().await;
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
    }
}

/// `200 text/event-stream`, then `chunks` one by one.
async fn write_sse(sock: &mut TcpStream, chunks: Vec<String>) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let _ = sock.write_all(head.as_bytes()).await;
    for c in chunks {
        let _ = sock.write_all(c.as_bytes()).await;
        let _ = sock.flush().await;
        // Let the client see the pieces separately.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn read_request(sock: &mut TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    Some(Received {
        path,
        headers,
        body,
    })
}

/// Spreads SSE events over time: `gap` before each one.
pub fn paced(events: Vec<String>, gap: Duration) -> Vec<(Duration, String)> {
    events.into_iter().map(|e| (gap, e)).collect()
}

/// The canary key every provider test uses; no error may ever show it.
pub const CANARY: &str = "sk-canary-7f3a9c1e-NEVER-PRINT";

/// Asserts the canary appears in neither `Display` nor `Debug`.
pub fn assert_no_canary(e: &impl std::fmt::Debug, display: &str) {
    assert!(
        !display.contains(CANARY),
        "key leaked in Display: {display}"
    );
    let dbg = format!("{e:?}");
    assert!(!dbg.contains(CANARY), "key leaked in Debug: {dbg}");
}

/// A request with a system prompt, a tool, an assistant turn with two tool
/// calls (the second with arguments that are not JSON) and both results
/// (the second an error).
pub fn sample_request() -> ModelRequest {
    ModelRequest {
        system: "You are terse.".into(),
        messages: vec![
            Message::User {
                text: "Read a.txt and c.txt".into(),
            },
            Message::Assistant {
                text: Some("Reading.".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "fs__read".into(),
                        arguments: "{\"path\":\"a.txt\"}".into(),
                    },
                    ToolCall {
                        id: "call_c".into(),
                        name: "fs__read".into(),
                        arguments: "{\"path\":".into(),
                    },
                ],
                reasoning: vec![],
            },
            Message::ToolResult {
                call_id: "call_a".into(),
                content: "contents of a".into(),
                is_error: false,
            },
            Message::ToolResult {
                call_id: "call_c".into(),
                content: "arguments are not valid JSON".into(),
                is_error: true,
            },
        ],
        tools: vec![ToolDef {
            name: "fs__read".into(),
            description: "Read a file".into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            }),
        }],
        max_tokens: 256,
        temperature: Some(0.5),
        step: 0,
        agent: String::new(),
    }
}

/// A request with one user message and nothing else.
pub fn text_only() -> ModelRequest {
    ModelRequest {
        system: String::new(),
        messages: vec![Message::User { text: "hi".into() }],
        tools: vec![],
        max_tokens: 100,
        temperature: None,
        step: 0,
        agent: String::new(),
    }
}
