//! Issue 9, approvals: a call that needs one pauses the session (the
//! process exits), `approvals` lists it, `approve`/`deny` answer it, and
//! `resume` carries on; an approval covers its exact action only, a
//! session-scoped one covers it from then on, an expired one does not
//! apply, and a crash between the approval and the call runs the call once.

use std::path::{Path, PathBuf};

use longhand_session::Event;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    Home, Proc, call, of_kind, scripted_agent, session_of_json, text_turn, tool_turn,
};

/// A scripted agent whose fs writes wait for approval.
fn agent(dir: &Path, responses: &[Value]) -> PathBuf {
    let script = scripted_agent(dir, "approving", "max_steps = 20", responses);
    let toml = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str("\n[approve]\nfs = \"writes\"\n");
    std::fs::write(&toml, text).expect("write agent.toml");
    script
}

fn write_turn(id: &str, content: &str) -> Value {
    tool_turn(
        &format!("writing {content}"),
        vec![call(
            id,
            "fs__write",
            json!({"path": "/w/a.txt", "content": content}),
        )],
        10,
        1,
    )
}

fn start(home: &Home, dir: &Path, script: &Path) -> (crate::support::Ended, String) {
    let run = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]);
    let session = session_of_json(&run.stdout[0]);
    (run, session)
}

/// The pending requests, as `approvals --json` lists them.
fn pending(home: &Home) -> Vec<Value> {
    let out = home.run(&["approvals", "--json"]);
    out.expect_code(0);
    out.stdout
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn file(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("work/a.txt")).ok()
}

#[test]
fn an_approval_covers_its_exact_action_only() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(
        dir.path(),
        &[
            write_turn("w1", "one"),
            write_turn("w2", "two"),
            text_turn("done", 10, 1),
        ],
    );
    let (run, session) = start(&home, dir.path(), &script);
    // Paused at the first write; the process is gone.
    run.expect_code(3);
    assert_eq!(file(dir.path()), None, "it ran before approval");
    let waiting = pending(&home);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["session"], session.as_str());
    assert_eq!(waiting[0]["tool"], "fs__write");
    assert_eq!(waiting[0]["input"]["content"], "one");
    let request = waiting[0]["request"].as_str().expect("id").to_owned();
    home.run(&["approve", &session, &request]).expect_code(0);
    // Approved once: the write runs; the next write (other arguments)
    // needs its own approval.
    home.run(&["resume", &session]).expect_code(3);
    assert_eq!(file(dir.path()).as_deref(), Some("one"));
    let waiting = pending(&home);
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["input"]["content"], "two");
    assert_ne!(waiting[0]["request"], request.as_str());
    // Answering the used request again is refused.
    let again = home.run(&["approve", &session, &request]);
    again.expect_code(2);
    assert!(again.stderr.contains("not pending"), "{}", again.stderr);
    // Deny the second: the model is told why and goes on to finish.
    let second = waiting[0]["request"].as_str().expect("id").to_owned();
    home.run(&["deny", &session, &second, "--reason", "keep the first"])
        .expect_code(0);
    home.run(&["resume", &session]).expect_code(0);
    assert_eq!(file(dir.path()).as_deref(), Some("one"));
    let log = home.log(&session);
    let denied = log
        .iter()
        .find_map(|r| match &r.event {
            Event::ToolFinished {
                call_id,
                ok,
                result,
                ..
            } if call_id == "w2" => Some((*ok, result.clone())),
            _ => None,
        })
        .expect("w2 answered");
    assert!(!denied.0);
    assert!(pending(&home).is_empty());
    // Each request was answered by a person, on the record.
    assert_eq!(of_kind(&log, "approval_requested").len(), 2);
    assert_eq!(of_kind(&log, "approval_granted").len(), 1);
    assert_eq!(of_kind(&log, "approval_denied").len(), 1);
}

#[test]
fn a_session_approval_covers_the_same_action_later_and_an_expired_one_none() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(
        dir.path(),
        &[
            write_turn("w1", "same"),
            write_turn("w2", "same"),
            write_turn("w3", "other"),
            text_turn("done", 10, 1),
        ],
    );
    let (run, session) = start(&home, dir.path(), &script);
    run.expect_code(3);
    let request = pending(&home)[0]["request"]
        .as_str()
        .expect("id")
        .to_owned();
    home.run(&["approve", &session, &request, "--scope", "session"])
        .expect_code(0);
    // w1 and w2 (the same action) run; w3 (other content) waits.
    home.run(&["resume", &session]).expect_code(3);
    let log = home.log(&session);
    assert_eq!(of_kind(&log, "approval_requested").len(), 2);
    let waiting = pending(&home);
    assert_eq!(waiting[0]["input"]["content"], "other");
    // An approval that has lapsed does not apply: a new request is made.
    let third = waiting[0]["request"].as_str().expect("id").to_owned();
    home.run(&["approve", &session, &third, "--expires", "1ms"])
        .expect_code(0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    home.run(&["resume", &session]).expect_code(3);
    assert_eq!(file(dir.path()).as_deref(), Some("same"));
    let waiting = pending(&home);
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["input"]["content"], "other");
    assert_ne!(waiting[0]["request"], third.as_str());
}

#[test]
fn a_crash_between_approval_and_call_runs_the_call_once() {
    // Killed at each event after the approval: the write runs exactly once
    // (or, killed mid-call, is recorded in doubt — never twice).
    for kill_after in 1..6 {
        let home = Home::new();
        let dir = TempDir::new().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
        let script = agent(
            dir.path(),
            &[write_turn("w1", "once"), text_turn("done", 10, 1)],
        );
        let (run, session) = start(&home, dir.path(), &script);
        run.expect_code(3);
        let request = pending(&home)[0]["request"]
            .as_str()
            .expect("id")
            .to_owned();
        home.run(&["approve", &session, &request]).expect_code(0);
        let mut proc = Proc::spawn(home.cmd(&["resume", &session, "--json"]));
        let mut seen = 0;
        while seen < kill_after {
            match proc.next_line() {
                Some(line) if line.contains("\"seq\"") => seen += 1,
                Some(_) => {}
                None => break,
            }
        }
        proc.kill();
        for _ in 0..3 {
            if home.state(&session).is_terminal() {
                break;
            }
            home.run(&["resume", &session]);
        }
        let log = home.log(&session);
        let started = log
            .iter()
            .filter(|r| matches!(&r.event, Event::ToolStarted { call_id, .. } if call_id == "w1"))
            .count();
        assert_eq!(
            started, 1,
            "kill after {kill_after}: w1 started {started} times"
        );
        assert_eq!(home.state(&session).status.as_str(), "finished");
        assert!(pending(&home).is_empty());
    }
}
