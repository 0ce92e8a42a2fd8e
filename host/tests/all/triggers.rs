//! Issue 10, triggers: `longhand triggers <agent>` fires `[[triggers]]`
//! timers, each firing a new session run to its end; missed firings are
//! caught up once with `missed = "once"`; the firing time is recorded so a
//! restart does not fire the same slot again; a bad trigger is refused
//! before anything starts.

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, call, scripted_agent, text_turn, tool_turn};

fn agent(dir: &std::path::Path, triggers: &str) -> std::path::PathBuf {
    let script = scripted_agent(
        dir,
        "ticker",
        "max_steps = 10",
        &[
            tool_turn(
                "noting",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/tick.txt", "content": "tick"}),
                )],
                10,
                1,
            ),
            text_turn("noted", 10, 1),
        ],
    );
    let toml = dir.join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str(triggers);
    std::fs::write(&toml, text).expect("agent.toml");
    script
}

/// `longhand triggers <dir> --firings N --script <script>`.
fn fire(
    home: &Home,
    dir: &std::path::Path,
    script: &std::path::Path,
    firings: u32,
) -> crate::support::Ended {
    home.run(&[
        "triggers",
        dir.to_str().expect("utf-8"),
        "--firings",
        &firings.to_string(),
        "--script",
        script.to_str().expect("utf-8"),
    ])
}

fn sessions(home: &Home) -> Vec<Value> {
    home.run(&["sessions", "--json"])
        .stdout
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
fn a_timer_fires_sessions_that_run_to_the_end() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(
        dir.path(),
        "\n[[triggers]]\nname = \"tick\"\nevery = \"1s\"\ngoal = \"Write the tick.\"\n",
    );
    let out = fire(&home, dir.path(), &script, 2);
    out.expect_code(0);
    let all = sessions(&home);
    assert_eq!(all.len(), 2, "{all:?}\n{}", out.stderr);
    for s in &all {
        let id = s["id"].as_str().expect("id");
        let state = home.state(id);
        assert_eq!(state.status.as_str(), "finished", "{id}");
        assert_eq!(state.goal.as_deref(), Some("Write the tick."));
    }
    assert_eq!(
        out.stderr
            .matches("triggers: ticker/tick fired for")
            .count(),
        2,
        "{}",
        out.stderr
    );
    // Slots a second apart, recorded.
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("triggers.json")).expect("state"),
    )
    .expect("json");
    assert!(
        state["last_ms"]["ticker/tick"].as_u64().is_some(),
        "{state}"
    );
}

#[test]
fn missed_firings_are_caught_up_once_and_not_again() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(
        dir.path(),
        "\n[[triggers]]\nname = \"hourly\"\nevery = \"1h\"\nmissed = \"once\"\n",
    );
    // The scheduler last ran ten hours ago: ten firings missed.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let last = now - 10 * 3_600_000 - 60_000;
    std::fs::create_dir_all(home.path()).expect("home");
    std::fs::write(
        home.path().join("triggers.json"),
        json!({"last_ms": {"ticker/hourly": last}}).to_string(),
    )
    .expect("state");
    let out = fire(&home, dir.path(), &script, 1);
    out.expect_code(0);
    assert_eq!(sessions(&home).len(), 1, "one catch-up firing, not ten");
    // The latest missed slot is recorded: 10 hours after the last firing.
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("triggers.json")).expect("state"),
    )
    .expect("json");
    assert_eq!(
        state["last_ms"]["ticker/hourly"].as_u64(),
        Some(last + 10 * 3_600_000)
    );
}

#[test]
fn bad_triggers_are_refused_before_anything_starts() {
    let home = Home::new();
    for (table, says) in [
        ("every = \"1h\"\ncron = \"0 7 * * *\"", "exactly one of"),
        ("cron = \"0 7 * *\"", "has 4 fields"),
        ("every = \"often\"", "not a duration"),
        ("webhook = true", "secret_env"),
    ] {
        let dir = TempDir::new().expect("tempdir");
        let script = agent(
            dir.path(),
            &format!("\n[[triggers]]\nname = \"t\"\n{table}\n"),
        );
        let out = fire(&home, dir.path(), &script, 1);
        out.expect_code(2);
        assert!(out.stderr.contains(says), "{table}: {}", out.stderr);
        // `run` checks the same file the same way.
        let run = home.run(&["run", dir.path().to_str().expect("utf-8")]);
        run.expect_code(2);
    }
    // A damaged state file stops the scheduler.
    let dir = TempDir::new().expect("tempdir");
    let script = agent(dir.path(), "\n[[triggers]]\nname = \"t\"\nevery = \"1s\"\n");
    std::fs::create_dir_all(home.path()).expect("home");
    std::fs::write(home.path().join("triggers.json"), "{oops").expect("state");
    let out = fire(&home, dir.path(), &script, 1);
    out.expect_code(2);
    assert!(out.stderr.contains("damaged"), "{}", out.stderr);
    assert!(sessions(&home).is_empty());
}

/// `examples/daily-digest`, the ambient agent: its daily cron trigger,
/// missed while no scheduler ran, fires once when `triggers` starts, and
/// the session it starts writes the digest of the inbox, offline.
#[test]
fn the_daily_digest_example_catches_up_its_missed_morning() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/daily-digest");
    let copy = TempDir::new().expect("tempdir");
    for entry in ["agent.toml", "instructions.md", "cassette.json", "inbox"] {
        let from = example.join(entry);
        let to = copy.path().join(entry);
        if from.is_dir() {
            std::fs::create_dir_all(&to).expect("mkdir");
            for file in std::fs::read_dir(&from).expect("inbox") {
                let file = file.expect("entry").path();
                std::fs::copy(&file, to.join(file.file_name().expect("name"))).expect("copy");
            }
        } else {
            std::fs::copy(&from, &to).expect("copy");
        }
    }
    std::fs::create_dir_all(copy.path().join("digests")).expect("digests");
    let home = Home::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    std::fs::create_dir_all(home.path()).expect("home");
    std::fs::write(
        home.path().join("triggers.json"),
        json!({"last_ms": {"daily-digest/daily": now - 2 * 86_400_000}}).to_string(),
    )
    .expect("state");
    let out = home.run(&[
        "triggers",
        copy.path().to_str().expect("utf-8"),
        "--firings",
        "1",
    ]);
    out.expect_code(0);
    assert!(
        out.stderr.contains("daily-digest/daily fired for") && out.stderr.contains("T07:00:00Z"),
        "{}",
        out.stderr
    );
    let all = sessions(&home);
    assert_eq!(all.len(), 1, "{all:?}");
    let id = all[0]["id"].as_str().expect("id");
    assert_eq!(home.state(id).status.as_str(), "finished");
    let digest = std::fs::read_to_string(copy.path().join("digests/digest.md")).expect("digest");
    for note in [
        "2026-11-29-standup.md",
        "2026-11-30-customer.md",
        "2026-11-30-incident.md",
    ] {
        assert!(digest.contains(note), "{digest}");
    }
}
