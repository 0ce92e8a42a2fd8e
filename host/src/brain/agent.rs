//! The agent loop: build context from state, call the model, record, run
//! tools, record, repeat — keeping nothing between steps that is not in the
//! session log.
//!
//! Every decision is taken from [`SessionState`] (a fold of the log), and
//! every effect is preceded by the event that announces it: `model_requested`
//! before the request, `tool_started` (durable) before a tool runs,
//! `tool_finished` after. So a process killed at any instant can be woken by
//! any other process, which folds the log and continues:
//! - a request without a response is sent again;
//! - a call started but not finished is re-run if its tool is read-only or
//!   idempotent, otherwise recorded as `tool_in_doubt` and the model is told
//!   the outcome is unknown;
//! - tool calls of a recorded response that never started are dispatched.
//!
//! This module talks to the store, the hands and a provider through their
//! public APIs only; it does not know SQL, wasmtime or HTTP.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::{
    AgentConfig, CompletionCheck, ModelConfig, RUN_PLACEHOLDER, SessionLimits, ToolConfig,
};
use super::model::{
    Message, ModelError, ModelProvider, ModelRequest, ModelResponse, RetryPolicy, ToolCall,
    ToolDef, complete_with_retry,
};
use super::state::{HistoryItem, SessionState};
use crate::hands::{CallError, Effect, Grants, Hands, LoadedTool, ToolSource, ToolSpec};
use crate::session::event::{MAX_INLINE_TEXT, bounded};
use crate::session::{
    BlobRef, Event, EventRecord, Lease, PauseKind, PauseReason, SessionId, SessionStatus, Store,
    StoreError,
};

/// Snapshot the folded state after this many events.
pub const SNAPSHOT_EVERY: u64 = 100;
/// How long a worker's lease on a session lasts without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(60);
/// Prefix of the call ids of completion checks (never shown to the model as calls).
const CHECK_PREFIX: &str = "completion-check-";
/// Separator between component and tool in the names the model sees.
pub const NAME_SEPARATOR: &str = "__";

/// The agent as frozen into the session's first event: what a resumed
/// session runs with, whatever the agent file says by then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frozen {
    /// Agent name.
    pub name: String,
    /// System instructions (text).
    pub instructions: String,
    /// Model settings (no key: only the name of its variable).
    pub model: ModelConfig,
    /// Session limits as configured (raises are events).
    pub limits: SessionLimits,
    /// Tools, each with the digest seen at start.
    pub tools: Vec<FrozenTool>,
    /// Completion check.
    pub completion: Option<CompletionCheck>,
    /// Directory relative paths are resolved against.
    pub base_dir: PathBuf,
}

/// One tool component of a frozen agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrozenTool {
    /// Prefix of its tools' names for the model (`fs` → `fs__read`).
    pub prefix: String,
    /// Digest seen when the session started; a different binary is refused.
    pub digest: String,
    /// Grants and limits as configured.
    pub config: ToolConfig,
    /// Directory grants as resolved and pinned at start (identity
    /// included). `None` in sessions frozen before grants were pinned:
    /// those resolve `config.dirs` when they wake.
    #[serde(default)]
    pub dirs: Option<Vec<crate::hands::DirGrant>>,
}

/// Errors that stop the loop. Tool and model failures are *not* here: they
/// are recorded and handed to the model or pause the session.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The session store refused or failed (fenced by another writer, I/O).
    /// Abort: another worker may own the session now.
    #[error("session store")]
    Store(#[from] StoreError),
    /// The agent cannot be assembled (component missing or changed, bad
    /// grant). Fix the configuration.
    #[error("agent: {0}")]
    Agent(String),
    /// The log holds something this version cannot read. Report it.
    #[error("session log: {0}")]
    Log(String),
}

/// A tool the model can call, bound to its component and grants.
struct BoundTool {
    component: usize,
    spec: ToolSpec,
}

struct BoundComponent {
    prefix: String,
    loaded: Arc<LoadedTool>,
    grants: Grants,
}

/// The agent with its components loaded and granted.
pub struct BoundAgent {
    frozen: Frozen,
    components: Vec<BoundComponent>,
    tools: BTreeMap<String, BoundTool>,
    defs: Vec<ToolDef>,
}

impl BoundAgent {
    /// Tool definitions as the model sees them.
    pub fn tool_defs(&self) -> &[ToolDef] {
        &self.defs
    }

    /// The frozen agent.
    pub fn frozen(&self) -> &Frozen {
        &self.frozen
    }
}

fn source_of<'a>(component: &'a str, base: &Path, owned: &'a mut PathBuf) -> ToolSource<'a> {
    if component.ends_with(".wasm") || component.contains('/') {
        *owned = base.join(component);
        ToolSource::File(owned)
    } else {
        ToolSource::Builtin(component)
    }
}

fn prefix_of(component: &str) -> String {
    let stem = Path::new(component)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(component);
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    cleaned.trim_matches('_').chars().take(24).collect()
}

/// Freeze an agent file: read instructions, load every component to learn
/// its digest, resolve paths. `lookup` reads environment variables.
pub async fn freeze(
    hands: &Hands,
    config: &AgentConfig,
    base: &Path,
    lookup: impl Fn(&str) -> Option<String> + Copy,
) -> Result<Frozen, RunError> {
    let base_dir = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_owned());
    let instructions = config
        .instructions_text(&base_dir)
        .map_err(RunError::Agent)?;
    let mut model = config.model.clone();
    if let Some(c) = &model.cassette {
        model.cassette = Some(base_dir.join(c));
    }
    let run_dir = format!(
        "{}-{}",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .replace(':', "-"),
        std::process::id()
    );
    let mut tools = Vec::new();
    for tool in &config.tools {
        let mut tool = tool.clone();
        for dir in &mut tool.dirs {
            if dir.host_text().contains(RUN_PLACEHOLDER) {
                *dir = dir.with_run(&run_dir);
                let host = dir.host_text();
                std::fs::create_dir_all(base_dir.join(&host)).map_err(|e| {
                    RunError::Agent(format!("cannot create the run directory {host}: {e}"))
                })?;
            }
        }
        let tool = &tool;
        let mut owned = PathBuf::new();
        let loaded = hands
            .load(source_of(&tool.component, &base_dir, &mut owned))
            .await
            .map_err(|e| RunError::Agent(e.to_string()))?;
        // `only` is a list of promises about the component; a name it does
        // not offer is a typo (or a tool since renamed) that would otherwise
        // silently shrink the agent's tools.
        if let Some(only) = &tool.only {
            let offered: Vec<&str> = loaded
                .info()
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            if let Some(unknown) = only.iter().find(|n| !offered.contains(&n.as_str())) {
                return Err(RunError::Agent(format!(
                    "tool {}: `only` names `{unknown}`, which this component does not offer; \
                     it offers: {}",
                    tool.component,
                    offered.join(", ")
                )));
            }
        }
        // Validate grants now (env and secrets must be set) so a bad config
        // is refused at start, not at the first call. The directories are
        // resolved and pinned here, once: a resumed session gets exactly
        // these directories or a refusal, whatever their paths name later.
        let grants = tool
            .grants(&base_dir, lookup)
            .map_err(|e| RunError::Agent(format!("tool {}: {e}", tool.component)))?;
        tools.push(FrozenTool {
            prefix: prefix_of(&tool.component),
            digest: loaded.digest().to_owned(),
            config: tool.clone(),
            dirs: Some(grants.dirs),
        });
    }
    Ok(Frozen {
        name: config.name.clone(),
        instructions,
        model,
        limits: config.limits.clone(),
        tools,
        completion: config.completion.clone(),
        base_dir,
    })
}

/// Load and grant a frozen agent's components, refusing changed binaries.
pub async fn bind(
    hands: &Hands,
    frozen: Frozen,
    lookup: impl Fn(&str) -> Option<String> + Copy,
) -> Result<BoundAgent, RunError> {
    let mut components = Vec::new();
    let mut tools = BTreeMap::new();
    let mut defs = Vec::new();
    for (index, ft) in frozen.tools.iter().enumerate() {
        let mut owned = PathBuf::new();
        let loaded = hands
            .load(source_of(
                &ft.config.component,
                &frozen.base_dir,
                &mut owned,
            ))
            .await
            .map_err(|e| RunError::Agent(e.to_string()))?;
        if loaded.digest() != ft.digest {
            return Err(RunError::Agent(format!(
                "component {} changed since the session started (was {}, now {}); its grants \
                 are not carried over to a different binary",
                ft.config.component,
                ft.digest,
                loaded.digest()
            )));
        }
        // Pinned directories are used as frozen, not resolved again: a
        // directory replaced since is refused call by call, naming it.
        let mut config = ft.config.clone();
        if ft.dirs.is_some() {
            config.dirs.clear();
        }
        let mut grants = config
            .grants(&frozen.base_dir, lookup)
            .map_err(|e| RunError::Agent(format!("tool {}: {e}", ft.config.component)))?;
        grants.component_digest = Some(ft.digest.clone());
        if let Some(pinned) = &ft.dirs {
            grants.dirs = pinned.clone();
        }
        for spec in &loaded.info().tools {
            if let Some(only) = &ft.config.only
                && !only.contains(&spec.name)
            {
                continue;
            }
            let name = format!("{}{NAME_SEPARATOR}{}", ft.prefix, spec.name);
            defs.push(ToolDef {
                name: name.clone(),
                description: spec.description.clone(),
                input_schema: spec.input_schema.clone(),
            });
            tools.insert(
                name,
                BoundTool {
                    component: index,
                    spec: spec.clone(),
                },
            );
        }
        components.push(BoundComponent {
            prefix: ft.prefix.clone(),
            loaded,
            grants,
        });
    }
    Ok(BoundAgent {
        frozen,
        components,
        tools,
        defs,
    })
}

/// Compact description of a model request, stored instead of the request
/// itself so the log does not re-store the whole history every step. The
/// request is rebuilt from the same state when needed.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RequestManifest {
    step: u64,
    system: BlobRef,
    tools: BlobRef,
    goal: BlobRef,
    history_through_seq: u64,
    history_items: usize,
    history_omitted: u64,
    /// sha256 of the canonical request JSON.
    request_digest: String,
}

/// What `run` ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// Final status: finished, failed or paused.
    pub status: SessionStatus,
    /// Why, for paused and failed sessions.
    pub detail: Option<String>,
}

/// Called with every event appended, for progress output.
pub type Observer = Box<dyn FnMut(&EventRecord, &SessionState) + Send + Sync>;

/// One worker driving one session.
pub struct Runner<'h> {
    store: Arc<dyn Store>,
    hands: &'h Hands,
    agent: BoundAgent,
    provider: Arc<dyn ModelProvider>,
    session: SessionId,
    lease: Lease,
    state: SessionState,
    blobs: HashMap<String, Arc<Vec<u8>>>,
    observer: Option<Observer>,
    retry: RetryPolicy,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn digest_hex(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl<'h> Runner<'h> {
    /// Create a session for `frozen` with `goal`, and lease it.
    pub async fn start(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        provider: Arc<dyn ModelProvider>,
        goal: &str,
        owner: &str,
    ) -> Result<Self, RunError> {
        let agent_json = serde_json::to_value(&agent.frozen)
            .map_err(|e| RunError::Log(format!("cannot serialize the agent: {e}")))?;
        let config_digest = digest_hex(agent_json.to_string().as_bytes());
        let created = Event::SessionCreated {
            agent_name: agent.frozen.name.clone(),
            agent: agent_json,
            config_digest,
        };
        let session = store.create(&agent.frozen.name, &created).await?;
        let lease = store.acquire_lease(&session, owner, LEASE_TTL).await?;
        let records = store.read(&session, 1).await?;
        let state = SessionState::fold(&records);
        let mut runner = Self {
            store,
            hands,
            agent,
            provider,
            session,
            lease,
            state,
            blobs: HashMap::new(),
            observer: None,
            retry: RetryPolicy::default(),
        };
        runner
            .append(vec![Event::GoalSet {
                goal: goal.to_owned(),
            }])
            .await?;
        Ok(runner)
    }

    /// Wake a session from its log (latest snapshot plus tail) and lease it.
    /// The agent must be bound from the session's own frozen config; see
    /// [`Runner::frozen_of`].
    pub async fn wake(
        store: Arc<dyn Store>,
        hands: &'h Hands,
        agent: BoundAgent,
        provider: Arc<dyn ModelProvider>,
        session: SessionId,
        owner: &str,
    ) -> Result<Self, RunError> {
        let lease = match store.acquire_lease(&session, owner, LEASE_TTL).await {
            Err(StoreError::LeaseHeld { owner: holder, .. }) if holder_is_dead(&holder, owner) => {
                store.take_over(&session, &holder, owner, LEASE_TTL).await?
            }
            other => other?,
        };
        let state = load_state(store.as_ref(), &session).await?;
        Ok(Self {
            store,
            hands,
            agent,
            provider,
            session,
            lease,
            state,
            blobs: HashMap::new(),
            observer: None,
            retry: RetryPolicy::default(),
        })
    }

    /// The frozen agent recorded in a session's first event.
    pub async fn frozen_of(store: &dyn Store, session: &SessionId) -> Result<Frozen, RunError> {
        let first = store.read(session, 1).await?;
        match first.first().map(|r| &r.event) {
            Some(Event::SessionCreated { agent, .. }) => serde_json::from_value(agent.clone())
                .map_err(|e| RunError::Log(format!("cannot read the frozen agent: {e}"))),
            _ => Err(RunError::Log(
                "the log does not start with session_created".to_owned(),
            )),
        }
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

    /// Use a different retry policy for model calls.
    pub fn set_retry(&mut self, retry: RetryPolicy) {
        self.retry = retry;
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
            self.append(vec![Event::Resumed { raised, note: None }])
                .await?;
        }
        Ok(())
    }

    async fn append(&mut self, mut events: Vec<Event>) -> Result<(), RunError> {
        if events.is_empty() {
            return Ok(());
        }
        // Explanations carry text a provider or a tool chose (an error body,
        // a call key): cut here, the one door every event passes, so no
        // pause or failure is ever too large to record.
        for event in &mut events {
            event.bound_text();
        }
        let expected = self.state.last_seq + 1;
        if self.lease.expires_ms.saturating_sub(now_ms()) < LEASE_TTL.as_millis() as u64 / 2 {
            self.lease = self.store.renew(&self.lease, LEASE_TTL).await?;
        }
        self.store
            .append(&self.session, &self.lease, expected, &events)
            .await?;
        let at_ms = now_ms();
        for (i, event) in events.into_iter().enumerate() {
            let record = EventRecord {
                seq: expected + i as u64,
                at_ms,
                event,
            };
            self.state.apply(&record);
            if let Some(obs) = self.observer.as_mut() {
                obs(&record, &self.state);
            }
        }
        if self.state.since_snapshot >= SNAPSHOT_EVERY {
            self.snapshot().await?;
        }
        Ok(())
    }

    async fn snapshot(&mut self) -> Result<(), RunError> {
        let bytes = serde_json::to_vec(&self.state)
            .map_err(|e| RunError::Log(format!("cannot serialize state: {e}")))?;
        let blob = self.store.put_blob(bytes).await?;
        let through_seq = self.state.last_seq;
        // Not through `append`: a snapshot must not trigger another.
        self.store
            .append(
                &self.session,
                &self.lease,
                through_seq + 1,
                &[Event::Snapshot {
                    state: blob.clone(),
                    through_seq,
                }],
            )
            .await?;
        let record = EventRecord {
            seq: through_seq + 1,
            at_ms: now_ms(),
            event: Event::Snapshot {
                state: blob,
                through_seq,
            },
        };
        self.state.apply(&record);
        if let Some(obs) = self.observer.as_mut() {
            obs(&record, &self.state);
        }
        Ok(())
    }

    async fn put(&mut self, bytes: Vec<u8>) -> Result<BlobRef, RunError> {
        // Blobs are content-addressed: one this runner already stored or
        // read needs no round trip to the store.
        let blob = BlobRef::of(&bytes);
        if self.blobs.contains_key(&blob.digest) {
            return Ok(blob);
        }
        let shared = Arc::new(bytes.clone());
        let blob = self.store.put_blob(bytes).await?;
        self.blobs.insert(blob.digest.clone(), shared);
        Ok(blob)
    }

    async fn get(&mut self, blob: &BlobRef) -> Result<Arc<Vec<u8>>, RunError> {
        if let Some(b) = self.blobs.get(&blob.digest) {
            return Ok(b.clone());
        }
        let bytes = Arc::new(self.store.get_blob(blob).await?);
        self.blobs.insert(blob.digest.clone(), bytes.clone());
        Ok(bytes)
    }

    /// Run until the session finishes, fails or pauses.
    pub async fn run(&mut self) -> Result<RunEnd, RunError> {
        let end = self.run_inner().await;
        let _ = self.store.release(&self.lease).await;
        end
    }

    async fn run_inner(&mut self) -> Result<RunEnd, RunError> {
        loop {
            match self.state.status {
                SessionStatus::Finished => {
                    let detail = match self.state.summary_blob.clone() {
                        Some(blob) => {
                            Some(String::from_utf8_lossy(&self.get(&blob).await?).into_owned())
                        }
                        None => self.state.summary.clone(),
                    };
                    return Ok(RunEnd {
                        status: SessionStatus::Finished,
                        detail,
                    });
                }
                SessionStatus::Failed => {
                    return Ok(RunEnd {
                        status: SessionStatus::Failed,
                        detail: self.state.error.clone(),
                    });
                }
                SessionStatus::Paused => {
                    return Ok(RunEnd {
                        status: SessionStatus::Paused,
                        detail: self.state.pause.as_ref().map(|p| p.detail.clone()),
                    });
                }
                SessionStatus::Created | SessionStatus::Running => {}
            }

            self.recover_open_calls().await?;
            if let Some(reason) = self.breaker() {
                self.append(vec![Event::Paused { reason }]).await?;
                continue;
            }

            // The last answer asked for tools that have not run yet.
            // Only as many as `max_tool_calls` has room for are started; the
            // rest stay unstarted and the session pauses on the limit. They
            // are not answered as "not run": an unstarted call of a recorded
            // answer is exactly what a crash between two calls leaves, and
            // waking already dispatches those. So `resume --raise
            // max_tool_calls=N` runs them as the model asked, nothing is
            // lost, and the log needs no new kind of event.
            let unresolved = self.unresolved_calls().await?;
            if !unresolved.is_empty() {
                let room = self.tool_call_room();
                if room == 0 {
                    let reason = self.tool_calls_reason(unresolved.len());
                    self.append(vec![Event::Paused { reason }]).await?;
                    continue;
                }
                let step = self.state.steps;
                let now: Vec<ToolCall> = unresolved.into_iter().take(room).collect();
                self.dispatch(step, now).await?;
                continue;
            }

            // A completion check passed and no `finished` follows it: the
            // process stopped (or the append failed) between the two. The
            // answer stands as it is; asking the model again would tell it a
            // check failed that passed.
            if let Some(text) = self.answer_of_passed_check().await? {
                let finished = self.finished(text).await?;
                self.append(vec![finished]).await?;
                continue;
            }

            // The last answer asked for nothing: done, if the check agrees.
            if let Some(text) = self.final_answer().await? {
                if self.completion_passes().await? {
                    let finished = self.finished(text).await?;
                    self.append(vec![finished]).await?;
                }
                continue;
            }

            if let Some(reason) = self.limit_hit() {
                self.append(vec![Event::Paused { reason }]).await?;
                continue;
            }
            self.model_turn().await?;
        }
    }

    /// The `finished` event for a final answer of any size: inline when it
    /// fits [`MAX_INLINE_TEXT`], else a preview plus the whole text as a
    /// blob. Moved, not cut: the answer is what the session was for.
    async fn finished(&mut self, text: String) -> Result<Event, RunError> {
        if text.len() <= MAX_INLINE_TEXT {
            return Ok(Event::Finished {
                summary: Some(text),
                summary_blob: None,
            });
        }
        let summary = Some(bounded(&text).into_owned());
        let blob = self.put(text.into_bytes()).await?;
        Ok(Event::Finished {
            summary,
            summary_blob: Some(blob),
        })
    }

    /// Re-run or mark in doubt every call started but not finished.
    async fn recover_open_calls(&mut self) -> Result<(), RunError> {
        let open: Vec<(String, super::state::OpenCall)> = self
            .state
            .open_calls
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (call_id, call) in open {
            let safe = matches!(call.effect.as_str(), "read-only" | "idempotent");
            if !safe {
                self.append(vec![Event::ToolInDoubt {
                    step: call.step,
                    call_id,
                    reason: format!(
                        "The process stopped while `{}` was running, so whether it took effect \
                         is unknown. It is not safe to repeat blindly: check its effect first.",
                        call.tool
                    ),
                }])
                .await?;
                continue;
            }
            let input_bytes = self.get(&call.input).await?;
            let input: serde_json::Value = serde_json::from_slice(&input_bytes)
                .map_err(|e| RunError::Log(format!("tool input blob: {e}")))?;
            let name = format!("{}{NAME_SEPARATOR}{}", call.component, call.tool);
            let (ok, result, receipt) = self.execute(&name, &input).await;
            let result = self.put(result).await?;
            self.append(vec![Event::ToolFinished {
                step: call.step,
                call_id,
                ok,
                result,
                receipt,
            }])
            .await?;
        }
        Ok(())
    }

    fn limit(&self, name: &str, configured: u64) -> u64 {
        self.state.raised.get(name).copied().unwrap_or(configured)
    }

    /// How many more tool calls `max_tool_calls` allows. Every call counts,
    /// including one refused before it ran (unknown tool, bad arguments):
    /// those are recorded as finished like any other.
    fn tool_call_room(&self) -> usize {
        let limit = self.limit("max_tool_calls", self.agent.frozen.limits.max_tool_calls);
        usize::try_from(limit.saturating_sub(self.state.tool_calls)).unwrap_or(usize::MAX)
    }

    /// The pause for `max_tool_calls` reached with `waiting` calls of the
    /// last answer not started: the reason between turns, plus the count.
    fn tool_calls_reason(&self, waiting: usize) -> PauseReason {
        let limit = self.limit("max_tool_calls", self.agent.frozen.limits.max_tool_calls);
        let mut reason = limit_reason("max_tool_calls", self.state.tool_calls, limit);
        reason.detail.push_str(&format!(
            " ({waiting} calls of the last answer have not run; they run on resume)"
        ));
        reason
    }

    fn limit_hit(&self) -> Option<PauseReason> {
        let l = &self.agent.frozen.limits;
        let s = &self.state;
        let checks = [
            ("max_steps", s.steps, l.max_steps),
            ("max_input_tokens", s.input_tokens, l.max_input_tokens),
            ("max_output_tokens", s.output_tokens, l.max_output_tokens),
            ("max_tool_calls", s.tool_calls, l.max_tool_calls),
            ("max_wall_secs", s.active_ms / 1000, l.max_wall_secs),
            ("max_write_bytes", s.bytes_written, l.max_write_bytes),
        ];
        for (name, used, configured) in checks {
            let limit = self.limit(name, configured);
            if used >= limit {
                return Some(limit_reason(name, used, limit));
            }
        }
        None
    }

    fn breaker(&self) -> Option<PauseReason> {
        let l = &self.agent.frozen.limits;
        let max_consecutive = self.limit("max_consecutive_failures", l.max_consecutive_failures);
        if self.state.consecutive_failures >= max_consecutive {
            return Some(PauseReason {
                kind: PauseKind::Breaker,
                limit: Some("max_consecutive_failures".to_owned()),
                detail: format!(
                    "{} tool calls failed in a row; look at `longhand log` and resume when fixed",
                    self.state.consecutive_failures
                ),
            });
        }
        let max_repeat = self.limit("max_repeated_failure", l.max_repeated_failure);
        if let Some((key, n)) = self
            .state
            .repeated_failures
            .iter()
            .find(|(_, n)| **n >= max_repeat)
        {
            return Some(PauseReason {
                kind: PauseKind::Breaker,
                limit: Some("max_repeated_failure".to_owned()),
                detail: format!("the same call failed {n} times: {key}"),
            });
        }
        None
    }

    async fn last_response(&mut self) -> Result<Option<(u64, ModelResponse)>, RunError> {
        let Some(HistoryItem::Assistant { step, response, .. }) = self
            .state
            .history
            .iter()
            .rev()
            .find(|h| matches!(h, HistoryItem::Assistant { .. }))
            .cloned()
        else {
            return Ok(None);
        };
        let bytes = self.get(&response).await?;
        let parsed: ModelResponse = serde_json::from_slice(&bytes)
            .map_err(|e| RunError::Log(format!("model response blob: {e}")))?;
        Ok(Some((step, parsed)))
    }

    /// Calls of the last answer that have no result and are not open.
    async fn unresolved_calls(&mut self) -> Result<Vec<ToolCall>, RunError> {
        let Some((_, response)) = self.last_response().await? else {
            return Ok(Vec::new());
        };
        let answered: std::collections::HashSet<&str> = self
            .state
            .history
            .iter()
            .filter_map(|h| match h {
                HistoryItem::ToolResult { call_id, .. } => Some(call_id.as_str()),
                HistoryItem::Assistant { .. } => None,
            })
            .collect();
        Ok(response
            .tool_calls
            .into_iter()
            .filter(|c| {
                !answered.contains(c.id.as_str()) && !self.state.open_calls.contains_key(&c.id)
            })
            .collect())
    }

    /// The text of the last answer when it asked for no tools and nothing
    /// came after it (a completion check result counts as coming after).
    async fn final_answer(&mut self) -> Result<Option<String>, RunError> {
        if !matches!(
            self.state.history.back(),
            Some(HistoryItem::Assistant { .. })
        ) {
            return Ok(None);
        }
        let Some((_, response)) = self.last_response().await? else {
            return Ok(None);
        };
        if response.tool_calls.is_empty() {
            Ok(Some(response.text.unwrap_or_default()))
        } else {
            Ok(None)
        }
    }

    /// The text of the last answer when it asked for no tools and the
    /// completion check run after it passed (and is the last thing in the
    /// history).
    async fn answer_of_passed_check(&mut self) -> Result<Option<String>, RunError> {
        if !matches!(
            self.state.history.back(),
            Some(HistoryItem::ToolResult { call_id, ok: true, .. }) if call_id.starts_with(CHECK_PREFIX)
        ) {
            return Ok(None);
        }
        let Some((_, response)) = self.last_response().await? else {
            return Ok(None);
        };
        Ok(response
            .tool_calls
            .is_empty()
            .then(|| response.text.unwrap_or_default()))
    }

    /// Run the completion check, if any, recording it. True when it passed
    /// or there is none.
    async fn completion_passes(&mut self) -> Result<bool, RunError> {
        let Some(check) = self.agent.frozen.completion.clone() else {
            return Ok(true);
        };
        let step = self.state.steps;
        let call = ToolCall {
            id: format!("{CHECK_PREFIX}{step}"),
            name: check.tool.clone(),
            arguments: check.input.to_string(),
        };
        self.dispatch(step, vec![call]).await?;
        Ok(matches!(
            self.state.history.back(),
            Some(HistoryItem::ToolResult { ok: true, .. })
        ))
    }

    /// Run one model turn: record the request, call with retries (each
    /// failure recorded), record the answer — or pause when retries run out.
    async fn model_turn(&mut self) -> Result<(), RunError> {
        let step = self.state.steps + 1;
        let request = self.build_request().await?;
        let request_json = serde_json::to_vec(&request)
            .map_err(|e| RunError::Log(format!("cannot serialize the request: {e}")))?;
        let system = self.put(request.system.clone().into_bytes()).await?;
        let tools = self
            .put(serde_json::to_vec(&request.tools).unwrap_or_default())
            .await?;
        let goal = self
            .put(self.state.goal.clone().unwrap_or_default().into_bytes())
            .await?;
        let manifest = RequestManifest {
            step,
            system,
            tools,
            goal,
            history_through_seq: self.state.last_seq,
            history_items: self.state.history.len(),
            history_omitted: self.state.history_omitted,
            request_digest: digest_hex(&request_json),
        };
        let manifest = self
            .put(serde_json::to_vec(&manifest).unwrap_or_default())
            .await?;
        let attempt = match &self.state.pending_request {
            Some(p) if p.step == step => 2,
            _ => 1,
        };
        self.append(vec![Event::ModelRequested {
            step,
            role: "worker".to_owned(),
            provider: self.provider.name().to_owned(),
            model: self.provider.model().to_owned(),
            request: manifest,
            attempt,
        }])
        .await?;

        let started = Instant::now();
        let mut failures: Vec<Event> = Vec::new();
        let result = complete_with_retry(
            self.provider.as_ref(),
            &request,
            &self.retry,
            |attempt: u32, err: &ModelError, wait: Option<Duration>| {
                failures.push(Event::ModelFailed {
                    step,
                    attempt,
                    error: err.to_string(),
                    retryable: err.retryable(),
                    retry_after_ms: wait.map(|w| w.as_millis() as u64),
                });
            },
        )
        .await;
        let latency_ms = started.elapsed().as_millis() as u64;
        self.append(failures).await?;
        match result {
            Ok(response) => {
                let bytes = serde_json::to_vec(&response)
                    .map_err(|e| RunError::Log(format!("cannot serialize the response: {e}")))?;
                let blob = self.put(bytes).await?;
                self.append(vec![Event::ModelResponded {
                    step,
                    response: blob,
                    input_tokens: response.usage.input_tokens,
                    output_tokens: response.usage.output_tokens,
                    latency_ms,
                    stop_reason: serde_json::to_value(&response.stop_reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "other".to_owned()),
                }])
                .await
            }
            Err(err) => {
                let kind = if matches!(err, ModelError::Diverged { .. }) {
                    // A cassette that no longer matches will not match later.
                    self.append(vec![Event::Failed {
                        error: format!("model: {err}"),
                    }])
                    .await?;
                    return Ok(());
                } else {
                    PauseKind::Breaker
                };
                self.append(vec![Event::Paused {
                    reason: PauseReason {
                        kind,
                        limit: None,
                        detail: format!("the model call failed after retries: {err}"),
                    },
                }])
                .await
            }
        }
    }

    /// Build the request from state alone: instructions, goal, and the
    /// history that fits the context budget.
    async fn build_request(&mut self) -> Result<ModelRequest, RunError> {
        let frozen = &self.agent.frozen;
        let system = frozen.instructions.clone();
        let max_tokens = frozen.model.max_tokens;
        let temperature = frozen.model.temperature;
        let tools = self.agent.defs.clone();
        let mut messages = vec![Message::User {
            text: self.state.goal.clone().unwrap_or_default(),
        }];
        if self.state.history_omitted > 0 {
            messages.push(Message::User {
                text: format!(
                    "[{} earlier items of this session were left out to fit the context window]",
                    self.state.history_omitted
                ),
            });
        }
        let history: Vec<HistoryItem> = self.state.history.iter().cloned().collect();
        for item in history {
            match item {
                HistoryItem::Assistant { response, .. } => {
                    let bytes = self.get(&response).await?;
                    let r: ModelResponse = serde_json::from_slice(&bytes)
                        .map_err(|e| RunError::Log(format!("model response blob: {e}")))?;
                    messages.push(Message::from(&r));
                }
                HistoryItem::ToolResult {
                    call_id,
                    ok,
                    result,
                    note,
                    ..
                } => {
                    let content = match (&result, &note) {
                        (_, Some(note)) => note.clone(),
                        (Some(blob), None) => {
                            String::from_utf8_lossy(&self.get(blob).await?).into_owned()
                        }
                        (None, None) => String::new(),
                    };
                    if call_id.starts_with(CHECK_PREFIX) {
                        // A passed check is always followed by `finished`
                        // (see `answer_of_passed_check`), so none reaches a
                        // request; were one to, it is left out rather than
                        // reported as a failure or sent as a call the model
                        // never made.
                        if !ok {
                            messages.push(Message::User {
                                text: format!(
                                    "The completion check did not pass, so the task is not done \
                                     yet: {content}"
                                ),
                            });
                        }
                    } else {
                        messages.push(Message::ToolResult {
                            call_id,
                            content,
                            is_error: !ok,
                        });
                    }
                }
            }
        }
        Ok(ModelRequest {
            system,
            messages,
            tools,
            max_tokens,
            temperature,
            step: self.state.steps + 1,
        })
    }

    /// Run tool calls: invalid ones answered at once, read-only ones side by
    /// side, the rest one by one — each announced durably before it runs.
    async fn dispatch(&mut self, step: u64, calls: Vec<ToolCall>) -> Result<(), RunError> {
        let mut batch: Vec<(String, String, serde_json::Value)> = Vec::new();
        for call in calls {
            let parsed = self.prepare(&call);
            match parsed {
                Err(message) => {
                    self.flush(step, std::mem::take(&mut batch)).await?;
                    let result = self
                        .put(
                            serde_json::to_vec(&serde_json::json!({"error": message}))
                                .unwrap_or_default(),
                        )
                        .await?;
                    self.append(vec![Event::ToolFinished {
                        step,
                        call_id: call.id,
                        ok: false,
                        result,
                        receipt: serde_json::Value::Null,
                    }])
                    .await?;
                }
                Ok((effect, input)) => {
                    if effect == Effect::ReadOnly {
                        batch.push((call.id, call.name, input));
                    } else {
                        self.flush(step, std::mem::take(&mut batch)).await?;
                        self.flush(step, vec![(call.id, call.name, input)]).await?;
                    }
                }
            }
        }
        self.flush(step, batch).await
    }

    /// Check a call before running it: known tool, JSON object arguments.
    fn prepare(&self, call: &ToolCall) -> Result<(Effect, serde_json::Value), serde_json::Value> {
        let Some(tool) = self.agent.tools.get(&call.name) else {
            return Err(serde_json::json!({
                "kind": "not-found",
                "message": format!(
                    "there is no tool `{}`; available: {}",
                    call.name,
                    self.agent.tools.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            }));
        };
        let text = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            call.arguments.as_str()
        };
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) if v.is_object() => Ok((tool.spec.effect, v)),
            Ok(_) => Err(serde_json::json!({
                "kind": "invalid-input",
                "message": "the arguments must be a JSON object",
            })),
            Err(e) => Err(serde_json::json!({
                "kind": "invalid-input",
                "message": format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's schema"),
            })),
        }
    }

    /// Start (durably), run, and finish a group of calls.
    async fn flush(
        &mut self,
        step: u64,
        batch: Vec<(String, String, serde_json::Value)>,
    ) -> Result<(), RunError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut started = Vec::new();
        for (call_id, name, input) in &batch {
            let Some(tool) = self.agent.tools.get(name) else {
                continue;
            };
            let component = &self.agent.components[tool.component];
            let effect = match tool.spec.effect {
                Effect::ReadOnly => "read-only",
                Effect::Idempotent => "idempotent",
                Effect::Writes => "writes",
            };
            let event = Event::ToolStarted {
                step,
                call_id: call_id.clone(),
                component: component.prefix.clone(),
                component_digest: component.loaded.digest().to_owned(),
                tool: tool.spec.name.clone(),
                effect: effect.to_owned(),
                input: BlobRef::of(&[]),
            };
            started.push((event, input.to_string().into_bytes()));
        }
        let mut events = Vec::new();
        for (mut event, input) in started {
            let blob = self.put(input).await?;
            if let Event::ToolStarted { input, .. } = &mut event {
                *input = blob;
            }
            events.push(event);
        }
        // Durable before any of them runs.
        self.append(events).await?;

        let runs = batch
            .iter()
            .map(|(_, name, input)| self.execute(name, input));
        let results = join_all(runs).await;
        let mut finished = Vec::new();
        for ((call_id, _, _), (ok, result, receipt)) in batch.into_iter().zip(results) {
            let result = self.put(result).await?;
            finished.push(Event::ToolFinished {
                step,
                call_id,
                ok,
                result,
                receipt,
            });
        }
        self.append(finished).await
    }

    /// Call a tool; returns (ok, result JSON bytes, trimmed receipt).
    async fn execute(
        &self,
        name: &str,
        input: &serde_json::Value,
    ) -> (bool, Vec<u8>, serde_json::Value) {
        let Some(tool) = self.agent.tools.get(name) else {
            let err = serde_json::json!({"error": {"kind": "not-found", "message": format!("no tool `{name}`")}});
            return (false, err.to_string().into_bytes(), serde_json::Value::Null);
        };
        let component = &self.agent.components[tool.component];
        let outcome = self
            .hands
            .call(&component.loaded, &component.grants, &tool.spec.name, input)
            .await;
        let receipt = trim_receipt(serde_json::to_value(&outcome.receipt).unwrap_or_default());
        match outcome.result {
            Ok(output) => (true, output.to_string().into_bytes(), receipt),
            Err(error) => {
                let value = serde_json::json!({ "error": error_value(&error) });
                (false, value.to_string().into_bytes(), receipt)
            }
        }
    }
}

/// The pause for limit `name` reached (`used` of `limit`).
fn limit_reason(name: &str, used: u64, limit: u64) -> PauseReason {
    PauseReason {
        kind: PauseKind::Limit,
        limit: Some(name.to_owned()),
        detail: format!("{name} reached ({used} of {limit}); resume with --raise {name}=<higher>"),
    }
}

fn error_value(error: &CallError) -> serde_json::Value {
    serde_json::to_value(error)
        .unwrap_or_else(|_| serde_json::json!({"message": error.to_string()}))
}

/// Keep the receipt small in the log: stdio and logs are cut.
fn trim_receipt(mut receipt: serde_json::Value) -> serde_json::Value {
    for key in ["stdout", "stderr"] {
        if let Some(text) = receipt.pointer_mut(&format!("/{key}/text"))
            && let Some(s) = text.as_str()
            && s.len() > 1024
        {
            let end = s.floor_char_boundary(1024);
            *text = serde_json::Value::String(format!("{}…", &s[..end]));
        }
    }
    if let Some(logs) = receipt.get_mut("logs").and_then(|l| l.as_array_mut()) {
        logs.truncate(16);
    }
    // The hands bound each entry (4 KiB) and each list (64 entries), but
    // not their sum: 64 uses of 8 KiB of guest-chosen paths, escaped, would
    // make `tool_finished` too large to store. Drop entries from the ends
    // of the lists until the receipt fits, and say how many.
    let json_len = |v: &serde_json::Value| serde_json::to_string(v).map_or(0, |s| s.len());
    let mut size = json_len(&receipt);
    let mut dropped = 0u64;
    for key in ["logs", "used", "denied", "limits_hit"] {
        let Some(items) = receipt.get_mut(key).and_then(|l| l.as_array_mut()) else {
            continue;
        };
        while size > MAX_RECEIPT_JSON {
            let Some(item) = items.pop() else { break };
            size = size.saturating_sub(json_len(&item) + 1);
            dropped += 1;
        }
    }
    if dropped > 0
        && let Some(object) = receipt.as_object_mut()
    {
        object.insert("entries_dropped".to_owned(), dropped.into());
    }
    receipt
}

/// The most a trimmed receipt takes in `tool_finished`, as JSON: about
/// 32 KiB (the count of removed entries adds a few bytes).
const MAX_RECEIPT_JSON: usize = 32 * 1024;

/// Poll every future to completion on the current task and return their
/// outputs in order. Read-only calls of one answer are few; a plain join
/// keeps results in the order of the calls without spawning.
async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    use std::task::Poll;
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futures.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => results[i] = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// Whether a lease holder named `host-pid` is a process of this machine
/// that no longer exists (so its lease need not be waited out). `me` is this
/// worker's own `host-pid` name.
fn holder_is_dead(holder: &str, me: &str) -> bool {
    let split = |s: &str| {
        s.rsplit_once('-')
            .map(|(h, p)| (h.to_owned(), p.parse::<u32>().ok()))
    };
    match (split(holder), split(me)) {
        (Some((host, Some(pid))), Some((my_host, _))) if host == my_host => {
            cfg!(target_os = "linux") && !Path::new(&format!("/proc/{pid}")).exists()
        }
        _ => false,
    }
}

/// Fold a session from its latest snapshot and the events after it.
pub async fn load_state(store: &dyn Store, session: &SessionId) -> Result<SessionState, RunError> {
    let log = store.wake_log(session).await?;
    let mut state = match &log.snapshot {
        Some(EventRecord {
            event: Event::Snapshot { state, .. },
            ..
        }) => {
            let bytes = store.get_blob(state).await?;
            serde_json::from_slice(&bytes)
                .map_err(|e| RunError::Log(format!("snapshot blob: {e}")))?
        }
        _ => SessionState::default(),
    };
    for record in &log.tail {
        state.apply(record);
    }
    Ok(state)
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
    use super::*;

    #[test]
    fn a_receipt_of_many_large_entries_is_trimmed_to_fit() {
        let entry = serde_json::json!({
            "capability": "fs",
            "resource": "\u{1}".repeat(4096),
            "detail": "\u{1}".repeat(4096),
        });
        let receipt = serde_json::json!({
            "wall_us": 7,
            "bytes_written": 3,
            "used": vec![entry.clone(); 64],
            "denied": vec![entry; 64],
            "logs": [],
        });
        assert!(receipt.to_string().len() > crate::session::MAX_EVENT_JSON);
        let trimmed = trim_receipt(receipt);
        assert!(trimmed.to_string().len() <= MAX_RECEIPT_JSON);
        // What the fold and `log` read is kept; what went is counted.
        assert_eq!(trimmed["wall_us"], 7);
        assert_eq!(trimmed["bytes_written"], 3);
        let kept = trimmed["used"].as_array().map_or(0, Vec::len)
            + trimmed["denied"].as_array().map_or(0, Vec::len);
        assert_eq!(trimmed["entries_dropped"], (128 - kept) as u64);
        // A small receipt is left as it was.
        let small = serde_json::json!({"wall_us": 1, "used": [{"capability": "fs"}]});
        assert_eq!(trim_receipt(small.clone()), small);
    }
}
