//! Two writers cannot both drive a session: while another worker holds a
//! live lease, `longhand resume` is refused and names the holder; once the
//! lease is released it goes ahead.

use std::time::Duration;

use longhand_session::{SessionId, SqliteStore, Store};
use serde_json::json;
use tempfile::TempDir;

use crate::support::{Home, block_on, call, scripted_agent, session_of_json, text_turn, tool_turn};

const OWNER: &str = "worker-a-on-another-machine";

#[test]
fn resume_is_refused_while_another_worker_holds_the_lease() {
    let home = Home::new();
    let dir = TempDir::new().expect("tempdir");
    let script = scripted_agent(
        dir.path(),
        "leased",
        "max_steps = 1",
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
    let run = home.run(&[
        "run",
        dir.path().to_str().expect("utf-8 path"),
        "--script",
        script.to_str().expect("utf-8 path"),
        "--json",
    ]);
    assert_eq!(run.code, Some(3), "paused at max_steps:\n{}", run.stderr);
    let session = session_of_json(&run.stdout[0]);
    let id: SessionId = session.parse().expect("session id");
    let last_seq = home.state(&session).last_seq;

    // Worker A takes the session (the paused run released its lease).
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
    assert_ne!(
        refused.code,
        Some(0),
        "a second writer was let in:\n{}",
        refused.stdout_text()
    );
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains(OWNER),
        "the refusal does not name the holder:\n{}",
        refused.stderr
    );
    assert_eq!(
        home.state(&session).last_seq,
        last_seq,
        "the refused resume wrote to the log"
    );

    block_on(async { store.release(&lease).await.expect("release") });
    let resumed = home.run(&["resume", &session, "--raise", "max_steps=5"]);
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    assert_eq!(home.state(&session).status.as_str(), "finished");
}
