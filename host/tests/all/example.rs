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

/// `examples/ralph-fix` (issue 8): a plan of three tasks finished by the
/// harness's checks — a sandboxed tool call, the crate's own `cargo test`
/// run confined, and a judge — runs offline to the end and leaves the
/// fixed crate in its run directory.
#[test]
fn ralph_fix_runs_offline_and_leaves_the_fixed_crate() {
    let home = Home::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ralph-fix");
    let example = std::fs::canonicalize(&example).expect("examples/ralph-fix exists");
    // The command check runs the toolchain found on the user's PATH and
    // under their HOME, as `longhand run` would in a shell.
    let mut cmd = home.cmd(&["run", example.to_str().expect("utf-8 path")]);
    for name in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    let mut proc = Proc::spawn(cmd);
    let guard = RunDirGuard {
        out: example.join("out"),
        pid: proc.pid(),
    };
    let run = proc.finish();
    run.expect_code(0);
    let session = run.stdout[0]
        .strip_prefix("session ")
        .unwrap_or_else(|| panic!("the session id is not printed first: {:?}", run.stdout));

    let dirs = guard.dirs();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let lib = std::fs::read_to_string(dirs[0].join("crate/src/lib.rs")).expect("the crate");
    assert!(lib.contains("'m' => 60,"), "not fixed:\n{lib}");
    assert!(dirs[0].join("FIX.md").is_file());

    let plan = home.run(&["plan", session, "--json"]);
    plan.expect_code(0);
    let plan: Value = serde_json::from_str(&plan.stdout[0]).expect("plan JSON");
    let tasks = plan["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 3);
    let kinds: Vec<&str> = tasks
        .iter()
        .flat_map(|t| t["checks"].as_array().expect("checks"))
        .map(|c| c["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["tool", "command", "tool", "judge"]);
    for task in tasks {
        assert_eq!(task["status"], "done", "{task}");
        for check in task["checks"].as_array().expect("checks") {
            assert_eq!(check["passed"], true, "{task}");
        }
    }
    // The command check ran confined, and says how.
    let log = home.log(session);
    let confined = log.iter().any(|r| {
        matches!(&r.event, longhand_host::session::Event::CheckFinished { kind, confinement: Some(c), passed: true, .. }
            if kind == "command" && c.get("landlock_abi").is_some())
    });
    assert!(confined, "no confined command check in the log");
    // The judge was told what the worker's calls changed in its task.
    let briefing = log
        .iter()
        .find_map(|r| match &r.event {
            longhand_host::session::Event::RoleStarted { role, briefing, .. }
                if role == "judge" =>
            {
                Some(briefing.clone())
            }
            _ => None,
        })
        .expect("the judge was asked");
    let home_dir = home.path().to_owned();
    let text = crate::support::block_on(async move {
        use longhand_host::session::Store;
        let store = longhand_host::session::SqliteStore::open(&home_dir)
            .await
            .expect("store");
        store.get_blob(&briefing).await.expect("briefing").to_vec()
    });
    let text = String::from_utf8(text).expect("utf-8");
    assert!(text.contains("- /out/FIX.md"), "{text}");
    assert!(text.contains("# Rubric"), "{text}");
}
