//! Providers through the CLI (issue 7 §3, §4): reasoning carried across a
//! tool turn by a real session — stored in the log, turned back into
//! context by the loop, sent to the same wire format — and one rule for
//! keys and reasoning settings, refused before a session exists.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, read_http_request, write};

/// Reads one HTTP request; returns its path and JSON body.
fn read_request(stream: &TcpStream) -> Option<(String, Value)> {
    let (path, body) = read_http_request(stream)?;
    Some((path, serde_json::from_slice(&body).ok()?))
}

/// The requests a server received: path and JSON body.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A loopback model server answering with `replies` in order (whole JSON
/// bodies); returns its port and what it was sent.
fn serve(replies: Vec<Value>) -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("local addr").port();
    let received = Received::default();
    let seen = Arc::clone(&received);
    // Detached: it blocks in accept() and ends with the test process.
    std::thread::spawn(move || {
        let mut replies = replies.into_iter();
        for mut stream in listener.incoming().flatten() {
            let Some(request) = read_request(&stream) else {
                continue;
            };
            seen.lock().expect("lock").push(request);
            let body = replies
                .next()
                .unwrap_or_else(|| json!({"error": {"message": "no more replies"}}))
                .to_string();
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
    });
    (port, received)
}

/// An agent reading one file, with `model` as its `[model]` section.
fn agent(dir: &Path, model: &str) -> String {
    write(&dir.join("data/x.txt"), "x");
    write(
        &dir.join("agent.toml"),
        &format!(
            "name = \"providers\"\ninstructions = \"Read x.\"\ngoal = \"Read /d/x.txt.\"\n\n\
             [model]\n{model}\n\n[[tools]]\ncomponent = \"fs\"\nonly = [\"read\"]\n\
             dirs = [\"data:/d:ro\"]\n"
        ),
    );
    dir.to_str().expect("utf-8 path").to_owned()
}

#[test]
fn responses_reasoning_items_come_back_in_the_next_request() {
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [],
                           "encrypted_content": "gAAAAB-encrypted-by-the-api"});
    let usage = json!({"input_tokens": 900, "input_tokens_details": {"cached_tokens": 640},
                       "output_tokens": 30});
    let (port, received) = serve(vec![
        json!({"id": "resp_1", "object": "response", "status": "completed", "output": [
            reasoning,
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "fs__read",
             "arguments": "{\"path\":\"/d/x.txt\"}", "status": "completed"},
        ], "usage": usage}),
        json!({"id": "resp_2", "object": "response", "status": "completed", "output": [
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "x holds x."}]},
        ], "usage": usage}),
    ]);
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = agent(
        dir.path(),
        &format!(
            "provider = \"openai-responses\"\nmodel = \"o3\"\nreasoning_effort = \"low\"\n\
             stream = false\nbase_url = \"http://127.0.0.1:{port}/v1\""
        ),
    );
    let run = home.run(&["run", &agent]);
    run.expect_code(0);
    let sent = received.lock().expect("lock").clone();
    assert_eq!(sent.len(), 2, "{}", run.stderr);
    for (path, body) in &sent {
        assert_eq!(path, "/v1/responses");
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["store"], false);
        assert!(body.get("temperature").is_none());
    }
    let input = sent[1].1["input"].as_array().expect("input items");
    let at = input
        .iter()
        .position(|i| *i == reasoning)
        .unwrap_or_else(|| panic!("reasoning not sent back: {input:?}"));
    assert_eq!(input[at + 1]["type"], "function_call");
    assert_eq!(input[at + 2]["type"], "function_call_output");
    assert_eq!(input[at + 2]["call_id"], "call_1");
}

#[test]
fn anthropic_thinking_comes_back_first_in_its_turn_with_caching() {
    let thinking = json!({"type": "thinking", "thinking": "I should read x.",
                          "signature": "EqQBCgIYAh-signed"});
    let usage = json!({"input_tokens": 50, "cache_read_input_tokens": 800,
                       "cache_creation_input_tokens": 100, "output_tokens": 20});
    let (port, received) = serve(vec![
        json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [
            thinking,
            {"type": "tool_use", "id": "toolu_1", "name": "fs__read",
             "input": {"path": "/d/x.txt"}},
        ], "stop_reason": "tool_use", "usage": usage}),
        json!({"id": "msg_2", "type": "message", "role": "assistant", "content": [
            {"type": "text", "text": "x holds x."},
        ], "stop_reason": "end_turn", "usage": usage}),
    ]);
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = agent(
        dir.path(),
        &format!(
            "provider = \"anthropic\"\nmodel = \"claude-test\"\nthinking_budget = 2048\n\
             stream = false\nbase_url = \"http://127.0.0.1:{port}\""
        ),
    );
    let run = home.run(&["run", &agent]);
    run.expect_code(0);
    let sent = received.lock().expect("lock").clone();
    assert_eq!(sent.len(), 2, "{}", run.stderr);
    let body = &sent[1].1;
    assert_eq!(sent[1].0, "/v1/messages");
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    let turns = body["messages"].as_array().expect("messages");
    let assistant = turns
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("the tool turn");
    assert_eq!(assistant["content"][0], thinking);
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    let last = turns.last().expect("a last turn");
    let last_block = last["content"].as_array().expect("blocks").last().cloned();
    assert_eq!(
        last_block.expect("a block")["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn a_public_api_without_a_key_is_refused_before_a_session_exists() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let agent = agent(dir.path(), "provider = \"openai\"\nmodel = \"gpt-4o-mini\"");
    for (flag, var) in [
        (None, "OPENAI_API_KEY"),
        (Some("openai:gpt-4o"), "OPENAI_API_KEY"),
        (Some("openai-responses:o3"), "OPENAI_API_KEY"),
        (Some("anthropic:claude-sonnet-4-5"), "ANTHROPIC_API_KEY"),
    ] {
        let mut args = vec!["run", agent.as_str()];
        args.extend(flag.iter().flat_map(|f| ["--model", *f]));
        let out = home.run(&args);
        out.expect_code(2);
        assert!(
            out.stderr.contains(var),
            "{flag:?}: stderr does not name {var}:\n{}",
            out.stderr
        );
    }
    let sessions = home.run(&["sessions", "--json"]);
    assert_eq!(sessions.stdout_text().trim(), "", "a session was created");
}

#[test]
fn reasoning_settings_that_do_not_fit_the_model_are_refused_at_start() {
    let home = Home::new();
    for (model, named) in [
        (
            "provider = \"openai\"\nmodel = \"gpt-4o\"\nreasoning_effort = \"high\"",
            "reasoning_effort",
        ),
        (
            "provider = \"openai\"\nmodel = \"o3\"\nreasoning_effort = \"extreme\"",
            "reasoning_effort",
        ),
        (
            "provider = \"openai\"\nmodel = \"o3\"\ntemperature = 0.3",
            "temperature",
        ),
        (
            "provider = \"anthropic\"\nmodel = \"c\"\nthinking_budget = 8192",
            "max_tokens",
        ),
        ("provider = \"script\"\nmodel = \"m\"", "--script"),
    ] {
        let dir = TempDir::new().expect("tempdir");
        let out = home.run(&["run", &agent(dir.path(), model)]);
        out.expect_code(2);
        assert!(
            out.stderr.contains(named),
            "{model}: stderr does not name {named}:\n{}",
            out.stderr
        );
    }
}
