//! `longhand pause | cancel | send` post to a session's control inbox
//! without touching its log; unknown and ended sessions are refused (exit
//! 2). That a running worker acts on them is the loop's test.

use longhand_session::{Control, ControlKind, SessionId, SqliteStore, Store};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, block_on, call, scripted_agent, session_of_json, text_turn, tool_turn};

/// The session's inbox, read through the library.
fn inbox(home: &Home, session: &str) -> Vec<Control> {
    let id: SessionId = session.parse().expect("session id");
    let dir = home.path().to_owned();
    block_on(async move {
        let store = SqliteStore::open(&dir).await.expect("open the store");
        store.controls(&id, 0).await.expect("read the inbox")
    })
}

/// Runs an agent whose script is `responses` with `limits`; returns the
/// session id and the exit code.
fn run_agent(home: &Home, dir: &TempDir, limits: &str, responses: &[Value]) -> (String, i32) {
    let script = scripted_agent(dir.path(), "steered", limits, responses);
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");
    let run = home.run(&["run", agent, "--script", script, "--json"]);
    let session = session_of_json(&run.stdout[0]);
    (session, run.code.expect("exited"))
}

fn write_turn(t: u64) -> Value {
    tool_turn(
        &format!("Writing file {t}."),
        vec![call(
            &format!("w{t}"),
            "fs__write",
            json!({"path": format!("/w/file-{t}.txt"), "content": "x"}),
        )],
        10,
        1,
    )
}

#[test]
fn controls_posted_to_a_paused_session_wait_in_its_inbox() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let (session, code) = run_agent(
        &home,
        &dir,
        "max_steps = 1",
        &[write_turn(1), write_turn(2), text_turn("Done.", 10, 1)],
    );
    assert_eq!(code, 3, "the limit pauses the session");
    let events_before = home.log(&session).len();

    let sent = home.run(&["send", &session, "Write file 2 as well."]);
    sent.expect_code(0);
    let text = sent.stdout_text();
    assert!(
        text.contains(&format!("posted message #1 to session {session}")),
        "{text}"
    );
    assert!(
        text.contains("longhand resume"),
        "a paused session acts on resume: {text}"
    );

    let cancelled = home.run(&[
        "cancel",
        &session,
        "--reason",
        "wrong goal",
        "--now",
        "--json",
    ]);
    cancelled.expect_code(0);
    let lines = cancelled.json_lines();
    assert_eq!(lines.len(), 1, "one JSON object: {lines:?}");
    let posted = &lines[0];
    let by = posted["by"].as_str().expect("by is text");
    assert!(by.starts_with("cli@"), "{posted}");
    let posted_ms = posted["posted_ms"].as_u64().expect("posted_ms");
    assert_eq!(
        posted,
        &json!({"session": session, "id": 2, "kind": "cancel", "now": true,
            "text": "wrong goal", "posted_ms": posted_ms, "by": by, "handled_ms": null})
    );

    // A second pause of a paused session is refused; nothing is posted.
    let paused = home.run(&["pause", &session, "--reason", "again"]);
    paused.expect_code(2);
    assert!(
        paused.stderr.contains("already paused"),
        "{}",
        paused.stderr
    );

    let controls = inbox(&home, &session);
    let got: Vec<_> = controls
        .iter()
        .map(|c| (c.id, c.kind, c.text.as_deref(), c.handled_ms))
        .collect();
    assert_eq!(
        got,
        [
            (1, ControlKind::Send, Some("Write file 2 as well."), None),
            (
                2,
                ControlKind::Cancel { now: true },
                Some("wrong goal"),
                None
            ),
        ]
    );
    assert_eq!(controls[1].posted_ms, posted_ms);
    // Posting appended nothing: only the lease holder writes the log.
    assert_eq!(home.log(&session).len(), events_before);
}

#[test]
fn an_unknown_or_malformed_session_is_a_usage_error() {
    let home = Home::new();
    let ghost = SessionId::generate(1_700_000_000_000);
    for args in [
        vec!["pause", ghost.as_str()],
        vec!["cancel", ghost.as_str(), "--now"],
        vec!["send", ghost.as_str(), "hello"],
    ] {
        let out = home.run(&args);
        out.expect_code(2);
        assert!(out.stderr.contains("not found"), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {:?}", out.stdout);
    }
    let out = home.run(&["send", "s-nope", "hello"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not a session id"), "{}", out.stderr);
}

#[test]
fn a_finished_session_has_nothing_to_steer() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let (session, code) = run_agent(&home, &dir, "", &[text_turn("Nothing to do.", 10, 1)]);
    assert_eq!(code, 0, "the session finished");
    for args in [
        vec!["pause", session.as_str()],
        vec!["cancel", session.as_str(), "--reason", "late"],
        vec!["send", session.as_str(), "hello", "--json"],
    ] {
        let out = home.run(&args);
        out.expect_code(2);
        assert!(
            out.stderr.contains("already finished"),
            "{args:?}: {}",
            out.stderr
        );
    }
    assert!(inbox(&home, &session).is_empty());
}

#[test]
fn empty_and_oversized_messages_are_refused() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let (session, code) = run_agent(
        &home,
        &dir,
        "max_steps = 1",
        &[write_turn(1), text_turn("Done.", 10, 1)],
    );
    assert_eq!(code, 3);
    let out = home.run(&["send", &session, "  "]);
    out.expect_code(2);
    assert!(out.stderr.contains("empty"), "{}", out.stderr);
    let long = "x".repeat(16 * 1024 + 1);
    let out = home.run(&["send", &session, &long]);
    out.expect_code(2);
    assert!(out.stderr.contains("16384-byte limit"), "{}", out.stderr);
    let longest = "x".repeat(16 * 1024);
    home.run(&["send", &session, &longest]).expect_code(0);
    let controls = inbox(&home, &session);
    assert_eq!(controls.len(), 1, "only the message that fits");
    assert_eq!(controls[0].text.as_deref().map(str::len), Some(16 * 1024));
}
