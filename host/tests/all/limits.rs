//! A session limit pauses the session with the reason (exit code 3), and
//! `longhand resume --raise LIMIT=VALUE` carries on from where it stopped.

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, session_of_json, text_turn, tool_turn};

fn write_turn(t: u64) -> Value {
    tool_turn(
        &format!("Writing file {t}."),
        vec![call(
            &format!("w{t}"),
            "fs__write",
            json!({"path": format!("/w/file-{t}.txt"), "content": format!("{t}\n")}),
        )],
        100 * t,
        t,
    )
}

#[test]
fn max_steps_pauses_and_raise_finishes() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        dir.path(),
        "limited",
        "max_steps = 2",
        &[
            write_turn(1),
            write_turn(2),
            write_turn(3),
            text_turn("Wrote three files.", 400, 4),
        ],
    );
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");

    let run = home.run(&["run", agent, "--script", script, "--json"]);
    assert_eq!(
        run.code,
        Some(3),
        "a paused session exits 3:\n{}",
        run.stderr
    );
    let events = run.json_lines();
    let session = session_of_json(&run.stdout[0]);
    let paused = events
        .iter()
        .find(|e| e["type"] == "paused")
        .unwrap_or_else(|| panic!("no paused event: {events:#?}"));
    assert_eq!(paused["reason"]["kind"], "limit", "{paused}");
    assert_eq!(paused["reason"]["limit"], "max_steps", "{paused}");
    assert_eq!(events.last(), Some(paused), "paused is the last event");
    let answered = events
        .iter()
        .filter(|e| e["type"] == "model_responded")
        .count();
    assert_eq!(answered, 2, "two model turns before the pause");
    // Step 2's call ran before the limit was checked.
    assert!(dir.path().join("work/file-2.txt").exists());
    assert!(!dir.path().join("work/file-3.txt").exists());
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "paused");
    assert_eq!(state.steps, 2);

    // Resuming without raising the limit pauses again at once.
    let again = home.run(&["resume", &session, "--json"]);
    assert_eq!(again.code, Some(3), "{}", again.stderr);

    let resumed = home.run(&["resume", &session, "--raise", "max_steps=10", "--json"]);
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    let events = resumed.json_lines();
    assert_eq!(session_of_json(&resumed.stdout[0]), session);
    // The raise is on record. (Read from the log: `resume --json` starts
    // printing after the `resumed` event is appended.)
    let log: Vec<Value> = home
        .log(&session)
        .iter()
        .map(|r| serde_json::to_value(r).expect("event JSON"))
        .collect();
    let raised = log
        .iter()
        .rev()
        .find(|e| e["type"] == "resumed")
        .unwrap_or_else(|| panic!("no resumed event: {log:#?}"));
    assert_eq!(raised["raised"], json!({"max_steps": 10}), "{raised}");
    let last = events.last().expect("events");
    assert_eq!(last["type"], "finished", "{last}");
    assert_eq!(last["summary"], "Wrote three files.", "{last}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("work/file-3.txt"))
            .ok()
            .as_deref(),
        Some("3\n")
    );

    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    assert_eq!(state.steps, 4);
    assert_eq!(state.input_tokens, 100 + 200 + 300 + 400);
    assert_eq!(state.raised.get("max_steps"), Some(&10));
}
