//! Issue 9, budgets: the no-progress breaker pauses a worker that keeps
//! answering without a check passing or anything changing; read-only
//! results are reused from the session's record when the agent enables it,
//! until a call changes something.

use longhand_session::Event;
use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, session_of_json, text_turn, tool_turn};

fn stat(id: &str) -> serde_json::Value {
    tool_turn(
        id,
        vec![call(id, "fs__stat", json!({"path": "/w/a.txt"}))],
        10,
        1,
    )
}

fn run(home: &Home, dir: &std::path::Path, script: &std::path::Path) -> (i32, String) {
    let out = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]);
    (out.code.unwrap_or(-1), session_of_json(&out.stdout[0]))
}

#[test]
fn the_no_progress_breaker_pauses_and_a_change_resets_it() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    std::fs::write(dir.path().join("work/a.txt"), "a").expect("write");
    // Looking without doing: paused after three answers.
    let script = scripted_agent(
        dir.path(),
        "idle",
        "max_steps_without_progress = 3",
        &[
            stat("s1"),
            stat("s2"),
            stat("s3"),
            stat("s4"),
            text_turn("done", 1, 1),
        ],
    );
    let (code, session) = run(&home, dir.path(), &script);
    assert_eq!(code, 3);
    let state = home.state(&session);
    let pause = state.pause.expect("paused");
    assert_eq!(pause.limit.as_deref(), Some("max_steps_without_progress"));
    assert_eq!(format!("{:?}", pause.kind), "Breaker");
    assert_eq!(state.steps, 3);

    // A write between the looks is progress: the same budget finishes.
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    std::fs::write(dir.path().join("work/a.txt"), "a").expect("write");
    let write = tool_turn(
        "w",
        vec![call(
            "w",
            "fs__write",
            json!({"path": "/w/b.txt", "content": "b"}),
        )],
        10,
        1,
    );
    let script = scripted_agent(
        dir.path(),
        "busy",
        "max_steps_without_progress = 3",
        &[
            stat("s1"),
            stat("s2"),
            write,
            stat("s4"),
            stat("s5"),
            text_turn("done", 1, 1),
        ],
    );
    let (code, session) = run(&home, dir.path(), &script);
    assert_eq!(code, 0, "{:?}", home.state(&session).pause);
}

#[test]
fn read_only_results_are_reused_until_something_changes() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    std::fs::write(dir.path().join("work/a.txt"), "first").expect("write");
    let read = |id: &str| {
        tool_turn(
            id,
            vec![call(id, "fs__read", json!({"path": "/w/a.txt"}))],
            10,
            1,
        )
    };
    let write = tool_turn(
        "w",
        vec![call(
            "w",
            "fs__write",
            json!({"path": "/w/a.txt", "content": "second"}),
        )],
        10,
        1,
    );
    let script = scripted_agent(
        dir.path(),
        "cached",
        "cache_read_only = true",
        &[
            read("r1"),
            read("r2"),
            write,
            read("r3"),
            text_turn("done", 1, 1),
        ],
    );
    let (code, session) = run(&home, dir.path(), &script);
    assert_eq!(code, 0);
    let log = home.log(&session);
    let receipt = |id: &str| {
        log.iter()
            .find_map(|r| match &r.event {
                Event::ToolFinished {
                    call_id, receipt, ..
                } if call_id == id => Some(receipt.clone()),
                _ => None,
            })
            .expect("finished")
    };
    // r2 is r1's result, recorded as a hit; r3, after the write, ran.
    assert!(receipt("r1").get("cache_hit").is_none());
    assert_eq!(receipt("r2")["cache_hit"], "r1");
    assert!(receipt("r3").get("cache_hit").is_none());
    assert!(receipt("r3")["wall_us"].as_u64().is_some());
    let result_of = |id: &str| {
        log.iter()
            .find_map(|r| match &r.event {
                Event::ToolFinished {
                    call_id, result, ..
                } if call_id == id => Some(result.clone()),
                _ => None,
            })
            .expect("finished")
    };
    assert_eq!(result_of("r1"), result_of("r2"));
    assert_ne!(result_of("r1"), result_of("r3"));
}

#[test]
fn cost_is_counted_by_the_frozen_price_and_caps_the_session() {
    let home = Home::new();
    // The operator's prices: this script's "model" at $1,000 per million
    // tokens, i.e. 1,000 micro-dollars a token.
    std::fs::write(
        home.path().join("prices.toml"),
        "as_of = \"2026-11-30\"\n[script.\"*\"]\ninput = 1000.0\noutput = 1000.0\n",
    )
    .expect("prices.toml");
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("work")).expect("mkdir");
    std::fs::write(dir.path().join("work/a.txt"), "a").expect("write");
    // Each answer: 10 in + 1 out = 11,000 micro-dollars; the cap is 30,000.
    let script = scripted_agent(
        dir.path(),
        "costly",
        "max_cost_micros = 30000",
        &[
            stat("s1"),
            stat("s2"),
            stat("s3"),
            stat("s4"),
            text_turn("done", 10, 1),
        ],
    );
    let (code, session) = run(&home, dir.path(), &script);
    assert_eq!(code, 3);
    let state = home.state(&session);
    assert_eq!(state.cost_micros, 33_000);
    assert_eq!(state.cost_unknown, 0);
    assert_eq!(
        state.pause.expect("paused").limit.as_deref(),
        Some("max_cost_micros")
    );
    let listed = home.run(&["sessions", "--json"]);
    listed.expect_code(0);
    let line: serde_json::Value = serde_json::from_str(&listed.stdout[0]).expect("json");
    assert_eq!(line["spend"]["cost_micros"], 33_000);
    assert_eq!(line["spend"]["steps"], 3);
    // Raising the cap lets it go on.
    let resumed = home.run(&["resume", &session, "--raise", "max_cost_micros=100000"]);
    resumed.expect_code(0);
}
