//! A final answer of any size finishes the session (issue 7: one over the
//! store's 256 KiB event limit left it `running`, exited 3, and on resume
//! the model was told a passing completion check had failed).
//!
//! The answer here is 1 MiB: `finished` carries a bounded preview and a blob
//! reference, the blob holds the whole text byte for byte, and `run --json`
//! and `log --json` show the same event.

use longhand_session::event::{BlobRef, MAX_EVENT_JSON, MAX_INLINE_TEXT};
use longhand_session::{SqliteStore, Store};
use tempfile::TempDir;

use crate::support::{Home, block_on, scripted_agent, session_of_json, text_turn};

/// A 1 MiB answer of many lines, with two-byte characters so a cut that
/// ignored character boundaries would show, and an end a preview lacks.
fn one_mib_answer() -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 1024 * 1024 {
        text.push_str(&format!("réponse finale, partie {i}.\n"));
        i += 1;
    }
    text.push_str("THE END");
    text
}

#[test]
fn a_one_mib_final_answer_finishes_the_session() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let answer = one_mib_answer();
    assert!(answer.len() > 4 * MAX_EVENT_JSON);
    let script = scripted_agent(dir.path(), "large", "", &[text_turn(&answer, 10, 300_000)]);
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");

    let run = home.run(&["run", agent, "--script", script, "--json"]);
    run.expect_code(0);
    let session = session_of_json(&run.stdout[0]);
    let events = run.json_lines();
    let finished = events.last().expect("events").clone();
    assert_eq!(finished["type"], "finished", "{finished}");

    // A preview inline, bounded, cut on a character boundary from the
    // start of the answer.
    let preview = finished["summary"].as_str().expect("a summary preview");
    let kept = preview.strip_suffix('…').expect("a cut preview ends in …");
    assert!(
        kept.len() <= MAX_INLINE_TEXT,
        "preview of {} bytes",
        kept.len()
    );
    assert!(
        kept.len() > MAX_INLINE_TEXT - 4,
        "preview of {} bytes",
        kept.len()
    );
    assert!(answer.starts_with(kept));
    // The whole answer in the blob the event names.
    let blob: BlobRef =
        serde_json::from_value(finished["summary_blob"].clone()).expect("a summary blob");
    assert_eq!(blob, BlobRef::of(answer.as_bytes()));

    let state = home.state(&session);
    assert_eq!(state.status.as_str(), "finished");
    assert_eq!(state.summary.as_deref(), Some(preview));
    assert_eq!(state.summary_blob.as_ref(), Some(&blob));
    let stored = block_on(async {
        let store = SqliteStore::open(home.path())
            .await
            .expect("open the store");
        store.get_blob(&blob).await.expect("the summary blob")
    });
    assert_eq!(stored.len(), answer.len());
    assert!(stored == answer.as_bytes(), "the blob is not the answer");

    // `log --json` shows the event `run --json` printed.
    let logged = home.log(&session);
    let last = serde_json::to_value(logged.last().expect("a log")).expect("event JSON");
    // The same event, time included: `run --json` prints what is stored.
    assert_eq!(last, finished.clone());
    // `log` prints it on one line, the preview and where the rest is.
    let log = home.run(&["log", &session]);
    log.expect_code(0);
    let line = log.stdout.last().expect("a log line");
    assert!(
        line.contains("finished: réponse finale, partie 0."),
        "{line}"
    );
    assert!(line.contains(&format!("blob {blob}")), "{line}");
    assert!(
        line.len() < 4 * MAX_INLINE_TEXT,
        "log line of {} bytes",
        line.len()
    );

    let sessions = home.run(&["sessions", "--json"]);
    sessions.expect_code(0);
    let rows = sessions.json_lines();
    let row = rows
        .iter()
        .find(|s| s["id"] == session.as_str())
        .unwrap_or_else(|| panic!("{session} not listed: {rows:?}"));
    assert_eq!(row["status"], "finished", "{row}");

    // Resuming a finished session changes nothing and says so.
    let resume = home.run(&["resume", &session]);
    resume.expect_code(0);
    assert!(resume.stdout_text().contains("already finished"));
    assert_eq!(home.log(&session).len(), logged.len());
}

#[test]
fn run_prints_the_whole_answer() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let answer = one_mib_answer();
    let script = scripted_agent(dir.path(), "large", "", &[text_turn(&answer, 10, 300_000)]);
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");

    let run = home.run(&["run", agent, "--script", script]);
    run.expect_code(0);
    let out = run.stdout_text();
    let printed = out
        .split_once("finished: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no `finished:` line in {} bytes of stdout", out.len()));
    assert!(
        printed == answer,
        "stdout after `finished: ` is not the whole answer"
    );
}

/// A log whose completion check passed with no `finished` after it (what a
/// kill between the two leaves, and what the old event size limit left):
/// `resume` finishes it with the recorded answer and asks the model nothing
/// (the script has no second answer), so it is never told the check failed.
#[test]
fn a_passed_check_without_finished_finishes_on_resume() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let answer = one_mib_answer();
    let script = scripted_agent(
        dir.path(),
        "checked",
        "",
        &[text_turn(&answer, 10, 300_000)],
    );
    let toml = dir.path().join("agent.toml");
    let mut config = std::fs::read_to_string(&toml).expect("agent.toml");
    config.push_str("\n[completion]\ntool = \"fs__stat\"\ninput = { path = \"/w\" }\n");
    std::fs::write(&toml, config).expect("write agent.toml");
    let agent = dir.path().to_str().expect("utf-8 path");
    let script = script.to_str().expect("utf-8 path");

    let run = home.run(&["run", agent, "--script", script, "--json"]);
    run.expect_code(0);
    let original = session_of_json(&run.stdout[0]);
    let events = home.log(&original);
    let kinds: Vec<&str> = events.iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["tool_started", "tool_finished", "finished"],
        "the check ran, then the session finished: {kinds:?}"
    );

    // The same log without its last event, as a new session.
    let copy = block_on(async {
        let store = SqliteStore::open(home.path())
            .await
            .expect("open the store");
        let (created, rest) = events.split_first().expect("session_created");
        let id = store
            .create("checked", &created.event)
            .await
            .expect("create the copy");
        let lease = store
            .acquire_lease(&id, "test-copy", std::time::Duration::from_secs(60))
            .await
            .expect("lease the copy");
        let body: Vec<_> = rest[..rest.len() - 1]
            .iter()
            .map(|r| r.event.clone())
            .collect();
        store
            .append(&id, &lease, 2, &body)
            .await
            .expect("append the copy");
        store.release(&lease).await.expect("release the copy");
        id.to_string()
    });
    assert_eq!(home.state(&copy).status.as_str(), "running");

    let resumed = home.run(&["resume", &copy, "--json"]);
    resumed.expect_code(0);
    let state = home.state(&copy);
    assert_eq!(state.status.as_str(), "finished");
    assert_eq!(state.steps, 1, "the model was not asked again");
    assert_eq!(state.summary_blob, Some(BlobRef::of(answer.as_bytes())));
    let tail: Vec<&str> = home.log(&copy)[events.len() - 1..]
        .iter()
        .map(|r| r.event.kind())
        .collect();
    // The copy was left running: the worker says it recovered it, then
    // finishes; the model is not asked again.
    assert_eq!(
        tail,
        ["resumed", "finished"],
        "resume wrote only the recovery note and `finished`"
    );
}

#[test]
fn a_goal_over_the_bound_is_refused_before_a_session_exists() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        dir.path(),
        "big-goal",
        "max_steps = 2",
        &[text_turn("ok", 1, 1)],
    );
    let goal = "g".repeat(longhand_brain::MAX_GOAL_BYTES + 1);
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8 path"),
        "--script",
        script.to_str().expect("utf-8 path"),
        "--goal",
        &goal,
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains("the goal is"), "{}", run.stderr);
    let sessions = home.run(&["sessions", "--json"]);
    sessions.expect_code(0);
    assert!(
        sessions
            .stdout
            .iter()
            .all(|l| l.trim().is_empty() || l.trim() == "[]"),
        "no session was created: {:?}",
        sessions.stdout
    );
}
