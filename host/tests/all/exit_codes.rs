//! README's exit-code table, row by row, through the real binary: each
//! test makes one row's situation happen and checks the code `longhand`
//! exits with (and that the message says why). The map itself is
//! `longhand_host::cli::exit_code`; its unit tests check it on typed
//! values, these check that every command reaches it with the right error.

use std::path::Path;
use std::time::Duration;

use longhand_session::{SessionId, SqliteStore, Store};
use serde_json::json;
use tempfile::TempDir;

use crate::support::{
    Ended, Home, block_on, call, scripted_agent, session_of_json, text_turn, tool_turn, write,
};

/// The store's database file under a home.
const DB_FILE: &str = "longhand.db";

/// A value of `--memory` / `memory_mib` whose size in bytes overflows u64
/// (TOML integers stop at i64::MAX).
const OVERFLOWING_MIB: &str = "9223372036854775807";

#[track_caller]
fn expect(out: &Ended, code: i32, says: &str) {
    out.expect_code(code);
    assert!(
        out.stderr.contains(says) || out.stdout_text().contains(says),
        "exit {code} does not say {says:?}:\nstdout:\n{}\nstderr:\n{}",
        out.stdout_text(),
        out.stderr
    );
}

/// `tool call fs <tool>` with `dir` granted as `/w`.
fn fs_call(home: &Home, dir: &Path, tool: &str, input: &str, extra: &[&str]) -> Ended {
    let grant = format!("{}:/w", dir.display());
    let mut args = vec![
        "tool", "call", "fs", tool, "--dir", &grant, "--input", input,
    ];
    args.extend_from_slice(extra);
    home.run(&args)
}

fn dir_with_a_file() -> TempDir {
    let dir = TempDir::new().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "hello\n").expect("write a.txt");
    dir
}

#[test]
fn tool_success_exits_0() {
    let (home, dir) = (Home::new(), dir_with_a_file());
    let out = fs_call(&home, dir.path(), "read", r#"{"path": "/w/a.txt"}"#, &[]);
    expect(&out, 0, "hello");
}

#[test]
fn tool_error_exits_1() {
    let (home, dir) = (Home::new(), dir_with_a_file());
    let out = fs_call(&home, dir.path(), "read", r#"{"path": "/w/nope.txt"}"#, &[]);
    expect(&out, 1, "not found");
}

#[test]
fn bad_flag_exits_2() {
    let home = Home::new();
    let out = home.run(&["tool", "call", "fs", "read", "--no-such-flag"]);
    expect(&out, 2, "--no-such-flag");
    let out = home.run(&["tool", "call", "fs", "read", "--input", "{not json"]);
    expect(&out, 2, "--input is not valid JSON");
    let out = home.run(&["tool", "call", "fs", "nosuchtool"]);
    expect(&out, 2, "has no tool `nosuchtool`");
    let out = home.run(&["run", "/nonexistent/agent.toml"]);
    expect(&out, 2, "cannot read");
}

/// An overflowing memory limit is refused the same way, with the same
/// words, whether it was a flag or a line of agent.toml.
#[test]
fn bad_grant_exits_2_with_the_same_error_from_flags_and_agent_toml() {
    let (home, dir) = (Home::new(), dir_with_a_file());
    let said = format!("memory {OVERFLOWING_MIB} MiB is out of range: give 1 to 4096 MiB");
    let out = fs_call(
        &home,
        dir.path(),
        "read",
        r#"{"path": "/w/a.txt"}"#,
        &["--memory", OVERFLOWING_MIB],
    );
    expect(&out, 2, &said);
    let out = fs_call(&home, dir.path(), "read", "{}", &["--fuel", "0"]);
    expect(&out, 2, "fuel must be above zero");

    let agent = TempDir::new().expect("tempdir");
    scripted_agent(agent.path(), "bad-grant", "", &[text_turn("Done.", 1, 1)]);
    let file = agent.path().join("agent.toml");
    let text = std::fs::read_to_string(&file).expect("read agent.toml");
    write(&file, &format!("{text}memory_mib = {OVERFLOWING_MIB}\n"));
    let out = home.run(&["run", agent.path().to_str().expect("utf-8 path")]);
    expect(&out, 2, &said);
    expect(&out, 2, "tools[0] (fs)");
    let sessions = home.run(&["sessions", "--json"]);
    expect(&sessions, 0, "");
    assert!(sessions.stdout.is_empty(), "a session was created");
}

#[test]
fn denied_capability_exits_3() {
    let home = Home::new();
    // Port 9 on loopback: refused by the grant before any connection.
    let out = home.run(&[
        "tool",
        "call",
        "http",
        "get",
        "--input",
        r#"{"url": "http://127.0.0.1:9/x"}"#,
    ]);
    expect(&out, 3, "access denied to 127.0.0.1:9");
}

#[test]
fn limit_hit_exits_3() {
    let (home, dir) = (Home::new(), dir_with_a_file());
    let out = fs_call(
        &home,
        dir.path(),
        "read",
        r#"{"path": "/w/a.txt"}"#,
        &["--fuel", "1000"],
    );
    expect(&out, 3, "fuel limit of 1000 exhausted");
}

/// A session that writes one file, then finishes — or, with `max_steps =
/// 1`, pauses before its second turn.
fn one_write_agent(dir: &Path, limits: &str) -> String {
    let script = scripted_agent(
        dir,
        "rows",
        limits,
        &[
            tool_turn(
                "Writing.",
                vec![call(
                    "w1",
                    "fs__write",
                    json!({"path": "/w/a.txt", "content": "a"}),
                )],
                10,
                1,
            ),
            text_turn("Done.", 20, 2),
        ],
    );
    script.to_str().expect("utf-8 path").to_owned()
}

fn run_scripted(home: &Home, dir: &Path, script: &str) -> (Ended, String) {
    let agent = dir.to_str().expect("utf-8 path");
    let out = home.run(&["run", agent, "--script", script, "--json"]);
    let session = session_of_json(&out.stdout[0]);
    (out, session)
}

#[test]
fn session_finished_exits_0() {
    let (home, dir) = (Home::new(), TempDir::new().expect("tempdir"));
    let script = one_write_agent(dir.path(), "");
    let (out, session) = run_scripted(&home, dir.path(), &script);
    expect(&out, 0, r#""type":"finished""#);
    // Resuming a finished session, listing and logging it: 0 too.
    expect(&home.run(&["resume", &session]), 0, "already finished");
    expect(&home.run(&["sessions"]), 0, &session);
    expect(&home.run(&["log", &session]), 0, "finished");
}

#[test]
fn session_failed_exits_1() {
    let (home, dir) = (Home::new(), TempDir::new().expect("tempdir"));
    scripted_agent(dir.path(), "diverges", "", &[]);
    // The agent replays this cassette, which holds no turn the run asks
    // for: it diverges at once, and the session fails.
    write(
        &dir.path().join("unused-cassette.json"),
        &json!({"version": 1, "turns": []}).to_string(),
    );
    let out = home.run(&["run", dir.path().to_str().expect("utf-8 path"), "--json"]);
    expect(&out, 1, r#""type":"failed""#);
    expect(&out, 1, "cassette exhausted");
    let session = session_of_json(&out.stdout[0]);
    expect(&home.run(&["resume", &session]), 1, "already failed");
}

#[test]
fn session_paused_exits_3() {
    let (home, dir) = (Home::new(), TempDir::new().expect("tempdir"));
    let script = one_write_agent(dir.path(), "max_steps = 1");
    let (out, session) = run_scripted(&home, dir.path(), &script);
    expect(&out, 3, r#""limit":"max_steps""#);
    expect(&home.run(&["resume", &session]), 3, "paused");
}

#[test]
fn lease_held_by_another_worker_exits_3() {
    const OWNER: &str = "worker-b-on-another-machine";
    let (home, dir) = (Home::new(), TempDir::new().expect("tempdir"));
    let script = one_write_agent(dir.path(), "max_steps = 1");
    let (out, session) = run_scripted(&home, dir.path(), &script);
    out.expect_code(3);
    let id: SessionId = session.parse().expect("session id");
    let store_dir = home.path().to_owned();
    let (store, lease) = block_on(async {
        let store = SqliteStore::open(&store_dir).await.expect("open the store");
        let lease = store
            .acquire_lease(&id, OWNER, Duration::from_secs(120))
            .await
            .expect("the lease is free");
        (store, lease)
    });
    let refused = home.run(&["resume", &session, "--raise", "max_steps=5"]);
    expect(&refused, 3, OWNER);
    block_on(async { store.release(&lease).await.expect("release") });
}

/// Rewrite one event's JSON behind the store's back: the checksum chain no
/// longer verifies from that event on.
fn tamper_with_event(home: &Path, session: &str, seq: u64) {
    let db = rusqlite::Connection::open(home.join(DB_FILE)).expect("open the database");
    db.execute_batch("DROP TRIGGER events_no_update")
        .expect("drop the append-only trigger");
    let changed = db
        .execute(
            "UPDATE events SET json = replace(json, 'Follow the script', 'Follow another script') \
             WHERE session_id = ?1 AND seq = ?2",
            rusqlite::params![session, seq],
        )
        .expect("rewrite an event");
    assert_eq!(changed, 1, "no event {seq} in {session}");
}

#[test]
fn corrupt_store_exits_4() {
    let (home, dir) = (Home::new(), TempDir::new().expect("tempdir"));
    let script = one_write_agent(dir.path(), "max_steps = 1");
    let (out, session) = run_scripted(&home, dir.path(), &script);
    out.expect_code(3);
    let goal_seq = home
        .log(&session)
        .iter()
        .find(|r| r.event.kind() == "goal_set")
        .map(|r| r.seq)
        .expect("a goal_set event");
    tamper_with_event(home.path(), &session, goal_seq);
    for args in [
        vec!["log", session.as_str()],
        vec!["resume", session.as_str(), "--raise", "max_steps=5"],
    ] {
        let out = home.run(&args);
        expect(&out, 4, "session store is corrupt");
        assert!(
            !out.stderr.contains("denied"),
            "{args:?} calls corruption a denial:\n{}",
            out.stderr
        );
    }

    // A database file whose bytes are not a database at all.
    let db = home.path().join(DB_FILE);
    let mut bytes = std::fs::read(&db).expect("read the database");
    for b in bytes.iter_mut().take(4096) {
        *b = !*b;
    }
    std::fs::write(&db, bytes).expect("write the database");
    for args in [
        vec!["sessions"],
        vec!["log", session.as_str()],
        vec!["resume", session.as_str()],
    ] {
        let out = home.run(&args);
        out.expect_code(4);
    }
}

#[test]
fn unknown_session_exits_2() {
    let home = Home::new();
    // Well formed, never created.
    let unknown = "s-01ARZ3NDEKTSV4RRFFQ69G5FAV";
    for args in [vec!["resume", unknown], vec!["log", unknown]] {
        expect(&home.run(&args), 2, &format!("session {unknown} not found"));
    }
    for args in [vec!["resume", "nonsense"], vec!["log", "nonsense"]] {
        expect(&home.run(&args), 2, "is not a session id");
    }
}
