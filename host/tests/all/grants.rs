//! Directory grants through the real binary: a FIFO cannot hang `tool
//! call`, an ambiguous `--dir` is refused with advice, `--mount` grants a
//! path holding `:`, a session keeps the directories it was started with,
//! and its total writes pause it like any other limit.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, session_of_json, text_turn, tool_turn};

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo failed");
}

#[test]
fn a_fifo_in_a_grant_neither_hangs_the_call_nor_the_process() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    mkfifo(&dir.path().join("fifo"));
    let grant = format!("{}:/w", dir.path().display());
    for (tool, input) in [
        ("read", json!({"path": "/w/fifo"})),
        ("search", json!({"pattern": "x", "root": "/w"})),
    ] {
        let started = Instant::now();
        let out = home.run(&[
            "tool",
            "call",
            "fs",
            tool,
            "--dir",
            &format!("{grant}:rw"),
            "--timeout",
            "5s",
            "--input",
            &input.to_string(),
        ]);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(30), "{tool} took {took:?}");
        // `search` skips what is not a regular file by itself; `read`
        // opens the path and is refused by the host.
        if tool == "read" {
            assert_ne!(
                out.code,
                Some(0),
                "read succeeded:\n{}",
                out.stdout.join("\n")
            );
            assert!(
                out.stderr.contains("only regular files and directories"),
                "the receipt should name the refusal:\n{}",
                out.stderr
            );
        }
    }
}

#[test]
fn an_ambiguous_dir_is_refused_and_mount_is_not_ambiguous() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir(dir.path().join("data")).expect("mkdir");
    std::fs::create_dir(dir.path().join("data:rw")).expect("mkdir");
    std::fs::write(dir.path().join("data:rw/which.txt"), "the one with a colon").expect("w");
    std::fs::write(dir.path().join("data/which.txt"), "the plain one").expect("w");
    let spec = format!("{}/data:rw", dir.path().display());

    let out = home.run(&[
        "tool",
        "call",
        "fs",
        "read",
        "--dir",
        &spec,
        "--input",
        r#"{"path":"which.txt"}"#,
    ]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("ambiguous") && out.stderr.contains("--mount"),
        "{}",
        out.stderr
    );

    let mount = format!("src={spec},dst=/workspace,mode=ro");
    let out = home.run(&[
        "tool",
        "call",
        "fs",
        "read",
        "--mount",
        &mount,
        "--input",
        r#"{"path":"which.txt"}"#,
    ]);
    out.expect_code(0);
    assert!(
        out.stdout_text().contains("the one with a colon"),
        "{}",
        out.stdout_text()
    );
}

fn write_turn(t: u64) -> Value {
    tool_turn(
        &format!("Writing file {t}."),
        vec![call(
            &format!("w{t}"),
            "fs__write",
            json!({"path": format!("/w/file-{t}.txt"), "content": "x".repeat(1000)}),
        )],
        10,
        1,
    )
}

fn events_of(home: &Home, session: &str) -> Vec<Value> {
    home.log(session)
        .iter()
        .map(|r| serde_json::to_value(r).expect("event JSON"))
        .collect()
}

#[test]
fn a_session_keeps_its_pinned_directories_across_resume() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        dir.path(),
        "pinned",
        "max_steps = 1",
        &[write_turn(1), write_turn(2), text_turn("Done.", 10, 1)],
    );
    let (agent, script) = (
        dir.path().to_str().expect("utf-8"),
        script.to_str().expect("utf-8"),
    );
    let run = home.run(&["run", agent, "--script", script, "--json"]);
    assert_eq!(run.code, Some(3), "paused after one step:\n{}", run.stderr);
    let session = session_of_json(&run.stdout[0]);
    assert!(dir.path().join("work/file-1.txt").exists());

    // The grant is frozen with the directory's identity.
    let created = events_of(&home, &session)
        .into_iter()
        .find(|e| e["type"] == "session_created")
        .expect("session_created");
    let text = created.to_string();
    assert!(
        text.contains("\"identity\"") && text.contains("\"ino\""),
        "{text}"
    );

    // While paused, the directory is swapped for a link to elsewhere.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    std::fs::rename(dir.path().join("work"), dir.path().join("work-old")).expect("mv");
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("work")).expect("ln");

    let resumed = home.run(&["resume", &session, "--raise", "max_steps=10", "--json"]);
    let events = resumed.json_lines();
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_finished")
        .unwrap_or_else(|| panic!("no tool call after resume: {events:#?}\n{}", resumed.stderr));
    // Refused before the tool ran: no fuel, nothing written anywhere.
    assert_eq!(finished["ok"], json!(false), "{finished}");
    assert_eq!(finished["receipt"]["fuel_used"], json!(0), "{finished}");
    assert!(!dir.path().join("work-old/file-2.txt").exists());
    assert!(
        std::fs::read_dir(&elsewhere).expect("ls").next().is_none(),
        "a write went through the planted link"
    );
}

#[test]
fn the_session_write_total_pauses_the_session() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    // Each write is 1000 bytes plus a 4 KiB block per created file (the
    // fs tool writes a temporary file and renames it into place).
    let script = scripted_agent(
        dir.path(),
        "writes",
        "max_write_bytes = 6000",
        &[
            write_turn(1),
            write_turn(2),
            write_turn(3),
            text_turn("Done.", 10, 1),
        ],
    );
    let (agent, script) = (
        dir.path().to_str().expect("utf-8"),
        script.to_str().expect("utf-8"),
    );
    let run = home.run(&["run", agent, "--script", script, "--json"]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    let events = run.json_lines();
    let paused = events
        .iter()
        .find(|e| e["type"] == "paused")
        .unwrap_or_else(|| panic!("no paused event: {events:#?}"));
    assert_eq!(paused["reason"]["limit"], "max_write_bytes", "{paused}");
    let session = session_of_json(&run.stdout[0]);
    let state = home.state(&session);
    assert!(state.bytes_written >= 6000, "{}", state.bytes_written);
    assert!(!dir.path().join("work/file-3.txt").exists());
}

/// A directory the component asks for (`fs` asks for /workspace) and the
/// operator did not grant reaches the model as access denied naming the
/// grant, whatever the tool does there (read, list, write, stat) and
/// whatever else is granted — never as "not found", which sends a model
/// searching. Granted, the same call works.
#[test]
fn a_requested_directory_that_is_not_granted_is_access_denied_naming_the_grant() {
    let home = Home::new();
    let other = TempDir::new().expect("tempdir");
    let other_grant = format!("{}:/data:ro", other.path().display());
    for (tool, input) in [
        ("read", json!({"path": "/workspace/notes.txt"})),
        ("list", json!({"path": "/workspace"})),
        (
            "write",
            json!({"path": "/workspace/out.txt", "content": "x"}),
        ),
        ("stat", json!({"path": "/workspace/notes.txt"})),
    ] {
        for grant in [None, Some(other_grant.as_str())] {
            let mut args = vec!["tool", "call", "fs", tool, "--json"];
            if let Some(grant) = grant {
                args.extend(["--dir", grant]);
            }
            let input = input.to_string();
            args.extend(["--input", &input]);
            let out = home.run(&args);
            assert_ne!(out.code, Some(0), "{tool} {grant:?} succeeded");
            let text = out.stdout.join("\n");
            assert!(text.contains("access-denied"), "{tool} {grant:?}:\n{text}");
            assert!(
                text.contains("/workspace is not granted to this tool")
                    && text.contains("HOST_DIR:/workspace:rw"),
                "{tool} {grant:?}: the error names the grant:\n{text}"
            );
            assert!(!text.contains("not-found"), "{tool} {grant:?}:\n{text}");
        }
    }
    let granted = TempDir::new().expect("tempdir");
    std::fs::write(granted.path().join("notes.txt"), "hello").unwrap();
    let out = home.run(&[
        "tool",
        "call",
        "fs",
        "read",
        "--dir",
        &format!("{}:/workspace:ro", granted.path().display()),
        "--input",
        r#"{"path": "/workspace/notes.txt"}"#,
    ]);
    out.expect_code(0);
    assert!(out.stdout.join("\n").contains("hello"));
}
