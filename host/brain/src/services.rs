//! What a session runs with besides its log: decided once, at its start,
//! frozen into its first event, and rebuilt from that alone by every
//! process that wakes it — `resume`, a `longhand worker`, `serve`, a parent
//! waking its child (the runners themselves are built by `launch`).
//!
//! Two halves:
//! - [`override_models`] writes a flag that replaces the model (`run
//!   --model`, `--cassette`, `--script`) into every model of the frozen
//!   agent: the worker's, each role's (`[roles.*]`) and each child agent's,
//!   recursively. `run` calls it before prices are frozen, so every answer
//!   is priced at the model that gives it and counts toward
//!   `max_cost_micros`; a woken session has nothing left to guess.
//! - [`Services`] is what one process adds to frozen agents: one provider
//!   per distinct model config (a cache, so a cassette, a script or a
//!   `--record` cassette shared by the worker, its roles and its children
//!   is one instance), the memory bank, the retry policy, and a wrapper
//!   such as a worker's rate limits. [`Services::kit`] is the one function
//!   that turns a frozen agent into what its runner calls (a [`Kit`]): for
//!   a session started here, a woken one, a delegated child and a parallel
//!   task's child alike.
//!
//! This module decides nothing about a session and writes no event; it
//! reads frozen agents and builds providers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::agent::config::{MemoryConfig, ModelConfig};
use crate::agent::frozen::{Frozen, price_key};
use crate::core::state::roles::Role;
use crate::error::LaunchError;
use crate::memory::{MemoryBank, MemoryError};
use crate::model::{
    BuildError, ModelFlag, ModelProvider, ProviderKind, RecordingProvider, RetryPolicy,
    build_provider,
};

/// A flag that replaces every model of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelOverride {
    /// `--model PROVIDER:MODEL[@BASE_URL]`.
    Model(ModelFlag),
    /// `--cassette FILE`: replay every answer from it.
    Cassette(PathBuf),
    /// `--script FILE`: answer turn *k* with its *k*-th response.
    Script(PathBuf),
}

impl ModelOverride {
    /// Point `model` where the flag says, keeping its other settings.
    pub fn apply(&self, model: &mut ModelConfig) {
        match self {
            Self::Model(flag) => flag.clone().apply(model),
            Self::Cassette(file) => {
                model.provider = ProviderKind::Replay;
                model.cassette = Some(file.clone());
            }
            Self::Script(file) => {
                model.provider = ProviderKind::Script;
                model.cassette = Some(file.clone());
            }
        }
        // An agent without `[model]` has no model name for the log and
        // prices to show: the answers' source is it.
        if model.model.is_empty() {
            model.model = model.provider.as_str().to_owned();
        }
    }
}

/// Replace every model `frozen` calls — its `[model]`, its `[roles.*]`,
/// and its children's, recursively — with the one `with` names.
///
/// The flag is applied to `[model]` as it always was (its request knobs
/// stay); every other model is then pointed at the same endpoint: the
/// same provider, model, base URL, key variable and file. A role or child
/// keeps its own request knobs (`max_tokens`, `temperature`, streaming,
/// timeouts), but never its own endpoint or key: a key meant for one
/// server is not sent to another.
pub fn override_models(frozen: &mut Frozen, with: &ModelOverride) {
    with.apply(&mut frozen.model);
    let endpoint = frozen.model.clone();
    point_below(frozen, &endpoint);
}

/// Point the roles and children of `frozen` (not its `[model]`) at
/// `endpoint`'s provider, model, URL, key variable and file.
fn point_below(frozen: &mut Frozen, endpoint: &ModelConfig) {
    for role in [&mut frozen.roles.planner, &mut frozen.roles.judge]
        .into_iter()
        .flatten()
    {
        point(role, endpoint);
    }
    for child in frozen.agents.values_mut() {
        point(&mut child.frozen.model, endpoint);
        point_below(&mut child.frozen, endpoint);
    }
}

fn point(model: &mut ModelConfig, endpoint: &ModelConfig) {
    model.provider = endpoint.provider;
    model.model.clone_from(&endpoint.model);
    model.base_url.clone_from(&endpoint.base_url);
    model.api_key_env.clone_from(&endpoint.api_key_env);
    model.cassette.clone_from(&endpoint.cassette);
}

/// Reads an environment variable (a key's).
type Env = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Wraps every provider built (e.g. a worker's shared rate limits).
type Wrap = Box<dyn Fn(Arc<dyn ModelProvider>) -> Arc<dyn ModelProvider> + Send + Sync>;

/// Where models' answers come from.
enum Answers {
    /// From the provider each frozen model config names, built with keys
    /// read through `Env`.
    Frozen(Env),
    /// From this one provider, whatever the config says (tests, benches,
    /// an embedder with its own model).
    Only(Arc<dyn ModelProvider>),
}

/// Where the memory bank is.
enum Bank {
    /// In this data directory (`memory::default_path`).
    In(PathBuf),
    /// Nowhere to put one: an agent with `[memory]` scopes is refused.
    Nowhere,
    /// Not attached: memory tools are not offered.
    Off,
}

/// What one process adds to frozen agents to run them; shared by every
/// runner it builds (see the module docs).
pub struct Services {
    answers: Answers,
    bank: Bank,
    wrap: Option<Wrap>,
    record: Option<PathBuf>,
    retry: RetryPolicy,
    /// Providers built so far, by [`cache_key`].
    providers: Mutex<HashMap<String, Arc<dyn ModelProvider>>>,
    /// The first recorder opened: later ones share its cassette.
    recorder: Mutex<Option<RecordingProvider<Arc<dyn ModelProvider>>>>,
    /// The memory bank, once opened.
    memory: Mutex<Option<Arc<MemoryBank>>>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("record", &self.record)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// A lock that a panic elsewhere does not poison: every value behind one
/// here is a cache, whole after every insert.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Services {
    /// Providers built from each frozen model config, keys read with
    /// `env`; no memory bank location yet (see [`Services::data_dir`]).
    pub fn new(env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self::with(Answers::Frozen(Box::new(env)), Bank::Nowhere)
    }

    /// Every model of every runner answered by `provider`, without a
    /// memory bank.
    pub fn answering(provider: Arc<dyn ModelProvider>) -> Self {
        Self::with(Answers::Only(provider), Bank::Off)
    }

    fn with(answers: Answers, bank: Bank) -> Self {
        Self {
            answers,
            bank,
            wrap: None,
            record: None,
            retry: RetryPolicy::default(),
            providers: Mutex::default(),
            recorder: Mutex::default(),
            memory: Mutex::default(),
        }
    }

    /// Keep the memory bank in `dir` (`None`: there is no data directory,
    /// and an agent with `[memory]` scopes is refused).
    pub fn data_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.bank = dir.map_or(Bank::Nowhere, Bank::In);
        self
    }

    /// Record every answer — every role's and every child's — into the
    /// cassette at `path`, extending it.
    pub fn record(mut self, path: PathBuf) -> Self {
        self.record = Some(path);
        self
    }

    /// Wrap every provider built with `wrap` (before recording).
    pub fn wrap(
        mut self,
        wrap: impl Fn(Arc<dyn ModelProvider>) -> Arc<dyn ModelProvider> + Send + Sync + 'static,
    ) -> Self {
        self.wrap = Some(Box::new(wrap));
        self
    }

    /// Retry model calls by `retry`.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// What a runner of `frozen` calls: the provider of its `[model]` and
    /// of each role with its own, and the memory bank when `[memory]`
    /// names a scope. The one place a runner's providers are built.
    pub fn kit(self: &Arc<Self>, frozen: &Frozen) -> Result<Kit, LaunchError> {
        self.kit_in(Arc::default(), frozen)
    }

    /// [`Services::kit`] for a runner of the session tree whose replays
    /// are `tree` (see [`Kit::tree`]).
    fn kit_in(self: &Arc<Self>, tree: Tree, frozen: &Frozen) -> Result<Kit, LaunchError> {
        let role = |model: &Option<ModelConfig>| {
            model.as_ref().map(|m| self.provider(&tree, m)).transpose()
        };
        Ok(Kit {
            worker: self.provider(&tree, &frozen.model)?,
            planner: role(&frozen.roles.planner)?,
            judge: role(&frozen.roles.judge)?,
            memory: self.memory(&frozen.memory)?,
            retry: self.retry.clone(),
            services: Arc::clone(self),
            tree,
        })
    }

    /// The provider `model` names: built once per distinct config, then
    /// shared.
    fn provider(
        &self,
        tree: &Tree,
        model: &ModelConfig,
    ) -> Result<Arc<dyn ModelProvider>, LaunchError> {
        let key = match &self.answers {
            Answers::Only(_) => String::new(),
            Answers::Frozen(_) => cache_key(model),
        };
        // A cassette is read in order: one cursor per session tree (the
        // session, its roles, its children), never shared by two sessions
        // a worker runs. Every other provider holds no conversation state
        // and is shared by the whole process.
        let mut cache = if matches!(model.provider, ProviderKind::Replay) {
            lock(tree)
        } else {
            lock(&self.providers)
        };
        if let Some(provider) = cache.get(&key) {
            return Ok(Arc::clone(provider));
        }
        let built = match &self.answers {
            Answers::Only(provider) => Arc::clone(provider),
            Answers::Frozen(env) => build_provider(model, env).map_err(|source| match source {
                BuildError::NoModel => LaunchError::NoModel(source),
                source => LaunchError::Provider {
                    model: price_key(model),
                    source,
                },
            })?,
        };
        let built = match &self.wrap {
            Some(wrap) => wrap(built),
            None => built,
        };
        let built = self.recorded(built)?;
        cache.insert(key, Arc::clone(&built));
        Ok(built)
    }

    /// `provider`, recording into the `--record` cassette when one is
    /// asked for: every recorder shares the first one's cassette.
    fn recorded(
        &self,
        provider: Arc<dyn ModelProvider>,
    ) -> Result<Arc<dyn ModelProvider>, LaunchError> {
        let Some(path) = &self.record else {
            return Ok(provider);
        };
        let mut first = lock(&self.recorder);
        if let Some(first) = first.as_ref() {
            return Ok(Arc::new(first.share(provider)));
        }
        let opened = RecordingProvider::open(Arc::clone(&provider), path).map_err(|source| {
            LaunchError::Record {
                path: path.clone(),
                source,
            }
        })?;
        let shared = Arc::new(opened.share(provider));
        *first = Some(opened);
        Ok(shared)
    }

    /// The memory bank, when `config` names any scope.
    fn memory(&self, config: &MemoryConfig) -> Result<Option<Arc<MemoryBank>>, LaunchError> {
        if config.read.is_empty() && config.search.is_empty() && config.remember.is_none() {
            return Ok(None);
        }
        let dir = match &self.bank {
            Bank::Off => return Ok(None),
            Bank::Nowhere => return Err(LaunchError::NoDataDir),
            Bank::In(dir) => dir,
        };
        let mut bank = lock(&self.memory);
        if let Some(bank) = bank.as_ref() {
            return Ok(Some(Arc::clone(bank)));
        }
        let path = crate::memory::default_path(dir);
        let opened = std::fs::create_dir_all(dir)
            .map_err(|source| MemoryError::Io {
                context: format!("creating the data directory {}", dir.display()),
                source,
            })
            .and_then(|()| MemoryBank::open(&path))
            .map(Arc::new)
            .map_err(|source| LaunchError::Memory {
                path: path.clone(),
                source,
            })?;
        *bank = Some(Arc::clone(&opened));
        Ok(Some(opened))
    }
}

/// What tells two model configs' providers apart. A cassette or a script
/// is its file alone (request knobs are not part of it), so every model
/// pointed at one file shares one provider; an HTTP provider is its whole
/// config (URL, key variable, wire settings).
fn cache_key(model: &ModelConfig) -> String {
    match model.provider {
        ProviderKind::Replay | ProviderKind::Script => {
            format!("{}:{:?}", model.provider.as_str(), model.cassette)
        }
        _ => format!("{model:?}"),
    }
}

/// What one runner calls, built by [`Services::kit`] from its frozen
/// agent: the providers of its roles, its memory bank, its retry policy,
/// and the services its children's kits come from.
#[derive(Clone)]
pub struct Kit {
    worker: Arc<dyn ModelProvider>,
    planner: Option<Arc<dyn ModelProvider>>,
    judge: Option<Arc<dyn ModelProvider>>,
    /// The memory bank `[memory]` scopes refer to, when attached.
    pub(super) memory: Option<Arc<MemoryBank>>,
    /// How model calls are retried.
    pub(super) retry: RetryPolicy,
    services: Arc<Services>,
    /// The providers only this session tree shares (its cassette's replay).
    tree: Tree,
}

/// Providers by [`cache_key`].
type Tree = Arc<Mutex<HashMap<String, Arc<dyn ModelProvider>>>>;

impl std::fmt::Debug for Kit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kit")
            .field("worker", &self.worker.name())
            .field("memory", &self.memory.is_some())
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Kit {
    /// The provider that answers `role`: its own model's, or the
    /// worker's.
    pub fn provider(&self, role: Role) -> Arc<dyn ModelProvider> {
        let own = match role {
            Role::Planner => self.planner.as_ref(),
            Role::Judge => self.judge.as_ref(),
            Role::Worker | Role::Handoff => None,
        };
        Arc::clone(own.unwrap_or(&self.worker))
    }

    /// The kit of a child agent frozen as `frozen` (a delegate's or a
    /// parallel task's): from the same services, with this runner's retry
    /// policy.
    pub fn child(&self, frozen: &Frozen) -> Result<Kit, LaunchError> {
        let mut kit = self.services.kit_in(Arc::clone(&self.tree), frozen)?;
        kit.retry = self.retry.clone();
        Ok(kit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A frozen agent with `model`, a judge of its own, and a child with
    /// its own model and a grandchild.
    fn tree(script: &std::path::Path) -> Frozen {
        let model = |name: &str, url: &str| {
            json!({"provider": "openai", "model": name, "base_url": url,
                   "api_key_env": format!("{name}_KEY")})
        };
        let leaf = json!({"name": "leaf", "instructions": "i", "model": model("leaf", "http://leaf/v1"),
                          "limits": {}, "tools": [], "completion": null, "base_dir": "/"});
        let child = json!({"name": "child", "instructions": "i",
                           "model": model("child", "http://child/v1"),
                           "roles": {"planner": model("child-planner", "http://cp/v1")},
                           "limits": {}, "tools": [], "completion": null, "base_dir": "/",
                           "agents": {"leaf": {"description": "d", "frozen": leaf}}});
        let mut judge = model("judge", "http://judge/v1");
        judge["max_tokens"] = json!(77);
        judge["stream"] = json!(false);
        let frozen: Frozen = serde_json::from_value(json!({
            "name": "top", "instructions": "i", "model": model("top", "http://top/v1"),
            "roles": {"judge": judge},
            "limits": {}, "tools": [], "completion": null, "base_dir": "/",
            "agents": {"child": {"description": "d", "frozen": child}}
        }))
        .expect("a frozen agent");
        std::fs::write(script, r#"{"responses": []}"#).expect("script");
        frozen
    }

    /// Every model config of `frozen`, depth first.
    fn models(frozen: &Frozen) -> Vec<&ModelConfig> {
        let mut out = vec![&frozen.model];
        out.extend(frozen.roles.planner.iter());
        out.extend(frozen.roles.judge.iter());
        for child in frozen.agents.values() {
            out.extend(models(&child.frozen));
        }
        out
    }

    #[test]
    fn an_override_reaches_every_role_and_child_and_keeps_their_knobs() {
        let dir = tempfile::TempDir::new().expect("tempdir");
        let mut frozen = tree(&dir.path().join("s.json"));
        let flag: ModelFlag = "openai:m@http://127.0.0.1:9/v1".parse().expect("flag");
        override_models(&mut frozen, &ModelOverride::Model(flag));
        let all = models(&frozen);
        assert_eq!(all.len(), 5);
        for m in &all {
            assert_eq!(m.provider, ProviderKind::OpenAi);
            assert_eq!(m.model, "m");
            assert_eq!(m.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
            // The key `[model]` kept (same provider), never a role's own.
            assert_eq!(m.api_key_env.as_deref(), Some("top_KEY"));
        }
        let judge = frozen.roles.judge.as_ref().expect("judge");
        assert_eq!((judge.max_tokens, judge.stream), (77, false));

        let script = dir.path().join("s.json");
        override_models(&mut frozen, &ModelOverride::Script(script.clone()));
        for m in models(&frozen) {
            assert_eq!(m.provider, ProviderKind::Script);
            assert_eq!(m.cassette.as_deref(), Some(script.as_path()));
        }
    }

    #[test]
    fn one_provider_per_distinct_config_and_one_for_a_shared_file() {
        let dir = tempfile::TempDir::new().expect("tempdir");
        let script = dir.path().join("s.json");
        let mut frozen = tree(&script);
        let services = Arc::new(Services::new(|_| None));
        // Without an override: the worker and the judge are two servers.
        let kit = services.kit(&frozen).expect("kit");
        assert!(!Arc::ptr_eq(
            &kit.provider(Role::Worker),
            &kit.provider(Role::Judge)
        ));
        assert!(Arc::ptr_eq(
            &kit.provider(Role::Worker),
            &kit.provider(Role::Planner)
        ));
        let again = services.kit(&frozen).expect("kit");
        assert!(Arc::ptr_eq(
            &kit.provider(Role::Judge),
            &again.provider(Role::Judge)
        ));
        // A script for all: one instance for the worker, its judge (other
        // knobs) and a child's planner.
        override_models(&mut frozen, &ModelOverride::Script(script));
        let kit = services.kit(&frozen).expect("kit");
        let child = &frozen.agents["child"].frozen;
        let child_kit = kit.child(child).expect("child kit");
        let worker = kit.provider(Role::Worker);
        assert_eq!(worker.name(), "script");
        for other in [
            kit.provider(Role::Judge),
            child_kit.provider(Role::Planner),
            child_kit.provider(Role::Worker),
        ] {
            assert!(Arc::ptr_eq(&worker, &other));
        }
    }

    #[test]
    fn a_cassette_is_one_cursor_per_session_tree_never_shared_by_two_sessions() {
        let dir = tempfile::TempDir::new().expect("tempdir");
        let cassette = dir.path().join("c.json");
        std::fs::write(&cassette, r#"{"version":1,"turns":[]}"#).expect("cassette");
        let mut frozen = tree(&dir.path().join("s.json"));
        override_models(&mut frozen, &ModelOverride::Cassette(cassette));
        let services = Arc::new(Services::new(|_| None));
        let one = services.kit(&frozen).expect("kit");
        let two = services.kit(&frozen).expect("kit");
        let child = one
            .child(&frozen.agents["child"].frozen)
            .expect("child kit");
        assert!(Arc::ptr_eq(
            &one.provider(Role::Worker),
            &one.provider(Role::Judge)
        ));
        assert!(Arc::ptr_eq(
            &one.provider(Role::Worker),
            &child.provider(Role::Worker)
        ));
        assert!(!Arc::ptr_eq(
            &one.provider(Role::Worker),
            &two.provider(Role::Worker)
        ));
    }

    #[test]
    fn memory_scopes_without_a_data_directory_are_refused() {
        let dir = tempfile::TempDir::new().expect("tempdir");
        let mut frozen = tree(&dir.path().join("s.json"));
        frozen.memory.read = vec!["project:x".to_owned()];
        let err = Arc::new(Services::new(|_| None))
            .kit(&frozen)
            .expect_err("no data directory");
        assert!(matches!(err, LaunchError::NoDataDir), "{err}");
        let services = Arc::new(Services::new(|_| None).data_dir(Some(dir.path().to_owned())));
        let one = services.kit(&frozen).expect("kit").memory.expect("a bank");
        let two = services.kit(&frozen).expect("kit").memory.expect("a bank");
        assert!(Arc::ptr_eq(&one, &two), "one bank per process");
    }
}
