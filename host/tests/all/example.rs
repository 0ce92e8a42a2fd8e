//! The offline example (`examples/code-audit`) runs as the README says:
//! `longhand run examples/code-audit`, its model answers replayed from the
//! cassette, its tools, sandbox and session log real.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Home, Proc};

/// Removes the run directory the example created (`out/<time>-<pid>`),
/// whatever the test's outcome; other runs' directories are left alone.
struct RunDirGuard {
    out: PathBuf,
    pid: u32,
}

impl RunDirGuard {
    fn dirs(&self) -> Vec<PathBuf> {
        let suffix = format!("-{}", self.pid);
        std::fs::read_dir(&self.out)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(&suffix))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for RunDirGuard {
    fn drop(&mut self) {
        for dir in self.dirs() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[test]
fn code_audit_runs_offline_and_is_logged() {
    let home = Home::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/code-audit");
    let example = std::fs::canonicalize(&example).expect("examples/code-audit exists");

    let mut proc = Proc::spawn(home.cmd(&["run", example.to_str().expect("utf-8 path")]));
    let guard = RunDirGuard {
        out: example.join("out"),
        pid: proc.pid(),
    };
    let run = proc.finish();
    run.expect_code(0);
    let session = run.stdout[0]
        .strip_prefix("session ")
        .unwrap_or_else(|| panic!("the session id is not printed first: {:?}", run.stdout));
    assert!(session.starts_with("s-"), "{session}");
    assert!(
        run.stdout.iter().any(|l| l.starts_with("finished: ")),
        "no final summary:\n{}",
        run.stdout_text()
    );

    // The tools wrote into this run's own directory.
    let dirs = guard.dirs();
    assert_eq!(
        dirs.len(),
        1,
        "one run directory for pid {}: {dirs:?}",
        guard.pid
    );
    let report = std::fs::read_to_string(dirs[0].join("report.md")).expect("the report");
    assert!(
        report.contains("TODO") && report.contains("lodash"),
        "{report}"
    );

    // The trajectory: model turns and the tool calls they asked for.
    let log = home.run(&["log", session]);
    assert_eq!(log.code, Some(0), "{}", log.stderr);
    let text = log.stdout_text();
    for expected in [
        "session created: agent code-audit",
        "goal: Audit the code base",
        "step 1 ← model",
        "calls fs__list",
        "tool fs/list [read-only] started",
        "tool json/query_file [read-only] started",
        "tool fs/write [idempotent] started",
        "tool ok",
        "finished: Wrote /out/report.md",
    ] {
        assert!(
            text.contains(expected),
            "`longhand log` lacks {expected:?}:\n{text}"
        );
    }
    let turns = log
        .stdout
        .iter()
        .filter(|l| l.contains(" ← model "))
        .count();
    assert_eq!(turns, 5, "model turns in the log:\n{text}");

    // `sessions --json` lists it as finished.
    let sessions = home.run(&["sessions", "--json"]);
    assert_eq!(sessions.code, Some(0), "{}", sessions.stderr);
    let listed: Vec<Value> = sessions.json_lines();
    let row = listed
        .iter()
        .find(|s| s["id"] == session)
        .unwrap_or_else(|| panic!("{session} not listed: {listed:?}"));
    assert_eq!(row["status"], "finished", "{row}");
    assert_eq!(row["agent_name"], "code-audit", "{row}");
}
