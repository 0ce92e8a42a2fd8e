//! The one place runners are built: a session started here
//! ([`Launcher::start`]), one woken from its log ([`Launcher::wake`]) —
//! `resume`, a `longhand worker`, `serve` — and a parent's children (a
//! delegated sub-agent, a parallel task's child session), which the
//! executors start through the [`Launch`] door this module implements.
//!
//! A wake folds the log once ([`Waking::load`]): the frozen agent the
//! runner is bound from and the state it runs on are the same fold. The
//! lease is taken after binding (binding may take a while), and the events
//! written meanwhile, if any, are folded in after it.
//!
//! What a runner calls is built by [`Services`] (`brain::services`); this
//! module decides nothing about a session and writes no event but the ones
//! a runner writes when it is created.

use std::sync::Arc;

use crate::agent::bind::BoundAgent;
use crate::agent::frozen::Frozen;
use crate::control::lease;
use crate::core::ctx::{BindChild, Child, Launch, Parent, Parts};
use crate::core::runner::Runner;
use crate::core::state::SessionState;
use crate::core::state::snapshot;
use crate::error::{LogError, RunError, inconsistent};
use crate::model::ModelProvider;
use longhand_hands::Hands;
use longhand_session::{SessionId, SessionStatus, Store};

use crate::services::{Kit, Services};

/// Builds the runners of one store and one tool host.
pub struct Launcher<'h> {
    store: Arc<dyn Store>,
    hands: &'h Hands,
}

/// A session's log folded once, to wake it from: its state and the frozen
/// agent in its first event.
pub struct Waking {
    session: SessionId,
    state: SessionState,
}

impl Waking {
    /// Fold `session` from its latest snapshot and the events after it.
    pub async fn load(store: &dyn Store, session: SessionId) -> Result<Self, RunError> {
        let state = snapshot::load_state(store, &session).await?;
        Ok(Self { session, state })
    }

    /// The folded state.
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// The frozen agent recorded in the session's first event.
    pub fn frozen(&self) -> Result<Frozen, RunError> {
        match (&self.state.agent, &self.state.agent_unreadable) {
            (Some(agent), _) => Ok(agent.get().clone()),
            (None, Some(why)) => Err(LogError::Agent(why.clone()).into()),
            (None, None) => Err(inconsistent("the log does not start with session_created")),
        }
    }
}

/// The frozen agent recorded in a session's first event (read from the
/// latest snapshot and its tail, not from seq 1).
pub async fn frozen_of(store: &dyn Store, session: &SessionId) -> Result<Frozen, RunError> {
    Waking::load(store, session.clone()).await?.frozen()
}

impl<'h> Launcher<'h> {
    /// Runners of `store`, their tools run by `hands`.
    pub fn new(store: Arc<dyn Store>, hands: &'h Hands) -> Self {
        Self { store, hands }
    }

    fn parts(&self, agent: BoundAgent, kit: Kit) -> Parts<'h> {
        // The registry: the agent's components first, its MCP servers, then the host's own
        // toolsets, in the order the model reads them.
        let mut sets = crate::tools::component::sets(&agent);
        sets.extend(crate::tools::mcp::sets(&agent));
        sets.extend(crate::host_tools::sets());
        let offer = crate::tools::Offer {
            frozen: &agent.frozen,
            memory: kit.memory.as_ref(),
        };
        let tools = crate::tools::Registry::new(sets, &offer);
        Parts {
            store: Arc::clone(&self.store),
            hands: self.hands,
            agent,
            tools,
            kit,
            launch: &CHILDREN,
        }
    }

    /// Create a session for `agent` with `goal`, calling what `kit` holds
    /// (built for this agent by [`Services::kit`]), and lease it for
    /// `owner`.
    pub async fn start(
        &self,
        agent: BoundAgent,
        kit: Kit,
        goal: &str,
        owner: &str,
    ) -> Result<Runner<'h>, RunError> {
        Runner::create(self.parts(agent, kit), goal, owner).await
    }

    /// Wake the session `waking` folded, bound as `agent` (from its own
    /// frozen config, [`Waking::frozen`]) and calling what `kit` holds, and
    /// lease it for `owner`. Events written since the fold are folded in
    /// once the lease is held.
    pub async fn wake(
        &self,
        waking: Waking,
        agent: BoundAgent,
        kit: Kit,
        owner: &str,
    ) -> Result<Runner<'h>, RunError> {
        let Waking { session, mut state } = waking;
        let ttl = lease::ttl();
        // The store takes a lease whose holder is a dead process of this
        // machine at once (`session::holder`), and says whose it was.
        let lease = self.store.acquire_lease(&session, owner, ttl).await?;
        for record in self.store.read(&session, state.last_seq + 1).await? {
            state.apply(&record);
        }
        Ok(Runner::woken(
            self.parts(agent, kit),
            session,
            lease,
            ttl,
            state,
        ))
    }
}

/// Runners built for tests, benches and embedders: every model of the
/// session and of its children answered by one provider.
impl<'h> Runner<'h> {
    /// Create a session for `agent` with `goal`, and lease it; `provider`
    /// answers every model of it and of its children. A goal longer than
    /// [`MAX_GOAL_BYTES`](crate::MAX_GOAL_BYTES) is refused before
    /// anything is created.
    pub async fn start(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        provider: Arc<dyn ModelProvider>,
        goal: &str,
        owner: &str,
    ) -> Result<Self, RunError> {
        let kit = Arc::new(Services::answering(provider)).kit(&agent.frozen)?;
        Launcher::new(store, hands)
            .start(agent, kit, goal, owner)
            .await
    }

    /// Wake a session from its log (latest snapshot plus tail) and lease
    /// it; `provider` answers every model of it and of its children. The
    /// agent must be bound from the session's own frozen config; see
    /// [`frozen_of`].
    pub async fn wake(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        provider: Arc<dyn ModelProvider>,
        session: SessionId,
        owner: &str,
    ) -> Result<Self, RunError> {
        let kit = Arc::new(Services::answering(provider)).kit(&agent.frozen)?;
        let waking = Waking::load(store.as_ref(), session).await?;
        Launcher::new(store, hands)
            .wake(waking, agent, kit, owner)
            .await
    }
}

/// How executors start children: runners built here, their kits from the
/// parent's ([`Kit::child`]), leased under a child owner of the parent's
/// lease (`lease::child_owner`).
struct Children;

/// The one [`Launch`] every runner hands its executors.
static CHILDREN: Children = Children;

#[async_trait::async_trait]
impl Launch for Children {
    async fn start<'h>(
        &self,
        parent: Parent<'_, 'h>,
        agent: BoundAgent,
        goal: &str,
        first: Vec<longhand_session::Event>,
    ) -> Result<Box<dyn Child + 'h>, RunError> {
        let kit = parent.kit.child(&agent.frozen)?;
        let owner = lease::child_owner(&parent.lease.owner, parent.session);
        let mut runner = Launcher::new(Arc::clone(parent.store), parent.hands)
            .start(agent, kit, goal, &owner)
            .await?;
        if !first.is_empty() {
            runner.ctx.write(first).await?;
        }
        Ok(Box::new(runner))
    }

    async fn wake<'h>(
        &self,
        parent: Parent<'_, 'h>,
        session: SessionId,
        bind: BindChild<'_>,
    ) -> Result<Box<dyn Child + 'h>, RunError> {
        let waking = Waking::load(parent.store.as_ref(), session).await?;
        let agent = bind(waking.frozen()?)?;
        let kit = parent.kit.child(&agent.frozen)?;
        let owner = lease::child_owner(&parent.lease.owner, parent.session);
        let mut runner = Launcher::new(Arc::clone(parent.store), parent.hands)
            .wake(waking, agent, kit, &owner)
            .await?;
        // The parent runs because someone let it go on: a child that
        // paused (and paused the parent) goes on with it.
        if runner.state().status == SessionStatus::Paused {
            runner.resume(Default::default()).await?;
        }
        Ok(Box::new(runner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::config::AgentConfig;
    use crate::agent::freeze::freeze;
    use crate::model::{ModelError, ModelRequest, ModelResponse};
    use longhand_hands::HandsConfig;
    use longhand_session::{Event, SqliteStore};

    /// A model never asked (nothing here runs a turn).
    struct Unasked;

    #[async_trait::async_trait]
    impl ModelProvider for Unasked {
        fn name(&self) -> &str {
            "unasked"
        }
        fn model(&self) -> &str {
            "unasked"
        }
        async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
            std::future::pending().await
        }
    }

    async fn agent(dir: &std::path::Path, hands: &Hands) -> BoundAgent {
        std::fs::write(
            dir.join("agent.toml"),
            "name = \"held\"\ninstructions = \"x\"\n[model]\nprovider = \"openai\"\n\
             model = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        )
        .unwrap();
        let (config, base) = AgentConfig::load(dir).unwrap();
        let frozen = freeze(hands, &config, &base, |_| None).await.unwrap();
        crate::agent::bind::bind(hands, frozen, |_| None)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_wake_folds_the_log_once_then_the_events_written_after_that_fold() {
        let dir = tempfile::TempDir::new().unwrap();
        let hands = Hands::new(HandsConfig::default()).unwrap();
        let agent = agent(dir.path(), &hands).await;
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
        let runner = Runner::start(
            store.clone(),
            &hands,
            agent.clone(),
            Arc::new(Unasked),
            "g",
            "me-1",
        )
        .await
        .unwrap();
        let session = runner.session().clone();
        let waking = Waking::load(store.as_ref(), session.clone()).await.unwrap();
        assert_eq!(
            serde_json::to_value(waking.frozen().unwrap()).unwrap(),
            serde_json::to_value(&agent.frozen).unwrap()
        );
        let folded = waking.state().last_seq;
        // Written after the fold, before the wake takes the lease.
        runner.detach().await.unwrap();
        let kit = Arc::new(Services::answering(Arc::new(Unasked)))
            .kit(&agent.frozen)
            .unwrap();
        let woken = Launcher::new(store.clone(), &hands)
            .wake(waking, agent, kit, "me-2")
            .await
            .unwrap();
        assert_eq!(woken.state().last_seq, folded + 1);
        let whole = snapshot::load_state(store.as_ref(), &session)
            .await
            .unwrap();
        assert_eq!(woken.state().last_seq, whole.last_seq);
        assert_eq!(woken.state().status, whole.status);
    }

    #[tokio::test]
    async fn a_child_starts_and_wakes_through_the_launch_door_under_a_child_owner() {
        let dir = tempfile::TempDir::new().unwrap();
        let hands = Hands::new(HandsConfig::default()).unwrap();
        let agent = agent(dir.path(), &hands).await;
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
        let parent = Runner::start(
            store.clone(),
            &hands,
            agent.clone(),
            Arc::new(Unasked),
            "g",
            "me-1",
        )
        .await
        .unwrap();
        let first = vec![Event::Delegated {
            parent: parent.session().as_str().to_owned(),
            call_id: "c1".to_owned(),
            agent: "held".to_owned(),
            depth: 1,
        }];
        let child = parent
            .ctx
            .launch
            .start(parent.ctx.parent(), agent.clone(), "sub", first)
            .await
            .unwrap();
        let id = child.session().clone();
        assert_ne!(&id, parent.session());
        assert_eq!(child.state().goal.as_deref(), Some("sub"));
        // Its first events are written after its goal (folded at once;
        // on their way to the store).
        assert_eq!(
            child.state().parent.as_deref(),
            Some(parent.session().as_str())
        );
        // Held by the child owner of the parent's lease, not by the parent.
        let owner = lease::child_owner("me-1", parent.session());
        assert!(
            store
                .acquire_lease(&id, "me-1", lease::ttl())
                .await
                .is_err()
        );
        child.release().await;
        // Woken from its own log, bound from the frozen agent it holds.
        let seen = std::sync::Mutex::new(None);
        let bind: BindChild<'_> = Box::new(|frozen: Frozen| {
            *seen.lock().unwrap() = Some(frozen.name.clone());
            let mut agent = agent.clone();
            agent.frozen = frozen;
            Ok(agent)
        });
        let woken = parent
            .ctx
            .launch
            .wake(parent.ctx.parent(), id.clone(), bind)
            .await
            .unwrap();
        assert_eq!(seen.lock().unwrap().as_deref(), Some("held"));
        assert_eq!(woken.state().goal.as_deref(), Some("sub"));
        assert!(
            store
                .acquire_lease(&id, "other", lease::ttl())
                .await
                .is_err()
        );
        woken.release().await;
        assert_eq!(
            store
                .acquire_lease(&id, &owner, lease::ttl())
                .await
                .unwrap()
                .owner,
            owner
        );
        // A child whose frozen agent is refused is never leased.
        let refused: BindChild<'_> = Box::new(|_| Err(inconsistent("refused")));
        let err = parent
            .ctx
            .launch
            .wake(parent.ctx.parent(), id.clone(), refused)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("refused"), "{err}");
    }
}
