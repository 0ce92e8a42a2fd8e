//! The store contract: what any session backend (SQLite, PostgreSQL
//! for many workers) must provide, and the errors it speaks.
//!
//! The contract, in short:
//! - A session's log is append-only and gap-free: seq 1 is
//!   `session_created`, every append names the seq it writes
//!   (`expected_seq == last_seq + 1`) and is all-or-nothing.
//! - Only the holder of the session's current lease appends. Leases carry a
//!   **fencing token** that grows with every new holder, and the store checks
//!   it inside the append's transaction, so a worker that lost its lease
//!   (paused, partitioned, presumed dead) cannot write after the new holder
//!   took over, however late it wakes up.
//! - Every append names its [`Durability`]: `append` (and
//!   `append_with(.., Durability::Now)`) returns only once the events are on
//!   stable storage; `Durability::Soon` returns once they are written and
//!   visible to every reader (a process crash loses nothing) and reaches
//!   stable storage within a bounded window.
//! - Reads verify integrity (the SQLite backend chains checksums) and report
//!   damage as [`StoreError::Corrupt`] naming the seq, never a panic.
//! - Blobs are content-addressed: stored once, verified on read.
//! - Each session has a control inbox ([`super::inbox`]) that anyone may
//!   post to, lease or not; only the lease holder marks a control handled.
//!
//! This module must not know SQL; backends live beside it.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::event::{BlobRef, Event, EventRecord, SessionStatus};
use super::inbox::{Control, ControlKind};

/// What a store call can fail with. Each variant says who acts.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another worker holds a live lease on the session. The caller does not
    /// retry at once: it leaves the session alone, or waits until
    /// `expires_ms` (the holder may renew) and tries again.
    #[error("{}", held_message(owner, holder, *expires_ms, *now_ms))]
    LeaseHeld {
        /// The current holder.
        owner: String,
        /// When its lease runs out unless renewed, unix ms.
        expires_ms: u64,
        /// The holder's process as the store recorded it and how alive it
        /// looks from here, for people (e.g. `pid 4242 on build-1, alive
        /// on this machine, last renewed 3 s ago`); empty when the lease
        /// row names no process.
        holder: String,
        /// The store's clock when it refused, unix ms: what "in 42 s" is
        /// measured from.
        now_ms: u64,
    },
    /// The caller's lease is no longer the session's current one (it was
    /// released, or another worker took over after it expired). The caller
    /// stops working on the session at once and drops what it folded: its
    /// view may be stale. It may acquire a fresh lease and wake again.
    #[error(
        "lease token {token} is no longer current ({})",
        current.map_or("no live lease".to_owned(), |c| format!("the current token is {c}"))
    )]
    Fenced {
        /// The token the caller presented.
        token: u64,
        /// The session's current token, if any lease is live.
        current: Option<u64>,
    },
    /// The append named a seq that is not the next one: the caller's view of
    /// the log is stale (or it has a bug). Nothing was written. The caller
    /// re-reads the log from its last known seq, re-folds, and decides again;
    /// it never blindly retries with `actual`.
    #[error("append at seq {expected} refused: the next seq is {actual}")]
    SeqConflict {
        /// The seq the caller said it would write.
        expected: u64,
        /// The seq the log expects next (`last_seq + 1`).
        actual: u64,
    },
    /// No such session or blob. Reported to whoever named it (a user typing
    /// a session id, a dangling blob ref is [`StoreError::Corrupt`] instead
    /// when it comes from the log).
    #[error("{what} not found")]
    NotFound {
        /// What was looked for, e.g. `session s-…`.
        what: String,
    },
    /// Stored data failed verification: a broken checksum chain, a gap in the
    /// seqs, undecodable JSON, a blob whose bytes do not match its digest, or
    /// a file that is not a (whole) database. Aborts the session; a person
    /// restores from backup or inspects the damage. `seq` names the first
    /// bad event when there is one; everything before it verified.
    #[error("session store is corrupt: {detail}")]
    Corrupt {
        /// First damaged event, when the damage is in a log.
        seq: Option<u64>,
        /// What failed and where, with advice.
        detail: String,
    },
    /// The database was written by a newer Longhand (its schema version is
    /// higher than this binary knows). The operator upgrades Longhand; the
    /// store never downgrades a database.
    #[error(
        "{path} has schema version {found}, newer than this Longhand supports ({supported}); upgrade Longhand to open it"
    )]
    TooNew {
        /// The database.
        path: String,
        /// Its schema version.
        found: u32,
        /// The newest version this binary knows.
        supported: u32,
    },
    /// The caller broke the contract (appended a second `session_created`,
    /// passed a lease for another session, an event too large, a zero TTL).
    /// A bug: abort, do not retry.
    #[error("invalid store request: {0}")]
    Invalid(String),
    /// The filesystem failed (creating the directory, permissions, disk
    /// full). Reported to the operator; retrying later may help.
    #[error("{context}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The database failed for a reason not covered above (locked past the
    /// busy timeout, connection lost). Nothing was written; retrying later
    /// may help, and the operator is told if it persists.
    #[error("{context}")]
    Db {
        /// What was being done.
        context: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// "session is leased by w-1 (pid 4242 on build-1, alive on this machine,
/// last renewed 3 s ago) until 12:04:31 UTC (in 42 s)".
fn held_message(owner: &str, holder: &str, expires_ms: u64, now_ms: u64) -> String {
    let who = match holder {
        "" => owner.to_owned(),
        holder => format!("{owner} ({holder})"),
    };
    format!(
        "session is leased by {who} until {} (in {})",
        clock_utc(expires_ms),
        seconds(expires_ms.saturating_sub(now_ms))
    )
}

/// `12:04:31 UTC` of a unix-ms time (the date is left out: leases last
/// minutes).
pub(crate) fn clock_utc(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02} UTC", s / 3600 % 24, s / 60 % 60, s % 60)
}

/// A span of ms for people, rounded up to whole seconds: `42 s`.
pub(crate) fn seconds(ms: u64) -> String {
    format!("{} s", ms.div_ceil(1000))
}

/// Shorthand for store results.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A session's id: `s-` and 26 Crockford base32 digits of a ULID (48 bits of
/// unix milliseconds, then 80 random bits). Sorts by creation time as text,
/// which is how `list` orders sessions and how people skim them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    /// A new id for a session created at `now_ms`. Randomness comes from the
    /// OS; if it is unavailable the low bits fall back to a hash of the time
    /// and process id (still unique enough within one machine).
    pub fn generate(now_ms: u64) -> Self {
        let mut random = [0u8; 16];
        if getrandom::fill(&mut random).is_err() {
            use std::hash::{BuildHasher, RandomState};
            let h = RandomState::new().hash_one((now_ms, std::process::id()));
            random[..8].copy_from_slice(&h.to_le_bytes());
        }
        // `from_parts` keeps the low 48 bits of the time and 80 of these.
        let ulid = ulid::Ulid::from_parts(now_ms, u128::from_le_bytes(random));
        SessionId(format!("s-{ulid}"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionId {
    type Err = StoreError;

    /// Accepts exactly what [`SessionId::generate`] produces: `s-` and an
    /// upper-case ULID.
    fn from_str(s: &str) -> Result<Self> {
        let ok = s
            .strip_prefix("s-")
            .is_some_and(|rest| ulid::Ulid::from_string(rest).is_ok_and(|u| u.to_string() == rest));
        if ok {
            Ok(SessionId(s.to_owned()))
        } else {
            Err(StoreError::Invalid(format!(
                "{s:?} is not a session id (expected s- and 26 base32 digits)"
            )))
        }
    }
}

impl TryFrom<String> for SessionId {
    type Error = StoreError;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

/// The right to append to one session, until `expires_ms`.
///
/// Holding a `Lease` value proves nothing by itself: the store checks
/// `token` against the session's current token on every append, so a stale
/// `Lease` is refused with [`StoreError::Fenced`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The leased session.
    pub session: SessionId,
    /// Who holds it (a worker id: host name, pid, …).
    pub owner: String,
    /// Fencing token: strictly greater for every new holder of this session;
    /// unchanged when the same holder renews a live lease.
    pub token: u64,
    /// When it runs out unless renewed, unix ms, by the store's clock.
    pub expires_ms: u64,
    /// Set when this grant took the session from a live lease whose holder
    /// was proven dead (same machine, process gone): that holder's name.
    /// `None` for every other grant and for renewals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_from: Option<String>,
}

/// One line of `list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session.
    pub id: SessionId,
    /// Its agent's name.
    pub agent_name: String,
    /// When it was created, unix ms.
    pub created_ms: u64,
    /// When its last event was appended, unix ms.
    pub updated_ms: u64,
    /// Its last seq (1 right after creation).
    pub last_seq: u64,
    /// As the last lifecycle event left it.
    pub status: SessionStatus,
}

/// What `wake` reads: the latest snapshot, if any, and every event after
/// the seq it was folded through.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeLog {
    /// The latest [`Event::Snapshot`] record, if the log has one.
    pub snapshot: Option<EventRecord>,
    /// The events to fold on top: from `through_seq + 1` of the snapshot (or
    /// from seq 1 without one) to the end. May include the snapshot event
    /// itself, which a fold ignores.
    pub tail: Vec<EventRecord>,
}

/// How durable an append must be when it returns. Whatever the class, an
/// append is atomic and visible to every reader of the store once it
/// returns; the class says what a machine crash (power loss, kernel panic)
/// may take back.
///
/// Either way the store keeps a **prefix**: what survives a machine crash is
/// every commit up to some point in commit order, never a later one without
/// an earlier one. So a `Now` append also makes every append that returned
/// before it durable, whatever their class, and a lease or blob written
/// before an event is on stable storage whenever that event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// On stable storage (fsynced) before `append` returns: a write-effect
    /// call about to run, finishing, pausing, anything an operator waits on.
    Now,
    /// Written and visible to every reader before `append` returns, so a
    /// process crash (kill -9) loses nothing; on stable storage within a
    /// bounded window (the SQLite backend's default: 100 ms); a machine
    /// crash may lose these, and the loop redoes them.
    Soon,
}

/// What an append wrote: the session's new last seq, and the time (unix
/// ms, the store's clock) recorded on every event of the append — what a
/// caller showing the events must print to match a later read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The seq of the last event now in the log.
    pub last_seq: u64,
    /// `at_ms` of the appended events (0 when none were appended).
    pub at_ms: u64,
}

/// Where a store reads the time. Leases expire by the store's clock, never
/// the caller's, so workers with skewed clocks still agree.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now, unix milliseconds.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        now_ms()
    }
}

/// Now by the system's wall clock, unix milliseconds: the one clock of the
/// host for times it records itself (the store's own times come from its
/// [`Clock`]). A clock set before 1970 reads 0; one past the year 584
/// million reads `u64::MAX`.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A session store. Object-safe (`Arc<dyn Store>`), so the brain, the CLI
/// and the server do not care which backend is behind it.
///
/// The PostgreSQL backend (`postgres`, the cargo feature of that name) implements the same methods with the same
/// guarantees: a transaction per call, the lease token and `last_seq`
/// checked and bumped inside the append's transaction (`SELECT … FOR UPDATE`
/// on the session row), the database's clock for lease expiry.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug {
    /// Creates a session whose log starts with `created` (which must be an
    /// [`Event::SessionCreated`] naming `agent_name`) at seq 1. No lease is
    /// needed: nobody else knows the id yet.
    async fn create(&self, agent_name: &str, created: &Event) -> Result<SessionId>;

    /// Every session, oldest first.
    async fn list(&self) -> Result<Vec<SessionSummary>>;

    /// One session's summary; [`StoreError::NotFound`] if there is none.
    async fn summary(&self, session: &SessionId) -> Result<SessionSummary>;

    /// Takes the session's lease for `owner` for `ttl`.
    ///
    /// - No live lease (none yet, released, or expired): granted with a
    ///   token greater than any before, even when `owner` held the old one.
    /// - A live lease held by `owner`: renewed, same token, new expiry.
    /// - A live lease held by a process of this machine that is gone
    ///   (see [`super::holder`]): taken at once, greater token,
    ///   [`Lease::taken_from`] naming the dead holder.
    /// - A live lease held by someone else: [`StoreError::LeaseHeld`].
    ///
    /// Every grant records the calling process ([`super::holder::Process`])
    /// so that others can judge it the same way.
    async fn acquire_lease(&self, session: &SessionId, owner: &str, ttl: Duration)
    -> Result<Lease>;

    /// Extends `lease` (a heartbeat) by `ttl` from now, keeping its token.
    /// [`StoreError::Fenced`] if it is no longer current, even if it was
    /// merely released. An expired lease that nobody took over is still
    /// current and is renewed.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease>;

    /// Take the lease from `dead_owner`, whose death the caller has proven
    /// (same machine, process gone), without waiting for it to expire. The
    /// new token is greater, so the old holder is fenced should it live
    /// after all. Refused with `LeaseHeld` if someone else holds the lease.
    async fn take_over(
        &self,
        session: &SessionId,
        dead_owner: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease>;

    /// Gives the lease up so another worker need not wait for it to expire.
    /// Doing so with a lease that is no longer current does nothing.
    async fn release(&self, lease: &Lease) -> Result<()>;

    /// Appends `events` at `expected_seq`, `expected_seq + 1`, … atomically,
    /// and returns the new last seq. Durable when it returns
    /// ([`Durability::Now`]); see [`Store::append_with`] for blobs and for
    /// appends that need not be durable at once.
    ///
    /// Refused, with nothing written, if `lease` is not the session's current
    /// lease ([`StoreError::Fenced`], checked first), if `expected_seq` is not
    /// `last_seq + 1` ([`StoreError::SeqConflict`]), or if an event is a
    /// `session_created` or larger than
    /// [`MAX_EVENT_JSON`](super::event::MAX_EVENT_JSON)
    /// ([`StoreError::Invalid`]). An empty `events` checks lease and seq and
    /// returns `expected_seq - 1`.
    ///
    /// A backend implements `append` or [`Store::append_with`] (or both):
    /// each provided method is written with the other, so implementing
    /// neither would loop. Both real backends implement `append_with`, one
    /// transaction for blobs and events, and take this `append`.
    async fn append(
        &self,
        session: &SessionId,
        lease: &Lease,
        expected_seq: u64,
        events: &[Event],
    ) -> Result<u64> {
        self.append_with(
            session,
            lease,
            expected_seq,
            events,
            Vec::new(),
            Durability::Now,
        )
        .await
        .map(|a| a.last_seq)
    }

    /// Appends `events` as [`Store::append`] does, together with the `blobs`
    /// they refer to, in one transaction, with the given [`Durability`]
    /// (`append` is this with no blobs and [`Durability::Now`]). Blobs
    /// already stored are not written again.
    ///
    /// The events are refused, with nothing written, for the reasons
    /// `append` gives. Whether a refused append leaves its blobs behind is
    /// the backend's choice: blobs are content-addressed, so an orphan blob
    /// is harmless (it costs space until blob garbage collection exists).
    /// The SQLite backend writes none. The provided implementation stores
    /// each blob with [`Store::put_blob`] first and then calls `append`, so
    /// it is always durable at once and may leave orphans.
    async fn append_with(
        &self,
        session: &SessionId,
        lease: &Lease,
        expected_seq: u64,
        events: &[Event],
        blobs: Vec<Vec<u8>>,
        durability: Durability,
    ) -> Result<Appended> {
        let _ = durability;
        for bytes in blobs {
            self.put_blob(bytes).await?;
        }
        let last_seq = self.append(session, lease, expected_seq, events).await?;
        // The time is the store's; a backend that cannot return it with
        // the write reads it back.
        let at_ms = match events.is_empty() {
            true => 0,
            false => self
                .read(session, expected_seq)
                .await?
                .first()
                .map_or(0, |r| r.at_ms),
        };
        Ok(Appended { last_seq, at_ms })
    }

    /// The events from `from_seq` (inclusive; 0 and 1 both mean the start)
    /// to the end, verified. Verification of the integrity chain starts at
    /// `from_seq`: the rows before it are trusted, so a full check reads
    /// from 1.
    async fn read(&self, session: &SessionId, from_seq: u64) -> Result<Vec<EventRecord>>;

    /// The session's latest [`Event::Snapshot`] record, verified, if any.
    async fn latest_snapshot(&self, session: &SessionId) -> Result<Option<EventRecord>>;

    /// Stores `bytes` under their digest and returns the reference. Storing
    /// the same bytes again stores nothing and returns the same reference.
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef>;

    /// The bytes behind `blob`, verified against its digest and length:
    /// [`StoreError::Corrupt`] on mismatch, [`StoreError::NotFound`] if the
    /// store never had them.
    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>>;

    /// Posts a control to `session`'s inbox and returns it with its id: the
    /// next after every id the session's inbox ever had (from 1), so two
    /// processes posting at once get distinct ids, in commit order. Durable
    /// when it returns: the poster tells a person it was posted.
    ///
    /// No lease is needed, and none is checked: this is how a process that
    /// does not run the session steers it. Allowed whatever the session's
    /// status: a paused or never-run session reads its inbox when it next
    /// runs; refusing finished sessions is the front end's call (the store
    /// does not judge lifecycles).
    ///
    /// Refused with [`StoreError::NotFound`] if the session does not exist,
    /// [`StoreError::Invalid`] if `text` is longer than
    /// [`MAX_CONTROL_TEXT`](super::inbox::MAX_CONTROL_TEXT) bytes.
    async fn post_control(
        &self,
        session: &SessionId,
        kind: ControlKind,
        text: Option<String>,
        by: &str,
    ) -> Result<Control>;

    /// `session`'s controls with an id greater than `after_id`, oldest
    /// first, handled or not ([`Control::handled_ms`] says which). The lease
    /// holder polls this with the last id its log records as applied (0 at
    /// first), so it is a cheap indexed read when nothing is new.
    /// [`StoreError::NotFound`] if the session does not exist.
    async fn controls(&self, session: &SessionId, after_id: u64) -> Result<Vec<Control>>;

    /// Marks control `id` of `lease.session` handled (sets `handled_ms` to
    /// now; settling a settled control keeps its first time). Fenced like
    /// [`Store::append`]: refused with [`StoreError::Fenced`] unless `lease`
    /// is the session's current lease; [`StoreError::NotFound`] if there is
    /// no such control.
    ///
    /// What "handled" means, and what it does not: the loop first appends
    /// the event(s) that act on the control, carrying its id, and then
    /// settles it. The log is the truth — a crash between the two leaves a
    /// control applied but unsettled, and the loop, which resumes from the
    /// highest id its log records, does not apply it again (it may settle it
    /// late). `handled_ms` is for front ends that show what is pending. Not
    /// necessarily durable when it returns (a lost mark is redone, as
    /// above).
    async fn settle_control(&self, lease: &Lease, id: u64) -> Result<()>;

    /// Deletes `blobs`, the parts of a snapshot that a newer snapshot of
    /// the same session superseded (its root, its history chunks the newer
    /// ones do not share), so the store does not keep a snapshot per 100
    /// events forever. Returns how many were deleted. Refused with
    /// [`StoreError::Fenced`] unless `lease` is the session's current one:
    /// only the session's writer knows which snapshots it wrote.
    ///
    /// What stays: every event (the `snapshot` events too, so the log, its
    /// checksum chain and an audit of it are whole) and every blob an event
    /// refers to. A pruned snapshot's event then names a root that is gone:
    /// only the latest snapshot is ever loaded, and a snapshot is a cache —
    /// a missing part makes `wake` fold the log instead. The caller names
    /// only blobs that its snapshot encoder alone produces (roots and
    /// history chunks): content-addressed, such a blob could be shared only
    /// with an identical snapshot of an identical session, which then
    /// wakes by folding its log.
    ///
    /// The provided implementation keeps everything (returns 0).
    async fn forget_snapshot_blobs(&self, lease: &Lease, blobs: &[BlobRef]) -> Result<u64> {
        let _ = (lease, blobs);
        Ok(0)
    }

    /// Sessions `owner` (a worker) should try to run next: status
    /// `running`, not in `skip` (those it runs already). The worker wakes
    /// each in turn (taking its lease with [`Store::acquire_lease`]) until
    /// it has enough.
    ///
    /// The provided implementation lists every running session, oldest
    /// update first, and leases none of them: two workers may pick the same
    /// session, and the lease decides who runs it (the other is refused
    /// with [`StoreError::LeaseHeld`] and moves on). Fine for the workers of
    /// one machine on SQLite, where a list is a local read.
    ///
    /// A backend for many workers overrides it to **claim**: at most
    /// `limit` sessions whose lease is free or expired, each leased to
    /// `owner` for `ttl` in the same transaction, so no two workers get the
    /// same session and none waits on another's row lock (PostgreSQL:
    /// `SELECT … FOR UPDATE SKIP LOCKED`). The worker's `acquire_lease` then
    /// renews the lease it already holds. A claimed session the worker
    /// cannot wake keeps its lease until the TTL runs out. It also takes
    /// the sessions whose live lease is held by a dead process of this
    /// machine, as `acquire_lease` does, so a worker restarted after a
    /// crash does not wait out its predecessor's leases.
    async fn claim_runnable(
        &self,
        owner: &str,
        ttl: Duration,
        limit: usize,
        skip: &[SessionId],
    ) -> Result<Vec<SessionId>> {
        let _ = (owner, ttl, limit);
        let mut runnable: Vec<SessionSummary> = self
            .list()
            .await?
            .into_iter()
            .filter(|s| s.status == SessionStatus::Running && !skip.contains(&s.id))
            .collect();
        runnable.sort_by_key(|s| s.updated_ms);
        Ok(runnable.into_iter().map(|s| s.id).collect())
    }

    /// Waits until something in the store may have changed — a session
    /// created, events appended, a lease released, a control posted — or
    /// until `timeout` passes, whichever is first. Returns `true` when woken
    /// by a change, `false` on timeout.
    ///
    /// For anyone who polls the store (a worker looking for runnable
    /// sessions, a server streaming a session's events to a browser): call
    /// it between reads instead of sleeping, and re-read after it returns,
    /// whatever it returned. It says *that* something may have changed, not
    /// *what*: wake-ups may be spurious, and a change made between the
    /// caller's last read and this call may not wake it (it then sees the
    /// change after `timeout`), so keep `timeout` at the latency you can
    /// accept without it (a second or so).
    ///
    /// The provided implementation sleeps for `timeout` and returns
    /// `false`: a backend without notifications is polled. The PostgreSQL
    /// backend returns as soon as another connection commits a change
    /// (`LISTEN`/`NOTIFY`), from any machine.
    async fn wait_for_change(&self, timeout: Duration) -> Result<bool> {
        tokio::time::sleep(timeout).await;
        Ok(false)
    }

    /// What `wake` folds: the latest snapshot and the events after it.
    async fn wake_log(&self, session: &SessionId) -> Result<WakeLog> {
        let snapshot = self.latest_snapshot(session).await?;
        let from = match &snapshot {
            Some(EventRecord {
                event: Event::Snapshot { through_seq, .. },
                ..
            }) => through_seq.saturating_add(1),
            _ => 1,
        };
        let tail = self.read(session, from).await?;
        Ok(WakeLog { snapshot, tail })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_sort_by_time_and_parse() {
        let a = SessionId::generate(1_700_000_000_000);
        let b = SessionId::generate(1_700_000_000_001);
        assert!(a < b, "{a} < {b}");
        assert_eq!(a.as_str().len(), 28);
        assert_eq!(a.as_str().parse::<SessionId>().unwrap(), a);
        assert_ne!(SessionId::generate(5), SessionId::generate(5));
        assert!("s-short".parse::<SessionId>().is_err());
        assert!("x-01ARZ3NDEKTSV4RRFFQ69G5FAV".parse::<SessionId>().is_err());
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<SessionId>(&json).unwrap(), a);
        assert!(serde_json::from_str::<SessionId>("\"nope\"").is_err());
    }
}
