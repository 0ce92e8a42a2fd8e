//! The API key is a canary: it must reach the model server in the
//! `Authorization` header and appear nowhere else — not on stdout or stderr,
//! not in `longhand log` (text or JSON), not in any byte the store wrote
//! (the SQLite database, its WAL and shared-memory files).
//!
//! The model is an in-process HTTP server on 127.0.0.1 speaking the OpenAI
//! chat-completions wire format without streaming: it asks for one tool
//! call, then answers in text once it sees the tool's result.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, files_under, write};

const CANARY: &str = "sk-lh-canary-5b0e19c7d2a84f36";
const KEY_VAR: &str = "LH_TEST_KEY";
const FILE_TEXT: &str = "hello from the sandbox";

/// One request the server received.
#[derive(Debug, Clone)]
struct Seen {
    request_line: String,
    authorization: Option<String>,
    body: String,
}

/// A chat-completions server on a loopback port, stopped when dropped.
struct ModelServer {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ModelServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("local addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let seen = Arc::clone(&seen);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    if let Some(request) = answer(stream) {
                        seen.lock().expect("lock").push(request);
                    }
                }
            })
        };
        Self {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Read one HTTP/1.1 request, answer it, close the connection.
fn answer(stream: TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut authorization = None;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        let value = value.trim().to_owned();
        match name.to_ascii_lowercase().as_str() {
            "authorization" => authorization = Some(value),
            "content-length" => length = value.parse().ok()?,
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = String::from_utf8(body).ok()?;

    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let has_tool_result = request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let message = if has_tool_result {
        json!({"role": "assistant", "content": "The file says hello."})
    } else {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_read_1",
            "type": "function",
            "function": {"name": "fs__read", "arguments": "{\"path\": \"/d/hello.txt\"}"},
        }]})
    };
    let finish = if has_tool_result {
        "stop"
    } else {
        "tool_calls"
    };
    let response = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "canary-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 21, "completion_tokens": 8, "total_tokens": 29},
    })
    .to_string();
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(response.as_bytes()).ok()?;
    stream.flush().ok()?;
    Some(Seen {
        request_line: request_line.trim_end().to_owned(),
        authorization,
        body,
    })
}

fn assert_no_canary(what: &str, text: &str) {
    assert!(
        !text.contains(CANARY),
        "the API key leaked into {what}:\n{text}"
    );
}

#[test]
fn api_key_reaches_the_server_and_nothing_else() {
    let server = ModelServer::start();
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("data/hello.txt"), FILE_TEXT);
    write(
        &dir.path().join("agent.toml"),
        &format!(
            r#"name = "canary"
instructions = "Read the file and say what it says."
goal = "What does /d/hello.txt say?"

[model]
provider = "openai"
model = "canary-model"
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "{KEY_VAR}"
stream = false

[[tools]]
component = "fs"
only = ["read"]
dirs = ["data:/d:ro"]
"#,
            port = server.port
        ),
    );

    let mut cmd = home.cmd(&["run", dir.path().to_str().expect("utf-8 path")]);
    cmd.env(KEY_VAR, CANARY);
    let run = crate::support::run(cmd);
    run.expect_code(0);
    assert!(
        run.stdout_text().contains("The file says hello."),
        "{}",
        run.stdout_text()
    );
    let session = run.stdout[0]
        .strip_prefix("session ")
        .expect("session id first")
        .to_owned();

    // The server saw the key, where it belongs, on every request.
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "two model turns: {seen:#?}");
    for request in &seen {
        assert_eq!(request.request_line, "POST /v1/chat/completions HTTP/1.1");
        assert_eq!(
            request.authorization.as_deref(),
            Some(&*format!("Bearer {CANARY}"))
        );
        assert_no_canary("the request body", &request.body);
    }
    assert!(
        seen[1].body.contains(FILE_TEXT),
        "the tool result went back to the model"
    );

    // Nowhere else.
    assert_no_canary("run's stdout", &run.stdout_text());
    assert_no_canary("run's stderr", &run.stderr);
    for args in [
        vec!["log", session.as_str()],
        vec!["log", session.as_str(), "--json"],
        vec!["sessions", "--json"],
    ] {
        let out = home.run(&args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert_no_canary(
            &format!("`longhand {}` stdout", args.join(" ")),
            &out.stdout_text(),
        );
        assert_no_canary(
            &format!("`longhand {}` stderr", args.join(" ")),
            &out.stderr,
        );
    }
    let log = home.run(&["log", &session, "--json"]).stdout_text();
    assert!(log.contains("tool_finished"), "the tool ran: {log}");

    let files = files_under(home.path());
    assert!(
        files.iter().any(|f| f.ends_with("longhand.db")),
        "the store is under LONGHAND_HOME: {files:?}"
    );
    let needle = CANARY.as_bytes();
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "the API key is stored in {}",
            file.display()
        );
    }
}
