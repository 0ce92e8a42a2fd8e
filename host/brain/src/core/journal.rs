//! The journal: the one writer of a session's log and of its folded
//! state. Every event an executor records goes through [`Journal::stage`],
//! which folds it into [`Journal::state`] and queues it; [`Journal::flush`]
//! writes what is queued, with the blobs it refers to, in one append, as
//! durable as its most demanding event requires ([`durability_of`]), and
//! snapshots the state every [`SNAPSHOT_EVERY`] events.
//!
//! So the state never holds what the log will not: it changes only by
//! folding an event this journal appends, with no exception (even the
//! calls of an answer from a log older than `model_responded.calls` are
//! learned by appending `calls_learned`). Nothing else holds a `&mut` of
//! the live state.
//!
//! It owns the session's id, the lease its appends are fenced by, the
//! blobs it wrote or read (bounded), and the appends still in flight. It
//! decides nothing and runs nothing: it is driven by the runner.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::state::{SessionState, repeatable};
use crate::error::{LogError, RunError, inconsistent};
use longhand_session::{
    Appended, BlobRef, Durability, Event, EventRecord, Lease, SessionId, Store, StoreError,
};

/// Snapshot the folded state after this many events.
pub const SNAPSHOT_EVERY: u64 = 100;

/// Snapshots whose blobs a journal keeps in the store: the latest, which a
/// wake loads, and the one before it, in case the latest's append has not
/// reached the store when the next is written. Older ones are forgotten
/// (their events stay): without this the store kept every snapshot, one
/// per 100 events, for the life of the session (issue 26).
pub const SNAPSHOTS_KEPT: usize = 2;

/// Blobs a runner keeps in memory (bytes) before it forgets them; they are
/// read back from the store when needed again. 4 MiB: more than the blobs a
/// request's history refers to under the default context budget, and a
/// bound a session running for days holds flat (at 32 MiB, before issue
/// 26, a long run's RSS grew with its steps until the cache was full).
pub(crate) const BLOB_CACHE_BYTES: usize = 4 << 20;

/// What an append task gives back (its records were shown from the task).
type InFlight = Result<(), StoreError>;

/// A `Soon` append on its way to the store.
struct Pending {
    task: tokio::task::JoinHandle<InFlight>,
    digests: Vec<String>,
    /// Resolves once the append is done, successfully (`Ok`) or not.
    done: tokio::sync::watch::Receiver<Option<bool>>,
}

/// Most `Soon` appends in flight at once. Each waits for the one before
/// it, so the log stays in order; the loop waits only when this many are
/// out, so a failure (a lost lease) stops it within two appends.
const MAX_IN_FLIGHT: usize = 2;

/// Called with every event appended, for progress output.
pub type Observer = Box<dyn FnMut(&EventRecord) + Send + Sync>;

/// The writer of one session's log and of its folded state.
pub struct Journal {
    store: Arc<dyn Store>,
    session: SessionId,
    lease: Lease,
    /// The folded state: every event staged so far, written or not.
    pub(crate) state: SessionState,
    /// Blobs this journal stored or read, by digest (bounded by
    /// [`BLOB_CACHE_BYTES`]).
    blobs: HashMap<String, Arc<Vec<u8>>>,
    blob_bytes: usize,
    /// Full history chunks this journal's snapshots already stored.
    chunks: super::state::snapshot::FullChunks,
    /// The parts (root, history chunks) of the snapshots this journal
    /// wrote that the store still keeps, oldest first: at most
    /// [`SNAPSHOTS_KEPT`] after each snapshot.
    snapshot_parts: VecDeque<Vec<BlobRef>>,
    /// Events folded into `state` but not yet written, and the new blobs
    /// they refer to: written together, in one append, by the next
    /// [`Journal::flush`].
    staged: Vec<Event>,
    staged_blobs: Vec<Vec<u8>>,
    staged_digests: Vec<String>,
    /// `Soon` appends sent and not yet waited for, oldest first, each with
    /// the digests of its blobs (kept in the cache until the store has
    /// them) and a signal that it is done, which the next one waits for.
    in_flight: VecDeque<Pending>,
    /// Shown each append's records as soon as the store has them — from
    /// the append's own task, before the next append may complete, so in
    /// log order — not when the loop next waits for its appends: a loop
    /// blocked in a long tool call or a child session would otherwise hold
    /// back what it wrote before (issue 26: `child_started` printed when
    /// the child ended).
    observer: Arc<std::sync::Mutex<Option<Observer>>>,
}

fn lock(
    observer: &std::sync::Mutex<Option<Observer>>,
) -> std::sync::MutexGuard<'_, Option<Observer>> {
    observer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Show `events`, written from seq `first` by `appended`, to telemetry and
/// the observer. The store's time, so what is shown matches a later read.
fn show_appended(
    observer: &std::sync::Mutex<Option<Observer>>,
    session: &SessionId,
    appended: &Appended,
    first: u64,
    events: &[Event],
) {
    let mut observer = lock(observer);
    for (i, event) in events.iter().enumerate() {
        let record = EventRecord {
            seq: first + i as u64,
            at_ms: appended.at_ms,
            event: event.clone(),
        };
        crate::watch::event(session, &record);
        if let Some(obs) = observer.as_mut() {
            obs(&record);
        }
    }
}

// The loop's clock is the store's (one clock for the whole process).
use longhand_session::now_ms;

/// How soon an event must reach stable storage, by what it announces.
///
/// Fsynced before the loop goes on: a `tool_started` of a call that writes
/// (the record must outlive the effect, so a crash leaves it in doubt
/// rather than run twice), and everything that ends a run or that a person
/// acts on (goal, pause, resume, finish, failure). Everything else can be
/// redone after a machine crash — a model request is sent again, a
/// read-only or idempotent call runs again — so it is written at once
/// (safe from a process crash) and fsynced by the store's next group
/// commit, within its bounded window.
pub fn durability_of(event: &Event) -> Durability {
    match event {
        Event::ToolStarted { effect, .. } if !repeatable(effect) => Durability::Now,
        Event::SessionCreated { .. }
        | Event::Detached { .. }
        | Event::GoalSet { .. }
        | Event::Paused { .. }
        | Event::Resumed { .. }
        | Event::Finished { .. }
        | Event::Failed { .. } => Durability::Now,
        _ => Durability::Soon,
    }
}

impl Journal {
    /// A journal writing `session`'s log under `lease`, from its folded
    /// `state`.
    pub fn new(
        store: Arc<dyn Store>,
        session: SessionId,
        lease: Lease,
        state: SessionState,
    ) -> Self {
        Self {
            store,
            session,
            lease,
            state,
            blobs: HashMap::new(),
            blob_bytes: 0,
            chunks: super::state::snapshot::FullChunks::default(),
            snapshot_parts: VecDeque::new(),
            staged: Vec::new(),
            staged_blobs: Vec::new(),
            staged_digests: Vec::new(),
            in_flight: VecDeque::new(),
            observer: Arc::default(),
        }
    }

    /// Start a session: create its log with `created` (its
    /// `session_created`), lease it for `owner` for `ttl`, and fold that
    /// first event, so a new session's state too is only what its journal
    /// wrote.
    pub async fn create(
        store: Arc<dyn Store>,
        created: Event,
        owner: &str,
        ttl: Duration,
    ) -> Result<Self, RunError> {
        let Event::SessionCreated { agent_name, .. } = &created else {
            return Err(inconsistent("a session's log starts with session_created"));
        };
        let session = store.create(agent_name, &created).await?;
        let lease = store.acquire_lease(&session, owner, ttl).await?;
        let mut state = SessionState::default();
        state.apply(&EventRecord {
            seq: 1,
            at_ms: now_ms(),
            event: created,
        });
        Ok(Self::new(store, session, lease, state))
    }

    /// The session this journal writes.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// The lease its appends are fenced by.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Set the progress observer.
    pub fn observe(&mut self, observer: Observer) {
        *lock(&self.observer) = Some(observer);
    }

    /// Whether an observer is attached.
    pub fn observed(&self) -> bool {
        lock(&self.observer).is_some()
    }

    /// Show the observer `records` (already in the log).
    pub fn show(&mut self, records: &[EventRecord]) {
        if let Some(obs) = lock(&self.observer).as_mut() {
            for record in records {
                obs(record);
            }
        }
    }

    /// Record the calls of the last answer, whose `model_responded`
    /// predates the `calls` field, once the loop has read them from its
    /// blob: staged as `calls_learned` and folded like any event.
    pub fn learn_calls(&mut self, calls: Vec<String>) {
        let Some(step) = self.state.answer.as_ref().map(|a| a.step) else {
            return;
        };
        self.stage(vec![Event::CallsLearned { step, calls }]);
    }

    /// Fold `events` into the state now; they are written by the next
    /// [`Journal::flush`]. The loop decides from the state, so what it has
    /// done counts at once, written or not; a crash before the write loses
    /// only what the log (and so the next worker) will redo.
    pub fn stage(&mut self, events: Vec<Event>) {
        for mut event in events {
            // Explanations carry text a provider or a tool chose (an error
            // body, a call key): cut here, the one door every event passes,
            // so no pause or failure is ever too large to record.
            event.bound_text();
            let record = EventRecord {
                seq: self.state.last_seq + 1,
                at_ms: now_ms(),
                event,
            };
            self.state.apply(&record);
            self.staged.push(record.event);
        }
    }

    /// Stage `events` and write everything staged.
    pub async fn write(&mut self, events: Vec<Event>) -> Result<(), RunError> {
        self.stage(events);
        self.flush().await
    }

    /// Write everything staged, with the blobs it refers to, in one append,
    /// as durable as its most demanding event requires.
    pub async fn flush(&mut self) -> Result<(), RunError> {
        self.append_staged().await?;
        if self.state.since_snapshot >= SNAPSHOT_EVERY {
            let encoded =
                crate::core::state::snapshot::encode_reusing(&self.state, &mut self.chunks);
            let event = Event::Snapshot {
                state: encoded.root,
                through_seq: self.state.last_seq,
            };
            self.staged_blobs.extend(encoded.blobs);
            // Written alone: its fold resets `since_snapshot`.
            self.stage(vec![event]);
            self.append_staged().await?;
            self.forget_old_snapshots(encoded.parts).await;
        }
        Ok(())
    }

    /// Remember `parts` as the newest snapshot's, and ask the store to
    /// forget what of the snapshots before the last [`SNAPSHOTS_KEPT`] no
    /// kept one shares. Housekeeping: a failure is logged, not fatal (the
    /// next append meets a lost lease or a broken store anyway). Snapshots
    /// written before this journal (by the run before a resume) are not
    /// known here and stay.
    async fn forget_old_snapshots(&mut self, parts: Vec<BlobRef>) {
        self.snapshot_parts.push_back(parts);
        while self.snapshot_parts.len() > SNAPSHOTS_KEPT {
            let Some(old) = self.snapshot_parts.pop_front() else {
                break;
            };
            let kept: std::collections::HashSet<&str> = self
                .snapshot_parts
                .iter()
                .flatten()
                .map(|b| b.digest.as_str())
                .collect();
            let forget: Vec<BlobRef> = old
                .into_iter()
                .filter(|b| !kept.contains(b.digest.as_str()))
                .collect();
            if let Err(e) = self.store.forget_snapshot_blobs(&self.lease, &forget).await {
                tracing::warn!(
                    session = %self.session,
                    "could not forget {} blobs of an old snapshot: {e}",
                    forget.len()
                );
            }
        }
    }

    /// Send everything staged to the store in one append. A `Soon` append
    /// is not waited for: its commit overlaps the loop's next work. Each
    /// append waits for the one sent before it, so the log stays in order;
    /// the loop waits once [`MAX_IN_FLIGHT`] are out, before a `Now`
    /// append returns, and at the end of the run, so an error still stops
    /// the run within two appends. A `Now` append is waited for: it is what
    /// makes an effect safe to start.
    async fn append_staged(&mut self) -> Result<(), RunError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.staged);
        let blobs = std::mem::take(&mut self.staged_blobs);
        let digests = std::mem::take(&mut self.staged_digests);
        let durability = if events
            .iter()
            .any(|e| matches!(durability_of(e), Durability::Now))
        {
            Durability::Now
        } else {
            Durability::Soon
        };
        let first = self.state.last_seq + 1 - events.len() as u64;
        let (store, session, lease) =
            (self.store.clone(), self.session.clone(), self.lease.clone());
        let before = self.in_flight.back().map(|p| p.done.clone());
        let (done, done_rx) = tokio::sync::watch::channel(None);
        let observer = self.observer.clone();
        let append = async move {
            // In order: after the append sent before this one.
            if let Some(mut before) = before {
                let ok = match before.wait_for(Option::is_some).await {
                    Ok(state) => *state == Some(true),
                    Err(_) => false,
                };
                if !ok {
                    let _ = done.send(Some(false));
                    return Err(StoreError::Invalid(
                        "an earlier append of this session failed; nothing after it is written"
                            .to_owned(),
                    ));
                }
            }
            let result = store
                .append_with(&session, &lease, first, &events, blobs, durability)
                .await;
            if let Ok(appended) = &result {
                // Before `done`: the next append waits for it, so records
                // are shown in log order.
                show_appended(&observer, &session, appended, first, &events);
            }
            let _ = done.send(Some(result.is_ok()));
            result?;
            Ok::<_, StoreError>(())
        };
        match durability {
            Durability::Now => {
                // Waits for those before it, then for its own fsync. An
                // earlier failure is the one reported.
                let result = append.await;
                self.settle().await?;
                result?;
            }
            Durability::Soon => {
                while self.in_flight.len() >= MAX_IN_FLIGHT {
                    self.settle_oldest().await?;
                }
                self.in_flight.push_back(Pending {
                    task: tokio::spawn(append),
                    digests,
                    done: done_rx,
                });
            }
        }
        if self.blob_bytes > BLOB_CACHE_BYTES {
            // Forget what the store has; keep what it may not have yet.
            let keep: std::collections::HashSet<&String> =
                self.in_flight.iter().flat_map(|p| &p.digests).collect();
            self.blobs.retain(|digest, _| keep.contains(digest));
            self.blob_bytes = self.blobs.values().map(|b| b.len()).sum();
        }
        Ok(())
    }

    /// Wait for every append in flight, and show their records.
    pub async fn settle(&mut self) -> Result<(), RunError> {
        while !self.in_flight.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    async fn settle_oldest(&mut self) -> Result<(), RunError> {
        let Some(pending) = self.in_flight.pop_front() else {
            return Ok(());
        };
        pending
            .task
            .await
            .map_err(|e| RunError::Log(LogError::Task(e.to_string())))??;
        Ok(())
    }

    /// Remember `bytes` as a blob to be written with the next append, and
    /// return its reference. Blobs are content-addressed: one this runner
    /// already stored or read is not written again.
    pub fn put(&mut self, bytes: Vec<u8>) -> BlobRef {
        let blob = BlobRef::of(&bytes);
        if self.blobs.contains_key(&blob.digest) {
            return blob;
        }
        self.blob_bytes += bytes.len();
        self.blobs
            .insert(blob.digest.clone(), Arc::new(bytes.clone()));
        self.staged_blobs.push(bytes);
        self.staged_digests.push(blob.digest.clone());
        blob
    }

    pub async fn get(&mut self, blob: &BlobRef) -> Result<Arc<Vec<u8>>, RunError> {
        if let Some(b) = self.blobs.get(&blob.digest) {
            return Ok(b.clone());
        }
        let bytes = Arc::new(self.store.get_blob(blob).await?);
        self.blob_bytes += bytes.len();
        self.blobs.insert(blob.digest.clone(), bytes.clone());
        Ok(bytes)
    }
}
