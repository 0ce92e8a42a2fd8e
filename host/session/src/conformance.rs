//! The one conformance suite of the [`Store`] contract, run against every
//! backend: each test is an `async fn(&Harness)`, and the `conformance!`
//! macro at the bottom makes a `#[tokio::test]` of it per backend
//! (`session::conformance::sqlite::…`, `session::conformance::postgres::…`).
//!
//! - SQLite always runs, in a temporary directory, on a clock the test moves
//!   by hand.
//! - PostgreSQL runs against the server in `LONGHAND_TEST_PG` (a
//!   `postgres://` URL whose role may create schemas; `.ci/setup-postgres.sh`
//!   sets one up and prints it), each test in a fresh schema dropped at the
//!   end, on the database's clock plus a skew the test moves by hand. Unset,
//!   the PostgreSQL tests print that they were skipped and pass — unless
//!   `LONGHAND_REQUIRE_EXTERNAL=1`, when they fail.
//!
//! What is not here: backend specifics (SQLite's group commit, fsync
//! accounting, file damage, migrations) stay beside their backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::event::tests::every_event;
use super::event::{BlobRef, Event, MAX_EVENT_JSON, PauseKind, PauseReason, SessionStatus};
use super::holder::Process;
use super::inbox::{ControlKind, MAX_CONTROL_TEXT};
use super::postgres::PostgresStore;
use super::sqlite::{DB_FILE, SqliteStore};
use super::store::{Clock, Durability, Lease, SessionId, Store, StoreError};

/// A clock the test moves by hand (SQLite).
#[derive(Debug)]
pub(crate) struct ManualClock(pub AtomicU64);

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// One backend's store, a second handle on the same data (as another
/// process or machine has), and the hooks the tests need.
struct Harness {
    backend: Backend,
    store: Arc<dyn Store>,
    other: Arc<dyn Store>,
    sqlite: Option<(tempfile::TempDir, Arc<ManualClock>)>,
    postgres: Option<(String, String, [PostgresStore; 2])>,
    /// Makes `other` act for another process (see `session::holder`).
    other_acts_as: Box<dyn Fn(Option<Process>) + Send + Sync>,
}

impl Harness {
    async fn sqlite() -> Self {
        let dir = tempfile::TempDir::new().unwrap();
        let clock = Arc::new(ManualClock(AtomicU64::new(1_700_000_000_000)));
        let store = SqliteStore::open_with_clock(dir.path(), clock.clone())
            .await
            .unwrap();
        let other = SqliteStore::open_with_clock(dir.path(), clock.clone())
            .await
            .unwrap();
        let acting = other.clone();
        Harness {
            backend: Backend::Sqlite,
            store: Arc::new(store),
            other: Arc::new(other),
            sqlite: Some((dir, clock)),
            postgres: None,
            other_acts_as: Box::new(move |p| acting.act_as(p)),
        }
    }

    /// `None` (after saying so) when no server is configured.
    async fn postgres() -> Option<Self> {
        let url = postgres_url()?;
        let schema = format!(
            "lh_test_{}",
            SessionId::generate(0).as_str()[2..].to_lowercase()
        );
        let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("LONGHAND_TEST_PG: cannot connect: {e}"));
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let open = || async {
            let mut config: tokio_postgres::Config = url.parse().unwrap();
            config.options(format!("-c search_path={schema}"));
            PostgresStore::connect_config(config).await.unwrap()
        };
        let (store, other) = (open().await, open().await);
        let acting = other.clone();
        Some(Harness {
            backend: Backend::Postgres,
            store: Arc::new(store.clone()),
            other: Arc::new(other.clone()),
            sqlite: None,
            postgres: Some((url, schema, [store, other])),
            other_acts_as: Box::new(move |p| acting.act_as(p)),
        })
    }

    /// Moves the store's clock (both handles) forward by `ms`.
    fn advance(&self, ms: u64) {
        if let Some((_, clock)) = &self.sqlite {
            clock.0.fetch_add(ms, Ordering::SeqCst);
        }
        if let Some((_, _, stores)) = &self.postgres {
            for s in stores {
                s.advance_clock(ms);
            }
        }
    }

    /// Runs `sql` on the raw database with the append-only guards off, as
    /// someone editing it by hand would; returns the rows changed.
    async fn tamper(&self, sql: &str) -> u64 {
        if let Some((dir, _)) = &self.sqlite {
            let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
            conn.execute_batch(
                "DROP TRIGGER IF EXISTS events_no_update; DROP TRIGGER IF EXISTS events_no_delete;",
            )
            .unwrap();
            return conn.execute(sql, []).unwrap() as u64;
        }
        let (client, schema) = self.pg_client().await;
        client
            .batch_execute(&format!(
                "SET search_path = {schema}; ALTER TABLE events DISABLE TRIGGER events_append_only"
            ))
            .await
            .unwrap();
        client.execute(sql, &[]).await.unwrap()
    }

    /// `sql` run plainly (guards on): whether the database refused it.
    async fn refuses(&self, sql: &str) -> Option<String> {
        if let Some((dir, _)) = &self.sqlite {
            let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
            return conn.execute(sql, []).err().map(|e| e.to_string());
        }
        let (client, schema) = self.pg_client().await;
        client
            .batch_execute(&format!("SET search_path = {schema}"))
            .await
            .unwrap();
        client.execute(sql, &[]).await.err().map(|e| {
            e.as_db_error()
                .map_or(e.to_string(), |d| d.message().to_owned())
        })
    }

    async fn pg_client(&self) -> (tokio_postgres::Client, String) {
        let Some((url, schema, _)) = &self.postgres else {
            panic!("not a PostgreSQL harness");
        };
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        (client, schema.clone())
    }

    /// A store with one session, leased by `w1`.
    async fn session(&self) -> (SessionId, Lease) {
        let id = self.store.create("agent", &created("agent")).await.unwrap();
        let lease = self.store.acquire_lease(&id, "w1", TTL).await.unwrap();
        (id, lease)
    }

    /// Drops the test's schema (PostgreSQL); a failed test leaves it for
    /// inspection.
    async fn finish(self) {
        if let Some((_, schema, _)) = &self.postgres {
            let (client, _) = self.pg_client().await;
            client
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .unwrap();
        }
    }
}

/// `LONGHAND_TEST_PG`, or `None` after printing why the test is skipped;
/// panics instead when `LONGHAND_REQUIRE_EXTERNAL=1`.
pub(crate) fn postgres_url() -> Option<String> {
    match std::env::var("LONGHAND_TEST_PG") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("LONGHAND_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1") => {
            panic!(
                "LONGHAND_REQUIRE_EXTERNAL=1 but LONGHAND_TEST_PG is not set: run \
                 `eval \"$(.ci/setup-postgres.sh)\"` first"
            )
        }
        _ => {
            eprintln!(
                "skipped: PostgreSQL store test (set LONGHAND_TEST_PG=postgres://… to a server \
                 where the role may create schemas, e.g. `eval \"$(.ci/setup-postgres.sh)\"`)"
            );
            None
        }
    }
}

async fn append_and_read_round_trip(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
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
    }
    // One append, one time; later appends never earlier.
    assert!(records[1..4].iter().all(|r| r.at_ms == records[1].at_ms));
    assert!(records.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    let read_back: Vec<Event> = records[1..].iter().map(|r| r.event.clone()).collect();
    assert_eq!(read_back, events);

    // Reading from the middle starts there; past the end is empty.
    let tail = store.read(&id, 5).await.unwrap();
    assert_eq!(tail.first().map(|r| r.seq), Some(5));
    assert_eq!(tail.len(), records.len() - 4);
    assert!(store.read(&id, last + 1).await.unwrap().is_empty());
    // Another handle (process, machine) reads the same.
    assert_eq!(h.other.read(&id, 1).await.unwrap(), records);

    // An empty append checks lease and seq and writes nothing.
    assert_eq!(
        store.append(&id, &lease, last + 1, &[]).await.unwrap(),
        last
    );
}

async fn list_and_status_follow_lifecycle_events(h: &Harness) {
    let store = &h.store;
    let (a, lease) = h.session().await;
    h.advance(1);
    let b = store.create("other", &created("other")).await.unwrap();
    let list = store.list().await.unwrap();
    assert_eq!(
        list.iter().map(|s| &s.id).collect::<Vec<_>>(),
        [&a, &b],
        "oldest first"
    );
    assert_eq!(list[0].status, SessionStatus::Created);
    assert_eq!(list[1].agent_name, "other");

    h.advance(5);
    let pause = Event::Paused {
        reason: PauseReason {
            kind: PauseKind::Limit,
            limit: Some("tokens".into()),
            detail: "".into(),
        },
    };
    let error = Event::Error {
        step: None,
        message: "x".into(),
    };
    store
        .append(&a, &lease, 2, &[goal("g"), error])
        .await
        .unwrap();
    assert_eq!(
        store.summary(&a).await.unwrap().status,
        SessionStatus::Running
    );
    store.append(&a, &lease, 4, &[pause]).await.unwrap();
    let s = store.summary(&a).await.unwrap();
    assert_eq!((s.status, s.last_seq), (SessionStatus::Paused, 4));
    assert!(s.updated_ms >= s.created_ms + 6, "{s:?}");
    let finished = Event::Finished {
        summary: None,
        summary_blob: None,
    };
    store.append(&a, &lease, 5, &[finished]).await.unwrap();
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

async fn seq_conflict_writes_nothing(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
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

async fn second_owner_is_refused_then_takes_over_and_fences_the_first(h: &Harness) {
    let (store, other) = (&h.store, &h.other);
    let (id, first) = h.session().await;

    let err = other.acquire_lease(&id, "w2", TTL).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::LeaseHeld { owner, expires_ms, .. }
            if owner == "w1" && *expires_ms == first.expires_ms),
        "{err:?}"
    );

    // The holder renews (by acquire or renew): same token, later expiry.
    h.advance(5_000);
    let again = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    assert_eq!(again.token, first.token);
    assert!(again.expires_ms > first.expires_ms);
    h.advance(5_000);
    let renewed = store.renew(&first, TTL).await.unwrap();
    assert_eq!(renewed.token, first.token);
    assert!(matches!(
        other.acquire_lease(&id, "w2", TTL).await,
        Err(StoreError::LeaseHeld { .. })
    ));

    // w1 goes quiet; once the lease expires w2 takes over with a greater token.
    h.advance(TTL.as_millis() as u64 + 1);
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
    h.advance(TTL.as_millis() as u64 + 1);
    let fourth = store.acquire_lease(&id, "w1", TTL).await.unwrap();
    assert!(fourth.token > third.token);
    assert!(matches!(
        store.append(&id, &third, 3, &[goal("x")]).await,
        Err(StoreError::Fenced { .. })
    ));
}

async fn a_dead_holder_is_taken_over_at_once_and_fenced(h: &Harness) {
    let store = &h.store;
    let (id, first) = h.session().await;
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

async fn lease_for_another_session_or_zero_ttl_is_invalid(h: &Harness) {
    let store = &h.store;
    let (a, lease) = h.session().await;
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

async fn contract_violations_are_invalid(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
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

async fn blobs_are_stored_once_and_verified(h: &Harness) {
    let store = &h.store;
    let a = store.put_blob(b"hello".to_vec()).await.unwrap();
    let again = h.other.put_blob(b"hello".to_vec()).await.unwrap();
    let b = store.put_blob(Vec::new()).await.unwrap();
    assert_eq!(a, again);
    assert_eq!(a, BlobRef::of(b"hello"));
    assert_eq!(store.get_blob(&a).await.unwrap(), b"hello");
    assert_eq!(store.get_blob(&b).await.unwrap(), b"");
    // Counting rows touches none.
    assert_eq!(h.tamper("UPDATE blobs SET size = size").await, 2);

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

    let hell0 = match h.backend {
        Backend::Sqlite => "x'68656c6c30'",
        Backend::Postgres => "'\\x68656c6c30'::bytea",
    };
    h.tamper(&format!(
        "UPDATE blobs SET bytes = {hell0} WHERE digest = '{}'",
        a.digest
    ))
    .await;
    let err = store.get_blob(&a).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { .. } if err.to_string().contains(&a.digest)),
        "{err}"
    );
}

async fn append_with_stores_blobs_once_and_atomically_with_the_events(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
    let shared = b"system prompt".to_vec();
    for (seq, durability) in [(2, Durability::Soon), (3, Durability::Now)] {
        let request = format!("request {seq}").into_bytes();
        store
            .append_with(
                &id,
                &lease,
                seq,
                &[goal("a")],
                vec![shared.clone(), request],
                durability,
            )
            .await
            .unwrap();
    }
    assert_eq!(
        h.tamper("UPDATE blobs SET size = size").await,
        3,
        "the shared blob is stored once"
    );
    assert_eq!(store.get_blob(&BlobRef::of(&shared)).await.unwrap(), shared);
    // Refused before anything is written: no events, no blobs.
    let err = store
        .append_with(
            &id,
            &lease,
            3,
            &[goal("c")],
            vec![b"orphan?".to_vec()],
            Durability::Soon,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::SeqConflict { .. }), "{err:?}");
    assert!(matches!(
        store.get_blob(&BlobRef::of(b"orphan?")).await,
        Err(StoreError::NotFound { .. })
    ));
    // Blobs without events: stored, and the lease and seq still checked.
    let alone = store
        .append_with(
            &id,
            &lease,
            4,
            &[],
            vec![b"alone".to_vec()],
            Durability::Soon,
        )
        .await
        .unwrap();
    assert_eq!(alone.last_seq, 3);
    assert_eq!(
        store.get_blob(&BlobRef::of(b"alone")).await.unwrap(),
        b"alone"
    );
    // Large blobs (hashed off the caller's task) give the same result.
    let big = vec![7u8; (64 << 10) + 1];
    let appended = store
        .append_with(
            &id,
            &lease,
            4,
            &[goal("big")],
            vec![big.clone()],
            Durability::Soon,
        )
        .await
        .unwrap();
    assert_eq!(store.get_blob(&BlobRef::of(&big)).await.unwrap(), big);
    // The time returned is the one a read shows.
    let read = store.read(&id, 4).await.unwrap();
    assert_eq!(read[0].at_ms, appended.at_ms);
}

async fn latest_snapshot_and_wake_log(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
    assert_eq!(store.latest_snapshot(&id).await.unwrap(), None);
    let log = store.wake_log(&id).await.unwrap();
    assert_eq!((log.snapshot, log.tail.len()), (None, 1));

    let s1 = store.put_blob(b"state through 2".to_vec()).await.unwrap();
    let s2 = store.put_blob(b"state through 5".to_vec()).await.unwrap();
    store.append(&id, &lease, 2, &[goal("a")]).await.unwrap();
    let snap1 = Event::Snapshot {
        state: s1,
        through_seq: 2,
    };
    store.append(&id, &lease, 3, &[snap1]).await.unwrap();
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
    let log = store.wake_log(&id).await.unwrap();
    assert_eq!(log.snapshot.as_ref(), Some(&latest));
    assert_eq!(log.tail.iter().map(|r| r.seq).collect::<Vec<_>>(), [6, 7]);
    assert_eq!(store.get_blob(&s2).await.unwrap(), b"state through 5");
    let ghost = SessionId::generate(1);
    assert!(matches!(
        store.latest_snapshot(&ghost).await,
        Err(StoreError::NotFound { .. })
    ));
}

async fn a_damaged_event_is_corrupt_naming_its_seq(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
    let three = [goal("first"), goal("second"), goal("third")];
    store.append(&id, &lease, 2, &three).await.unwrap();
    // Flip one byte of event 3's JSON, keeping it valid JSON: only the
    // checksum can tell.
    let changed = h
        .tamper(&format!(
            "UPDATE events SET json = replace(json, 'second', 'secohd')
             WHERE session_id = '{id}' AND seq = 3"
        ))
        .await;
    assert_eq!(changed, 1);

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

    // JSON that does not decode: still Corrupt, never a panic.
    h.tamper(&format!(
        "UPDATE events SET json = '{{\"type\":' WHERE session_id = '{id}' AND seq = 2"
    ))
    .await;
    assert!(matches!(
        store.read(&id, 1).await,
        Err(StoreError::Corrupt { seq: Some(2), .. })
    ));
}

async fn a_lost_tail_or_a_gap_is_corrupt(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
    store
        .append(&id, &lease, 2, &[goal("a"), goal("b"), goal("c")])
        .await
        .unwrap();
    h.tamper(&format!(
        "DELETE FROM events WHERE session_id = '{id}' AND seq = 4"
    ))
    .await;
    let err = store.read(&id, 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { seq: Some(4), .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("cut short"), "{err}");

    h.tamper(&format!(
        "DELETE FROM events WHERE session_id = '{id}' AND seq = 2"
    ))
    .await;
    let err = store.read(&id, 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { seq: Some(2), .. }),
        "{err:?}"
    );
}

async fn the_schema_refuses_edits_to_events(h: &Harness) {
    let (id, _lease) = h.session().await;
    let err = h
        .refuses(&format!("DELETE FROM events WHERE session_id = '{id}'"))
        .await;
    assert!(
        err.as_deref().is_some_and(|e| e.contains("append-only")),
        "{err:?}"
    );
    let err = h.refuses("UPDATE events SET json = '{}'").await;
    assert!(
        err.as_deref().is_some_and(|e| e.contains("append-only")),
        "{err:?}"
    );
}

/// Two tasks race to append the same seq with the same lease, through one
/// handle and through two: exactly one wins, the other learns the log moved
/// on.
async fn racing_appends_of_one_seq_one_wins(h: &Harness) {
    let (id, lease) = h.session().await;
    for (x, y) in [(&h.store, &h.store), (&h.store, &h.other)] {
        for round in 0..20 {
            let next = x.summary(&id).await.unwrap().last_seq + 1;
            let task = |store: &Arc<dyn Store>, who: &'static str| {
                let (store, id, lease) = (store.clone(), id.clone(), lease.clone());
                tokio::spawn(async move { store.append(&id, &lease, next, &[goal(who)]).await })
            };
            let (a, b) = tokio::join!(task(x, "x"), task(y, "y"));
            let results = [a.unwrap(), b.unwrap()];
            assert_eq!(
                results.iter().filter(|r| r.is_ok()).count(),
                1,
                "round {round}: {results:?}"
            );
            assert!(
                results
                    .iter()
                    .any(|r| matches!(r, Err(StoreError::SeqConflict { .. }))),
                "round {round}: {results:?}"
            );
        }
    }
    let records = h.store.read(&id, 1).await.unwrap();
    assert_eq!(records.len(), 41);
    assert_eq!(records.last().map(|r| r.seq), Some(41));
}

/// Two handles post at once: every control gets its own id, the ids are
/// 1..=n with no gap, and every one is visible to both.
async fn concurrent_posters_get_distinct_increasing_ids(h: &Harness) {
    let (id, _lease) = h.session().await;
    let mut tasks = Vec::new();
    for (store, who) in [(&h.store, "x"), (&h.other, "y")] {
        for i in 0..20 {
            let (store, id) = (store.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                store
                    .post_control(&id, ControlKind::Send, Some(format!("{who} {i}")), who)
                    .await
            }));
        }
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap().unwrap().id);
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..=40).collect::<Vec<u64>>());
    for reader in [&h.store, &h.other] {
        let all = reader.controls(&id, 0).await.unwrap();
        assert_eq!(
            all.iter().map(|c| c.id).collect::<Vec<_>>(),
            (1..=40).collect::<Vec<u64>>(),
            "oldest first, none missing"
        );
        let texts: std::collections::HashSet<_> =
            all.iter().filter_map(|c| c.text.clone()).collect();
        assert_eq!(texts.len(), 40, "each post is its own row");
        assert!(all.iter().all(|c| c.handled_ms.is_none()));
    }
}

async fn controls_after_an_id_are_the_newer_ones_oldest_first(h: &Harness) {
    let store = &h.store;
    let (id, _lease) = h.session().await;
    let second = store.create("agent", &created("agent")).await.unwrap();
    assert!(store.controls(&id, 0).await.unwrap().is_empty());
    let pause = store
        .post_control(&id, ControlKind::Pause, Some("lunch".into()), "cli@h-1")
        .await
        .unwrap();
    h.advance(5);
    let cancel = store
        .post_control(&id, ControlKind::Cancel { now: true }, None, "cli@h-2")
        .await
        .unwrap();
    // Ids are per session.
    let elsewhere = store
        .post_control(&second, ControlKind::Send, Some("hi".into()), "cli@h-3")
        .await
        .unwrap();
    assert_eq!((pause.id, cancel.id, elsewhere.id), (1, 2, 1));
    assert!(pause.posted_ms + 5 <= cancel.posted_ms);
    assert_eq!(
        store.controls(&id, 0).await.unwrap(),
        [pause.clone(), cancel.clone()]
    );
    assert_eq!(
        store.controls(&id, 1).await.unwrap(),
        std::slice::from_ref(&cancel)
    );
    assert!(store.controls(&id, 2).await.unwrap().is_empty());
    assert_eq!(store.controls(&second, 0).await.unwrap(), [elsewhere]);
    let read = &store.controls(&id, 1).await.unwrap()[0];
    assert_eq!(
        (read.kind, read.text.as_deref(), read.by.as_str()),
        (ControlKind::Cancel { now: true }, None, "cli@h-2")
    );

    // Unknown sessions and oversized text are refused; nothing is posted.
    let ghost = SessionId::generate(1);
    assert!(matches!(
        store
            .post_control(&ghost, ControlKind::Pause, None, "me")
            .await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.controls(&ghost, 0).await,
        Err(StoreError::NotFound { .. })
    ));
    let long = "x".repeat(MAX_CONTROL_TEXT + 1);
    let refused = store
        .post_control(&id, ControlKind::Send, Some(long), "me")
        .await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("16384")),
        "{refused:?}"
    );
    let longest = "x".repeat(MAX_CONTROL_TEXT);
    let fits = store
        .post_control(&id, ControlKind::Send, Some(longest), "me")
        .await
        .unwrap();
    assert_eq!(fits.id, 3, "the refused post took no id");
}

/// Only the current lease holder settles; settling keeps the first time;
/// a poster needs no lease at all, even while someone else holds it.
async fn settling_is_fenced_like_an_append(h: &Harness) {
    let store = &h.store;
    let (id, first) = h.session().await;
    let c = store
        .post_control(&id, ControlKind::Pause, None, "cli@h-1")
        .await
        .unwrap();
    // The holder's lease expires and another worker takes the session.
    h.advance(TTL.as_millis() as u64 + 1);
    let second = h.other.acquire_lease(&id, "w2", TTL).await.unwrap();
    assert!(matches!(
        store.settle_control(&first, c.id).await,
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(store.controls(&id, 0).await.unwrap()[0].handled_ms, None);
    store.settle_control(&second, c.id).await.unwrap();
    let settled_at = store.controls(&id, 0).await.unwrap()[0].handled_ms;
    assert!(settled_at.is_some_and(|t| t >= c.posted_ms));
    h.advance(7);
    store.settle_control(&second, c.id).await.unwrap();
    assert_eq!(
        store.controls(&id, 0).await.unwrap()[0].handled_ms,
        settled_at
    );
    assert!(matches!(
        store.settle_control(&second, 99).await,
        Err(StoreError::NotFound { .. })
    ));
    // A released lease settles nothing either.
    store.release(&second).await.unwrap();
    let later = store
        .post_control(&id, ControlKind::Send, Some("go on".into()), "cli@h-1")
        .await
        .unwrap();
    assert!(matches!(
        store.settle_control(&second, later.id).await,
        Err(StoreError::Fenced { .. })
    ));
}

/// Claiming: only running sessions with no live lease, none claimed twice
/// by two workers at once, none in `skip`; what one claims is leased to it.
async fn claims_give_each_runnable_session_to_one_worker(h: &Harness) {
    let store = &h.store;
    let mut running = Vec::new();
    for _ in 0..12 {
        let (id, lease) = h.session().await;
        store.append(&id, &lease, 2, &[goal("go")]).await.unwrap();
        store.release(&lease).await.unwrap();
        running.push(id);
    }
    // Not runnable: created only, or running but held by a live worker.
    let (idle, _) = h.session().await;
    let held = &running[0];
    let held_lease = store.acquire_lease(held, "busy", TTL).await.unwrap();

    let (a, b) = tokio::join!(
        store.claim_runnable("wa", TTL, 6, std::slice::from_ref(&running[1])),
        h.other.claim_runnable("wb", TTL, 6, &[])
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let all: Vec<&SessionId> = a.iter().chain(&b).collect();
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert!(!all.contains(&&idle), "only running sessions");
    assert!(!a.contains(&running[1]), "skip is honoured");
    match h.backend {
        // Claims lease: no session twice, at most `limit` each, and every
        // runnable one once between the two (10 or 11 of the 11).
        Backend::Postgres => {
            assert!(!all.contains(&held), "a live lease is left alone");
            assert_eq!(distinct.len(), all.len(), "{a:?} {b:?}");
            assert!(a.len() <= 6 && b.len() <= 6);
            // Between them, every runnable session — but one claim whose
            // snapshot predates the other's commit finds the other's picks
            // already leased (its `ON CONFLICT` leaves a live lease alone)
            // and returns fewer, never one twice. The next poll takes the
            // rest: `wb` claims again (its own leases count as free), and
            // the union is every runnable one.
            let again = h.other.claim_runnable("wb", TTL, 6, &[]).await.unwrap();
            assert!(
                again.iter().all(|id| !a.contains(id) && id != held),
                "{a:?} {again:?}"
            );
            let union: std::collections::HashSet<_> = all.iter().copied().chain(&again).collect();
            assert!(union.len() >= 10, "{a:?} {b:?} {again:?}");
            for id in &a {
                assert!(matches!(
                    h.other.acquire_lease(id, "wb", TTL).await,
                    Err(StoreError::LeaseHeld { owner, .. }) if owner == "wa"
                ));
                // The claimer's own acquire renews what it claimed.
                store.acquire_lease(id, "wa", TTL).await.unwrap();
            }
        }
        // The provided claim is a list: the lease decides later.
        Backend::Sqlite => {
            assert!(b.contains(held), "it does not look at leases");
            assert_eq!(b.len(), 12);
        }
    }
    store.release(&held_lease).await.unwrap();
}

/// A lease names its holder's process: a holder of this machine whose
/// process is gone is taken over at once (with a greater token, and named);
/// a live one, one on another machine, or a row that names no process
/// (an older Longhand) is waited out; the refusal says which.
async fn a_holder_dead_on_this_machine_is_taken_over_at_once(h: &Harness) {
    let Some(me) = Process::current() else {
        eprintln!("skipped: this platform has no /proc to judge holders by");
        return;
    };
    // Alive: this very process holds it.
    let (id, _) = h.session().await;
    let err = h.other.acquire_lease(&id, "w2", TTL).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::LeaseHeld { .. }), "{err:?}");
    assert!(
        text.contains(&format!(
            "pid {} on {}, alive on this machine",
            me.pid, me.host
        )),
        "{text}"
    );
    assert!(
        text.contains("last renewed 0 s ago") && text.contains("UTC (in 10 s)"),
        "{text}"
    );

    // Dead: a process whose pid now belongs to another (start time differs).
    let dead = Process {
        started: me.started + 1,
        ..me.clone()
    };
    (h.other_acts_as)(Some(dead));
    let id = h.store.create("agent", &created("agent")).await.unwrap();
    let first = h.other.acquire_lease(&id, "w-dead", TTL).await.unwrap();
    assert_eq!(first.taken_from, None);
    let taken = h.store.acquire_lease(&id, "w2", TTL).await.unwrap();
    assert!(taken.token > first.token);
    assert_eq!(taken.taken_from.as_deref(), Some("w-dead"));
    let err = h
        .other
        .append(&id, &first, 2, &[goal("late")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    // Renewing keeps the token and says nothing was taken.
    let renewed = h.store.renew(&taken, TTL).await.unwrap();
    assert_eq!((renewed.token, renewed.taken_from), (taken.token, None));

    // Another machine, or no process recorded: only time frees it.
    for (acting, says) in [
        (
            Some(Process {
                machine: "another-boot/1".into(),
                ..me.clone()
            }),
            "on another machine",
        ),
        (None, ""),
    ] {
        (h.other_acts_as)(acting);
        let id = h.store.create("agent", &created("agent")).await.unwrap();
        h.other.acquire_lease(&id, "w-far", TTL).await.unwrap();
        let err = h.store.acquire_lease(&id, "w2", TTL).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("leased by w-far"), "{text}");
        match says {
            "" => assert!(!text.contains("pid"), "{text}"),
            says => assert!(text.contains(says), "{text}"),
        }
        h.advance(TTL.as_millis() as u64 + 1);
        let later = h.store.acquire_lease(&id, "w2", TTL).await.unwrap();
        assert_eq!(later.taken_from, None);
    }

    // A worker's claim takes a running session whose holder died here,
    // and leaves one whose holder lives.
    let dead = Process {
        started: me.started + 1,
        ..me.clone()
    };
    (h.other_acts_as)(Some(dead));
    let orphan = h.store.create("agent", &created("agent")).await.unwrap();
    let lease = h.other.acquire_lease(&orphan, "w-dead", TTL).await.unwrap();
    h.other
        .append(&orphan, &lease, 2, &[goal("go")])
        .await
        .unwrap();
    (h.other_acts_as)(Some(me.clone()));
    let live = h.store.create("agent", &created("agent")).await.unwrap();
    let lease = h.other.acquire_lease(&live, "w-live", TTL).await.unwrap();
    h.other
        .append(&live, &lease, 2, &[goal("go")])
        .await
        .unwrap();
    let claimed = h.store.claim_runnable("w3", TTL, 8, &[]).await.unwrap();
    assert!(claimed.contains(&orphan), "{claimed:?}");
    let got = h.store.acquire_lease(&orphan, "w3", TTL).await.unwrap();
    assert!(got.token > 1);
    match h.backend {
        Backend::Postgres => assert!(!claimed.contains(&live), "{claimed:?}"),
        // The provided claim lists; the lease refuses the live one.
        Backend::Sqlite => {}
    }
    assert!(matches!(
        h.store.acquire_lease(&live, "w3", TTL).await,
        Err(StoreError::LeaseHeld { .. })
    ));
}

/// Issue 26: a session that was running when its worker died goes to the
/// front of the queue — before every session never started, however long
/// that queue and however recent the orphan's last append — whether its
/// lease expired (a worker elsewhere) or its holder is seen dead here.
async fn orphans_are_claimed_before_sessions_never_started(h: &Harness) {
    let Some(me) = Process::current() else {
        eprintln!("skipped: this platform has no /proc to judge holders by");
        return;
    };
    let store = &h.store;
    let mut queued = Vec::new();
    for _ in 0..5 {
        let (id, lease) = h.session().await;
        store.append(&id, &lease, 2, &[goal("go")]).await.unwrap();
        store.release(&lease).await.unwrap();
        queued.push(id);
    }
    h.advance(1000);
    // A worker elsewhere ran this one and vanished: its lease ran out.
    let expired = store.create("agent", &created("agent")).await.unwrap();
    let lease = store.acquire_lease(&expired, "w-gone", TTL).await.unwrap();
    store
        .append(&expired, &lease, 2, &[goal("go")])
        .await
        .unwrap();
    h.advance(TTL.as_millis() as u64 + 1);
    // A worker of this machine ran this one and died: its lease is live.
    (h.other_acts_as)(Some(Process {
        started: me.started + 1,
        ..me.clone()
    }));
    let dead = store.create("agent", &created("agent")).await.unwrap();
    let lease = h.other.acquire_lease(&dead, "w-dead", TTL).await.unwrap();
    h.other
        .append(&dead, &lease, 2, &[goal("go")])
        .await
        .unwrap();
    (h.other_acts_as)(Some(me));

    let claimed = store.claim_runnable("w3", TTL, 2, &[]).await.unwrap();
    let front: std::collections::HashSet<&SessionId> = claimed.iter().take(2).collect();
    assert_eq!(
        front,
        [&expired, &dead].into_iter().collect(),
        "orphans first: {claimed:?} (queued {queued:?})"
    );
    for id in [&expired, &dead] {
        store.acquire_lease(id, "w3", TTL).await.unwrap();
    }
}

/// Issue 26: the parts of superseded snapshots can be forgotten, by the
/// session's current lease holder only; the log (snapshot events included)
/// still reads whole and verified, and blobs not named stay.
async fn superseded_snapshot_blobs_are_forgotten_and_the_log_stays_whole(h: &Harness) {
    let store = &h.store;
    let (id, lease) = h.session().await;
    let old_root = b"old snapshot root".to_vec();
    let old_chunk = b"old snapshot chunk".to_vec();
    let kept = b"a response the log refers to".to_vec();
    let snapshot = |through_seq: u64, root: &[u8]| Event::Snapshot {
        state: BlobRef::of(root),
        through_seq,
    };
    store
        .append_with(
            &id,
            &lease,
            2,
            &[goal("go"), snapshot(2, &old_root)],
            vec![old_root.clone(), old_chunk.clone(), kept.clone()],
            Durability::Now,
        )
        .await
        .unwrap();
    let parts = [BlobRef::of(&old_root), BlobRef::of(&old_chunk)];
    // Only the holder of the current lease may forget.
    let stale = Lease {
        token: lease.token + 7,
        ..lease.clone()
    };
    let err = store
        .forget_snapshot_blobs(&stale, &parts)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    assert_eq!(store.get_blob(&parts[0]).await.unwrap(), old_root);

    assert_eq!(
        store.forget_snapshot_blobs(&lease, &parts).await.unwrap(),
        2
    );
    for part in &parts {
        assert!(matches!(
            store.get_blob(part).await,
            Err(StoreError::NotFound { .. })
        ));
    }
    assert_eq!(store.get_blob(&BlobRef::of(&kept)).await.unwrap(), kept);
    let log = store.read(&id, 1).await.unwrap();
    assert_eq!(log.len(), 3, "every event stays, the snapshot's too");
    assert_eq!(
        store.latest_snapshot(&id).await.unwrap().map(|r| r.seq),
        Some(3)
    );
    // Forgetting what is gone already deletes nothing and is no error.
    assert_eq!(
        store.forget_snapshot_blobs(&lease, &parts).await.unwrap(),
        0
    );
}

/// A change made through one handle wakes a waiter on another.
async fn a_change_wakes_a_waiter(h: &Harness) {
    let (id, lease) = h.session().await;
    let other = h.other.clone();
    // The provided wait sleeps the whole timeout: keep it short there.
    let timeout = match h.backend {
        Backend::Postgres => Duration::from_secs(30),
        Backend::Sqlite => Duration::from_millis(50),
    };
    let waiter = tokio::spawn(async move {
        // The first wait may end at once (the listener connecting counts
        // as a change); what matters is that later ones end on appends.
        let mut woken = 0;
        for _ in 0..3 {
            if other.wait_for_change(timeout).await.unwrap() {
                woken += 1;
            }
        }
        woken
    });
    for seq in 2..200 {
        h.store
            .append(&id, &lease, seq, &[goal("tick")])
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if waiter.is_finished() {
            break;
        }
    }
    let woken = waiter.await.unwrap();
    match h.backend {
        Backend::Postgres => assert_eq!(woken, 3),
        Backend::Sqlite => assert_eq!(woken, 0, "the provided wait only sleeps"),
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let h = super::Harness::sqlite().await;
                    super::$name(&h).await;
                    h.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(h) = super::Harness::postgres().await else { return };
                    super::$name(&h).await;
                    h.finish().await;
                }
            )*
        }
    };
}

conformance!(
    append_and_read_round_trip,
    list_and_status_follow_lifecycle_events,
    seq_conflict_writes_nothing,
    second_owner_is_refused_then_takes_over_and_fences_the_first,
    a_dead_holder_is_taken_over_at_once_and_fenced,
    lease_for_another_session_or_zero_ttl_is_invalid,
    contract_violations_are_invalid,
    blobs_are_stored_once_and_verified,
    append_with_stores_blobs_once_and_atomically_with_the_events,
    latest_snapshot_and_wake_log,
    a_damaged_event_is_corrupt_naming_its_seq,
    a_lost_tail_or_a_gap_is_corrupt,
    the_schema_refuses_edits_to_events,
    racing_appends_of_one_seq_one_wins,
    concurrent_posters_get_distinct_increasing_ids,
    controls_after_an_id_are_the_newer_ones_oldest_first,
    settling_is_fenced_like_an_append,
    claims_give_each_runnable_session_to_one_worker,
    a_holder_dead_on_this_machine_is_taken_over_at_once,
    orphans_are_claimed_before_sessions_never_started,
    superseded_snapshot_blobs_are_forgotten_and_the_log_stays_whole,
    a_change_wakes_a_waiter,
);
