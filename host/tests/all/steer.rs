//! Issue 9, steering: `send`, `pause` and `cancel` reach a session another
//! process is running, within a second, at its next safe point; a pause
//! posted to a paused session is answered by the operator's resume.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use longhand_brain::core::state::HistoryItem;
use longhand_session::{Event, EventRecord};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, Proc, call, scripted_agent, session_of_json, text_turn, tool_turn};

/// A long scripted run of quick steps (a stat each).
fn long_agent(dir: &Path, turns: usize) -> PathBuf {
    std::fs::create_dir_all(dir.join("work")).expect("mkdir");
    std::fs::write(dir.join("work/a.txt"), "a").expect("write");
    let mut responses: Vec<Value> = (1..turns)
        .map(|i| {
            tool_turn(
                &format!("turn {i}"),
                vec![call(
                    &format!("c{i}"),
                    "fs__stat",
                    json!({"path": "/w/a.txt"}),
                )],
                10,
                1,
            )
        })
        .collect();
    responses.push(text_turn("all done", 10, 1));
    scripted_agent(
        dir,
        "steered",
        "max_steps = 5000\nmax_tool_calls = 5000",
        &responses,
    )
}

fn spawn(home: &Home, dir: &Path, script: &Path) -> (Proc, String) {
    let mut proc = Proc::spawn(home.cmd(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]));
    let session = session_of_json(&proc.next_line().expect("a first line"));
    // Running: a few events in.
    for _ in 0..6 {
        proc.next_line();
    }
    (proc, session)
}

/// Post a control with `--json`; returns when it was posted (unix ms).
fn post(home: &Home, args: &[&str]) -> u64 {
    let mut all = args.to_vec();
    all.push("--json");
    let out = home.run(&all);
    out.expect_code(0);
    let control: Value = serde_json::from_str(&out.stdout[0]).expect("control JSON");
    control["posted_ms"].as_u64().expect("posted_ms")
}

fn steered<'a>(log: &'a [EventRecord], kind: &str) -> Vec<&'a EventRecord> {
    log.iter()
        .filter(|r| matches!(&r.event, Event::Steered { kind: k, .. } if k == kind))
        .collect()
}

#[test]
fn send_and_pause_reach_a_running_session_within_a_second() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = long_agent(dir.path(), 3000);
    let (mut proc, session) = spawn(&home, dir.path(), &script);
    let sent = post(&home, &["send", &session, "also look at b.txt"]);
    std::thread::sleep(Duration::from_millis(300));
    let paused = post(&home, &["pause", &session, "--reason", "lunch"]);
    let started = Instant::now();
    let ended = proc.finish();
    ended.expect_code(3);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the run went on {:?} after the pause",
        started.elapsed()
    );
    let log = home.log(&session);
    let send = steered(&log, "send");
    let pause = steered(&log, "pause");
    assert_eq!((send.len(), pause.len()), (1, 1));
    assert!(
        send[0].at_ms - sent < 1000,
        "send took {} ms",
        send[0].at_ms - sent
    );
    assert!(
        pause[0].at_ms - paused < 1000,
        "pause took {} ms",
        pause[0].at_ms - paused
    );
    // The pause is the session's last word, and the model has the message.
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "paused");
    assert!(
        state
            .pause
            .as_ref()
            .expect("a pause")
            .detail
            .contains("lunch")
    );
    assert!(state.steps < 2999, "it ran to the end");
    let told = state.history.iter().any(
        |h| matches!(h, HistoryItem::Note { text, .. } if text.contains("also look at b.txt")),
    );
    assert!(
        told || state.history_omitted > 0,
        "the message is not in the context"
    );
    // Resuming carries on from where it paused (the pause is not applied
    // again).
    let mut resumed = Proc::spawn(home.cmd(&["resume", &session, "--json"]));
    for _ in 0..10 {
        resumed.next_line();
    }
    resumed.kill();
    assert!(home.state(&session).steps > state.steps);
}

#[test]
fn cancel_ends_a_running_session() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = long_agent(dir.path(), 3000);
    let (mut proc, session) = spawn(&home, dir.path(), &script);
    let posted = post(&home, &["cancel", &session, "--reason", "wrong goal"]);
    let ended = proc.finish();
    ended.expect_code(1);
    let log = home.log(&session);
    let cancel = steered(&log, "cancel");
    assert_eq!(cancel.len(), 1);
    assert!(cancel[0].at_ms - posted < 1000);
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "failed");
    assert!(
        state
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("wrong goal")
    );
    // No call was left open: it acted between steps.
    assert!(state.open_calls.is_empty());
    assert!(state.in_doubt.is_empty());
}

#[test]
fn a_pause_posted_to_a_paused_session_is_answered_by_the_resume() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = long_agent(dir.path(), 3000);
    let (mut proc, session) = spawn(&home, dir.path(), &script);
    post(&home, &["pause", &session]);
    proc.finish().expect_code(3);
    // Paused; a pause that raced the first one lands in the inbox (the CLI
    // refuses to post one to a paused session, so it is posted directly);
    // then the operator resumes it.
    let id: longhand_session::SessionId = session.parse().expect("id");
    let home_dir = home.path().to_owned();
    crate::support::block_on(async move {
        use longhand_session::{SqliteStore, Store, inbox::ControlKind};
        let store = SqliteStore::open(&home_dir).await.expect("store");
        store
            .post_control(&id, ControlKind::Pause, Some("again".into()), "test")
            .await
            .expect("post");
    });
    let mut resumed = Proc::spawn(home.cmd(&["resume", &session, "--json"]));
    for _ in 0..20 {
        resumed.next_line();
    }
    resumed.kill();
    let log = home.log(&session);
    let pauses = steered(&log, "pause");
    assert_eq!(pauses.len(), 2);
    let Event::Steered { text, .. } = &pauses[1].event else {
        unreachable!()
    };
    assert!(
        text.as_deref().unwrap_or_default().contains("superseded"),
        "{text:?}"
    );
    // It ran on after the resume instead of pausing at once.
    let after = log
        .iter()
        .rposition(|r| r.event.kind() == "resumed")
        .expect("resumed");
    assert!(
        log[after..]
            .iter()
            .any(|r| r.event.kind() == "model_responded")
    );
}

#[test]
fn cancel_now_ends_a_tool_call_in_flight_and_records_it_in_doubt() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    // A query that counts to a billion: seconds of work in the sandbox.
    let responses = vec![
        tool_turn(
            "counting",
            vec![call(
                "long",
                "json__query",
                json!({"filter": "reduce range(0; 1000000000000) as $i (0; . + 1)", "input": null}),
            )],
            10,
            1,
        ),
        text_turn("done", 10, 1),
    ];
    let script = scripted_agent(dir.path(), "slow", "max_steps = 10", &responses);
    let toml = dir.path().join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str("\n[[tools]]\ncomponent = \"json\"\nonly = [\"query\"]\ntimeout = \"120s\"\nfuel = 100000000000000000\n");
    std::fs::write(&toml, text).expect("agent.toml");
    let mut proc = Proc::spawn(home.cmd(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]));
    let session = session_of_json(&proc.next_line().expect("a first line"));
    // The answer is immediate and the count takes minutes: two seconds in,
    // the call is running. (Its events are written when it ends, so no
    // line announces it.)
    std::thread::sleep(Duration::from_secs(2));
    let posted = post(
        &home,
        &["cancel", &session, "--now", "--reason", "too slow"],
    );
    let ended = proc.finish();
    ended.expect_code(1);
    let log = home.log(&session);
    let cancel = steered(&log, "cancel_now");
    assert_eq!(cancel.len(), 1);
    assert!(
        cancel[0].at_ms - posted < 1500,
        "cancel --now took {} ms",
        cancel[0].at_ms - posted
    );
    // The call never finished; it is recorded in doubt, then the end.
    assert!(
        !log.iter()
            .any(|r| matches!(&r.event, Event::ToolFinished { call_id, .. } if call_id == "long"))
    );
    assert!(
        log.iter()
            .any(|r| matches!(&r.event, Event::ToolInDoubt { call_id, .. } if call_id == "long"))
    );
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "failed");
    assert!(
        state
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("too slow")
    );
}
