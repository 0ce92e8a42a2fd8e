//! A bad agent file is refused at start — exit code 2, the field or path
//! named on stderr — and nothing is created: no store, no session, no
//! directory.

use std::path::Path;

use tempfile::TempDir;

use crate::support::{command, run, write};

const GOOD_HEAD: &str = r#"name = "bad"
instructions = "Nothing."
goal = "Nothing."

[model]
provider = "replay"
model = "m"
cassette = "cassette.json"
"#;

/// Run `longhand run <dir>` with a home that does not exist yet; check the
/// refusal and that the home was not created.
fn refused(agent_toml: &str, named: &[&str]) {
    let dir = TempDir::new().expect("tempdir");
    write(&dir.path().join("agent.toml"), agent_toml);
    write(
        &dir.path().join("cassette.json"),
        r#"{"version": 1, "model": "m", "turns": []}"#,
    );
    let home = dir.path().join("home");
    let before = listing(dir.path());

    let out = run(command(
        &home,
        &["run", dir.path().to_str().expect("utf-8 path")],
    ));
    assert_eq!(
        out.code,
        Some(2),
        "stdout:\n{}\nstderr:\n{}",
        out.stdout_text(),
        out.stderr
    );
    for name in named {
        assert!(
            out.stderr.contains(name),
            "stderr does not name {name:?}:\n{}",
            out.stderr
        );
    }
    assert!(out.stdout.is_empty(), "nothing on stdout: {:?}", out.stdout);
    assert!(
        !home.exists(),
        "LONGHAND_HOME was created for a refused agent"
    );
    assert_eq!(listing(dir.path()), before, "the agent directory changed");
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = crate::support::files_under(dir)
        .into_iter()
        .map(|p| p.display().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn unknown_field_is_refused_and_named() {
    refused(
        &format!("colour = \"blue\"\n{GOOD_HEAD}"),
        &["unknown field `colour`"],
    );
}

#[test]
fn unknown_nested_field_is_refused_and_named() {
    refused(
        &format!("{GOOD_HEAD}\n[limits]\nmax_stepz = 3\n"),
        &["unknown field `max_stepz`"],
    );
    refused(
        &format!("{GOOD_HEAD}\n[[tools]]\ncomponent = \"fs\"\ndir = [\"work:/w:rw\"]\n"),
        &["unknown field `dir`"],
    );
}

#[test]
fn grant_of_a_missing_directory_is_refused_and_named() {
    refused(
        &format!("{GOOD_HEAD}\n[[tools]]\ncomponent = \"fs\"\ndirs = [\"no-such-dir:/w:rw\"]\n"),
        &["no-such-dir", "tools[0]"],
    );
}
