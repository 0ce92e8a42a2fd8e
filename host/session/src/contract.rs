//! What every backend checks and computes the same way: the [`Store`]
//! contract's rules as plain functions over values, and the checksum chain.
//!
//! A backend reads rows and writes rows in its own SQL, inside its own
//! transaction; whether a lease is granted, whether an append is fenced or
//! stale, what the next checksum is, whether a read verifies — those answers
//! come from here, so SQLite and PostgreSQL cannot drift apart. The
//! conformance suite (`conformance.rs`) then checks both against the same
//! expectations.
//!
//! The checksum chain: each event stores
//! `sha256(prev || seq (8 bytes, big-endian) || at_ms (same) || json)`,
//! where `prev` is the previous event's checksum, or for seq 1 a genesis
//! value derived from the session id (so rows cannot be moved between
//! sessions unnoticed). The session row keeps the head (the last checksum),
//! so a lost tail is noticed too. It is not a signature: someone who can
//! rewrite the database can rewrite the chain.
//!
//! This module must not know SQL, and must not read the clock: callers pass
//! the database's time in.
//!
//! [`Store`]: super::Store

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::event::{BlobRef, Event, EventRecord, MAX_EVENT_JSON, SessionStatus};
use super::holder::{Liveness, Process};
use super::inbox::MAX_CONTROL_TEXT;
use super::store::{Lease, Result, StoreError};

/// Where a runnable session stands in the queue a worker claims from
/// (smaller first), after priority, which the worker or the SQL applies:
/// 1. an *orphan* first — a session whose lease still names a holder that
///    has expired or is known dead: it was running when its worker died,
///    its user has waited already, and it may hold half-done work;
/// 2. then by `updated_ms`, the longest waiting first.
///
/// Without row 1 an orphan's recent `updated_ms` (it was appending until
/// its worker died) put it behind every session never started, however
/// long that queue (issue 26: 35–45 s behind them in a fleet).
pub(super) fn claim_order(orphaned: bool, updated_ms: u64) -> (bool, u64) {
    (!orphaned, updated_ms)
}

/// The checksum every session's chain starts from.
pub(super) fn genesis(session: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"longhand/session/v1\0")
        .chain_update(session)
        .finalize()
        .into()
}

/// The checksum of event `seq` after `prev`.
pub(super) fn link(prev: &[u8], seq: u64, at_ms: u64, json: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update(prev)
        .chain_update(seq.to_be_bytes())
        .chain_update(at_ms.to_be_bytes())
        .chain_update(json)
        .finalize()
        .into()
}

/// Damage found at event `seq` of `session`.
pub(super) fn corrupt(session: &str, seq: u64, what: &str) -> StoreError {
    StoreError::Corrupt {
        seq: Some(seq),
        detail: format!(
            "session {session}, event {seq}: {what}; events before it verified. \
             Restore the database from a backup, or inspect it before going on"
        ),
    }
}

/// An event serialised for storage, prepared before any lock is taken.
#[derive(Debug, Clone)]
pub(super) struct Encoded {
    /// The event's `type`, stored beside the JSON for lookups.
    pub kind: &'static str,
    /// Exactly the bytes the checksum covers.
    pub json: String,
    /// The lifecycle status the event leaves the session in, if any.
    pub status: Option<SessionStatus>,
}

/// Serialises one event, refusing one over [`MAX_EVENT_JSON`].
pub(super) fn encode(event: &Event) -> Result<Encoded> {
    let json = serde_json::to_string(event).map_err(|e| {
        StoreError::Invalid(format!("{} event does not serialise: {e}", event.kind()))
    })?;
    if json.len() > MAX_EVENT_JSON {
        return Err(StoreError::Invalid(format!(
            "{} event is {} bytes of JSON, over the {MAX_EVENT_JSON}-byte limit; \
             put large payloads in blobs",
            event.kind(),
            json.len()
        )));
    }
    Ok(Encoded {
        kind: event.kind(),
        json,
        status: event.status_after(),
    })
}

/// `create`'s argument check: `created` must be a `session_created` naming
/// `agent_name`. Returns it encoded.
pub(super) fn encode_created(agent_name: &str, created: &Event) -> Result<Encoded> {
    match created {
        Event::SessionCreated {
            agent_name: named, ..
        } if named == agent_name => encode(created),
        Event::SessionCreated {
            agent_name: named, ..
        } => Err(StoreError::Invalid(format!(
            "session_created names agent {named:?}, not {agent_name:?}"
        ))),
        other => Err(StoreError::Invalid(format!(
            "a session starts with session_created, not {}",
            other.kind()
        ))),
    }
}

/// `append`'s argument checks, made before any lock: the lease is for this
/// session, and no event is a `session_created` or too large. Returns the
/// events encoded.
pub(super) fn encode_appended(
    session: &super::store::SessionId,
    lease: &Lease,
    events: &[Event],
) -> Result<Vec<Encoded>> {
    if lease.session != *session {
        return Err(StoreError::Invalid(format!(
            "lease is for session {}, not {session}",
            lease.session
        )));
    }
    events
        .iter()
        .map(|event| match event {
            Event::SessionCreated { .. } => Err(StoreError::Invalid(
                "session_created is written by create, never appended".into(),
            )),
            event => encode(event),
        })
        .collect()
}

/// A lease TTL in ms: at least 1.
pub(super) fn ttl_ms(ttl: Duration) -> Result<u64> {
    match u64::try_from(ttl.as_millis()) {
        Ok(0) => Err(StoreError::Invalid(
            "a lease TTL must be at least 1 ms".into(),
        )),
        Ok(ms) => Ok(ms),
        Err(_) => Err(StoreError::Invalid("lease TTL too large".into())),
    }
}

/// A session's lease row as stored: the holder (`None` once released), the
/// fencing token (only grows), the expiry by the database's clock, and —
/// when the writer recorded them — the holder's process and when it last
/// took or renewed the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LeaseRow {
    pub owner: Option<String>,
    pub token: u64,
    pub expires_ms: u64,
    pub holder: Option<Process>,
    pub renewed_ms: Option<u64>,
}

/// A lease as granted: its token, and the holder it was taken from when
/// that holder was proven dead before its lease ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Granted {
    pub token: u64,
    pub taken_from: Option<String>,
}

/// The token `owner` gets when asking for the lease at `now_ms` (the
/// database's clock), given the current row and `liveness`, what the asking
/// process found out about the row's holder ([`super::holder`]): the same
/// token when it renews its own live lease, a greater one for a new holder
/// — when the lease is free or expired, held by `dead_owner` (whose death
/// the caller proved), or held by a process `liveness` finds dead.
/// [`StoreError::LeaseHeld`] when someone else holds it.
pub(super) fn grant_token(
    row: Option<&LeaseRow>,
    owner: &str,
    dead_owner: Option<&str>,
    liveness: &Liveness,
    now_ms: u64,
) -> Result<Granted> {
    let fresh = |token| Granted {
        token,
        taken_from: None,
    };
    match row {
        None => Ok(fresh(1)),
        Some(LeaseRow {
            owner: Some(holder),
            token,
            expires_ms,
            ..
        }) if *expires_ms > now_ms => {
            if holder == owner {
                Ok(fresh(*token))
            } else if dead_owner == Some(holder.as_str()) || liveness.is_dead() {
                Ok(Granted {
                    token: token + 1,
                    taken_from: Some(holder.clone()),
                })
            } else {
                Err(lease_held(row, liveness, now_ms))
            }
        }
        Some(row) => Ok(fresh(row.token + 1)),
    }
}

/// The refusal for a live lease held by someone else, saying who holds it
/// and how alive it looks from here.
pub(super) fn lease_held(row: Option<&LeaseRow>, liveness: &Liveness, now_ms: u64) -> StoreError {
    let Some(row) = row else {
        return StoreError::LeaseHeld {
            owner: String::new(),
            expires_ms: 0,
            holder: String::new(),
            now_ms,
        };
    };
    let holder = match &row.holder {
        None => String::new(),
        Some(p) => {
            let mut text = format!("pid {} on {}, {}", p.pid, p.host, liveness.describe());
            if let Some(at) = row.renewed_ms {
                // Rounded down: "0 s ago" right after a renewal.
                text.push_str(&format!(
                    ", last renewed {} s ago",
                    now_ms.saturating_sub(at) / 1000
                ));
            }
            text
        }
    };
    StoreError::LeaseHeld {
        owner: row.owner.clone().unwrap_or_default(),
        expires_ms: row.expires_ms,
        holder,
        now_ms,
    }
}

/// Whether `lease` is the session's current lease, given its row: the same
/// holder and token, released or not expired-and-taken. An expired lease
/// nobody took over is still current (its holder may renew it).
/// [`StoreError::Fenced`] otherwise.
pub(super) fn check_lease(row: Option<&LeaseRow>, lease: &Lease) -> Result<()> {
    match row {
        Some(LeaseRow {
            owner: Some(owner),
            token,
            ..
        }) if *token == lease.token && *owner == lease.owner => Ok(()),
        Some(LeaseRow {
            owner: Some(_),
            token,
            ..
        }) => Err(StoreError::Fenced {
            token: lease.token,
            current: Some(*token),
        }),
        _ => Err(StoreError::Fenced {
            token: lease.token,
            current: None,
        }),
    }
}

/// Whether an append at `expected_seq` follows `last_seq`.
pub(super) fn check_seq(expected_seq: u64, last_seq: u64) -> Result<()> {
    if expected_seq == last_seq + 1 {
        Ok(())
    } else {
        Err(StoreError::SeqConflict {
            expected: expected_seq,
            actual: last_seq + 1,
        })
    }
}

/// `post_control`'s text limit.
pub(super) fn check_control_text(text: Option<&str>) -> Result<()> {
    match text {
        Some(text) if text.len() > MAX_CONTROL_TEXT => Err(StoreError::Invalid(format!(
            "a control's text is {} bytes, over the {MAX_CONTROL_TEXT}-byte limit",
            text.len()
        ))),
        _ => Ok(()),
    }
}

/// `get_blob`'s argument check: a well-formed digest.
pub(super) fn check_blob_ref(blob: &BlobRef) -> Result<()> {
    if blob.is_well_formed() {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "{:?} is not a sha256 digest",
            blob.digest
        )))
    }
}

/// Verifies blob bytes read back from `place` (a file, a database) against
/// the reference they were asked for.
pub(super) fn verify_blob(place: &str, wanted: &BlobRef, bytes: &[u8]) -> Result<()> {
    if BlobRef::of(bytes) == *wanted {
        Ok(())
    } else {
        Err(StoreError::Corrupt {
            seq: None,
            detail: format!(
                "{place}: blob {wanted} does not match its digest and length; \
                 restore the database from a backup"
            ),
        })
    }
}

/// Blobs with their references, hashed before any lock is taken. Large
/// batches are hashed on the blocking pool (SHA-256 runs at roughly
/// 0.5–2 GB/s), small ones inline.
pub(super) async fn hash_blobs(blobs: Vec<Vec<u8>>) -> Result<Vec<(BlobRef, Vec<u8>)>> {
    const INLINE_BYTES: usize = 64 << 10;
    let hash = |blobs: Vec<Vec<u8>>| {
        blobs
            .into_iter()
            .map(|bytes| (BlobRef::of(&bytes), bytes))
            .collect::<Vec<_>>()
    };
    if blobs.iter().map(Vec::len).sum::<usize>() <= INLINE_BYTES {
        return Ok(hash(blobs));
    }
    tokio::task::spawn_blocking(move || hash(blobs))
        .await
        .map_err(|e| StoreError::Db {
            context: "hashing blobs failed".into(),
            source: Box::new(e),
        })
}

/// The rows an append writes, chained from the session's head.
#[derive(Debug)]
pub(super) struct NewRow<'a> {
    pub seq: u64,
    pub kind: &'static str,
    pub json: &'a str,
    pub checksum: [u8; 32],
}

/// What an append leaves in the session row.
#[derive(Debug)]
pub(super) struct Advance<'a> {
    /// The rows to insert, in seq order.
    pub rows: Vec<NewRow<'a>>,
    /// The new `last_seq`.
    pub last_seq: u64,
    /// The new head checksum.
    pub head: Vec<u8>,
    /// The new status, when an event changed it.
    pub status: Option<SessionStatus>,
}

/// Chains `encoded` after `last_seq` (whose checksum is `head`), all
/// stamped `now_ms`.
pub(super) fn chain<'a>(
    last_seq: u64,
    head: &[u8],
    now_ms: u64,
    encoded: &'a [Encoded],
) -> Advance<'a> {
    let mut prev = head.to_vec();
    let mut seq = last_seq;
    let mut status = None;
    let mut rows = Vec::with_capacity(encoded.len());
    for enc in encoded {
        seq += 1;
        let checksum = link(&prev, seq, now_ms, enc.json.as_bytes());
        prev = checksum.to_vec();
        status = enc.status.or(status);
        rows.push(NewRow {
            seq,
            kind: enc.kind,
            json: &enc.json,
            checksum,
        });
    }
    Advance {
        rows,
        last_seq: seq,
        head: prev,
        status,
    }
}

/// Verifies a read of events `from..=to` of one session, row by row, as a
/// backend streams them in seq order.
///
/// `new` takes the checksum of event `from - 1` (ignored when `from` is 1:
/// the chain starts at genesis); a backend that cannot find that row passes
/// `None` and gets [`StoreError::Corrupt`].
#[derive(Debug)]
pub(super) struct Verifier<'s> {
    session: &'s str,
    prev: Vec<u8>,
    want: u64,
    to: u64,
    last_seq: u64,
    head: Vec<u8>,
    to_end: bool,
}

impl<'s> Verifier<'s> {
    /// A verifier of `from..=to` (`to` `None`: to the end, which also
    /// checks the log reaches `last_seq` and ends at `head`). `Ok(None)`
    /// when the range is empty.
    pub(super) fn new(
        session: &'s str,
        from: u64,
        to: Option<u64>,
        last_seq: u64,
        head: Vec<u8>,
        prev: impl FnOnce(u64) -> Option<Vec<u8>>,
    ) -> Result<Option<Self>> {
        let from = from.max(1);
        let to_seq = to.unwrap_or(last_seq).min(last_seq);
        if from > to_seq {
            return Ok(None);
        }
        let prev = match from {
            1 => genesis(session).to_vec(),
            _ => prev(from - 1).ok_or_else(|| corrupt(session, from - 1, "missing"))?,
        };
        Ok(Some(Verifier {
            session,
            prev,
            want: from,
            to: to_seq,
            last_seq,
            head,
            to_end: to.is_none(),
        }))
    }

    /// The first seq to read.
    pub(super) fn from(&self) -> u64 {
        self.want
    }

    /// The last seq to read.
    pub(super) fn to(&self) -> u64 {
        self.to
    }

    /// Checks the next row and decodes it.
    pub(super) fn next(
        &mut self,
        seq: u64,
        at_ms: u64,
        kind: &str,
        json: &[u8],
        checksum: &[u8],
    ) -> Result<EventRecord> {
        let session = self.session;
        if seq != self.want {
            return Err(corrupt(session, self.want, "missing (the log has a gap)"));
        }
        if link(&self.prev, seq, at_ms, json).as_slice() != checksum {
            return Err(corrupt(
                session,
                seq,
                "checksum mismatch (the row was damaged or edited)",
            ));
        }
        let event: Event = serde_json::from_slice(json).map_err(|e| {
            corrupt(
                session,
                seq,
                &format!("json does not decode ({e}; written by a newer Longhand?)"),
            )
        })?;
        if event.kind() != kind {
            return Err(corrupt(
                session,
                seq,
                &format!("type column {kind:?} disagrees with the json"),
            ));
        }
        if (seq == 1) != matches!(event, Event::SessionCreated { .. }) {
            return Err(corrupt(
                session,
                seq,
                "session_created must be exactly event 1",
            ));
        }
        self.prev = checksum.to_vec();
        self.want = seq + 1;
        Ok(EventRecord { seq, at_ms, event })
    }

    /// Checks nothing is missing at the end (and, reading to the end, that
    /// the last checksum is the session's head).
    pub(super) fn finish(self) -> Result<()> {
        if self.want <= self.to {
            return Err(corrupt(
                self.session,
                self.want,
                &format!(
                    "missing (the session records {} events; the log was cut short)",
                    self.last_seq
                ),
            ));
        }
        if self.to_end && self.prev != self.head {
            return Err(corrupt(
                self.session,
                self.last_seq,
                "does not match the session's head checksum",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(owner: Option<&str>, token: u64, expires_ms: u64) -> LeaseRow {
        LeaseRow {
            owner: owner.map(str::to_owned),
            token,
            expires_ms,
            holder: None,
            renewed_ms: None,
        }
    }

    fn token(row: Option<&LeaseRow>, owner: &str, dead: Option<&str>, now: u64) -> u64 {
        grant_token(row, owner, dead, &Liveness::Unknown, now)
            .unwrap()
            .token
    }

    #[test]
    fn lease_grants_follow_the_contract() {
        assert_eq!(token(None, "a", None, 10), 1);
        let live = row(Some("a"), 4, 100);
        assert_eq!(token(Some(&live), "a", None, 50), 4);
        assert!(matches!(
            grant_token(Some(&live), "b", None, &Liveness::Unknown, 50),
            Err(StoreError::LeaseHeld {
                expires_ms: 100,
                ..
            })
        ));
        assert_eq!(token(Some(&live), "b", Some("a"), 50), 5);
        assert_eq!(token(Some(&live), "b", None, 100), 5);
        // Expired, even for the same owner: a new token.
        assert_eq!(token(Some(&live), "a", None, 100), 5);
        let released = row(None, 7, 0);
        assert_eq!(token(Some(&released), "a", None, 1), 8);
        // A holder found dead is taken at once, and named.
        let dead = Liveness::Dead("process 7 no longer exists".into());
        let taken = grant_token(Some(&live), "b", None, &dead, 50).unwrap();
        assert_eq!(taken.token, 5);
        assert_eq!(taken.taken_from.as_deref(), Some("a"));
        // Alive, elsewhere or unknown: only time frees it.
        for alive in [
            Liveness::Alive,
            Liveness::OtherMachine,
            Liveness::OtherNamespace,
        ] {
            assert!(grant_token(Some(&live), "b", None, &alive, 50).is_err());
        }
    }

    #[test]
    fn a_refusal_says_who_holds_the_lease_and_until_when() {
        let mut held = row(Some("w-1"), 4, 1_700_000_042_000);
        held.holder = Some(Process {
            host: "build-1".into(),
            pid: 4242,
            started: 1,
            machine: "b/1".into(),
        });
        held.renewed_ms = Some(1_699_999_997_000);
        let err = lease_held(Some(&held), &Liveness::Alive, 1_700_000_000_000).to_string();
        assert_eq!(
            err,
            "session is leased by w-1 (pid 4242 on build-1, alive on this machine, \
             last renewed 3 s ago) until 22:14:02 UTC (in 42 s)"
        );
        let old = row(Some("w-2"), 1, 1_700_000_001_500);
        let err = lease_held(Some(&old), &Liveness::Unknown, 1_700_000_000_000).to_string();
        assert_eq!(err, "session is leased by w-2 until 22:13:21 UTC (in 2 s)");
    }

    #[test]
    fn fencing_compares_owner_and_token() {
        let lease = |owner: &str, token| Lease {
            session: crate::store::SessionId::generate(1),
            owner: owner.into(),
            token,
            expires_ms: 0,
            taken_from: None,
        };
        let current = row(Some("a"), 3, 0);
        assert!(check_lease(Some(&current), &lease("a", 3)).is_ok());
        assert!(matches!(
            check_lease(Some(&current), &lease("a", 2)),
            Err(StoreError::Fenced {
                token: 2,
                current: Some(3)
            })
        ));
        assert!(check_lease(Some(&current), &lease("b", 3)).is_err());
        assert!(matches!(
            check_lease(Some(&row(None, 3, 0)), &lease("a", 3)),
            Err(StoreError::Fenced { current: None, .. })
        ));
        assert!(check_lease(None, &lease("a", 1)).is_err());
    }

    #[test]
    fn a_chain_verifies_and_a_changed_byte_does_not() {
        let events = [
            encode(&Event::GoalSet { goal: "a".into() }).unwrap(),
            encode(&Event::GoalSet { goal: "b".into() }).unwrap(),
        ];
        let session = "s-x";
        let head = genesis(session);
        // Pretend seq 1 is the genesis' successor: verify from 2.
        let adv = chain(1, &head, 7, &events);
        assert_eq!(adv.last_seq, 3);
        let mut v = Verifier::new(session, 2, None, 3, adv.head.clone(), |_| {
            Some(head.to_vec())
        })
        .unwrap()
        .unwrap();
        for r in &adv.rows {
            v.next(r.seq, 7, r.kind, r.json.as_bytes(), &r.checksum)
                .unwrap();
        }
        v.finish().unwrap();
        let mut v = Verifier::new(session, 2, None, 3, adv.head.clone(), |_| {
            Some(head.to_vec())
        })
        .unwrap()
        .unwrap();
        let r = &adv.rows[0];
        let err = v
            .next(r.seq, 8, r.kind, r.json.as_bytes(), &r.checksum)
            .unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { seq: Some(2), .. }));
    }
}
