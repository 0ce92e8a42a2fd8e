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
//! The runner decides nothing itself (that is [`decide`]'s) and writes
//! nothing itself (that is the journal's, `core::journal`, which folds
//! every event it appends): it asks, runs the executor of the action
//! (`core::act`, each an `impl Ctx` that sees the [`Ctx`] the runner holds
//! and never the runner), and keeps the lifecycle — the heartbeat of the
//! lease, the inbox poller, a recovered wake's note. It is built by the
//! launcher alone (`brain::launch`, from the frozen session), never by an
//! executor: children start through `Ctx::launch`. This module talks to
//! the store, the hands and a provider through their public APIs only; it
//! does not know SQL, wasmtime or HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::ctx::{Child, Ctx, Parts, RunEnd};
use super::decide::{self, Action};
use super::journal::Journal;
use super::journal::Observer;
use super::state::SessionState;
use crate::control::lease::{self, Heartbeat};
use crate::error::json_error;
use crate::error::{AgentError, RunError};
use crate::model::RetryPolicy;
use longhand_session::inbox::Control;
use longhand_session::sha256_digest as digest_hex;
use longhand_session::{Event, Lease, ResumeCause, SessionId, SessionStatus};

use crate::error::MAX_GOAL_BYTES;

/// One worker driving one session.
pub struct Runner<'h> {
    /// What the executors see (see `core::ctx`).
    pub(crate) ctx: Ctx<'h>,
    lease_ttl: Duration,
    /// Set when waking found the session left running by a worker that
    /// stopped without pausing: recorded as a `resumed` event at `run`.
    recovered: Option<(ResumeCause, String)>,
}

impl<'h> Runner<'h> {
    /// Create a session for `parts.agent` with `goal`, and lease it for
    /// `owner`. The launcher (`brain::launch`) is the only caller. A goal
    /// longer than [`MAX_GOAL_BYTES`] is refused before anything is
    /// created.
    pub(crate) async fn create(
        parts: Parts<'h>,
        goal: &str,
        owner: &str,
    ) -> Result<Self, RunError> {
        if goal.len() > MAX_GOAL_BYTES {
            return Err(AgentError::GoalTooLong { bytes: goal.len() }.into());
        }
        let frozen = &parts.agent.frozen;
        let agent_json = serde_json::to_value(frozen).map_err(json_error("the agent"))?;
        let config_digest = digest_hex(agent_json.to_string().as_bytes());
        let created = Event::SessionCreated {
            agent_name: frozen.name.clone(),
            agent: agent_json,
            config_digest,
        };
        let ttl = lease::ttl();
        let journal = Journal::create(Arc::clone(&parts.store), created, owner, ttl).await?;
        let mut runner = Self::new(parts, journal, ttl);
        runner
            .ctx
            .write(vec![Event::GoalSet {
                goal: goal.to_owned(),
            }])
            .await?;
        Ok(runner)
    }

    /// The runner of a woken session: its log folded into `state` (once,
    /// by the launcher, `brain::launch`) and `lease` taken for `ttl`.
    pub(crate) fn woken(
        parts: Parts<'h>,
        session: SessionId,
        lease: Lease,
        ttl: Duration,
        state: SessionState,
    ) -> Self {
        let taken_from = lease.taken_from.clone();
        let journal = Journal::new(Arc::clone(&parts.store), session, lease, state);
        let mut runner = Self::new(parts, journal, ttl);
        // Every run ends finished, failed or paused; a session found
        // created or running was left by a worker that stopped mid-run.
        if matches!(
            runner.ctx.journal.state.status,
            SessionStatus::Created | SessionStatus::Running
        ) && !runner.ctx.journal.state.awaiting_worker
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
        runner
    }

    fn new(parts: Parts<'h>, journal: Journal, lease_ttl: Duration) -> Self {
        Self {
            ctx: Ctx::new(parts, journal),
            lease_ttl,
            recovered: None,
        }
    }

    /// Leave the session to another worker: give up the lease without
    /// running. (Everything written so far is durable.)
    pub async fn detach(mut self) -> Result<(), RunError> {
        let by = self.ctx.lease.owner.clone();
        let written = self.ctx.write(vec![Event::Detached { by }]).await;
        let _ = self.ctx.settle().await;
        let _ = self.ctx.store.release(&self.ctx.lease).await;
        written
    }

    /// Set the progress observer.
    pub fn observe(&mut self, observer: Observer) {
        self.ctx.journal.observe(observer);
    }

    /// Show the observer the events already in the log from `from_seq` on
    /// (those written before it was attached).
    pub async fn replay_to_observer(&mut self, from_seq: u64) -> Result<(), RunError> {
        if !self.ctx.journal.observed() || from_seq > self.ctx.journal.state.last_seq {
            return Ok(());
        }
        let mut records = self.ctx.store.read(&self.ctx.session, from_seq).await?;
        let last = self.ctx.journal.state.last_seq;
        records.retain(|r| r.seq <= last);
        self.ctx.journal.show(&records);
        Ok(())
    }

    /// Use a different retry policy for model calls (its children's too).
    pub fn set_retry(&mut self, retry: RetryPolicy) {
        self.ctx.kit.retry = retry;
    }

    /// Renew the lease for `ttl` at a time (every `ttl / 3`) from now on.
    /// Default [`LEASE_TTL`](crate::control::lease::LEASE_TTL).
    pub fn set_lease_ttl(&mut self, ttl: Duration) {
        self.lease_ttl = ttl;
    }

    /// The session id.
    pub fn session(&self) -> &SessionId {
        &self.ctx.session
    }

    /// The folded state.
    pub fn state(&self) -> &SessionState {
        &self.ctx.journal.state
    }

    /// Record a resume (with raised limits) if the session is paused.
    pub async fn resume(&mut self, raised: BTreeMap<String, u64>) -> Result<(), RunError> {
        if self.ctx.journal.state.status == SessionStatus::Paused || !raised.is_empty() {
            self.ctx.supersede_pauses().await?;
            // An operator's resume says all a recovery note would.
            self.recovered = None;
            self.ctx
                .write(vec![Event::Resumed {
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
        let span = crate::watch::run_started(
            &self.ctx.session,
            &self.ctx.journal.state.agent_name,
            self.ctx.journal.state.parent.as_deref(),
        );
        let end = self.run_traced().await;
        match &end {
            Ok(end) => span.end(end.status.as_str(), None),
            Err(e) => span.end(self.ctx.journal.state.status.as_str(), Some(e.to_string())),
        }
        end
    }

    async fn run_traced(&mut self) -> Result<RunEnd, RunError> {
        let heartbeat = Heartbeat::start(
            self.ctx.store.clone(),
            self.ctx.lease.clone(),
            self.lease_ttl,
        );
        let mut lost = heartbeat.lost();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (now_tx, mut now_rx) = tokio::sync::watch::channel(None);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(None);
        let poller = crate::control::steer::Poller::start(
            self.ctx.store.clone(),
            self.ctx.session.clone(),
            self.ctx.journal.state.last_control,
            tx,
            now_tx,
            stop_tx,
        )
        .await;
        self.ctx.inbox = Some(rx);
        self.ctx.stop = Some(stop_rx);
        let end = tokio::select! {
            end = self.run_inner() => end,
            why = lost.wait() => Err(RunError::LeaseLost(why)),
            Some(control) = crate::control::steer::cancel_requested(&mut now_rx) => Err(
                // `cancel --now`: the step in flight is dropped here; it
                // is recorded below, with the step's future gone.
                RunError::CancelNow(Box::new(control)),
            ),
        };
        let end = match end {
            Err(RunError::CancelNow(control)) => self.cancelled_now(*control).await,
            other => other,
        };
        poller.stop();
        self.ctx.inbox = None;
        self.ctx.stop = None;
        heartbeat.stop();
        // Appends still on their way land before the lease is given up (a
        // released lease no longer writes). After a lost lease they are
        // refused anyway; their error is not the one to report.
        let settled = match &end {
            Err(RunError::LeaseLost(_)) => Ok(()),
            _ => self.ctx.settle().await,
        };
        lease::release(
            self.ctx.store.clone(),
            self.ctx.lease.clone(),
            self.lease_ttl,
        )
        .await;
        match (end, settled) {
            (Ok(_), Err(e)) => Err(e),
            (end, _) => end,
        }
    }

    async fn run_inner(&mut self) -> Result<RunEnd, RunError> {
        if let Some((cause, note)) = self.recovered.take() {
            self.ctx
                .write(vec![Event::Resumed {
                    raised: BTreeMap::new(),
                    note: Some(note),
                    cause,
                }])
                .await?;
        }
        loop {
            self.ctx.apply_controls().await?;
            let action = decide::next(&self.ctx.journal.state, self.ctx.policy());
            // Staged events ride along with the next request's record; any
            // other action writes them first (nothing else carries them).
            if !matches!(action, Action::Ask { .. }) {
                self.ctx.flush().await?;
            }
            match action {
                Action::Stop(status) => return self.end(status).await,
                Action::LearnCalls => self.learn_calls().await?,
                Action::Recover(calls) => self.ctx.recover(calls).await?,
                Action::Pause(reason) => self.ctx.write(vec![Event::Paused { reason }]).await?,
                Action::Dispatch { step, calls } => self.ctx.dispatch_pending(step, calls).await?,
                Action::Check { step } => self.ctx.check(step).await?,
                Action::Finish => self.finish().await?,
                Action::FinishPlan => self.ctx.finish_plan().await?,
                Action::Ask { role, step } => self.ctx.ask(role, step).await?,
                Action::CreatePlan => self.ctx.create_plan().await?,
                Action::StartPlanner(purpose) => self.ctx.start_planner(purpose).await?,
                Action::AcceptPlan { step } => self.ctx.accept_plan(step).await?,
                Action::StartTask(task) => self.ctx.start_task(task).await?,
                Action::RunCheck { task, check } => self.ctx.run_check(task, check).await?,
                Action::StartJudge { task, check } => self.ctx.start_judge(task, check).await?,
                Action::AcceptVerdict { step, last_try } => {
                    self.ctx.accept_verdict(step, last_try).await?
                }
                Action::Fail(error) => self.ctx.write(vec![Event::Failed { error }]).await?,
                Action::Deny { step, call, reason } => self.ctx.deny(step, call, reason).await?,
                Action::FinishTask { task, done } => self.ctx.finish_task(task, done).await?,
                Action::StartChild(task) => self.ctx.start_child(task).await?,
                Action::AwaitChildren(children) => self.ctx.await_children(children).await?,
                Action::AcceptHandoff => self.ctx.accept_handoff().await?,
                Action::FallbackHandoff => self.ctx.fallback_handoff().await?,
            }
        }
    }

    /// After `cancel --now` dropped the step in flight: record what the
    /// drop left and the control, then do what `decide` makes of it (the
    /// session fails; nothing, if it had ended or had seen the control).
    async fn cancelled_now(&mut self, control: Control) -> Result<RunEnd, RunError> {
        self.ctx.cancel_now(control).await?;
        if let Action::Fail(error) = decide::next(&self.ctx.journal.state, self.ctx.policy()) {
            self.ctx.write(vec![Event::Failed { error }]).await?;
        }
        self.end(self.ctx.journal.state.status).await
    }

    async fn end(&mut self, status: SessionStatus) -> Result<RunEnd, RunError> {
        self.ctx.settle().await?;
        let detail = match status {
            SessionStatus::Finished => match self.ctx.journal.state.summary_blob.clone() {
                Some(blob) => {
                    Some(String::from_utf8_lossy(&self.ctx.get(&blob).await?).into_owned())
                }
                None => self.ctx.journal.state.summary.clone(),
            },
            SessionStatus::Failed => self.ctx.journal.state.error.clone(),
            _ => self
                .ctx
                .journal
                .state
                .pause
                .as_ref()
                .map(|p| p.detail.clone()),
        };
        Ok(RunEnd { status, detail })
    }

    async fn learn_calls(&mut self) -> Result<(), RunError> {
        let calls = self
            .ctx
            .last_response()
            .await?
            .map(|r| r.tool_calls.into_iter().map(|c| c.id).collect())
            .unwrap_or_default();
        self.ctx.journal.learn_calls(calls);
        Ok(())
    }

    /// Finish with the last answer's text.
    async fn finish(&mut self) -> Result<(), RunError> {
        let text = self
            .ctx
            .last_response()
            .await?
            .and_then(|r| r.text)
            .unwrap_or_default();
        let finished = self.ctx.finished(text).await;
        self.ctx.write(vec![finished]).await
    }
}

/// A child is a runner (built by the launcher for a parent's executor).
#[async_trait::async_trait]
impl<'h> Child for Runner<'h> {
    fn session(&self) -> &SessionId {
        &self.ctx.session
    }

    fn state(&self) -> &SessionState {
        &self.ctx.journal.state
    }

    async fn run(&mut self) -> Result<RunEnd, RunError> {
        Runner::run(self).await
    }

    async fn release(self: Box<Self>) {
        let _ = self.ctx.store.release(&self.ctx.lease).await;
    }
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
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::agent::bind::bind;
    use crate::agent::config::AgentConfig;
    use crate::agent::freeze::freeze;
    use crate::model::{ModelError, ModelProvider, ModelRequest, ModelResponse};
    use longhand_hands::{Hands, HandsConfig};
    use longhand_session::{SqliteStore, Store};

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
        let state = crate::core::state::snapshot::load_state(store.as_ref(), &session)
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

/// Old logs wake through the runner (kept here, above the journal they
/// test, so the journal imports nothing above it).
#[cfg(test)]
mod old_logs {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use super::Runner;
    use crate::agent::bind::bind;
    use crate::agent::config::AgentConfig;
    use crate::agent::freeze::freeze;
    use crate::model::script::ScriptProvider;
    use crate::model::{ModelResponse, StopReason, ToolCall, Usage};
    use longhand_hands::{Hands, HandsConfig};
    use longhand_session::{Durability, Event, SessionStatus, SqliteStore, Store};

    fn answer(text: Option<&str>, calls: Vec<ToolCall>) -> ModelResponse {
        ModelResponse {
            text: text.map(str::to_owned),
            stop_reason: if calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            },
            tool_calls: calls,
            usage: Usage::default(),
            reasoning: Vec::new(),
        }
    }

    /// A log written before `model_responded.calls`, `model_failed.last`
    /// and `calls_learned` existed, paused by an operator's `pause`, is
    /// resumed, learns its answer's calls by appending `calls_learned`
    /// (never by changing the state beside the log), runs them and goes on
    /// to finish.
    #[tokio::test]
    async fn an_old_log_wakes_learns_its_calls_through_an_event_and_finishes() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(
            dir.path().join("agent.toml"),
            "name = \"old\"\ninstructions = \"x\"\n[model]\nprovider = \"openai\"\n\
             model = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        )
        .unwrap();
        let (config, base) = AgentConfig::load(dir.path()).unwrap();
        let hands = Hands::new(HandsConfig::default()).unwrap();
        let frozen = freeze(&hands, &config, &base, |_| None).await.unwrap();
        let agent = bind(&hands, frozen, |_| None).await.unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).await.unwrap());

        let agent_json = serde_json::to_value(&agent.frozen).unwrap();
        let created = Event::SessionCreated {
            agent_name: "old".into(),
            config_digest: longhand_session::sha256_digest(agent_json.to_string().as_bytes()),
            agent: agent_json,
        };
        let session = store.create("old", &created).await.unwrap();
        let lease = store
            .acquire_lease(&session, "old-writer", Duration::from_secs(30))
            .await
            .unwrap();
        // The answer asks for a tool the agent does not have: refused as a
        // call, so no tool host is needed.
        let first = answer(
            None,
            vec![ToolCall {
                id: "c1".into(),
                name: "nope".into(),
                arguments: "{}".into(),
            }],
        );
        let response = serde_json::to_vec(&first).unwrap();
        let blob = longhand_session::BlobRef::of(&response);
        let old = [
            serde_json::json!({"type": "goal_set", "goal": "g"}),
            serde_json::json!({"type": "model_requested", "step": 1, "role": "worker",
                "provider": "p", "model": "m", "request": blob, "attempt": 1}),
            serde_json::json!({"type": "model_failed", "step": 1, "attempt": 1,
                "error": "HTTP 529", "retryable": true}),
            serde_json::json!({"type": "model_responded", "step": 1, "response": blob,
                "input_tokens": 1, "output_tokens": 1, "latency_ms": 1,
                "stop_reason": "tool_use"}),
            serde_json::json!({"type": "steered", "control": 1, "kind": "pause", "by": "ops"}),
            serde_json::json!({"type": "paused",
                "reason": {"kind": "user", "detail": "paused by ops"}}),
        ];
        let events: Vec<Event> = old
            .into_iter()
            .map(|e| serde_json::from_value(e).unwrap())
            .collect();
        store
            .append_with(
                &session,
                &lease,
                2,
                &events,
                vec![response],
                Durability::Now,
            )
            .await
            .unwrap();
        store.release(&lease).await.unwrap();

        // A script is a cassette: its first turn is the answer in the log.
        let provider = Arc::new(ScriptProvider::new(vec![
            first,
            answer(Some("done"), Vec::new()),
        ]));
        let mut runner = Runner::wake(
            store.clone(),
            &hands,
            agent,
            provider,
            session.clone(),
            "me",
        )
        .await
        .unwrap();
        runner.resume(BTreeMap::new()).await.unwrap();
        let end = runner.run().await.unwrap();
        assert_eq!(end.status, SessionStatus::Finished, "{:?}", end.detail);
        assert_eq!(end.detail.as_deref(), Some("done"));

        let log: Vec<Event> = store
            .read(&session, 1)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.event)
            .collect();
        let learned: Vec<&Event> = log
            .iter()
            .filter(|e| matches!(e, Event::CallsLearned { .. }))
            .collect();
        assert_eq!(
            learned,
            [&Event::CallsLearned {
                step: 1,
                calls: vec!["c1".into()]
            }]
        );
        assert!(log.iter().any(
            |e| matches!(e, Event::ToolFinished { call_id, ok: false, .. } if call_id == "c1")
        ));
        // The operator's pause was answered by the resume: no second pause.
        assert_eq!(
            log.iter()
                .filter(|e| matches!(e, Event::Paused { .. }))
                .count(),
            1
        );
        // Folded again from the log alone, the state is the one the run
        // ended with: nothing changed it beside the log.
        let folded = crate::core::state::snapshot::load_state(store.as_ref(), &session)
            .await
            .unwrap();
        assert_eq!(&folded, runner.state());
    }
}
