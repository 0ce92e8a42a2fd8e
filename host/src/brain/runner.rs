//! One worker driving one session: ask [`decide::next`] what to do, do it,
//! record it, repeat — keeping nothing between steps that is not in the
//! session log.
//!
//! Every effect is preceded by the event that announces it, durably when
//! the effect could not be repeated: `model_requested` before a request,
//! `tool_started` (fsynced) before a call that writes. So a process killed
//! at any instant can be woken by any other process, which folds the log
//! and continues:
//! - a request without a response is sent again;
//! - a call started but not finished is re-run if its tool is read-only or
//!   idempotent, otherwise recorded as `tool_in_doubt` and the model is told
//!   the outcome is unknown;
//! - tool calls of a recorded response that never started are dispatched.
//!
//! Durability follows the effect (see [`durability_of`]): most events are
//! written at once (visible to every reader, safe from a process crash) and
//! reach stable storage with the store's next group commit; the events that
//! precede an unrepeatable effect or end a run are fsynced before the loop
//! goes on. docs/design.md ("Durability by effect") states the guarantee.
//!
//! This module talks to the store, the hands and a provider through their
//! public APIs only; it does not know SQL, wasmtime or HTTP.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::bind::{BoundAgent, Frozen};
use super::decide::{self, Action, Policy};
use super::launch::{Kit, Services};
use super::lease::{self, Heartbeat};
use super::model::{ModelProvider, ModelResponse, RetryPolicy};
use super::state::{SessionState, repeatable};
use crate::hands::Hands;
use crate::session::event::{MAX_INLINE_TEXT, bounded};
use crate::session::{
    Appended, BlobRef, Durability, Event, EventRecord, Lease, ResumeCause, SessionId,
    SessionStatus, Store, StoreError,
};

/// The longest goal a session accepts, in bytes (64 KiB). The goal is sent
/// in every request and stored inline in `goal_set`; a longer text belongs
/// in a file the agent's tools can read.
pub const MAX_GOAL_BYTES: usize = 64 * 1024;

/// Snapshot the folded state after this many events.
pub const SNAPSHOT_EVERY: u64 = 100;

/// Blobs a runner keeps in memory (bytes) before it forgets them; they are
/// read back from the store when needed again.
const BLOB_CACHE_BYTES: usize = 32 << 20;

/// Errors that stop the loop. Tool and model failures are *not* here: they
/// are recorded and handed to the model or pause the session.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The session store refused or failed (fenced by another writer,
    /// lease lost, I/O). Abort: another worker may own the session now.
    #[error("session store: {0}")]
    Store(#[from] StoreError),
    /// The heartbeat could not keep the lease: another worker took the
    /// session, or the store refused renewals until it ran out. The step in
    /// flight was abandoned.
    #[error("lost the session's lease: {0}")]
    LeaseLost(String),
    /// The agent cannot be assembled (component missing or changed, bad
    /// grant). Fix the configuration.
    #[error("agent: {0}")]
    Agent(#[from] AgentError),
    /// The log holds something this version cannot read. Report it.
    #[error("session log: {0}")]
    Log(#[from] LogError),
    /// A model's provider or the memory bank cannot be set up (see
    /// `brain::launch`). Fix the configuration or the environment.
    #[error("{0}")]
    Launch(#[from] super::launch::LaunchError),
    /// Internal to `run`: a `cancel --now` arrived and the step in flight
    /// was dropped; `run` records it and returns the end, never this.
    #[error("cancelled now")]
    CancelNow(Box<crate::session::inbox::Control>),
}

/// A component as an agent file names it, as an error shows it: cut to a
/// path's length, since the file may say anything.
fn shown(component: &str) -> std::borrow::Cow<'_, str> {
    crate::hands::bound::cut_str(component, crate::hands::bound::MAX_PATH_BYTES)
}

/// Why an agent cannot be frozen or bound. Nothing has run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The instructions cannot be read.
    #[error("instructions: {0}")]
    Instructions(String),
    /// The goal is longer than [`MAX_GOAL_BYTES`].
    #[error(
        "the goal is {bytes} bytes; at most {MAX_GOAL_BYTES} are accepted — put long material \
         in a file the agent's tools can read and name it in the goal"
    )]
    GoalTooLong {
        /// Its length.
        bytes: usize,
    },
    /// A `{run}` directory cannot be created.
    #[error("cannot create the run directory {path}: {source}")]
    RunDir {
        /// The directory, as written with `{run}` filled in.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A component cannot be loaded (missing, not a component, refused for
    /// its imports…).
    #[error("{0}")]
    Load(#[from] crate::hands::LoadError),
    /// The plan file is invalid or names what the agent does not have.
    #[error("{0}")]
    Plan(String),
    /// `only` names a tool the component does not offer.
    #[error(
        "tool {}: `only` names `{}`, which this component does not offer; it offers: {offered}",
        shown(.component),
        crate::hands::bound::name(.name)
    )]
    UnknownTool {
        /// The component as configured.
        component: String,
        /// The name that is not offered.
        name: String,
        /// What it offers, comma-separated.
        offered: String,
    },
    /// A grant is invalid (an unset variable, a bad directory, a bad limit).
    #[error("tool {}: {source}", shown(.component))]
    Grant {
        /// The component as configured.
        component: String,
        /// Why.
        source: crate::hands::GrantError,
    },
    /// The component's binary is not the one the session was started with.
    #[error(
        "component {} changed since the session started (was {was}, now {now}); its grants are \
         not carried over to a different binary",
        shown(.component)
    )]
    Changed {
        /// The component as configured.
        component: String,
        /// The digest frozen into the session.
        was: String,
        /// The digest found now.
        now: String,
    },
}

/// What in a session's log this version cannot read or write.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A stored JSON value (a blob or the frozen agent) does not decode,
    /// or a value cannot be encoded.
    #[error("{what}: {source}")]
    Json {
        /// Which value.
        what: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// The log's events contradict each other (an event names what the
    /// log does not hold).
    #[error("{0}")]
    Inconsistent(String),
    /// An append task stopped without an answer (it panicked or was
    /// cancelled).
    #[error("an append task failed: {0}")]
    Task(String),
}

/// A JSON error about `what` as a [`RunError`].
pub(super) fn json_error(what: &'static str) -> impl Fn(serde_json::Error) -> RunError {
    move |source| RunError::Log(LogError::Json { what, source })
}

/// What `run` ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// Final status: finished, failed or paused.
    pub status: SessionStatus,
    /// Why, for paused and failed sessions; the answer, for finished ones.
    pub detail: Option<String>,
}

/// What an append task gives back: the store's answer, the first seq and
/// the events (for the observer).
type InFlight = Result<(Appended, u64, Vec<Event>), StoreError>;

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
pub type Observer = Box<dyn FnMut(&EventRecord, &SessionState) + Send + Sync>;

/// One worker driving one session.
pub struct Runner<'h> {
    pub(super) store: Arc<dyn Store>,
    pub(super) hands: &'h Hands,
    pub(super) agent: BoundAgent,
    /// What it calls — each role's provider, the memory bank, the retry
    /// policy — and where its children's come from (see `launch`).
    pub(super) kit: Kit,
    /// Controls from the session's inbox, while running (see `steer`).
    pub(super) inbox: Option<tokio::sync::mpsc::UnboundedReceiver<crate::session::inbox::Control>>,
    /// The id of the newest `pause` or `cancel` seen in the inbox, while
    /// running: a model request in flight is dropped for it (see `steer`).
    pub(super) stop: Option<tokio::sync::watch::Receiver<Option<u64>>>,
    pub(super) session: SessionId,
    pub(super) lease: Lease,
    pub(super) lease_ttl: Duration,
    pub(super) state: SessionState,
    /// Blobs this runner stored or read, by digest (bounded by
    /// [`BLOB_CACHE_BYTES`]).
    blobs: HashMap<String, Arc<Vec<u8>>>,
    blob_bytes: usize,
    /// Full history chunks this runner's snapshots already stored.
    chunks: super::snapshot::FullChunks,
    /// Parts of the last request, kept to build the next one.
    pub(super) context: super::turn::ContextCache,
    /// Events folded into `state` but not yet written, and the new blobs
    /// they refer to: written together, in one append, by the next
    /// [`Runner::flush`].
    staged: Vec<Event>,
    staged_blobs: Vec<Vec<u8>>,
    staged_digests: Vec<String>,
    /// `Soon` appends sent and not yet waited for, oldest first, each with
    /// the digests of its blobs (kept in the cache until the store has
    /// them) and a signal that it is done, which the next one waits for.
    in_flight: VecDeque<Pending>,
    observer: Option<Observer>,
    /// Set when waking found the session left running by a worker that
    /// stopped without pausing: recorded as a `resumed` event at `run`.
    recovered: Option<(ResumeCause, String)>,
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

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

impl<'h> Runner<'h> {
    /// Create a session for `agent` with `goal`, and lease it; `provider`
    /// answers every model of it and of its children. A goal longer than
    /// [`MAX_GOAL_BYTES`] is refused before anything is created.
    pub async fn start(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        provider: Arc<dyn ModelProvider>,
        goal: &str,
        owner: &str,
    ) -> Result<Self, RunError> {
        let kit = Arc::new(Services::answering(provider)).kit(&agent.frozen)?;
        Self::start_with(store, hands, agent, kit, goal, owner).await
    }

    /// [`Runner::start`] calling what `kit` holds (built for this agent by
    /// [`Services::kit`]).
    pub async fn start_with(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        kit: Kit,
        goal: &str,
        owner: &str,
    ) -> Result<Self, RunError> {
        if goal.len() > MAX_GOAL_BYTES {
            return Err(AgentError::GoalTooLong { bytes: goal.len() }.into());
        }
        let agent_json = serde_json::to_value(&agent.frozen).map_err(json_error("the agent"))?;
        let config_digest = digest_hex(agent_json.to_string().as_bytes());
        let created = Event::SessionCreated {
            agent_name: agent.frozen.name.clone(),
            agent: agent_json,
            config_digest,
        };
        let session = store.create(&agent.frozen.name, &created).await?;
        let ttl = lease::ttl();
        let lease = store.acquire_lease(&session, owner, ttl).await?;
        // The first event is the one just written: fold it without a read.
        let mut state = SessionState::default();
        state.apply(&EventRecord {
            seq: 1,
            at_ms: now_ms(),
            event: created,
        });
        let mut runner = Self::new(store, hands, agent, kit, session, lease, ttl, state);
        runner
            .write(vec![Event::GoalSet {
                goal: goal.to_owned(),
            }])
            .await?;
        Ok(runner)
    }

    /// Wake a session from its log (latest snapshot plus tail) and lease it;
    /// `provider` answers every model of it and of its children. The agent
    /// must be bound from the session's own frozen config; see
    /// [`Runner::frozen_of`].
    pub async fn wake(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        provider: Arc<dyn ModelProvider>,
        session: SessionId,
        owner: &str,
    ) -> Result<Self, RunError> {
        let kit = Arc::new(Services::answering(provider)).kit(&agent.frozen)?;
        Self::wake_with(store, hands, agent, kit, session, owner).await
    }

    /// [`Runner::wake`] calling what `kit` holds (built for the session's
    /// frozen agent by [`Services::kit`]).
    pub async fn wake_with(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        kit: Kit,
        session: SessionId,
        owner: &str,
    ) -> Result<Self, RunError> {
        let ttl = lease::ttl();
        // The store takes a lease whose holder is a dead process of this
        // machine at once (`session::holder`), and says whose it was.
        let lease = store.acquire_lease(&session, owner, ttl).await?;
        let taken_from = lease.taken_from.clone();
        let state = super::snapshot::load_state(store.as_ref(), &session).await?;
        let mut runner = Self::new(store, hands, agent, kit, session, lease, ttl, state);
        // Every run ends finished, failed or paused; a session found
        // created or running was left by a worker that stopped mid-run.
        if matches!(
            runner.state.status,
            SessionStatus::Created | SessionStatus::Running
        ) && !runner.state.awaiting_worker
        {
            runner.recovered = Some(match taken_from {
                Some(holder) => (
                    ResumeCause::TakeOver,
                    format!("taken over from {holder}, which is no longer running"),
                ),
                None => (
                    ResumeCause::Crash,
                    "the last worker stopped without pausing or finishing (killed, crashed or \
                     lost its store); carrying on from the log"
                        .to_owned(),
                ),
            });
        }
        Ok(runner)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "private constructor of the two doors above"
    )]
    fn new(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        kit: Kit,
        session: SessionId,
        lease: Lease,
        lease_ttl: Duration,
        state: SessionState,
    ) -> Self {
        Self {
            store,
            hands,
            agent,
            kit,
            inbox: None,
            stop: None,
            session,
            lease,
            lease_ttl,
            state,
            blobs: HashMap::new(),
            blob_bytes: 0,
            context: super::turn::ContextCache::default(),
            chunks: super::snapshot::FullChunks::default(),
            staged: Vec::new(),
            staged_blobs: Vec::new(),
            staged_digests: Vec::new(),
            in_flight: VecDeque::new(),
            observer: None,
            recovered: None,
        }
    }

    /// The frozen agent recorded in a session's first event.
    pub async fn frozen_of(store: &dyn Store, session: &SessionId) -> Result<Frozen, RunError> {
        // From the latest snapshot and its tail, not by reading the log
        // from seq 1: `store.read(session, 1)` returns every event, which
        // made waking a million-event session cost a full read.
        let state = super::agent::load_state(store, session).await?;
        if state.agent.is_null() {
            return Err(RunError::Log(LogError::Inconsistent(
                "the log does not start with session_created".to_owned(),
            )));
        }
        serde_json::from_value(state.agent).map_err(json_error("the frozen agent"))
    }

    /// Leave the session to another worker: give up the lease without
    /// running. (Everything written so far is durable.)
    pub async fn detach(mut self) -> Result<(), RunError> {
        let by = self.lease.owner.clone();
        let written = self.write(vec![Event::Detached { by }]).await;
        let _ = self.settle().await;
        let _ = self.store.release(&self.lease).await;
        written
    }

    /// Set the progress observer.
    pub fn observe(&mut self, observer: Observer) {
        self.observer = Some(observer);
    }

    /// Show the observer the events already in the log from `from_seq` on
    /// (those written before it was attached).
    pub async fn replay_to_observer(&mut self, from_seq: u64) -> Result<(), RunError> {
        if self.observer.is_none() || from_seq > self.state.last_seq {
            return Ok(());
        }
        let records = self.store.read(&self.session, from_seq).await?;
        if let Some(obs) = self.observer.as_mut() {
            for record in records.iter().filter(|r| r.seq <= self.state.last_seq) {
                obs(record, &self.state);
            }
        }
        Ok(())
    }

    /// Use a different retry policy for model calls (its children's too).
    pub fn set_retry(&mut self, retry: RetryPolicy) {
        self.kit.retry = retry;
    }

    /// Renew the lease for `ttl` at a time (every `ttl / 3`) from now on.
    /// Default [`LEASE_TTL`](super::lease::LEASE_TTL).
    pub fn set_lease_ttl(&mut self, ttl: Duration) {
        self.lease_ttl = ttl;
    }

    /// The session id.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// The folded state.
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// Record a resume (with raised limits) if the session is paused.
    pub async fn resume(&mut self, raised: BTreeMap<String, u64>) -> Result<(), RunError> {
        if self.state.status == SessionStatus::Paused || !raised.is_empty() {
            self.supersede_pauses().await?;
            // An operator's resume says all a recovery note would.
            self.recovered = None;
            self.write(vec![Event::Resumed {
                raised,
                note: None,
                cause: ResumeCause::Operator,
            }])
            .await?;
        }
        Ok(())
    }

    /// Run until the session finishes, fails or pauses.
    ///
    /// A heartbeat renews the lease every third of its TTL while this runs,
    /// whatever the loop is waiting on. If the lease is lost (another
    /// worker took the session), the step in flight is dropped at once —
    /// a model request is abandoned, a tool call's future is dropped — and
    /// `run` returns [`RunError::LeaseLost`]; nothing more is written.
    pub async fn run(&mut self) -> Result<RunEnd, RunError> {
        let span = crate::telemetry::run_started(
            &self.session,
            &self.state.agent_name,
            self.state.parent.as_deref(),
        );
        let end = self.run_traced().await;
        match &end {
            Ok(end) => span.end(end.status.as_str(), None),
            Err(e) => span.end(self.state.status.as_str(), Some(e.to_string())),
        }
        end
    }

    async fn run_traced(&mut self) -> Result<RunEnd, RunError> {
        let heartbeat = Heartbeat::start(self.store.clone(), self.lease.clone(), self.lease_ttl);
        let mut lost = heartbeat.lost();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (now_tx, mut now_rx) = tokio::sync::watch::channel(None);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(None);
        let poller = super::steer::Poller::start(
            self.store.clone(),
            self.session.clone(),
            self.state.last_control,
            tx,
            now_tx,
            stop_tx,
        )
        .await;
        self.inbox = Some(rx);
        self.stop = Some(stop_rx);
        let end = tokio::select! {
            end = self.run_inner() => end,
            why = lost.wait() => Err(RunError::LeaseLost(why)),
            Some(control) = super::steer::cancel_requested(&mut now_rx) => Err(
                // `cancel --now`: the step in flight is dropped here; it
                // is recorded below, with the step's future gone.
                RunError::CancelNow(Box::new(control)),
            ),
        };
        let end = match end {
            Err(RunError::CancelNow(control)) => match self.cancel_now(*control).await {
                Ok(()) => self.end(self.state.status).await,
                Err(e) => Err(e),
            },
            other => other,
        };
        poller.stop();
        self.inbox = None;
        self.stop = None;
        heartbeat.stop();
        // Appends still on their way land before the lease is given up (a
        // released lease no longer writes). After a lost lease they are
        // refused anyway; their error is not the one to report.
        let settled = match &end {
            Err(RunError::LeaseLost(_)) => Ok(()),
            _ => self.settle().await,
        };
        lease::release(self.store.clone(), self.lease.clone(), self.lease_ttl).await;
        match (end, settled) {
            (Ok(_), Err(e)) => Err(e),
            (end, _) => end,
        }
    }

    async fn run_inner(&mut self) -> Result<RunEnd, RunError> {
        if let Some((cause, note)) = self.recovered.take() {
            self.write(vec![Event::Resumed {
                raised: BTreeMap::new(),
                note: Some(note),
                cause,
            }])
            .await?;
        }
        loop {
            self.apply_controls().await?;
            let policy = Policy {
                limits: &self.agent.frozen.limits,
                has_check: self.agent.frozen.completion.is_some(),
                plan: self.plan_policy(),
            };
            let policy_planned = policy.plan.is_some();
            let action = decide::next(&self.state, policy);
            // Staged events ride along with the next request's record; any
            // other action writes them first (nothing else carries them).
            if !matches!(action, Action::Ask { .. }) {
                self.flush().await?;
            }
            match action {
                Action::Stop(status) => return self.end(status).await,
                Action::LearnCalls => self.learn_calls().await?,
                Action::Recover(calls) => self.recover(calls).await?,
                Action::Pause(reason) => self.write(vec![Event::Paused { reason }]).await?,
                Action::Dispatch { step, calls } => self.dispatch_pending(step, calls).await?,
                Action::Check { step } => self.check(step).await?,
                Action::Finish if policy_planned => self.finish_plan().await?,
                Action::Finish => self.finish().await?,
                Action::Ask { role, step } => self.ask(role, step).await?,
                Action::CreatePlan => self.create_plan().await?,
                Action::StartPlanner(purpose) => self.start_planner(purpose).await?,
                Action::AcceptPlan { step } => self.accept_plan(step).await?,
                Action::StartTask(task) => self.start_task(task).await?,
                Action::RunCheck { task, check } => self.run_check(task, check).await?,
                Action::StartJudge { task, check } => self.start_judge(task, check).await?,
                Action::AcceptVerdict { step } => self.accept_verdict(step).await?,
                Action::FinishTask { task, done } => self.finish_task(task, done).await?,
                Action::StartChild(task) => self.start_child(task).await?,
                Action::AwaitChildren(children) => self.await_children(children).await?,
                Action::AcceptHandoff => self.accept_handoff().await?,
            }
        }
    }

    async fn end(&mut self, status: SessionStatus) -> Result<RunEnd, RunError> {
        self.settle().await?;
        let detail = match status {
            SessionStatus::Finished => match self.state.summary_blob.clone() {
                Some(blob) => Some(String::from_utf8_lossy(&self.get(&blob).await?).into_owned()),
                None => self.state.summary.clone(),
            },
            SessionStatus::Failed => self.state.error.clone(),
            _ => self.state.pause.as_ref().map(|p| p.detail.clone()),
        };
        Ok(RunEnd { status, detail })
    }

    /// The last answer, read from its blob.
    pub(super) async fn last_response(&mut self) -> Result<Option<ModelResponse>, RunError> {
        let Some(answer) = self.state.answer.clone() else {
            return Ok(None);
        };
        let bytes = self.get(&answer.response).await?;
        let parsed = serde_json::from_slice(&bytes).map_err(json_error("a model response blob"))?;
        Ok(Some(parsed))
    }

    async fn learn_calls(&mut self) -> Result<(), RunError> {
        let calls = self
            .last_response()
            .await?
            .map(|r| r.tool_calls.into_iter().map(|c| c.id).collect())
            .unwrap_or_default();
        self.state.learn_calls(calls);
        Ok(())
    }

    /// Finish with the last answer's text.
    async fn finish(&mut self) -> Result<(), RunError> {
        let text = self
            .last_response()
            .await?
            .and_then(|r| r.text)
            .unwrap_or_default();
        let finished = self.finished(text).await;
        self.write(vec![finished]).await
    }

    /// The `finished` event for a final answer of any size: inline when it
    /// fits [`MAX_INLINE_TEXT`], else a preview plus the whole text as a
    /// blob. Moved, not cut: the answer is what the session was for.
    pub(super) async fn finished(&mut self, text: String) -> Event {
        if text.len() <= MAX_INLINE_TEXT {
            return Event::Finished {
                summary: Some(text),
                summary_blob: None,
            };
        }
        let summary = Some(bounded(&text).into_owned());
        let blob = self.put(text.into_bytes());
        Event::Finished {
            summary,
            summary_blob: Some(blob),
        }
    }

    /// Fold `events` into the state now; they are written by the next
    /// [`Runner::flush`]. The loop decides from the state, so what it has
    /// done counts at once, written or not; a crash before the write loses
    /// only what the log (and so the next worker) will redo.
    pub(super) fn stage(&mut self, events: Vec<Event>) {
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
    pub(super) async fn write(&mut self, events: Vec<Event>) -> Result<(), RunError> {
        self.stage(events);
        self.flush().await
    }

    /// Write everything staged, with the blobs it refers to, in one append,
    /// as durable as its most demanding event requires.
    pub(super) async fn flush(&mut self) -> Result<(), RunError> {
        self.append_staged().await?;
        if self.state.since_snapshot >= SNAPSHOT_EVERY {
            let encoded = super::snapshot::encode_reusing(&self.state, &mut self.chunks);
            let event = Event::Snapshot {
                state: encoded.root,
                through_seq: self.state.last_seq,
            };
            self.staged_blobs.extend(encoded.blobs);
            // Written alone: its fold resets `since_snapshot`.
            self.stage(vec![event]);
            self.append_staged().await?;
        }
        Ok(())
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
            let _ = done.send(Some(result.is_ok()));
            Ok::<_, StoreError>((result?, first, events))
        };
        match durability {
            Durability::Now => {
                // Waits for those before it, then for its own fsync. An
                // earlier failure is the one reported.
                let result = append.await;
                self.settle().await?;
                let (appended, first, events) = result?;
                self.observe_appended(appended, first, events);
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
    pub(super) async fn settle(&mut self) -> Result<(), RunError> {
        while !self.in_flight.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    async fn settle_oldest(&mut self) -> Result<(), RunError> {
        let Some(pending) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let (appended, first, events) = pending
            .task
            .await
            .map_err(|e| RunError::Log(LogError::Task(e.to_string())))??;
        self.observe_appended(appended, first, events);
        Ok(())
    }

    fn observe_appended(&mut self, appended: Appended, first: u64, events: Vec<Event>) {
        // The store's time, so what is shown matches a later read.
        for (i, event) in events.into_iter().enumerate() {
            let record = EventRecord {
                seq: first + i as u64,
                at_ms: appended.at_ms,
                event,
            };
            crate::telemetry::observe(&self.session, &record);
            if let Some(obs) = self.observer.as_mut() {
                obs(&record, &self.state);
            }
        }
    }

    /// Remember `bytes` as a blob to be written with the next append, and
    /// return its reference. Blobs are content-addressed: one this runner
    /// already stored or read is not written again.
    pub(super) fn put(&mut self, bytes: Vec<u8>) -> BlobRef {
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

    pub(super) async fn get(&mut self, blob: &BlobRef) -> Result<Arc<Vec<u8>>, RunError> {
        if let Some(b) = self.blobs.get(&blob.digest) {
            return Ok(b.clone());
        }
        let bytes = Arc::new(self.store.get_blob(blob).await?);
        self.blob_bytes += bytes.len();
        self.blobs.insert(blob.digest.clone(), bytes.clone());
        Ok(bytes)
    }
}

pub(super) fn digest_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Compile-time check: a runner's `run` future can be spawned on a
/// multi-threaded runtime (one process drives many sessions on tokio).
#[cfg(test)]
fn _run_is_send<'a>(
    runner: &'a mut Runner<'a>,
) -> impl Future<Output = Result<RunEnd, RunError>> + Send + 'a {
    runner.run()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::brain::bind::{bind, freeze};
    use crate::brain::config::AgentConfig;
    use crate::brain::model::{ModelError, ModelRequest};
    use crate::hands::HandsConfig;
    use crate::session::SqliteStore;

    /// A model that never answers.
    struct Hangs;

    #[async_trait::async_trait]
    impl ModelProvider for Hangs {
        fn name(&self) -> &str {
            "hangs"
        }
        fn model(&self) -> &str {
            "hangs"
        }
        async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
            std::future::pending().await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_that_loses_its_lease_stops_within_a_second() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(
            dir.path().join("agent.toml"),
            "name = \"held\"\ninstructions = \"x\"\n[model]\nprovider = \"openai\"\n\
             model = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        )
        .unwrap();
        let (config, base) = AgentConfig::load(dir.path()).unwrap();
        let hands = Hands::new(HandsConfig::default()).unwrap();
        let frozen = freeze(&hands, &config, &base, |_| None).await.unwrap();
        let agent = bind(&hands, frozen, |_| None).await.unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
        let mut runner = Runner::start(store.clone(), &hands, agent, Arc::new(Hangs), "g", "me-1")
            .await
            .unwrap();
        runner.set_lease_ttl(Duration::from_millis(300));
        let session = runner.session().clone();
        let run = async {
            let end = runner.run().await;
            (end, Instant::now())
        };
        let thief = async {
            // The runner is inside the model call by now.
            tokio::time::sleep(Duration::from_millis(400)).await;
            let taken = store
                .take_over(&session, "me-1", "thief", Duration::from_secs(60))
                .await
                .unwrap();
            (taken, Instant::now())
        };
        let ((end, ended), (taken, took)) = tokio::join!(run, thief);
        assert_eq!(taken.owner, "thief");
        let err = end.expect_err("the run must stop");
        assert!(matches!(err, RunError::LeaseLost(_)), "{err}");
        let late = ended.duration_since(took);
        assert!(
            late < Duration::from_secs(1),
            "stopped {late:?} after losing the lease"
        );
        // It wrote nothing after losing it: the thief's lease appends at
        // the next seq.
        let state = super::super::snapshot::load_state(store.as_ref(), &session)
            .await
            .unwrap();
        assert_eq!(
            store
                .append(
                    &session,
                    &taken,
                    state.last_seq + 1,
                    &[Event::GoalSet {
                        goal: "next".into()
                    }]
                )
                .await
                .unwrap(),
            state.last_seq + 1
        );
    }
}
