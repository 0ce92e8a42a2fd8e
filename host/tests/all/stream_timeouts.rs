//! Issue 7 §3: `model.request_timeout` bounds silence, not a whole answer.
//! Against a peer that streamed an event every 2 s, `request_timeout = "5s"`
//! used to time out five times and pause. Here, scaled down: an answer
//! streamed as an event every 300 ms for about 2.4 s, under
//! `request_timeout = "1s"`, must finish the session on the first request.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, read_http_request, write};

/// Reads one request, then streams a text answer slowly and closes.
fn answer_slowly(stream: TcpStream) -> Option<()> {
    read_http_request(&stream)?;
    let mut stream = stream;
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
        )
        .ok()?;
    stream.flush().ok()?;
    let chunk = |content: &str, finish: Option<&str>| {
        let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {"content": content},
                                    "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut events: Vec<String> = (0..6).map(|_| chunk("slow ", None)).collect();
    events.push(chunk("answer", Some("stop")));
    events.push("data: [DONE]\n\n".to_owned());
    for event in events {
        std::thread::sleep(Duration::from_millis(300));
        stream.write_all(event.as_bytes()).ok()?;
        stream.flush().ok()?;
    }
    Some(())
}

#[test]
fn a_live_stream_longer_than_request_timeout_finishes() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("local addr").port();
    let requests = Arc::new(AtomicUsize::new(0));
    {
        let requests = Arc::clone(&requests);
        // Detached: it blocks in accept() and ends with the test process.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                requests.fetch_add(1, Ordering::SeqCst);
                answer_slowly(stream);
            }
        });
    }
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("data/x.txt"), "x");
    write(
        &dir.path().join("agent.toml"),
        &format!(
            r#"name = "slow-stream"
instructions = "Answer."
goal = "Say something slowly."

[model]
provider = "openai"
model = "slow-model"
base_url = "http://127.0.0.1:{port}/v1"
stream = true
request_timeout = "1s"

[[tools]]
component = "fs"
only = ["read"]
dirs = ["data:/d:ro"]
"#
        ),
    );
    let run = crate::support::run(home.cmd(&["run", dir.path().to_str().expect("utf-8 path")]));
    run.expect_code(0);
    assert!(
        run.stdout_text()
            .contains("slow slow slow slow slow slow answer"),
        "{}",
        run.stdout_text()
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "no retry: {}",
        run.stderr
    );
}
