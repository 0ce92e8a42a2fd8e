//! Issue 7 §5: `--script` answers by the loop's step, so a script longer
//! than the context window replays exactly (a 1000-step script used to run
//! 678 tool calls in 1010 steps and pause), and a run that is not where the
//! script thinks it is fails loudly instead of replaying wrong answers.

use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, text_turn, tool_turn, write};

#[test]
fn a_script_longer_than_the_context_window_replays_exactly() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("work/a.txt"), "a");
    const TURNS: usize = 1000;
    let mut responses: Vec<_> = (1..TURNS)
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
    // A small window: history is trimmed from the front after a few turns.
    let script = scripted_agent(
        dir.path(),
        "long",
        "max_steps = 2000\nmax_tool_calls = 2000\ncontext_tokens = 2000",
        &responses,
    );
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8 path"),
        "--script",
        script.to_str().expect("utf-8 path"),
        "--json",
    ]);
    run.expect_code(0);
    let session = crate::support::session_of_json(&run.stdout[0]);
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    assert_eq!(state.steps, TURNS as u64);
    assert_eq!(state.tool_calls, TURNS as u64 - 1);
    assert!(state.history_omitted > 0, "the window was exceeded");
    assert_eq!(state.summary.as_deref(), Some("all done"));
}

#[test]
fn a_run_that_left_the_script_fails_loudly() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("work/a.txt"), "a");
    let responses = [
        tool_turn(
            "reading",
            vec![call("c1", "fs__read", json!({"path": "/w/a.txt"}))],
            10,
            1,
        ),
        text_turn("done", 10, 1),
    ];
    // Turn 1 is played and the session pauses at max_steps…
    let script = scripted_agent(dir.path(), "drift", "max_steps = 1", &responses);
    let paused = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8 path"),
        "--script",
        script.to_str().expect("utf-8 path"),
        "--json",
    ]);
    paused.expect_code(3);
    let id = crate::support::session_of_json(&paused.stdout[0]);
    // …then the script (which `resume` reads again from the same path) is
    // replaced by one whose turn 1 differs. Turn 2 must not be played into
    // a conversation the script never had: the session fails and says why.
    let edited = [
        tool_turn(
            "writing instead",
            vec![call(
                "c1",
                "fs__write",
                json!({"path": "/w/b.txt", "content": "b"}),
            )],
            10,
            1,
        ),
        text_turn("done", 10, 1),
    ];
    write(&script, &json!({ "responses": edited }).to_string());
    let resumed = home.run(&["resume", &id, "--raise", "max_steps=10"]);
    resumed.expect_code(1);
    let state = home.state(&id);
    assert_eq!(state.status.as_str(), "failed");
    let error = state.error.unwrap_or_default();
    assert!(
        error.contains("reading") && error.contains("writing instead"),
        "the failure shows what the run had and what the script expected: {error}"
    );
    assert!(
        !dir.path().join("work/b.txt").exists(),
        "nothing was written"
    );
}

/// Call ids are the model's to choose: oversized, repeated, with characters
/// the APIs refuse, or shaped like a completion check's. Each call still
/// runs once and gets its own result, under an id both APIs accept; an
/// answer of more than 1024 calls runs the first 1024 and says so.
#[test]
fn hostile_call_ids_and_floods_are_recorded_safely() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("work/a.txt"), "a");
    let stat = || json!({"path": "/w/a.txt"});
    let huge = "x".repeat(100_000);
    let hostile = vec![
        call(&huge, "fs__stat", stat()),
        call("dup", "fs__stat", stat()),
        call("dup", "fs__stat", stat()),
        call("has space/and\u{202e}rtl", "fs__stat", stat()),
        call("completion-check-1", "fs__stat", stat()),
        call("", "fs__stat", stat()),
    ];
    let flood: Vec<_> = (0..1500)
        .map(|i| call(&format!("f{i}"), "fs__stat", stat()))
        .collect();
    let responses = [
        tool_turn("hostile ids", hostile, 10, 1),
        // Reuses an id of turn 1: it must not be taken for that call.
        tool_turn("reused", vec![call("dup", "fs__stat", stat())], 10, 1),
        tool_turn("flood", flood, 10, 1),
        text_turn("done", 10, 1),
    ];
    let script = scripted_agent(
        dir.path(),
        "hostile-ids",
        "max_steps = 10\nmax_tool_calls = 5000",
        &responses,
    );
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8 path"),
        "--script",
        script.to_str().expect("utf-8 path"),
        "--json",
    ]);
    run.expect_code(0);
    let session = crate::support::session_of_json(&run.stdout[0]);
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    assert_eq!(
        state.tool_calls,
        6 + 1 + 1024,
        "every recorded call ran once"
    );
    let log = home.log(&session);
    let mut ids = std::collections::HashSet::new();
    for record in &log {
        if let longhand_session::Event::ToolFinished { call_id, .. } = &record.event {
            assert!(
                (1..=64).contains(&call_id.len())
                    && call_id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "an id both APIs accept: {call_id:?}"
            );
            assert!(ids.insert(call_id.clone()), "ids are unique: {call_id}");
        }
    }
    assert_eq!(ids.len(), 6 + 1 + 1024);
    assert!(
        !ids.contains("completion-check-1"),
        "no call passes for a completion check"
    );
}

/// A scripted agent needs no model: with no `[model]` it runs under
/// `--script`, is refused without one (before a session exists, saying
/// what to add or pass), and `tool lock` pins its tools all the same.
#[test]
fn an_agent_without_a_model_runs_scripted_and_is_refused_live() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("work/a.txt"), "a");
    let responses = [
        tool_turn(
            "reading",
            vec![call("c1", "fs__read", json!({"path": "/w/a.txt"}))],
            10,
            1,
        ),
        text_turn("read it", 10, 1),
    ];
    let script = scripted_agent(
        dir.path(),
        "modelless",
        "max_cost_micros = 1000",
        &responses,
    );
    // The helper's agent with its `[model]` table taken out.
    let file = dir.path().join("agent.toml");
    let agent = std::fs::read_to_string(&file).unwrap();
    let start = agent.find("[model]").expect("a [model] table");
    let end = start + agent[start..].find("\n\n").expect("a blank line after it") + 2;
    std::fs::write(&file, format!("{}{}", &agent[..start], &agent[end..])).unwrap();
    let agent = std::fs::read_to_string(&file).unwrap();
    assert!(
        !agent.contains("[model]") && !agent.contains("cassette"),
        "{agent}"
    );
    let agent = dir.path().to_str().expect("utf-8 path");

    let run = home.run(&[
        "run",
        agent,
        "--script",
        script.to_str().expect("utf-8 path"),
        "--json",
    ]);
    run.expect_code(0);
    let session = crate::support::session_of_json(&run.stdout[0]);
    assert_eq!(home.state(&session).summary.as_deref(), Some("read it"));

    let live = home.run(&["run", agent]);
    live.expect_code(2);
    assert!(live.stderr.contains("has no [model]"), "{}", live.stderr);
    assert!(live.stderr.contains("--script FILE"), "{}", live.stderr);
    assert_eq!(
        home.run(&["sessions", "--json"]).stdout.len(),
        1,
        "no second session"
    );

    let locked = home.run(&["tool", "lock", agent]);
    locked.expect_code(0);
    assert!(dir.path().join("longhand.lock").is_file());
}
