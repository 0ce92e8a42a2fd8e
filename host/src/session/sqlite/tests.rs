//! Tests of the SQLite store, and through it of the [`Store`] contract.

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;
use tempfile::TempDir;

use super::*;
use crate::session::event::tests::every_event;
use crate::session::event::{PauseKind, PauseReason};

/// A clock the test moves by hand.
#[derive(Debug)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const TTL: Duration = Duration::from_secs(10);

fn created(agent: &str) -> Event {
    Event::SessionCreated {
        agent_name: agent.into(),
        agent: serde_json::json!({"model": "m", "tools": []}),
        config_digest: "sha256:00".into(),
    }
}

fn goal(g: &str) -> Event {
    Event::GoalSet { goal: g.into() }
}

async fn open(dir: &TempDir) -> (SqliteStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicU64::new(1_700_000_000_000)));
    let store = SqliteStore::open_with_clock(dir.path(), clock.clone())
        .await
        .unwrap();
    (store, clock)
}

/// A store with one session, leased by `w1`.
async fn session(dir: &TempDir) -> (SqliteStore, Arc<ManualClock>, SessionId, Lease) {
    let (store, clock) = open(dir).await;
    let id = store.create("agent", &created("agent")).await.unwrap();
    let lease = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    (store, clock, id, lease)
}

/// A raw connection for tampering, with the append-only triggers dropped.
fn raw(dir: &TempDir) -> Connection {
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;")
        .unwrap();
    conn
}

#[tokio::test]
async fn append_and_read_round_trip() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    let events: Vec<Event> = every_event()
        .into_iter()
        .filter(|e| !matches!(e, Event::SessionCreated { .. }))
        .collect();
    let last = store.append(&id, &lease, 2, &events[..3]).await.unwrap();
    assert_eq!(last, 4);
    let last = store.append(&id, &lease, 5, &events[3..]).await.unwrap();
    assert_eq!(last, 1 + events.len() as u64);

    let records = store.read(&id, 1).await.unwrap();
    assert_eq!(records.len(), 1 + events.len());
    assert_eq!(records[0].event, created("agent"));
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.seq, i as u64 + 1);
        assert_eq!(record.at_ms, 1_700_000_000_000);
    }
    let read_back: Vec<Event> = records[1..].iter().map(|r| r.event.clone()).collect();
    assert_eq!(read_back, events);

    // Reading from the middle starts there; past the end is empty.
    let tail = store.read(&id, 5).await.unwrap();
    assert_eq!(tail.first().map(|r| r.seq), Some(5));
    assert_eq!(tail.len(), records.len() - 4);
    assert!(store.read(&id, last + 1).await.unwrap().is_empty());

    // An empty append checks lease and seq and writes nothing.
    assert_eq!(
        store.append(&id, &lease, last + 1, &[]).await.unwrap(),
        last
    );
}

#[tokio::test]
async fn list_and_status_follow_lifecycle_events() {
    let dir = TempDir::new().unwrap();
    let (store, clock, a, lease) = session(&dir).await;
    clock.advance(1);
    let b = store.create("other", &created("other")).await.unwrap();
    let list = store.list().await.unwrap();
    assert_eq!(
        list.iter().map(|s| &s.id).collect::<Vec<_>>(),
        [&a, &b],
        "oldest first"
    );
    assert_eq!(list[0].status, SessionStatus::Created);
    assert_eq!(list[1].agent_name, "other");

    clock.advance(5);
    let pause = Event::Paused {
        reason: PauseReason {
            kind: PauseKind::Limit,
            limit: Some("tokens".into()),
            detail: "".into(),
        },
    };
    store
        .append(
            &a,
            &lease,
            2,
            &[
                goal("g"),
                Event::Error {
                    step: None,
                    message: "x".into(),
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        store.summary(&a).await.unwrap().status,
        SessionStatus::Running
    );
    store.append(&a, &lease, 4, &[pause]).await.unwrap();
    let s = store.summary(&a).await.unwrap();
    assert_eq!((s.status, s.last_seq), (SessionStatus::Paused, 4));
    assert_eq!(s.updated_ms, s.created_ms + 6);
    store
        .append(
            &a,
            &lease,
            5,
            &[Event::Finished {
                summary: None,
                summary_blob: None,
            }],
        )
        .await
        .unwrap();
    assert_eq!(
        store.summary(&a).await.unwrap().status,
        SessionStatus::Finished
    );

    let missing: SessionId = "s-00000000000000000000000000".parse().unwrap();
    assert!(matches!(
        store.summary(&missing).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.read(&missing, 1).await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn seq_conflict_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    store.append(&id, &lease, 2, &[goal("a")]).await.unwrap();
    for wrong in [2, 4, 0] {
        let err = store
            .append(&id, &lease, wrong, &[goal("b"), goal("c")])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::SeqConflict { expected, actual: 3 } if expected == wrong),
            "{err:?}"
        );
    }
    assert_eq!(store.read(&id, 1).await.unwrap().len(), 2);
    assert_eq!(store.summary(&id).await.unwrap().last_seq, 2);
}

#[tokio::test]
async fn second_owner_is_refused_then_takes_over_and_fences_the_first() {
    let dir = TempDir::new().unwrap();
    let (store, clock, id, first) = session(&dir).await;
    // Another process on the same file, sharing the clock.
    let other = SqliteStore::open_with_clock(dir.path(), clock.clone())
        .await
        .unwrap();

    let err = other.acquire_lease(&id, "w2", TTL).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseHeld { owner, expires_ms }
            if owner == "w1" && *expires_ms == first.expires_ms),
        "{err:?}"
    );

    // The holder renews (by acquire or renew): same token, later expiry.
    clock.advance(5_000);
    let again = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    assert_eq!(again.token, first.token);
    assert!(again.expires_ms > first.expires_ms);
    clock.advance(5_000);
    let renewed = store.renew(&first, TTL).await.unwrap();
    assert_eq!(renewed.token, first.token);
    assert!(matches!(
        other.acquire_lease(&id, "w2", TTL).await,
        Err(StoreError::LeaseHeld { .. })
    ));

    // w1 goes quiet; once the lease expires w2 takes over with a greater token.
    clock.advance(TTL.as_millis() as u64 + 1);
    let second = other.acquire_lease(&id, "w2", TTL).await.unwrap();
    assert!(second.token > first.token);

    // w1 wakes up late: every write with its old lease is fenced.
    let err = store
        .append(&id, &first, 2, &[goal("stale")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Fenced { token, current: Some(c) } if token == first.token && c == second.token),
        "{err:?}"
    );
    assert!(matches!(
        store.renew(&first, TTL).await,
        Err(StoreError::Fenced { .. })
    ));
    store.release(&first).await.unwrap(); // a no-op: it is not w1's any more
    assert_eq!(
        other
            .append(&id, &second, 2, &[goal("fresh")])
            .await
            .unwrap(),
        2
    );
    assert_eq!(store.read(&id, 2).await.unwrap()[0].event, goal("fresh"));

    // Release lets the next worker in at once, with a greater token still,
    // and the released lease can no longer write.
    other.release(&second).await.unwrap();
    let err = other
        .append(&id, &second, 3, &[goal("after release")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Fenced { current: None, .. }),
        "{err:?}"
    );
    let third = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    assert!(third.token > second.token);

    // An expired lease re-taken by its own owner is a new lease too.
    clock.advance(TTL.as_millis() as u64 + 1);
    let fourth = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    assert!(fourth.token > third.token);
    assert!(matches!(
        store.append(&id, &third, 3, &[goal("x")]).await,
        Err(StoreError::Fenced { .. })
    ));
}

#[tokio::test]
async fn a_dead_holder_is_taken_over_at_once_and_fenced() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, first) = session(&dir).await;
    // Naming the wrong holder takes nothing.
    assert!(matches!(
        store.take_over(&id, "someone-else", "w2", TTL).await,
        Err(StoreError::LeaseHeld { owner, .. }) if owner == "w1"
    ));
    // Naming the live holder takes the lease before it expires.
    let second = store.take_over(&id, "w1", "w2", TTL).await.unwrap();
    assert_eq!(second.owner, "w2");
    assert!(second.token > first.token);
    // Should w1 be alive after all, its writes are fenced.
    let err = store
        .append(&id, &first, 2, &[goal("late")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    assert_eq!(
        store.append(&id, &second, 2, &[goal("new")]).await.unwrap(),
        2
    );
}

#[tokio::test]
async fn lease_for_another_session_or_zero_ttl_is_invalid() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, a, lease) = session(&dir).await;
    let b = store.create("agent", &created("agent")).await.unwrap();
    assert!(matches!(
        store.append(&b, &lease, 2, &[goal("g")]).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.acquire_lease(&a, "w1", Duration::ZERO).await,
        Err(StoreError::Invalid(_))
    ));
    // No lease on b at all yet: fenced.
    let forged = Lease {
        session: b.clone(),
        ..lease
    };
    assert!(matches!(
        store.append(&b, &forged, 2, &[goal("g")]).await,
        Err(StoreError::Fenced { current: None, .. })
    ));
}

#[tokio::test]
async fn contract_violations_are_invalid() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    let err = store
        .append(&id, &lease, 2, &[created("agent")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    let huge = goal(&"x".repeat(MAX_EVENT_JSON));
    let err = store
        .append(&id, &lease, 2, &[goal("ok"), huge])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Invalid(m) if m.contains("blobs")),
        "{err:?}"
    );
    assert_eq!(
        store.summary(&id).await.unwrap().last_seq,
        1,
        "all or nothing"
    );
    assert!(matches!(
        store.create("agent", &goal("g")).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.create("other", &created("agent")).await,
        Err(StoreError::Invalid(_))
    ));
}

#[tokio::test]
async fn blobs_are_stored_once_and_verified() {
    let dir = TempDir::new().unwrap();
    let (store, _clock) = open(&dir).await;
    let a = store.put_blob(b"hello".to_vec()).await.unwrap();
    let again = store.put_blob(b"hello".to_vec()).await.unwrap();
    let b = store.put_blob(Vec::new()).await.unwrap();
    assert_eq!(a, again);
    assert_eq!(a, BlobRef::of(b"hello"));
    assert_eq!(store.get_blob(&a).await.unwrap(), b"hello");
    assert_eq!(store.get_blob(&b).await.unwrap(), b"");

    let conn = raw(&dir);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 2);

    let unknown = BlobRef::of(b"never stored");
    assert!(matches!(
        store.get_blob(&unknown).await,
        Err(StoreError::NotFound { .. })
    ));
    let malformed = BlobRef {
        digest: "md5:00".into(),
        bytes: 0,
    };
    assert!(matches!(
        store.get_blob(&malformed).await,
        Err(StoreError::Invalid(_))
    ));

    conn.execute(
        "UPDATE blobs SET bytes = x'68656c6c30' WHERE digest = ?1",
        [&a.digest],
    )
    .unwrap();
    let err = store.get_blob(&a).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { .. } if err.to_string().contains(&a.digest)),
        "{err}"
    );
}

#[tokio::test]
async fn latest_snapshot_and_wake_log() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    assert_eq!(store.latest_snapshot(&id).await.unwrap(), None);
    let log = store.wake_log(&id).await.unwrap();
    assert_eq!((log.snapshot, log.tail.len()), (None, 1));

    let s1 = store.put_blob(b"state through 2".to_vec()).await.unwrap();
    let s2 = store.put_blob(b"state through 5".to_vec()).await.unwrap();
    store.append(&id, &lease, 2, &[goal("a")]).await.unwrap();
    store
        .append(
            &id,
            &lease,
            3,
            &[Event::Snapshot {
                state: s1,
                through_seq: 2,
            }],
        )
        .await
        .unwrap();
    store
        .append(&id, &lease, 4, &[goal("b"), goal("c")])
        .await
        .unwrap();
    let snap2 = Event::Snapshot {
        state: s2.clone(),
        through_seq: 5,
    };
    store
        .append(&id, &lease, 6, &[snap2.clone(), goal("d")])
        .await
        .unwrap();

    let latest = store.latest_snapshot(&id).await.unwrap().unwrap();
    assert_eq!((latest.seq, &latest.event), (6, &snap2));

    // Through the trait object, as the brain holds it.
    let dyn_store: Arc<dyn Store> = Arc::new(store.clone());
    let log = dyn_store.wake_log(&id).await.unwrap();
    assert_eq!(log.snapshot.as_ref(), Some(&latest));
    assert_eq!(log.tail.iter().map(|r| r.seq).collect::<Vec<_>>(), [6, 7]);
    assert_eq!(store.get_blob(&s2).await.unwrap(), b"state through 5");
}

#[tokio::test]
async fn a_damaged_event_is_corrupt_naming_its_seq() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    store
        .append(
            &id,
            &lease,
            2,
            &[goal("first"), goal("second"), goal("third")],
        )
        .await
        .unwrap();
    let conn = raw(&dir);
    // Flip one byte of event 3's JSON, keeping it valid JSON: only the
    // checksum can tell.
    let json: String = conn
        .query_row(
            "SELECT json FROM events WHERE session_id = ?1 AND seq = 3",
            [id.as_str()],
            |r| r.get(0),
        )
        .unwrap();
    let flipped = json.replace("second", "secohd");
    assert_ne!(json, flipped);
    conn.execute(
        "UPDATE events SET json = ?2 WHERE session_id = ?1 AND seq = 3",
        params![id.as_str(), flipped],
    )
    .unwrap();

    let err = store.read(&id, 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { seq: Some(3), .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("event 3"), "{err}");
    assert!(matches!(
        store.wake_log(&id).await,
        Err(StoreError::Corrupt { seq: Some(3), .. })
    ));
    // The rows after the damage chain from the stored checksum of event 3,
    // so a read that starts after it (trusting what precedes) verifies.
    assert_eq!(store.read(&id, 4).await.unwrap().len(), 1);

    // Garbage that is not even UTF-8 JSON: still Corrupt, never a panic.
    conn.execute(
        "UPDATE events SET json = CAST(x'ff00fe' AS TEXT) WHERE session_id = ?1 AND seq = 2",
        [id.as_str()],
    )
    .unwrap();
    assert!(matches!(
        store.read(&id, 1).await,
        Err(StoreError::Corrupt { seq: Some(2), .. })
    ));
}

#[tokio::test]
async fn a_lost_tail_or_a_gap_is_corrupt() {
    let dir = TempDir::new().unwrap();
    let (store, _clock, id, lease) = session(&dir).await;
    store
        .append(&id, &lease, 2, &[goal("a"), goal("b"), goal("c")])
        .await
        .unwrap();
    let conn = raw(&dir);
    conn.execute(
        "DELETE FROM events WHERE session_id = ?1 AND seq = 4",
        [id.as_str()],
    )
    .unwrap();
    let err = store.read(&id, 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { seq: Some(4), .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("cut short"), "{err}");

    conn.execute(
        "DELETE FROM events WHERE session_id = ?1 AND seq = 2",
        [id.as_str()],
    )
    .unwrap();
    let err = store.read(&id, 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { seq: Some(2), .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_schema_refuses_edits_to_events() {
    let dir = TempDir::new().unwrap();
    let (_store, _clock, id, _lease) = session(&dir).await;
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let err = conn
        .execute("DELETE FROM events WHERE session_id = ?1", [id.as_str()])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    let err = conn
        .execute("UPDATE events SET json = '{}'", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

#[tokio::test]
async fn a_truncated_database_is_a_clear_error() {
    let dir = TempDir::new().unwrap();
    {
        let (store, _clock, id, lease) = session(&dir).await;
        let big = serde_json::json!({"pad": "x".repeat(3000)});
        for seq in 2..40 {
            let event = Event::Error {
                step: Some(seq),
                message: big.to_string(),
            };
            store.append(&id, &lease, seq, &[event]).await.unwrap();
        }
    } // closing the last connection checkpoints the WAL into the file
    let path = dir.path().join(DB_FILE);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(
        len > 64 * 1024,
        "the database should be several pages: {len}"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();

    let err = match SqliteStore::open(dir.path()).await {
        Err(e) => e,
        Ok(store) => {
            let list = store.list().await;
            let id = list
                .as_ref()
                .ok()
                .and_then(|l| l.first())
                .map(|s| s.id.clone());
            match id {
                Some(id) => store.read(&id, 1).await.unwrap_err(),
                None => list.unwrap_err(),
            }
        }
    };
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    assert!(msg.contains("backup"), "gives advice: {msg}");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join(DB_FILE);
    std::fs::write(
        &path,
        "these are not the pages you are looking for\n".repeat(200),
    )
    .unwrap();
    let err = SqliteStore::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );

    // A real SQLite database of some other application is refused too.
    let other = TempDir::new().unwrap();
    Connection::open(other.path().join(DB_FILE))
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let err = SqliteStore::open(other.path()).await.unwrap_err();
    assert!(err.to_string().contains("another application"), "{err}");
}

#[tokio::test]
async fn a_newer_schema_version_is_refused() {
    let dir = TempDir::new().unwrap();
    drop(open(&dir).await);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    let err = SqliteStore::open(dir.path()).await.unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found, supported, .. }
            if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade Longhand"), "{err}");
}

#[tokio::test]
async fn reopening_keeps_everything_and_does_not_migrate_again() {
    let dir = TempDir::new().unwrap();
    let id = {
        let (store, _clock, id, lease) = session(&dir).await;
        store.append(&id, &lease, 2, &[goal("g")]).await.unwrap();
        id
    };
    let (store, _clock) = open(&dir).await;
    assert_eq!(store.read(&id, 1).await.unwrap().len(), 2);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!((version, mode.as_str()), (SCHEMA_VERSION, "wal"));
    // Durable commits: synchronous=FULL (2) on the store's own connection.
    let sync: i64 = {
        let conn = store.inner.conn.lock().unwrap();
        conn.pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap()
    };
    assert_eq!(sync, 2);
}

/// Races two appends of the same seq with the same lease, `rounds` times.
async fn race(x: &SqliteStore, y: &SqliteStore, id: &SessionId, lease: &Lease, rounds: usize) {
    for round in 0..rounds {
        let next = x.summary(id).await.unwrap().last_seq + 1;
        let task = |store: &SqliteStore, who: &'static str| {
            let (store, id, lease) = (store.clone(), id.clone(), lease.clone());
            tokio::spawn(async move { store.append(&id, &lease, next, &[goal(who)]).await })
        };
        let (a, b) = tokio::join!(task(x, "x"), task(y, "y"));
        let results = [a.unwrap(), b.unwrap()];
        let wins = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {results:?}");
        assert!(
            results
                .iter()
                .any(|r| matches!(r, Err(StoreError::SeqConflict { .. }))),
            "round {round}: {results:?}"
        );
    }
}

/// Two tasks race to append the same seq with the same lease: exactly one
/// wins, the other learns the log moved on. Through one store (one
/// connection), then through two stores on one file (SQLite's locks decide).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_appends_of_one_seq_one_wins() {
    let dir = TempDir::new().unwrap();
    let (store, clock, id, lease) = session(&dir).await;
    race(&store, &store, &id, &lease, 20).await;
    let other = SqliteStore::open_with_clock(dir.path(), clock)
        .await
        .unwrap();
    race(&store, &other, &id, &lease, 20).await;
    let records = store.read(&id, 1).await.unwrap();
    assert_eq!(records.len(), 41);
    assert_eq!(records.last().map(|r| r.seq), Some(41));
}
