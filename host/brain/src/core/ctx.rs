//! What an executor reads and writes: the session's store, the hands that
//! run its tools, its bound (frozen) agent, the tool registry its calls go
//! through, the services it calls (a
//! [`Kit`]), the inbox while running, the lease, the [`Journal`] — the one
//! writer of the log and of the folded state — and the cache of the last
//! request.
//!
//! Every executor (`core::act`, the inbox controls and the approval gate in
//! `control`, the host tools' loop side in `host_tools`) is an
//! `impl Ctx` block: it sees this context and nothing of the runner that
//! drives it. The runner (`core::runner`) owns one `Ctx` and keeps the
//! lifecycle — start, wake, the heartbeat, the loop — above it.
//!
//! Children (a delegated sub-agent, a parallel task) start through one
//! door, [`Launch`]: an executor hands it what the parent lends the child
//! ([`Parent`]) and gets back a [`Child`] to run. The launcher that
//! implements it (`brain::launch`) is the one place runners are built; no
//! executor names the runner.

use std::sync::Arc;

use super::decide::Policy;
use super::journal::Journal;
use super::state::SessionState;
use crate::agent::bind::BoundAgent;
use crate::agent::frozen::Frozen;
use crate::error::{RunError, json_error};
use crate::model::ModelResponse;
use crate::services::Kit;
use crate::tools::{CallCx, Registry};
use longhand_hands::Hands;
use longhand_session::event::{MAX_INLINE_TEXT, bounded};
use longhand_session::{Event, Lease, SessionId, SessionStatus, Store};

/// What `run` ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// Final status: finished, failed or paused.
    pub status: SessionStatus,
    /// Why, for paused and failed sessions; the answer, for finished ones.
    pub detail: Option<String>,
}

/// What a parent lends the child it starts or wakes: its store, its hands,
/// the kit the child's comes from, and its lease and session (the child
/// runs under a child owner of them, see `control::lease::child_owner`).
#[derive(Clone, Copy)]
pub(crate) struct Parent<'a, 'h> {
    pub(crate) store: &'a Arc<dyn Store>,
    pub(crate) hands: &'h Hands,
    pub(crate) kit: &'a Kit,
    pub(crate) lease: &'a Lease,
    pub(crate) session: &'a SessionId,
}

/// Binds a woken child from the frozen agent its own log holds (or
/// refuses it).
pub(crate) type BindChild<'a> = Box<dyn FnOnce(Frozen) -> Result<BoundAgent, RunError> + Send + 'a>;

/// A child session started or woken through [`Launch`], its lease held.
#[async_trait::async_trait]
pub(crate) trait Child: Send + Sync {
    /// Its session id.
    fn session(&self) -> &SessionId;
    /// Its folded state.
    fn state(&self) -> &SessionState;
    /// Run it until it finishes, fails or pauses.
    async fn run(&mut self) -> Result<RunEnd, RunError>;
    /// Give up its lease without running (it runs when woken).
    async fn release(self: Box<Self>);
}

/// The one door children start through.
#[async_trait::async_trait]
pub(crate) trait Launch: Send + Sync {
    /// Create a child session of `agent` with `goal`, its kit from the
    /// parent's, and write `first` after its goal. Nothing is created when
    /// its kit cannot be built ([`RunError::Launch`]).
    async fn start<'h>(
        &self,
        parent: Parent<'_, 'h>,
        agent: BoundAgent,
        goal: &str,
        first: Vec<Event>,
    ) -> Result<Box<dyn Child + 'h>, RunError>;

    /// Wake the child session `session` from its log (folded once), bound
    /// by `bind` from the frozen agent the log holds; a child that paused
    /// is resumed (its parent runs because someone let it go on).
    async fn wake<'h>(
        &self,
        parent: Parent<'_, 'h>,
        session: SessionId,
        bind: BindChild<'_>,
    ) -> Result<Box<dyn Child + 'h>, RunError>;
}

/// What a runner is built from (by the launcher, `brain::launch`): the
/// store, the hands, the bound agent, what it calls and where its children
/// start.
pub(crate) struct Parts<'h> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) hands: &'h Hands,
    pub(crate) agent: BoundAgent,
    /// Every tool the model may call, from the agent's components and the
    /// host's own toolsets.
    pub(crate) tools: Registry,
    pub(crate) kit: Kit,
    pub(crate) launch: &'static dyn Launch,
}

/// What the executors of one session see.
pub(crate) struct Ctx<'h> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) hands: &'h Hands,
    pub(crate) agent: BoundAgent,
    /// The one registry every tool call goes through.
    pub(crate) tools: Registry,
    /// What it calls — each role's provider, the memory bank, the retry
    /// policy — and where its children's come from (see `launch`).
    pub(crate) kit: Kit,
    /// Controls from the session's inbox, while running (see `steer`).
    pub(crate) inbox:
        Option<tokio::sync::mpsc::UnboundedReceiver<longhand_session::inbox::Control>>,
    /// The id of the newest `pause` or `cancel` seen in the inbox, while
    /// running: a model request in flight is dropped for it (see `steer`).
    pub(crate) stop: Option<tokio::sync::watch::Receiver<Option<u64>>>,
    pub(crate) session: SessionId,
    pub(crate) lease: Lease,
    /// The one writer of the log and of the folded state (`journal.state`).
    pub(crate) journal: Journal,
    /// Parts of the last request, kept to build the next one.
    pub(crate) context: crate::core::ask_cache::ContextCache,
    /// Where children start.
    pub(crate) launch: &'static dyn Launch,
    /// The roles whose model has no price, for `decide` (the prices are
    /// frozen: a wake builds a new context).
    unpriced: Vec<crate::core::decide::UnpricedRole>,
}

impl<'h> Ctx<'h> {
    /// The context of the session `journal` writes, under its lease.
    pub(crate) fn new(parts: Parts<'h>, journal: Journal) -> Self {
        let Parts {
            store,
            hands,
            agent,
            tools,
            kit,
            launch,
        } = parts;
        let session = journal.session().clone();
        let lease = journal.lease().clone();
        let mut ctx = Self {
            store,
            hands,
            agent,
            tools,
            kit,
            inbox: None,
            stop: None,
            session,
            lease,
            journal,
            context: crate::core::ask_cache::ContextCache::default(),
            launch,
            unpriced: Vec::new(),
        };
        ctx.unpriced = ctx.unpriced_roles();
        ctx
    }

    /// What a tool call sees of this runner.
    pub(crate) fn call_cx(&self) -> CallCx<'_> {
        CallCx {
            hands: self.hands,
            frozen: &self.agent.frozen,
            memory: self.kit.memory.as_ref(),
            session: self.session.as_str(),
            seq: self.journal.state.last_seq,
        }
    }

    /// What this session lends a child it starts or wakes.
    pub(crate) fn parent(&self) -> Parent<'_, 'h> {
        Parent {
            store: &self.store,
            hands: self.hands,
            kit: &self.kit,
            lease: &self.lease,
            session: &self.session,
        }
    }

    /// What `decide` reads besides the state: the frozen agent's policy.
    /// The one place it is built, for the loop and for the children's
    /// scheduler alike.
    pub(crate) fn policy(&self) -> Policy<'_> {
        Policy {
            limits: &self.agent.frozen.limits,
            has_check: self.agent.frozen.completion.is_some(),
            plan: self.plan_policy(),
            unpriced: &self.unpriced,
        }
    }

    /// Stage `events` in the journal (see [`Journal::stage`]).
    pub(crate) fn stage(&mut self, events: Vec<Event>) {
        self.journal.stage(events);
    }

    /// Stage `events` and write everything staged.
    pub(crate) async fn write(&mut self, events: Vec<Event>) -> Result<(), RunError> {
        self.journal.write(events).await
    }

    /// Write everything staged (see [`Journal::flush`]).
    pub(crate) async fn flush(&mut self) -> Result<(), RunError> {
        self.journal.flush().await
    }

    /// Wait for every append in flight.
    pub(crate) async fn settle(&mut self) -> Result<(), RunError> {
        self.journal.settle().await
    }

    /// A blob to be written with the next append (see [`Journal::put`]).
    pub(crate) fn put(&mut self, bytes: Vec<u8>) -> longhand_session::BlobRef {
        self.journal.put(bytes)
    }

    /// A blob, from the journal's cache or the store.
    pub(crate) async fn get(
        &mut self,
        blob: &longhand_session::BlobRef,
    ) -> Result<Arc<Vec<u8>>, RunError> {
        self.journal.get(blob).await
    }

    /// The last answer, read from its blob.
    pub(crate) async fn last_response(&mut self) -> Result<Option<ModelResponse>, RunError> {
        let Some(answer) = self.journal.state.answer.clone() else {
            return Ok(None);
        };
        let bytes = self.get(&answer.response).await?;
        let parsed = serde_json::from_slice(&bytes).map_err(json_error("a model response blob"))?;
        Ok(Some(parsed))
    }

    /// The `finished` event for a final answer of any size: inline when it
    /// fits [`MAX_INLINE_TEXT`], else a preview plus the whole text as a
    /// blob. Moved, not cut: the answer is what the session was for.
    pub(crate) async fn finished(&mut self, text: String) -> Event {
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
}
