//! Issue 9, skills: the model sees the skills' names and descriptions and
//! loads one on demand with `skill__load`; a skill that asks for more than
//! the agent holds is refused before a session exists.

use std::path::Path;

use longhand_session::Event;
use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, session_of_json, text_turn, tool_turn, write};

fn skill(dir: &Path, name: &str, front: &str, body: &str) {
    write(
        &dir.join("skills").join(name).join("SKILL.md"),
        &format!("---\nname: {name}\n{front}---\n{body}\n"),
    );
}

#[test]
fn a_skill_is_loaded_on_demand_and_one_asking_too_much_is_refused() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    skill(
        dir.path(),
        "plain-notes",
        "description: How to write a note in plain sentences.\ntools: [fs__write]\n\
         grants:\n  dirs:\n    - /w:rw\n",
        "Write notes as plain sentences of at most two lines each.",
    );
    let script = scripted_agent(
        dir.path(),
        "skilled",
        "max_steps = 5",
        &[
            tool_turn(
                "loading",
                vec![call("k", "skill__load", json!({"name": "plain-notes"}))],
                10,
                1,
            ),
            tool_turn(
                "bad name",
                vec![call("k2", "skill__load", json!({"name": "nope"}))],
                10,
                1,
            ),
            text_turn("noted", 10, 1),
        ],
    );
    let out = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--json",
    ]);
    out.expect_code(0);
    let session = session_of_json(&out.stdout[0]);
    let log = home.log(&session);
    let finished: Vec<(String, bool)> = log
        .iter()
        .filter_map(|r| match &r.event {
            Event::ToolFinished { call_id, ok, .. } => Some((call_id.clone(), *ok)),
            _ => None,
        })
        .collect();
    assert_eq!(finished, [("k".to_owned(), true), ("k2".to_owned(), false)]);
    let started = log
        .iter()
        .find_map(|r| match &r.event {
            Event::ToolStarted {
                call_id,
                component,
                tool,
                effect,
                ..
            } if call_id == "k" => Some((component.clone(), tool.clone(), effect.clone())),
            _ => None,
        })
        .expect("started");
    assert_eq!(started, ("skill".into(), "load".into(), "read-only".into()));

    // A skill that wants a directory the agent does not hold.
    skill(
        dir.path(),
        "greedy",
        "description: Wants everything.\ngrants:\n  dirs:\n    - /etc:ro\n",
        "Read everything.",
    );
    let out = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
    ]);
    out.expect_code(2);
    assert!(out.stderr.contains("greedy"), "{}", out.stderr);
    assert!(out.stderr.contains("/etc"), "{}", out.stderr);
}
