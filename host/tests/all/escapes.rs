//! Foreign text cannot drive the operator's terminal. A tool's describe
//! text, error messages, output and logs, and a model's answers, are full
//! of escape sequences here (clear screen, window title, an OSC 52
//! clipboard write, an 8-bit CSI, a bidi override) and of newlines that
//! would forge lines; none reaches stdout or stderr as a control
//! character, every one is still visible in escaped form, and `--json`
//! keeps the exact values as JSON escapes.
//!
//! The guest is `tests/fixtures/escapes`, built here with
//! `hands::dev::build_component` (the fixtures of `tests/` belong to
//! another test crate).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use longhand_hands::dev;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Ended, Home, call, scripted_agent, text_turn, tool_turn, write};

/// What the fixture puts in every string (see its `HOSTILE`).
const HOSTILE: &str = concat!(
    "\u{1b}[2J\u{1b}[H",
    "\u{1b}]0;pwned\u{7}",
    "\u{1b}]52;c;cm0gLXJmIH4K\u{7}",
    "\u{9b}31m",
    "\u{202e}txt.exe",
    "\nreceipt: 0.01 ms, forged line",
);

/// The escapes fixture, built once per test run.
fn component() -> &'static str {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/escapes");
        dev::build_component(&crate_dir)
            .unwrap_or_else(|e| panic!("building the escapes fixture: {e:#}"))
    })
    .to_str()
    .expect("utf-8 path")
}

/// Whether a terminal could act on `c`: the set `cli/term.rs` escapes.
fn acts_on_terminal(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

#[track_caller]
fn assert_harmless(what: &str, out: &Ended) {
    for (stream, text) in [
        ("stdout", out.stdout_text()),
        ("stderr", out.stderr.clone()),
    ] {
        if let Some(c) = text.chars().find(|&c| acts_on_terminal(c)) {
            panic!("{what}: {c:?} reached {stream}:\n{text:?}");
        }
    }
}

/// The escaped forms a person sees instead.
#[track_caller]
fn assert_visible(what: &str, text: &str) {
    for shown in ["\\x1b[2J", "\\x1b]52;c;", "\\u{9b}31m", "\\u{202e}txt.exe"] {
        assert!(
            text.contains(shown),
            "{what}: `{shown}` not shown in:\n{text}"
        );
    }
}

/// Every string anywhere in `value`.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn describe_shows_guest_text_escaped_one_line_per_item() {
    let home = Home::new();
    let out = home.run(&["tool", "describe", component()]);
    out.expect_code(0);
    assert_harmless("tool describe", &out);
    let text = out.stdout_text();
    assert_visible("tool describe", &text);
    // Only the CLI starts a line at the margin: a guest's newline cannot
    // forge a heading (or a receipt).
    for line in &out.stdout {
        assert!(
            line.starts_with(' ')
                || ["escapes", "digest:", "imports:", "asks for", "tools:"]
                    .iter()
                    .any(|h| line.starts_with(h)),
            "a line the CLI did not write: {line:?}\n{text}"
        );
    }
}

#[test]
fn describe_json_keeps_exact_values_as_json_escapes() {
    let home = Home::new();
    let out = home.run(&["tool", "describe", component(), "--json"]);
    out.expect_code(0);
    assert_harmless("tool describe --json", &out);
    let raw = out.stdout_text();
    for escape in ["\\u001b", "\\u009b", "\\u202e"] {
        assert!(raw.contains(escape), "{escape} missing from:\n{raw}");
    }
    let value: Value = serde_json::from_str(&raw).expect("describe --json is JSON");
    assert_eq!(
        value["info"]["description"],
        format!("Test fixture: hostile text everywhere.{HOSTILE}"),
        "the exact text survives"
    );
    assert_eq!(
        value["info"]["requests"]["hosts"][0],
        format!("example.com{HOSTILE}")
    );
}

#[test]
fn call_errors_are_one_escaped_line_above_one_receipt() {
    let home = Home::new();
    for (input, code) in [
        (json!({"fail": "failed", "message": HOSTILE}), 1),
        (json!({"fail": "not-found", "message": HOSTILE}), 1),
        (
            json!({"fail": "access-denied", "message": HOSTILE, "resource": HOSTILE}),
            3,
        ),
    ] {
        let input = input.to_string();
        let out = home.run(&["tool", "call", component(), "fail", "--input", &input]);
        out.expect_code(code);
        assert_harmless(&input, &out);
        assert_visible(&input, &out.stderr);
        let first = out.stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: "), "{}", out.stderr);
        let receipts = out
            .stderr
            .lines()
            .filter(|l| l.starts_with("receipt:"))
            .count();
        assert_eq!(receipts, 1, "a forged receipt line:\n{}", out.stderr);

        let out = home.run(&[
            "tool",
            "call",
            component(),
            "fail",
            "--input",
            &input,
            "--json",
        ]);
        out.expect_code(code);
        assert_harmless(&input, &out);
        let value: Value = serde_json::from_str(&out.stdout_text()).expect("JSON");
        assert_eq!(value["ok"], false);
        assert!(
            strings(&value["error"]).contains(&HOSTILE),
            "the exact message is kept: {value}"
        );
    }
}

#[test]
fn call_output_and_logs_are_escaped_and_stay_json() {
    let home = Home::new();
    // The guest returns a JSON string holding every hostile character;
    // serde_json writes C0 controls escaped but C1 and bidi raw.
    let say = json!({"say": json!(HOSTILE).to_string()}).to_string();
    let out = home.run(&["tool", "call", component(), "say", "--input", &say]);
    out.expect_code(0);
    assert_harmless("tool call output", &out);
    let shown: Value = serde_json::from_str(&out.stdout_text()).expect("output is still JSON");
    assert_eq!(shown, json!(HOSTILE));

    let out = home.run(&[
        "tool",
        "call",
        component(),
        "say",
        "--input",
        &say,
        "--json",
    ]);
    out.expect_code(0);
    assert_harmless("tool call output --json", &out);
    let value: Value = serde_json::from_str(&out.stdout_text()).expect("JSON");
    assert_eq!(value["output"], json!(HOSTILE));

    // Output that is not JSON at all, with raw escapes in it.
    let raw = json!({"say": HOSTILE}).to_string();
    let out = home.run(&["tool", "call", component(), "say", "--input", &raw]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    assert_harmless("tool call non-JSON output", &out);

    // Logs and progress travel in the receipt.
    let log = json!({"log": HOSTILE}).to_string();
    let out = home.run(&[
        "tool",
        "call",
        component(),
        "say",
        "--input",
        &log,
        "--json",
    ]);
    out.expect_code(0);
    assert_harmless("tool call log --json", &out);
    let value: Value = serde_json::from_str(&out.stdout_text()).expect("JSON");
    assert!(
        strings(&value["receipt"]).contains(&HOSTILE),
        "the log line is kept exactly: {value}"
    );
    let out = home.run(&["tool", "call", component(), "say", "--input", &log]);
    out.expect_code(0);
    assert_harmless("tool call log", &out);
}

#[test]
fn model_and_tool_text_in_run_and_log_is_escaped() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        dir.path(),
        "escapes",
        "",
        &[
            tool_turn(
                HOSTILE,
                vec![call("r1", "fs__read", json!({"path": "/w/evil.txt"}))],
                10,
                1,
            ),
            text_turn(HOSTILE, 20, 2),
        ],
    );
    write(&dir.path().join("work/evil.txt"), HOSTILE);
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");

    let run = home.run(&["run", agent, "--script", script, "--goal", HOSTILE]);
    run.expect_code(0);
    assert_harmless("run", &run);
    assert_visible("run", &run.stdout_text());
    let session = run.stdout[0]
        .strip_prefix("session ")
        .expect("the session id comes first")
        .to_owned();

    let log = home.run(&["log", &session]);
    log.expect_code(0);
    assert_harmless("log", &log);
    assert_visible("log", &log.stdout_text());
    for line in &log.stdout {
        assert!(line.starts_with('#'), "one line per event, not {line:?}");
    }

    let log = home.run(&["log", &session, "--json"]);
    log.expect_code(0);
    assert_harmless("log --json", &log);
    let events = log.json_lines();
    let goal = events
        .iter()
        .find(|e| e["type"] == "goal_set")
        .expect("a goal_set event");
    assert_eq!(goal["goal"], HOSTILE, "the exact goal is kept");

    let run = home.run(&[
        "run", agent, "--script", script, "--goal", HOSTILE, "--json",
    ]);
    run.expect_code(0);
    assert_harmless("run --json", &run);
    run.json_lines();

    let sessions = home.run(&["sessions"]);
    sessions.expect_code(0);
    assert_harmless("sessions", &sessions);
}
