//! The offline example (`examples/code-audit`) runs as the README says:
//! `longhand run examples/code-audit`, its model answers replayed from the
//! cassette, its tools, sandbox and session log real.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Home, Proc};

/// Removes the run directory the example created (`out/<time>-<pid>`),
/// whatever the test's outcome; other runs' directories are left alone.
pub(crate) struct RunDirGuard {
    pub(crate) out: PathBuf,
    pub(crate) pid: u32,
}

impl RunDirGuard {
    pub(crate) fn dirs(&self) -> Vec<PathBuf> {
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

/// `examples/csv-report` needs the python tool: on a machine where it is
/// not installed, the run stops before the model is asked, saying the one
/// command that installs it (the run itself is tested in
/// `interpreters.rs`, after the install).
#[test]
fn csv_report_without_python_says_how_to_install_it() {
    let home = Home::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/csv-report");
    let example = std::fs::canonicalize(&example).expect("examples/csv-report exists");
    let mut proc = Proc::spawn(home.cmd(&["run", example.to_str().expect("utf-8 path")]));
    let _guard = RunDirGuard {
        out: example.join("out"),
        pid: proc.pid(),
    };
    let run = proc.finish();
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("no built-in or installed tool named `python`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("hint: `python` is built from sources in this binary: install it once with `longhand tool install python`"),
        "{}",
        run.stderr
    );
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
    // Inside the fix task the worker ran the tests itself with `exec`:
    // they failed before the change and passed after it (real cargo runs;
    // the cassette matches by shape, so their output can differ).
    let text = home.run(&["log", session]);
    text.expect_code(0);
    let exec_results: Vec<&String> = text
        .stdout
        .iter()
        .filter(|l| l.contains("tool ok (call_7a") || l.contains("tool ok (call_8a"))
        .collect();
    assert_eq!(exec_results.len(), 2, "{}", text.stdout_text());
    assert!(
        exec_results[0].contains("\"exit_code\":101"),
        "{}",
        exec_results[0]
    );
    assert!(
        exec_results[1].contains("\"exit_code\":0"),
        "{}",
        exec_results[1]
    );
    // The command check ran confined, and says how.
    let log = home.log(session);
    let confined = log.iter().any(|r| {
        matches!(&r.event, longhand_session::Event::CheckFinished { kind, confinement: Some(c), passed: true, .. }
            if kind == "command" && c.get("landlock_abi").is_some())
    });
    assert!(confined, "no confined command check in the log");
    // The judge was told what the worker's calls changed in its task.
    let briefing = log
        .iter()
        .find_map(|r| match &r.event {
            longhand_session::Event::RoleStarted { role, briefing, .. } if role == "judge" => {
                Some(briefing.clone())
            }
            _ => None,
        })
        .expect("the judge was asked");
    let home_dir = home.path().to_owned();
    let text = crate::support::block_on(async move {
        use longhand_session::Store;
        let store = longhand_session::SqliteStore::open(&home_dir)
            .await
            .expect("store");
        store.get_blob(&briefing).await.expect("briefing").to_vec()
    });
    let text = String::from_utf8(text).expect("utf-8");
    assert!(text.contains("- /out/FIX.md"), "{text}");
    assert!(text.contains("# Rubric"), "{text}");
}

/// Runs `cmd` with the caller's PATH and HOME (the examples' command
/// checks and toolchains need them).
fn with_env(mut cmd: std::process::Command) -> std::process::Command {
    for name in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd
}

/// The pending approval, if any: (session, request).
fn pending_approval(home: &Home) -> Option<(String, String)> {
    let out = home.run(&["approvals", "--json"]);
    out.expect_code(0);
    let line: Value = serde_json::from_str(out.stdout.first()?).expect("json");
    Some((
        line["session"].as_str()?.to_owned(),
        line["request"].as_str()?.to_owned(),
    ))
}

/// Approve and resume `lead` until it ends; returns its final status.
fn carry_on(home: &Home, lead: &str) -> String {
    for _ in 0..6 {
        let state = home.state(lead);
        if state.is_terminal() {
            return state.status.as_str().to_owned();
        }
        if let Some((session, request)) = pending_approval(home) {
            home.run(&["approve", &session, &request]).expect_code(0);
        }
        home.run(&["resume", lead]);
    }
    home.state(lead).status.as_str().to_owned()
}

/// `examples/research-team` (issue 9): a lead delegates to a reader and a
/// writer; the writer's write waits for approval. Offline: run pauses
/// (exit 3), `approvals` lists the request, `approve` then `resume`
/// finishes — and killed after any event of the run or of the resume, it
/// still reaches the same end with the write done once.
#[test]
fn research_team_pauses_for_approval_and_survives_a_kill_at_every_event() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/research-team");
    let example = std::fs::canonicalize(&example).expect("examples/research-team exists");
    let summary = |dir: &Path| std::fs::read_to_string(dir.join("summary.md")).ok();
    let check_end = |home: &Home, lead: &str, guard: &RunDirGuard| {
        assert_eq!(home.state(lead).status.as_str(), "finished", "{lead}");
        let dirs = guard.dirs();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        let text = summary(&dirs[0]).expect("summary.md");
        assert!(text.contains("(solar.md)"), "{text}");
        // The writer's approved write ran once, in one writer session.
        let listed = home.run(&["sessions", "--json"]);
        let mut writes = 0;
        for line in &listed.stdout {
            let s: Value = serde_json::from_str(line).expect("json");
            if s["agent_name"] == "writer" {
                writes += home
                    .log(s["id"].as_str().expect("id"))
                    .iter()
                    .filter(|r| {
                        matches!(&r.event, longhand_session::Event::ToolStarted { tool, .. } if tool == "write")
                    })
                    .count();
            }
        }
        assert_eq!(writes, 1, "{lead}: the write started {writes} times");
    };

    // The documented flow, uninterrupted.
    let home = Home::new();
    let mut proc = Proc::spawn(with_env(home.cmd(&[
        "run",
        example.to_str().expect("utf-8"),
        "--json",
    ])));
    let guard = RunDirGuard {
        out: example.join("out"),
        pid: proc.pid(),
    };
    let run = proc.finish();
    run.expect_code(3);
    let lead = crate::support::session_of_json(&run.stdout[0]);
    let (session, request) = pending_approval(&home).expect("a pending approval");
    assert_ne!(session, lead, "the writer's own session asks");
    home.run(&["approve", &session, &request]).expect_code(0);
    home.run(&["resume", &lead]).expect_code(0);
    check_end(&home, &lead, &guard);
    let events = home.log(&lead).len();
    drop(guard);

    // `log` shows the tree: each child's events nested under the event
    // that started it, one level deeper per generation.
    let tree = home.run(&["log", &lead]);
    tree.expect_code(0);
    let lines = &tree.stdout;
    for agent in ["reader", "writer"] {
        let start = lines
            .iter()
            .position(|l| l.contains("child ") && l.contains(&format!("({agent}) started by")))
            .unwrap_or_else(|| panic!("no start of the {agent}:\n{}", lines.join("\n")));
        assert!(!lines[start].starts_with("  │ "), "{}", lines[start]);
        let nested = &lines[start + 1];
        assert!(
            nested.starts_with("  │ ")
                && nested.contains(&format!("session created: agent {agent}")),
            "the {agent}'s events do not follow its start, nested:\n{}",
            lines.join("\n")
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  │ ") && l.contains("tool fs/write")),
        "the writer's write is not in the tree:\n{}",
        lines.join("\n")
    );
    let own = lines.iter().filter(|l| !l.starts_with("  │ ")).count();
    assert_eq!(own, events, "the lead's own events, unindented");

    // Killed after each event of `run`, then carried on.
    for k in 1..events {
        let home = Home::new();
        let mut proc = Proc::spawn(with_env(home.cmd(&[
            "run",
            example.to_str().expect("utf-8"),
            "--json",
        ])));
        let guard = RunDirGuard {
            out: example.join("out"),
            pid: proc.pid(),
        };
        let lead = crate::support::session_of_json(&proc.next_line().expect("first line"));
        let mut seen = 0;
        while seen < k {
            match proc.next_line() {
                Some(line) if line.contains("\"seq\"") => seen += 1,
                Some(_) => {}
                None => break,
            }
        }
        proc.kill();
        assert_eq!(carry_on(&home, &lead), "finished", "killed after {k}");
        check_end(&home, &lead, &guard);
    }

    // Killed after each event of the `resume` that follows the approval.
    for k in 1..events {
        let home = Home::new();
        let mut proc = Proc::spawn(with_env(home.cmd(&[
            "run",
            example.to_str().expect("utf-8"),
            "--json",
        ])));
        let guard = RunDirGuard {
            out: example.join("out"),
            pid: proc.pid(),
        };
        let run = proc.finish();
        run.expect_code(3);
        let lead = crate::support::session_of_json(&run.stdout[0]);
        let (session, request) = pending_approval(&home).expect("a pending approval");
        home.run(&["approve", &session, &request]).expect_code(0);
        let mut resumed = Proc::spawn(home.cmd(&["resume", &lead, "--json"]));
        let mut seen = 0;
        while seen < k {
            match resumed.next_line() {
                Some(line) if line.contains("\"seq\"") => seen += 1,
                Some(_) => {}
                None => break,
            }
        }
        resumed.kill();
        assert_eq!(
            carry_on(&home, &lead),
            "finished",
            "resume killed after {k}"
        );
        check_end(&home, &lead, &guard);
    }
}
