//! Crash injection: a 200-turn session is SIGKILLed at many points — after
//! a number of events, between `tool_started` and `tool_finished` of a
//! `writes` tool, of an idempotent one, of a read-only batch, between a
//! model request and its answer — and resumed each time, until it finishes.
//!
//! What must hold (DESIGN.md, "Crash semantics"):
//! - the end state equals an uninterrupted run's: finished, same steps,
//!   same token totals, same summary, every call resolved exactly once;
//! - the log has no gaps;
//! - a `writes` tool (`fs__edit`) never runs twice: its side-effect counter,
//!   a ledger the edits append to, holds each `line N` at most once, holds
//!   it for every edit that finished, and every edit missing from it is
//!   recorded as `tool_in_doubt`;
//! - idempotent work (`fs__write`) is redone: every step file is right.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use longhand_session::{
    Event, EventRecord, SessionId, SessionStatus, SqliteStore, Store, StoreError,
};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    Home, Proc, block_on, call, scripted_agent, session_of_json, text_turn, tool_turn,
};

/// Model turns, the last one a text answer.
const TURNS: u64 = 200;
/// Every this many turns a turn also edits the ledger.
const EDIT_EVERY: u64 = 5;
const SUMMARY: &str = "Wrote 199 step files and kept the ledger.";

fn edits_in(turn: u64) -> bool {
    turn.is_multiple_of(EDIT_EVERY)
}

fn reads_in(turn: u64) -> bool {
    turn % 7 == 3
}

fn step_content(turn: u64) -> String {
    format!("step {turn} of {TURNS}\n")
}

/// The model's answers: each turn writes `/w/step-N.txt` (idempotent);
/// every 5th also edits the ledger (`writes`); every 7th reads two things
/// side by side first (read-only); the last turn answers in text.
fn script() -> Vec<Value> {
    let mut responses = Vec::new();
    for t in 1..TURNS {
        let mut calls = Vec::new();
        if reads_in(t) {
            calls.push(call(
                &format!("c{t}-read"),
                "fs__read",
                json!({"path": "/w/ledger.txt"}),
            ));
            calls.push(call(
                &format!("c{t}-stat"),
                "fs__stat",
                json!({"path": format!("/w/step-{}.txt", t - 1)}),
            ));
        }
        calls.push(call(
            &format!("c{t}-write"),
            "fs__write",
            json!({"path": format!("/w/step-{t}.txt"), "content": step_content(t)}),
        ));
        if edits_in(t) {
            calls.push(call(
                &format!("c{t}-edit"),
                "fs__edit",
                json!({"path": "/w/ledger.txt", "old": "END", "new": format!("line {t}\nEND")}),
            ));
        }
        responses.push(tool_turn(
            &format!("Turn {t}."),
            calls,
            1000 + t,
            10 + t % 13,
        ));
    }
    responses.push(text_turn(SUMMARY, 5000, 17));
    responses
}

/// Every call id of the script, with its tool.
fn script_calls() -> BTreeMap<String, &'static str> {
    let mut calls = BTreeMap::new();
    for t in 1..TURNS {
        if reads_in(t) {
            calls.insert(format!("c{t}-read"), "read");
            calls.insert(format!("c{t}-stat"), "stat");
        }
        calls.insert(format!("c{t}-write"), "write");
        if edits_in(t) {
            calls.insert(format!("c{t}-edit"), "edit");
        }
    }
    calls
}

/// An agent directory with its own `work/` (ledger holding `END`).
fn agent(root: &Path) -> (PathBuf, PathBuf) {
    let limits = "max_steps = 300\nmax_tool_calls = 600\ncontext_tokens = 1000000";
    let script = scripted_agent(root, "crash-ledger", limits, &script());
    std::fs::write(root.join("work/ledger.txt"), "END\n").expect("ledger");
    (root.to_owned(), script)
}

/// Where a process is killed.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// Right after it printed the session id (`run`: created, goal set).
    Start,
    /// After this many events of its own.
    Events(usize),
    /// At the first event with this seq or later.
    Seq(u64),
    /// Right after a `tool_started` of this tool, so the kill lands between
    /// `tool_started` and `tool_finished` (for `edit`, nearly always before
    /// the tool has touched the ledger).
    Started(&'static str),
    /// After an edit's `tool_started`, once its line is in the ledger:
    /// the effect happened and `tool_finished` is not yet written.
    AfterEdit,
    /// After an edit's `tool_started`, once the ledger is seen torn (the
    /// tool truncated it and has not written it yet), or once the edit is
    /// done if that instant is missed.
    InsideEditWrite,
    /// Right after the first event of this type.
    Kind(&'static str),
}

impl KillAt {
    fn hit(self, event: &Value, own_events: usize) -> bool {
        match self {
            KillAt::Start => true,
            KillAt::Events(n) => own_events >= n,
            KillAt::Seq(s) => event["seq"].as_u64().is_some_and(|seq| seq >= s),
            KillAt::Started(tool) => event["type"] == "tool_started" && event["tool"] == tool,
            KillAt::AfterEdit | KillAt::InsideEditWrite => {
                event["type"] == "tool_started" && event["tool"] == "edit"
            }
            KillAt::Kind(kind) => event["type"] == kind,
        }
    }

    /// Wait, after `hit`, for the instant to kill at.
    fn wait(self, event: &Value, work: &Path) -> &'static str {
        let (KillAt::AfterEdit | KillAt::InsideEditWrite) = self else {
            return "";
        };
        let n = event["call_id"]
            .as_str()
            .and_then(|id| {
                id.strip_prefix('c')?
                    .strip_suffix("-edit")?
                    .parse::<u64>()
                    .ok()
            })
            .expect("edit call id");
        let done = format!("line {n}\nEND\n");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let text = std::fs::read_to_string(work.join("ledger.txt")).unwrap_or_default();
            if text.ends_with(&done) {
                return "edit applied";
            }
            if matches!(self, KillAt::InsideEditWrite) && !text.ends_with("END\n") {
                return "ledger torn";
            }
            std::hint::spin_loop();
        }
        "edit never applied"
    }
}

/// The kill schedule, one entry per process, given the reference run's
/// last seq. Seq targets spread over the session; the rest are the
/// dangerous instants.
fn schedule(total: u64) -> Vec<KillAt> {
    let at = |percent: u64| KillAt::Seq(total * percent / 100);
    vec![
        KillAt::Start,
        KillAt::Started("edit"),
        KillAt::Events(1),
        at(10),
        KillAt::Started("write"),
        KillAt::AfterEdit,
        at(22),
        KillAt::Started("read"),
        KillAt::Kind("model_requested"),
        KillAt::Started("edit"),
        at(38),
        KillAt::Events(17),
        KillAt::Kind("tool_finished"),
        KillAt::AfterEdit,
        at(55),
        KillAt::Started("stat"),
        KillAt::Started("edit"),
        at(70),
        KillAt::Kind("model_responded"),
        KillAt::AfterEdit,
        at(85),
        KillAt::Started("edit"),
        at(97),
    ]
}

/// How a crashed session got to its end.
struct Crashed {
    session: String,
    kills: Vec<String>,
    processes: usize,
}

/// Run the agent in `dir`, killing each process where `plan` says, and
/// resume until the session finishes (the plan's end runs to the end).
///
/// With `spare_the_ledger`, a kill is only let through when the ledger is
/// whole, so the test checks the loop's guarantees and not `fs__edit`'s
/// non-atomic write (which [`a_kill_inside_an_edit_never_tears_the_file`]
/// covers).
fn crash_until_finished(
    home: &Home,
    dir: &Path,
    script: &Path,
    plan: Vec<KillAt>,
    spare_the_ledger: bool,
) -> Crashed {
    let dir_arg = dir.to_str().expect("utf-8 path");
    let script_arg = script.to_str().expect("utf-8 path");
    let work = dir.join("work");
    let mut session: Option<String> = None;
    let mut kills: Vec<String> = Vec::new();
    let mut plan = plan.into_iter();
    let mut processes = 0;
    loop {
        assert!(
            processes < 100,
            "the session did not finish after {processes} processes"
        );
        processes += 1;
        let kill_at = plan.next();
        let mut proc = match &session {
            None => Proc::spawn(home.cmd(&["run", dir_arg, "--script", script_arg, "--json"])),
            Some(id) => Proc::spawn(home.cmd(&["resume", id, "--json"])),
        };
        let Some(first) = proc.next_line() else {
            let ended = proc.finish();
            panic!(
                "longhand printed nothing (exit {:?}):\n{}",
                ended.code, ended.stderr
            );
        };
        if first.starts_with("session ") && first.ends_with(" is already finished") {
            // Killed after `finished` was durable, before the exit.
            assert_eq!(proc.finish().code, Some(0));
            break;
        }
        let id = session_of_json(&first);
        if let Some(known) = &session {
            assert_eq!(&id, known, "resume printed another session");
        }
        session = Some(id.clone());

        let mut own_events = 0;
        let mut killed = None;
        if let Some(KillAt::Start) = kill_at {
            killed = Some("at start".to_owned());
        } else {
            while let Some(line) = proc.next_line() {
                let event: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON event ({e}): {line}"));
                own_events += 1;
                if let Some(at) = kill_at
                    && at.hit(&event, own_events)
                {
                    let when = at.wait(&event, &work);
                    killed = Some(format!(
                        "{at:?} at seq {} ({} {}) {when}",
                        event["seq"],
                        event["type"],
                        event["call_id"].as_str().unwrap_or_default()
                    ));
                    break;
                }
            }
        }
        let Some(what) = killed else {
            let ended = proc.finish();
            assert_eq!(
                ended.code,
                Some(0),
                "longhand ended before its kill point ({kill_at:?}) without finishing:\n{}",
                ended.stderr
            );
            let last: Value =
                serde_json::from_str(ended.stdout.last().expect("a line")).expect("JSON event");
            assert_eq!(last["type"], "finished", "last event: {last}");
            break;
        };
        let pid = proc.pid();
        let what = if spare_the_ledger {
            stop_with_ledger_whole(pid, &work, what)
        } else {
            what
        };
        let ended = proc.kill();
        kills.push(what);
        // It may have exited by itself a moment before the kill.
        if ended.code == Some(0) && home.state(&id).status == SessionStatus::Finished {
            break;
        }
        release_dead_lease(home.path(), &id, pid);
    }
    Crashed {
        session: session.expect("a session"),
        kills,
        processes,
    }
}

/// Stop (SIGSTOP) process `pid` and return once the ledger, seen while the
/// process is stopped, is whole: then a SIGKILL cannot tear it. If the
/// process stopped inside `fs__edit`'s truncate-then-write, let it run a
/// little and try again. Returns `what`, noting any retry.
#[cfg(target_os = "linux")]
fn stop_with_ledger_whole(pid: u32, work: &Path, what: String) -> String {
    let signal = |sig| {
        // SAFETY: plain kill(2) on a child this test spawned and has not
        // yet waited for, so the pid cannot have been reused.
        unsafe { libc::kill(pid as libc::pid_t, sig) };
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut retries = 0;
    loop {
        signal(libc::SIGSTOP);
        let stopped = wait_until_stopped(pid, deadline);
        let text = std::fs::read_to_string(work.join("ledger.txt")).unwrap_or_default();
        if !stopped || text.ends_with("END\n") || Instant::now() > deadline {
            return if retries == 0 {
                what
            } else {
                format!("{what} (after {retries} torn-write retries)")
            };
        }
        retries += 1;
        signal(libc::SIGCONT);
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(not(target_os = "linux"))]
fn stop_with_ledger_whole(_pid: u32, _work: &Path, what: String) -> String {
    what
}

/// Whether every thread of `pid` is in the stopped state (`T`), polled
/// until `deadline`; false if the process is gone.
#[cfg(target_os = "linux")]
fn wait_until_stopped(pid: u32, deadline: Instant) -> bool {
    let tasks = PathBuf::from(format!("/proc/{pid}/task"));
    while Instant::now() < deadline {
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return false;
        };
        let states: Vec<char> = entries
            .flatten()
            .map(|task| {
                let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
                // `pid (comm) S …`: the state follows the last `)`.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next())
                    .unwrap_or('?')
            })
            .collect();
        if states.iter().any(|s| matches!(s, 'Z' | 'X')) {
            return false;
        }
        if states.iter().all(|s| *s == 'T') {
            return true;
        }
        std::thread::yield_now();
    }
    false
}

/// A killed worker's lease outlives it by up to `LEASE_TTL` (60 s), and
/// `longhand resume` waits for no one: it is refused while the lease is
/// live. The test knows the worker is dead (it killed it), so it releases
/// the lease in the dead worker's name, as an operator's tool would.
fn release_dead_lease(home: &Path, session: &str, pid: u32) {
    let id: SessionId = session.parse().expect("session id");
    let home = home.to_owned();
    block_on(async move {
        let store = SqliteStore::open(&home).await.expect("open the store");
        let ttl = Duration::from_secs(5);
        match store.acquire_lease(&id, "crash-test", ttl).await {
            Ok(lease) => store.release(&lease).await.expect("release"),
            Err(StoreError::LeaseHeld { owner, .. }) => {
                assert!(
                    owner.ends_with(&format!("-{pid}")),
                    "the lease is held by {owner}, not by the killed worker (pid {pid})"
                );
                let lease = store
                    .acquire_lease(&id, &owner, ttl)
                    .await
                    .expect("renew as owner");
                store.release(&lease).await.expect("release");
            }
            Err(e) => panic!("cannot take the lease over: {e}"),
        }
    });
}

/// What happened to each call id, from the log.
#[derive(Debug, Default)]
struct Calls {
    started: BTreeMap<String, usize>,
    finished: BTreeMap<String, Vec<bool>>,
    in_doubt: BTreeMap<String, usize>,
}

fn calls_of(events: &[EventRecord]) -> Calls {
    let mut calls = Calls::default();
    for r in events {
        match &r.event {
            Event::ToolStarted { call_id, .. } => {
                *calls.started.entry(call_id.clone()).or_default() += 1
            }
            Event::ToolFinished { call_id, ok, .. } => {
                calls.finished.entry(call_id.clone()).or_default().push(*ok);
            }
            Event::ToolInDoubt { call_id, .. } => {
                *calls.in_doubt.entry(call_id.clone()).or_default() += 1
            }
            _ => {}
        }
    }
    calls
}

/// The result a call finished with, as text (for failure messages).
fn result_of(home: &Home, log: &[EventRecord], call: &str) -> String {
    let Some(result) = log.iter().find_map(|r| match &r.event {
        Event::ToolFinished {
            call_id, result, ..
        } if call_id == call => Some(result.clone()),
        _ => None,
    }) else {
        return "<no result>".to_owned();
    };
    let dir = home.path().to_owned();
    block_on(async move {
        let store = SqliteStore::open(&dir).await.expect("open the store");
        let bytes = store.get_blob(&result).await.expect("result blob");
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The ledger must end in `END`: a kill never leaves it half written.
fn assert_ledger_whole(work: &Path) {
    let text = std::fs::read_to_string(work.join("ledger.txt")).expect("read the ledger");
    assert!(
        text.ends_with("END\n"),
        "the ledger is torn ({} bytes, no END marker): a kill landed inside fs__edit's write, \
         which truncates the file and then writes it (tools/fs/src/edit.rs uses fs::write) \
         instead of writing a temporary file and renaming it into place:\n{text}",
        text.len()
    );
}

/// Ledger lines `line N`, counted by N; panics on anything else but `END`.
fn ledger(work: &Path) -> BTreeMap<u64, usize> {
    let text = std::fs::read_to_string(work.join("ledger.txt")).expect("read the ledger");
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.pop(),
        Some("END"),
        "the ledger lost its END marker:\n{text}"
    );
    let mut counts = BTreeMap::new();
    let mut last = 0;
    for line in lines {
        let n: u64 = line
            .strip_prefix("line ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected ledger line {line:?}:\n{text}"));
        assert!(n >= last, "ledger out of order at {line:?}:\n{text}");
        last = n;
        *counts.entry(n).or_default() += 1;
    }
    counts
}

fn check_step_files(work: &Path) {
    for t in 1..TURNS {
        let path = work.join(format!("step-{t}.txt"));
        let got = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} is missing: {e}", path.display()));
        assert_eq!(got, step_content(t), "{}", path.display());
    }
}

#[test]
fn killed_anywhere_resumes_to_the_same_end() {
    let began = Instant::now();
    let home = Home::new();
    let root = TempDir::new().expect("tempdir");
    let calls = script_calls();

    // Reference: one uninterrupted run.
    let (ref_dir, ref_script) = agent(&root.path().join("reference"));
    let out = home.run(&[
        "run",
        ref_dir.to_str().expect("utf-8 path"),
        "--script",
        ref_script.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert_eq!(
        out.code,
        Some(0),
        "the reference run failed:\n{}",
        out.stderr
    );
    let reference = session_of_json(&out.stdout[0]);
    let ref_state = home.state(&reference);
    assert_eq!(ref_state.status, SessionStatus::Finished);
    assert_eq!(ref_state.steps, TURNS);
    assert_eq!(ref_state.summary.as_deref(), Some(SUMMARY));
    assert_eq!(ref_state.tool_calls, calls.len() as u64);
    let ref_log = home.log(&reference);
    let ref_calls = calls_of(&ref_log);
    assert!(
        ref_calls.in_doubt.is_empty(),
        "in doubt without a crash: {:?}",
        ref_calls.in_doubt
    );
    let ref_ledger = ledger(&ref_dir.join("work"));
    assert_eq!(ref_ledger.len() as u64, (TURNS - 1) / EDIT_EVERY);
    check_step_files(&ref_dir.join("work"));
    let total = ref_state.last_seq;
    let reference_time = began.elapsed();

    // The same agent, killed again and again.
    let (dir, script) = agent(&root.path().join("crashed"));
    let Crashed {
        session,
        kills,
        processes,
    } = crash_until_finished(&home, &dir, &script, schedule(total), true);
    assert!(
        kills.len() >= 15,
        "only {} kill points were reached: {kills:#?}",
        kills.len()
    );

    assert_ledger_whole(&dir.join("work"));

    // The end state equals the reference's.
    let state = home.state(&session);
    assert_eq!(state.status, SessionStatus::Finished);
    assert_eq!(state.steps, ref_state.steps, "steps");
    assert_eq!(state.input_tokens, ref_state.input_tokens, "input tokens");
    assert_eq!(
        state.output_tokens, ref_state.output_tokens,
        "output tokens"
    );
    assert_eq!(state.summary, ref_state.summary, "summary");
    assert_eq!(state.tool_calls, ref_state.tool_calls, "tool calls");

    // The log: seqs 1..=n without gaps, and what the CLI folds agrees.
    let log = home.log(&session);
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1, "gap in the log before {}", r.seq);
    }
    assert_eq!(log.last().map(|r| r.seq), Some(state.last_seq));
    assert!(
        log.iter()
            .any(|r| matches!(r.event, Event::Snapshot { .. })),
        "no snapshot was taken, so waking from one was not exercised"
    );
    let resent = log
        .iter()
        .filter(|r| matches!(r.event, Event::ModelRequested { attempt, .. } if attempt > 1))
        .count();

    // Every call resolved exactly once; only `writes` calls can be in doubt;
    // a `writes` call never started twice.
    let seen = calls_of(&log);
    for (id, tool) in &calls {
        let finishes = seen.finished.get(id).map_or(0, Vec::len);
        let doubts = seen.in_doubt.get(id).copied().unwrap_or(0);
        assert_eq!(
            finishes + doubts,
            1,
            "{id} ({tool}): {finishes} finished, {doubts} in doubt"
        );
        if let Some(oks) = seen.finished.get(id) {
            assert!(
                oks.iter().all(|ok| *ok),
                "{id} ({tool}) failed: {}\nledger:\n{}\nin doubt: {:?}",
                result_of(&home, &log, id),
                std::fs::read_to_string(dir.join("work/ledger.txt")).unwrap_or_default(),
                seen.in_doubt,
            );
        }
        if doubts > 0 {
            assert_eq!(
                *tool, "edit",
                "{id}: a {tool} call was put in doubt instead of re-run"
            );
        }
        if *tool == "edit" {
            assert_eq!(
                seen.started.get(id),
                Some(&1),
                "{id} started more than once"
            );
        }
    }
    let unknown: Vec<&String> = seen
        .finished
        .keys()
        .filter(|id| !calls.contains_key(*id))
        .collect();
    assert!(
        unknown.is_empty(),
        "calls the script never made: {unknown:?}"
    );

    // The side-effect counter.
    let work = dir.join("work");
    let counts = ledger(&work);
    for (n, count) in &counts {
        assert_eq!(
            *count, 1,
            "line {n} is in the ledger {count} times: an edit ran twice"
        );
    }
    let mut in_doubt_applied = 0;
    for (id, tool) in &calls {
        if *tool != "edit" {
            continue;
        }
        let n: u64 = id
            .trim_start_matches('c')
            .trim_end_matches("-edit")
            .parse()
            .expect("edit id");
        let in_ledger = counts.contains_key(&n);
        if seen.finished.contains_key(id) {
            assert!(
                in_ledger,
                "{id} finished ok but line {n} is not in the ledger"
            );
        } else {
            assert!(seen.in_doubt.contains_key(id), "{id} has no outcome");
            in_doubt_applied += usize::from(in_ledger);
        }
        if !in_ledger {
            assert!(
                seen.in_doubt.contains_key(id),
                "line {n} is missing and {id} is not in doubt"
            );
        }
    }
    check_step_files(&work);

    let in_doubt = seen.in_doubt.len();
    assert!(
        in_doubt > 0,
        "no kill landed inside an edit, so tool_in_doubt was not exercised: {kills:#?}"
    );
    println!(
        "crash test: {} processes, {} kills, {in_doubt} calls in doubt ({in_doubt_applied} had \
         taken effect, {} had not), {resent} model requests re-sent; {} events vs {} uninterrupted; \
         reference run {:.1}s, whole test {:.1}s",
        processes,
        kills.len(),
        in_doubt - in_doubt_applied,
        log.len(),
        total,
        reference_time.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );
    for k in &kills {
        println!("  killed: {k}");
    }
}

/// A `writes` tool killed mid-call may or may not have taken effect — that
/// is what `tool_in_doubt` says — but it must not leave a file that is
/// neither the old nor the new content, or the model has nothing sound to
/// check. Kills every edit of the session at the instant its file is seen
/// truncated (or, if that instant is missed, once the edit is done).
#[test]
fn a_kill_inside_an_edit_never_tears_the_file() {
    let home = Home::new();
    let root = TempDir::new().expect("tempdir");
    let (dir, script) = agent(&root.path().join("torn"));
    let edits = ((TURNS - 1) / EDIT_EVERY) as usize;
    let crashed = crash_until_finished(
        &home,
        &dir,
        &script,
        vec![KillAt::InsideEditWrite; edits],
        false,
    );
    let torn = crashed
        .kills
        .iter()
        .filter(|k| k.ends_with("ledger torn"))
        .count();
    println!(
        "torn-write test: {} kills inside edits, {torn} of them with the ledger seen torn",
        crashed.kills.len()
    );
    assert_ledger_whole(&dir.join("work"));
}
