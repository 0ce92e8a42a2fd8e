//! Issue 7 §2: sessions that hold up.
//! - A model call longer than the lease's TTL keeps the lease (a heartbeat
//!   renews it), and a `resume` meanwhile is refused naming the holder.
//! - Each failed model attempt is in the log when it happens: a worker
//!   killed during the backoff leaves every failure it saw, each with its
//!   own attempt number and time, and the next worker goes on counting.
//! - Waking a session left running writes a `resumed` event saying why.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use longhand_session::{Event, ResumeCause};
use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, Proc, read_http_request, session_of_json, write};

fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn text_answer(text: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    })
    .to_string()
}

/// A chat-completions server on loopback: `serve(n)` answers request `n`
/// (0-based).
fn server(
    serve: impl Fn(usize, &mut TcpStream) + Send + Sync + 'static,
) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("local addr").port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let serve = Arc::new(serve);
    // Detached: it blocks in accept() and ends with the test process.
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let serve = Arc::clone(&serve);
            let n = seen.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                if read_http_request(&stream).is_some() {
                    let mut stream = stream;
                    serve(n, &mut stream);
                }
            });
        }
    });
    (port, count)
}

fn agent(dir: &std::path::Path, port: u16) {
    write(&dir.join("data/x.txt"), "x");
    write(
        &dir.join("agent.toml"),
        &format!(
            r#"name = "held"
instructions = "Answer."
goal = "Say something."

[model]
provider = "openai"
model = "held-model"
base_url = "http://127.0.0.1:{port}/v1"
stream = false

[[tools]]
component = "fs"
only = ["read"]
dirs = ["data:/d:ro"]
"#
        ),
    );
}

#[test]
fn a_model_call_longer_than_the_lease_keeps_it() {
    // The answer takes 4 s; the lease lasts 1.2 s unless renewed (every
    // 0.4 s), so a renewal late by most of a second under load still holds.
    let (port, _) = server(|_, stream| {
        std::thread::sleep(Duration::from_millis(4000));
        respond(stream, "200 OK", &text_answer("slow but here"));
    });
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    agent(dir.path(), port);
    let mut cmd = home.cmd(&["run", dir.path().to_str().expect("utf-8 path"), "--json"]);
    cmd.env("LONGHAND_LEASE_TTL_MS", "1200");
    let mut run = Proc::spawn(cmd);
    let first = run.next_line().expect("the session line");
    let session = session_of_json(&first);
    // Well past the TTL, while the request is still out.
    std::thread::sleep(Duration::from_millis(2500));
    let refused = home.run(&["resume", &session]);
    assert_eq!(
        refused.code,
        Some(3),
        "refused while held:\n{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("leased by"),
        "names the holder: {}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(&run.pid().to_string()),
        "the holder named is the running worker (pid {}): {}",
        run.pid(),
        refused.stderr
    );
    let ended = run.finish();
    ended.expect_code(0);
    assert!(
        ended.stdout_text().contains("slow but here"),
        "{}",
        ended.stdout_text()
    );
    // One worker drove it: no second run's events, no recovery.
    let log = home.log(&session);
    assert!(
        !log.iter().any(|r| matches!(r.event, Event::Resumed { .. })),
        "{log:#?}"
    );
    assert_eq!(
        log.iter()
            .filter(|r| matches!(r.event, Event::ModelRequested { .. }))
            .count(),
        1
    );
}

#[test]
fn failed_attempts_are_in_the_log_before_the_backoff_ends() {
    // Every request fails with a 500 until `healthy` is set.
    let healthy = Arc::new(AtomicBool::new(false));
    let serving = Arc::clone(&healthy);
    let (port, requests) = server(move |_, stream| {
        if serving.load(Ordering::SeqCst) {
            respond(stream, "200 OK", &text_answer("back again"));
        } else {
            respond(
                stream,
                "500 Internal Server Error",
                r#"{"error":{"message":"boom","type":"server_error"}}"#,
            );
        }
    });
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    agent(dir.path(), port);
    let mut run =
        Proc::spawn(home.cmd(&["run", dir.path().to_str().expect("utf-8 path"), "--json"]));
    let session = session_of_json(&run.next_line().expect("the session line"));
    // Backoff is 0.5-1 s, 1-2 s, 2-4 s: three failures are in within ~4 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let failures = |home: &Home| {
        home.log(&session)
            .into_iter()
            .filter_map(|r| match r.event {
                Event::ModelFailed { attempt, .. } => Some((attempt, r.at_ms)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let mut seen = failures(&home);
    while seen.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "three failures never logged: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        seen = failures(&home);
    }
    // Killed during the backoff after the third failure.
    run.kill();
    let seen = failures(&home);
    assert!(seen.len() >= 3, "{seen:?}");
    assert_eq!(
        seen.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
        (1..=seen.len() as u32).collect::<Vec<_>>(),
        "one failure per attempt, numbered in order"
    );
    assert!(
        seen.windows(2).all(|w| w[1].1 > w[0].1),
        "each failure carries the time it happened: {seen:?}"
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        seen.len(),
        "each attempt reached the server"
    );

    // The next worker goes on counting and says why it woke the session.
    healthy.store(true, Ordering::SeqCst);
    let resumed = home.run(&["resume", &session, "--json"]);
    resumed.expect_code(0);
    let log = home.log(&session);
    let recovery = log
        .iter()
        .find_map(|r| match &r.event {
            Event::Resumed { cause, note, .. } => Some((*cause, note.clone())),
            _ => None,
        })
        .expect("a resumed event");
    // Killed on this machine: the next worker proves the holder dead and
    // takes the lease over at once instead of waiting it out.
    assert!(
        matches!(recovery.0, ResumeCause::Crash | ResumeCause::TakeOver),
        "{recovery:?}"
    );
    assert!(recovery.1.is_some(), "the note says why: {recovery:?}");
    let attempts: Vec<u32> = log
        .iter()
        .filter_map(|r| match r.event {
            Event::ModelRequested { attempt, .. } => Some(attempt),
            _ => None,
        })
        .collect();
    assert_eq!(
        attempts.last().copied(),
        Some(seen.len() as u32 + 1),
        "the resumed request is attempt {} of the turn: {attempts:?}",
        seen.len() + 1
    );
    // `run --json` prints the records as stored: the same times as `log`.
    let printed: Vec<serde_json::Value> = resumed.json_lines();
    for line in printed.iter().filter(|l| l.get("seq").is_some()) {
        let seq = line["seq"].as_u64().expect("seq");
        let stored = log
            .iter()
            .find(|r| r.seq == seq)
            .expect("printed event is stored");
        assert_eq!(line["at_ms"].as_u64(), Some(stored.at_ms), "{line}");
    }
}
