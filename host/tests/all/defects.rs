//! Three defects found against a strict model-API peer (issue 7, section 3),
//! each reproduced through the CLI:
//! - an `only` list naming a tool the component does not offer is refused
//!   at start, exit 2, naming the component, the name and what it offers;
//! - a bad base URL (in `--model` or `model.base_url`) is refused at start,
//!   exit 2, saying what is wrong, before any session exists;
//! - one answer asking for more calls than `max_tool_calls` has room for
//!   runs only as many as fit, pauses on the limit, and runs the rest on
//!   `resume --raise`.

use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, session_of_json, text_turn, tool_turn};

/// Sessions in `home`, as `longhand sessions --json` lists them.
fn sessions(home: &Home) -> Vec<String> {
    let out = home.run(&["sessions", "--json"]);
    out.expect_code(0);
    out.stdout
}

/// Replace `from` (which must occur) with `to` in the agent file.
fn edit_agent(dir: &Path, from: &str, to: &str) {
    let path = dir.join("agent.toml");
    let text = std::fs::read_to_string(&path).expect("read agent.toml");
    assert!(text.contains(from), "agent.toml has no {from:?}:\n{text}");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write agent.toml");
}

#[test]
fn unknown_name_in_only_is_refused_at_start() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(dir.path(), "only", "", &[text_turn("Done.", 1, 1)]);
    edit_agent(
        dir.path(),
        r#"only = ["read", "write", "edit", "stat"]"#,
        r#"only = ["read", "nosuchtool"]"#,
    );
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");

    let out = home.run(&["run", agent, "--script", script]);
    out.expect_code(2);
    for named in [
        "fs",
        "`only`",
        "nosuchtool",
        "offers: ",
        "read",
        "write",
        "list",
    ] {
        assert!(
            out.stderr.contains(named),
            "stderr does not name {named:?}:\n{}",
            out.stderr
        );
    }
    assert_eq!(sessions(&home), Vec::<String>::new(), "no session created");
}

#[test]
fn bad_model_urls_are_refused_before_a_session() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    scripted_agent(dir.path(), "urls", "", &[]);
    let agent = dir.path().to_str().expect("utf-8 path");

    for (flag, says) in [
        ("openai:gpt@notaurl", "is not a URL"),
        ("openai:gpt@", "is empty"),
        (
            "openai:gpt@ftp://host/v1",
            "must be http or https, not `ftp`",
        ),
    ] {
        let out = home.run(&["run", agent, "--model", flag]);
        out.expect_code(2);
        for named in [flag, says, "http://127.0.0.1:11434/v1"] {
            assert!(
                out.stderr.contains(named),
                "--model {flag}: stderr does not say {named:?}:\n{}",
                out.stderr
            );
        }
    }
    // The same check for `base_url` in the agent file, at load.
    edit_agent(
        dir.path(),
        "cassette = \"unused-cassette.json\"",
        "cassette = \"unused-cassette.json\"\nbase_url = \"ftp://host/v1\"",
    );
    let out = home.run(&["run", agent]);
    out.expect_code(2);
    for named in [
        "model.base_url",
        "must be http or https",
        "http://127.0.0.1:11434/v1",
    ] {
        assert!(
            out.stderr.contains(named),
            "stderr does not say {named:?}:\n{}",
            out.stderr
        );
    }
    let all = sessions(&home);
    assert_eq!(all.len(), 0, "no session created: {all:?}");
}

#[test]
fn one_answer_cannot_run_past_max_tool_calls() {
    const LIMIT: usize = 3;
    const CALLS: usize = 7;
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let calls: Vec<Value> = (1..=CALLS)
        .map(|t| {
            call(
                &format!("w{t}"),
                "fs__write",
                json!({"path": format!("/w/file-{t}.txt"), "content": format!("{t}\n")}),
            )
        })
        .collect();
    let script = scripted_agent(
        dir.path(),
        "many-calls",
        &format!("max_tool_calls = {LIMIT}"),
        &[
            tool_turn("Writing them all at once.", calls, 100, 1),
            text_turn("Wrote them all.", 200, 2),
        ],
    );
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");
    let written = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("work"))
            .expect("read work/")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };

    let run = home.run(&["run", agent, "--script", script, "--json"]);
    run.expect_code(3);
    let events = run.json_lines();
    let session = session_of_json(&run.stdout[0]);
    let paused = events.last().expect("events");
    assert_eq!(paused["type"], "paused", "{paused}");
    assert_eq!(paused["reason"]["kind"], "limit", "{paused}");
    assert_eq!(paused["reason"]["limit"], "max_tool_calls", "{paused}");
    let detail = paused["reason"]["detail"].as_str().expect("detail");
    assert!(
        detail.starts_with("max_tool_calls reached (3 of 3)")
            && detail.contains(&format!("{} calls", CALLS - LIMIT)),
        "{detail}"
    );
    let started = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["type"] == "tool_started")
            .map(|e| e["call_id"].as_str().expect("call id").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        started(&events),
        ["w1", "w2", "w3"],
        "calls in answer order"
    );
    assert_eq!(written(), ["file-1.txt", "file-2.txt", "file-3.txt"]);
    assert_eq!(home.state(&session).tool_calls, LIMIT as u64);

    // Resuming without a raise runs nothing more.
    let again = home.run(&["resume", &session, "--json"]);
    again.expect_code(3);
    assert_eq!(written().len(), LIMIT);

    // With room, the calls that had not run run, without another model
    // turn, and the session finishes on the script's next answer.
    let resumed = home.run(&[
        "resume",
        &session,
        "--raise",
        "max_tool_calls=100",
        "--json",
    ]);
    resumed.expect_code(0);
    let expected: Vec<String> = (1..=CALLS).map(|t| format!("file-{t}.txt")).collect();
    assert_eq!(written(), expected);
    for t in 1..=CALLS {
        let text = std::fs::read_to_string(dir.path().join(format!("work/file-{t}.txt")))
            .expect("read a written file");
        assert_eq!(text, format!("{t}\n"));
    }
    let log: Vec<Value> = home
        .log(&session)
        .iter()
        .map(|r| serde_json::to_value(r).expect("event JSON"))
        .collect();
    let ids: Vec<String> = (1..=CALLS).map(|t| format!("w{t}")).collect();
    assert_eq!(started(&log), ids, "each call started once, in order");
    let answers = log
        .iter()
        .filter(|e| e["type"] == "model_responded")
        .count();
    assert_eq!(answers, 2, "no model turn between the two halves");
    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    assert_eq!(state.tool_calls, CALLS as u64);
}
