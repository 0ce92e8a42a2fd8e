//! Issue 9, one process for many sessions: `run --detach` leaves a session
//! to `longhand worker`s; two workers on one store run every session to its
//! end and never run one session at once (each call runs once, no session
//! is taken over from a live worker); an approved session is picked up
//! again after `resume --detach`.

use std::collections::BTreeMap;
use std::path::Path;

use longhand_session::{Event, ResumeCause};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{Home, Proc, call, scripted_agent, text_turn, tool_turn};

/// A scripted agent of `turns` turns, each writing its own file (a call
/// that must never run twice) and reading one back.
fn agent(dir: &Path, turns: usize) -> std::path::PathBuf {
    let mut responses: Vec<Value> = (1..turns)
        .map(|i| {
            tool_turn(
                &format!("turn {i}"),
                vec![call(
                    &format!("w{i}"),
                    "fs__write",
                    json!({"path": format!("/w/{i}.txt"), "content": format!("{i}")}),
                )],
                10,
                1,
            )
        })
        .collect();
    responses.push(text_turn("all written", 10, 1));
    scripted_agent(dir, "worked", "max_steps = 100", &responses)
}

fn detach(home: &Home, dir: &Path, script: &Path, priority: i64) -> String {
    let out = home.run(&[
        "run",
        dir.to_str().expect("utf-8"),
        "--script",
        script.to_str().expect("utf-8"),
        "--detach",
        "--priority",
        &priority.to_string(),
        "--json",
    ]);
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout[0]).expect("json");
    v["session"].as_str().expect("session").to_owned()
}

#[test]
fn two_workers_run_every_detached_session_once() {
    let home = Home::new();
    let dirs: Vec<TempDir> = (0..8).map(|_| TempDir::new().expect("tempdir")).collect();
    let mut sessions = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let script = agent(dir.path(), 6);
        sessions.push(detach(&home, dir.path(), &script, (i % 3) as i64));
    }
    // Detached: nothing ran yet.
    for s in &sessions {
        let state = home.state(s);
        assert_eq!(state.status.as_str(), "running");
        assert_eq!(state.steps, 0);
        assert!(state.awaiting_worker);
    }
    let a = Proc::spawn(home.cmd(&["worker", "--concurrency", "3", "--until-idle"]));
    let b = Proc::spawn(home.cmd(&["worker", "--concurrency", "3", "--until-idle"]));
    for mut w in [a, b] {
        let ended = w.finish();
        ended.expect_code(0);
    }
    for (s, dir) in sessions.iter().zip(&dirs) {
        let state = home.state(s);
        assert_eq!(state.status.as_str(), "finished", "{s}");
        let log = home.log(s);
        // Every write ran once; nobody took a session from a live worker
        // and nobody recovered one from a crash.
        let mut started: BTreeMap<String, usize> = BTreeMap::new();
        for r in &log {
            match &r.event {
                Event::ToolStarted { call_id, .. } => {
                    *started.entry(call_id.clone()).or_default() += 1
                }
                Event::Resumed { cause, .. } => {
                    assert_eq!(*cause, ResumeCause::Operator, "{s}: resumed by {cause:?}")
                }
                _ => {}
            }
        }
        assert_eq!(started.len(), 5, "{s}");
        assert!(started.values().all(|n| *n == 1), "{s}: {started:?}");
        for i in 1..6 {
            assert!(dir.path().join(format!("work/{i}.txt")).is_file());
        }
    }
}

#[test]
fn an_approved_session_is_picked_up_by_a_worker_after_resume_detach() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = agent(dir.path(), 3);
    let toml = dir.path().join("agent.toml");
    let mut text = std::fs::read_to_string(&toml).expect("agent.toml");
    text.push_str("\n[approve]\nfs__write = \"always\"\n");
    std::fs::write(&toml, text).expect("agent.toml");
    let session = detach(&home, dir.path(), &script, 0);
    // The worker runs it to the approval and goes idle.
    let mut w = Proc::spawn(home.cmd(&["worker", "--until-idle"]));
    w.finish().expect_code(0);
    assert_eq!(home.state(&session).status.as_str(), "paused");
    for _ in 0..2 {
        let pending = home.run(&["approvals", "--json"]);
        let Some(line) = pending.stdout.first() else {
            break;
        };
        let request: Value = serde_json::from_str(line).expect("json");
        let id = request["request"].as_str().expect("id");
        home.run(&["approve", &session, id]).expect_code(0);
        home.run(&["resume", &session, "--detach"]).expect_code(0);
        let mut w = Proc::spawn(home.cmd(&["worker", "--until-idle"]));
        w.finish().expect_code(0);
    }
    assert_eq!(home.state(&session).status.as_str(), "finished");
    assert!(dir.path().join("work/2.txt").is_file());
}

#[test]
fn a_bad_rate_limit_is_refused_before_anything_runs() {
    let home = Home::new();
    for bad in ["openai", "openai=0", "openai=x:1", "openai=:"] {
        let out = home.run(&["worker", "--until-idle", "--rate", bad]);
        out.expect_code(2);
        assert!(out.stderr.contains("--rate"), "{bad}: {}", out.stderr);
    }
    // A good one is accepted (and there is nothing to run).
    home.run(&["worker", "--until-idle", "--rate", "script=600:100000"])
        .expect_code(0);
}

/// `--rate` holds every session of a worker to one shared limit, end to
/// end. The bucket starts with a minute's allowance (30 requests at
/// `script=30`) and refills one request per 2 s, so the 32 requests of 8
/// sessions × 4 turns cannot all have been sent before 4 s after the
/// worker started: the 31st waits for one refill, the 32nd for two. That
/// is a lower bound the limit guarantees on any machine, however slow;
/// without the limit the same work takes well under a second here.
#[test]
fn a_worker_rate_limit_is_shared_by_all_its_sessions() {
    let home = Home::new();
    let dirs: Vec<TempDir> = (0..8).map(|_| TempDir::new().expect("tempdir")).collect();
    let mut sessions = Vec::new();
    for dir in &dirs {
        let script = agent(dir.path(), 4);
        sessions.push(detach(&home, dir.path(), &script, 0));
    }
    let started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let mut w = Proc::spawn(home.cmd(&[
        "worker",
        "--concurrency",
        "8",
        "--until-idle",
        "--rate",
        "script=30",
    ]));
    w.finish().expect_code(0);
    let mut requests: Vec<u64> = Vec::new();
    for s in &sessions {
        assert_eq!(home.state(s).status.as_str(), "finished", "{s}");
        requests.extend(
            home.log(s)
                .iter()
                .filter(|r| matches!(r.event, Event::ModelResponded { .. }))
                .map(|r| r.at_ms),
        );
    }
    assert_eq!(requests.len(), 32, "{requests:?}");
    requests.sort_unstable();
    // `model_requested` is the intent, logged before the limit is waited
    // out; `model_responded` comes after the provider answered, so after
    // the wait: 4 s of refill, less a millisecond of clock rounding.
    let last = requests[31] - started_ms;
    assert!(
        last >= 3_999,
        "the 32nd answer came {last} ms after the worker started: the limit was not shared"
    );
}
