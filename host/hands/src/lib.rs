//! The hands: the tool host.
//!
//! A tool is a WASI Preview 2 component exporting `longhand:tool/tools`
//! (see `wit/tool.wit`), or one written for another host whose exported
//! functions become tools (see `derived.rs`). [`Hands`] owns the one wasmtime engine of the
//! process (pooling allocator, epoch interruption, fuel) and runs every call
//! in a **fresh instance** created from a pre-linked `InstancePre`, with only
//! the capabilities the [`Grants`] allow. No guest state survives a call.
//!
//! What this module must not do: know about sessions, models or the agent
//! loop. It takes a tool, grants and an input, and gives back an outcome and
//! a receipt; recording them is the caller's business.

mod addr;
mod bindings;
pub mod bound;
pub mod budget;
pub mod builtin;
mod call;
pub mod caps;
mod component;
mod derived;
pub mod dev;
pub mod dirs;
mod exec;
pub mod files_tape;
mod fs;
pub mod grants;
mod info;
mod kept;
pub mod mcp;
mod net;
mod process;
pub mod programs;
pub mod receipt;
mod redact;
pub mod sandbox;
pub mod schema;
pub mod seal;
mod sockets;
pub mod sql;
pub mod tape;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{Linker, ResourceTableError};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi_http::FieldMapError;

pub use component::{
    CapabilityRequests, ComponentInfo, DirRequest, Effect, LoadError, LoadedTool, PinnedLoadError,
    ToolSpec, digest_of,
};
pub use files_tape::FilesTape;
pub use grants::{
    Access, DirGrant, DirIdentity, DirSpec, GrantError, GrantSpec, Grants, HostPattern, LimitSpec,
    Limits, Secret, SecretGrant,
};
pub use info::{Derivation, DerivedTool, SkippedExport};
pub use receipt::Receipt;
pub use tape::Tape;

use call::{CallBuilder, CallState};

/// How often the epoch advances: the granularity of call timeouts, and how
/// often a running guest yields to the executor (see [`exec`]).
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Most core instances (instantiated core modules) one component may have.
/// A Rust tool has 3; componentize-js's StarlingMonkey 4; componentize-py's
/// CPython 14 and more, since its libc, libpython and every native
/// extension are modules of their own, linked at instantiation (44 with
/// `--stub-wasi`). Core instances are counted, not reserved: the pool
/// allocates their state when a component is instantiated, so the limit
/// costs nothing until it is used (`docs/benchmarks.md`, "Instance pool").
const CORE_INSTANCES_PER_COMPONENT: u32 = 64;
/// Most linear memories one component may define. Each is a slot of
/// reserved address space in the pool (`max_memory_size` plus guards), so
/// this is the expensive limit; every toolchain seen so far defines one.
const MEMORIES_PER_COMPONENT: u32 = 4;
/// Most tables one component may define (Rust, CPython and StarlingMonkey
/// components: 2).
const TABLES_PER_COMPONENT: u32 = 8;

/// The largest linear memory a pooled slot holds. On a 64-bit host, every
/// memory a grant may allow ([`grants::MAX_MEMORY_BYTES`], 4 GiB) in
/// reserved address space that costs nothing until touched. A 32-bit host
/// (32-bit ARM runs components on Pulley) has 4 GiB of address space in
/// all, so a slot is 64 MiB there and a guest grows no further, whatever
/// its grant says.
const POOL_MEMORY_BYTES: usize = if cfg!(target_pointer_width = "64") {
    grants::MAX_MEMORY_BYTES as usize
} else {
    64 << 20
};

/// Engine-wide settings. Defaults suit a laptop running a few agents.
#[derive(Debug, Clone)]
pub struct HandsConfig {
    /// Where compiled components are cached. Default `None`: compile on every
    /// load. The CLI uses `$LONGHAND_HOME/cache` (or the XDG cache dir).
    /// Entries are sealed with [`HandsConfig::cache_key`].
    pub cache_dir: Option<PathBuf>,
    /// The host key file that seals cache entries ([`seal::HostKey`];
    /// made on first use, mode 0600). Default `None`: `host.key` in
    /// [`HandsConfig::cache_dir`]. An entry is run only when its seal
    /// verifies; a key that cannot be read or made turns the cache off.
    /// The CLI uses `$LONGHAND_KEY_DIR/host.key`, else `host.key` in the
    /// cache directory, and keeps every directory grant away from it.
    pub cache_key: Option<PathBuf>,
    /// Calls that may run at once; further calls wait. Also sizes the
    /// instance pool. Default 64.
    pub max_concurrent_calls: u32,
    /// Run components on wasmtime's Pulley interpreter instead of native
    /// code from Cranelift: slower calls, but no executable memory is ever
    /// mapped. Hosts Cranelift has no backend for (32-bit ARM, 32-bit
    /// RISC-V) use Pulley whatever this says. Default `false`.
    pub interpreter: bool,
    /// Where the bytes of every built-in loaded are kept, by digest, so a
    /// session pinned to a built-in a later binary no longer embeds still
    /// finds it (see `kept.rs`). Default `None`: not kept. The CLI uses
    /// `components/` in the data directory.
    pub kept_dir: Option<PathBuf>,
}

impl Default for HandsConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            cache_key: None,
            kept_dir: None,
            max_concurrent_calls: 64,
            interpreter: false,
        }
    }
}

/// The tool host: one per process.
pub struct Hands {
    engine: Engine,
    linker: Linker<CallState>,
    cache: Option<component::Cache>,
    permits: Arc<Semaphore>,
    /// Loaded components by digest: loading the same bytes twice returns the
    /// same compiled, described component (it holds no guest state).
    loaded: std::sync::Mutex<std::collections::HashMap<String, Arc<LoadedTool>>>,
    /// Moves calls that run long off the caller's thread.
    offloader: exec::Offloader,
    /// Descriptors each call may hold: [`budget::MAX_OPEN_FILES`], or its
    /// share of the process limit when that is lower ([`budget::fd_share`]).
    fd_share: usize,
    /// Calls that may run at once.
    concurrency: usize,
    /// Components compiled so far ([`Hands::compiles`]).
    compiles: std::sync::atomic::AtomicU64,
    /// Where a name that is not a built-in is looked up
    /// ([`Hands::with_installed`]). Default `None`: only built-ins have names.
    installed: Option<Arc<dyn Installed>>,
    /// The built-ins' bytes by digest ([`HandsConfig::kept_dir`]).
    kept: Option<kept::Kept>,
}

/// Components installed under a name (`longhand tool install`): what a
/// name that is not a built-in means. The host that installs tools
/// implements it; the hands only ask it for bytes, and hash them again.
///
/// An implementation verifies what it hands out every time it is asked
/// (the bytes against the digest it recorded, a signature against the
/// operator's trust store), so a copy changed on disk since it was
/// installed is refused at every load, not only at install.
pub trait Installed: Send + Sync {
    /// The verified bytes of the tool installed as `name`; `Ok(None)` when
    /// none is; `Err` (why, and what to do) when one is but it no longer
    /// verifies.
    fn resolve(&self, name: &str) -> Result<Option<InstalledBytes>, String>;
}

/// An installed component's bytes, as [`Installed::resolve`] hands them out.
#[derive(Debug, Clone)]
pub struct InstalledBytes {
    /// The component.
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` the installer recorded; the hands hash the bytes
    /// again and refuse them if it differs.
    pub digest: String,
}

/// Why a call did not produce output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CallError {
    /// The input does not fit the tool's schema, or the tool said so. The
    /// model should fix the input.
    #[error("invalid input: {message}")]
    InvalidInput {
        /// What was wrong, naming the field.
        message: String,
    },
    /// The tool (or, from the host, the tool name) was not found. The model
    /// should look elsewhere.
    #[error("not found: {message}")]
    NotFound {
        /// What was not found.
        message: String,
    },
    /// The tool was refused a resource. The model may ask for a grant; the
    /// operator decides.
    #[error("access denied to {resource}: {reason}")]
    AccessDenied {
        /// The path, host or variable.
        resource: String,
        /// Why.
        reason: String,
    },
    /// The tool ran and reported failure. The model may retry differently.
    #[error("tool failed: {message}")]
    Failed {
        /// Why, as the tool put it.
        message: String,
    },
    /// A limit stopped the call (time, memory, fuel, stack, output). Raising
    /// the limit is the operator's decision; the host carries on.
    #[error("limit hit: {message}")]
    Limit {
        /// Which limit and its value.
        message: String,
    },
    /// The guest crashed (panic, trap, exit). Recorded; the model may retry.
    #[error("tool crashed: {message}")]
    Crashed {
        /// The cause, with the guest's panic message when there is one.
        message: String,
    },
    /// The grants do not allow this call at all (digest mismatch, invalid
    /// grant). Fix the configuration.
    #[error("call refused: {message}")]
    Refused {
        /// Why.
        message: String,
    },
    /// The host could not run the call (out of instance slots, I/O).
    /// Retrying later may work.
    #[error("host error: {message}")]
    Host {
        /// Why.
        message: String,
    },
}

impl CallError {
    /// Whether the cause is a denied capability or a broken limit (CLI exit
    /// code 3) rather than a tool-level error (exit code 1).
    pub fn is_denial_or_limit(&self) -> bool {
        matches!(
            self,
            Self::AccessDenied { .. } | Self::Limit { .. } | Self::Refused { .. }
        )
    }
}

/// The result of one call, with its receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// Output JSON, or why there is none.
    pub result: Result<serde_json::Value, CallError>,
    /// What it cost and touched.
    pub receipt: Receipt,
}

/// Per-call options of [`Hands::call_with`]. `Default` is a plain call.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Record the call's `wasi:http` exchanges on this tape, or answer them
    /// from it (see [`tape`]). Default `None`: requests go to the network
    /// under the grants' policy.
    pub tape: Option<Tape>,
    /// Keep what the call finds in its granted directories and what it
    /// writes there on this tape (see [`files_tape`]). Default `None`.
    pub files: Option<FilesTape>,
}

/// Where a component comes from.
#[derive(Debug, Clone, Copy)]
pub enum ToolSource<'a> {
    /// A tool built into the binary, by name (`fs`, `http`, `json`), or,
    /// when no built-in has the name and the host was given an
    /// [`Installed`] ([`Hands::with_installed`]), one installed under it.
    Builtin(&'a str),
    /// A `.wasm` file.
    File(&'a Path),
    /// Bytes in memory, with a label for messages.
    Bytes {
        /// Shown in errors and receipts.
        label: &'a str,
        /// The component.
        bytes: &'a [u8],
    },
}

impl Hands {
    /// Build the engine and linker. Fails only if the platform cannot
    /// reserve the instance pool.
    pub fn new(config: HandsConfig) -> anyhow::Result<Self> {
        let started = Instant::now();
        let slots = config.max_concurrent_calls.max(1);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(slots * CORE_INSTANCES_PER_COMPONENT)
            .total_memories(slots * MEMORIES_PER_COMPONENT)
            .total_tables(slots * TABLES_PER_COMPONENT)
            .total_stacks(slots)
            .max_memory_size(POOL_MEMORY_BYTES)
            .max_memories_per_component(MEMORIES_PER_COMPONENT)
            .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
            .max_tables_per_component(TABLES_PER_COMPONENT)
            // Keep a little of each slot resident so reuse avoids page faults
            // while a freed slot still starts zeroed.
            .linear_memory_keep_resident(64 << 10)
            .table_keep_resident(16 << 10);

        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(1 << 20)
            .async_stack_size(2 << 20)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        if config.interpreter {
            #[cfg(not(feature = "pulley"))]
            anyhow::bail!(
                "the Pulley interpreter was asked for, but this build lacks the cargo feature `pulley`"
            );
            #[cfg(feature = "pulley")]
            wasm.target(if cfg!(target_pointer_width = "64") {
                "pulley64"
            } else {
                "pulley32"
            })?;
        }
        if cfg!(target_pointer_width = "32") {
            // A slot's reservation is its whole size: no room for the
            // 4 GiB guard regions of 64-bit hosts.
            wasm.memory_reservation(POOL_MEMORY_BYTES as u64)
                .memory_guard_size(64 << 10);
        }
        let engine = Engine::new(&wasm)?;
        let engine_at = started.elapsed();

        let mut linker = Linker::new(&engine);
        caps::link_all(&mut linker)?;
        tracing::debug!(
            slots,
            engine_us = engine_at.as_micros(),
            linker_us = (started.elapsed() - engine_at).as_micros(),
            "tool host ready"
        );

        // The ticker ends when the engine is dropped.
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("longhand-epoch".to_owned())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })?;

        // No key, no cache: a cache entry is run only when its seal
        // verifies. A key that cannot be read or made is said once, and
        // every load compiles.
        let cache = config.cache_dir.and_then(|dir| {
            let key = config.cache_key.unwrap_or_else(|| dir.join("host.key"));
            match seal::HostKey::open_or_create(&key) {
                Ok(key) => Some(component::Cache { dir, key }),
                Err(err) => {
                    tracing::warn!(%err, "not using the compile cache");
                    None
                }
            }
        });

        Ok(Self {
            engine,
            linker,
            cache,
            permits: Arc::new(Semaphore::new(slots as usize)),
            loaded: std::sync::Mutex::new(std::collections::HashMap::new()),
            offloader: exec::Offloader::default(),
            fd_share: budget::fd_share(budget::fd_limit(), slots),
            concurrency: slots as usize,
            compiles: std::sync::atomic::AtomicU64::new(0),
            installed: None,
            kept: config.kept_dir.map(kept::Kept::new),
        })
    }

    /// Resolve names that are not built-ins through `installed`: after
    /// this, [`ToolSource::Builtin`] names a built-in or, failing that, an
    /// installed tool. Built-in names come first, so an installed tool can
    /// never stand in for one (the installer refuses such names anyway).
    pub fn with_installed(mut self, installed: Arc<dyn Installed>) -> Self {
        self.installed = Some(installed);
        self
    }

    /// Calls that may run at once ([`HandsConfig::max_concurrent_calls`]).
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Descriptors each call may hold open at once (see [`budget`]).
    pub fn fd_share(&self) -> usize {
        self.fd_share
    }

    /// Calls (and describes) running right now on a thread of their own:
    /// those whose guest code ran longer than a couple of milliseconds (see
    /// `docs/security.md`, "Busy guests and the runtime"). For tests and
    /// metrics; 0 when nothing long is running.
    pub fn offloaded_calls(&self) -> usize {
        self.offloader.live()
    }

    /// Components compiled by Cranelift since this host started; loads
    /// served from memory or the compile cache do not count. For tests and
    /// metrics: a refused component never adds to it.
    pub fn compiles(&self) -> u64 {
        self.compiles.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Load, check, link and describe a component.
    ///
    /// Components are kept by digest for the life of the host, so loading
    /// the same bytes again is a lookup. A component whose imports fall
    /// outside [`caps::CAPABILITIES`] is refused from its bytes, before it
    /// is compiled or cached.
    pub async fn load(&self, source: ToolSource<'_>) -> Result<Arc<LoadedTool>, LoadError> {
        let read = read(source, self.installed.as_deref())?;
        self.keep(source, &read);
        self.load_read(read).await
    }

    /// Keep a built-in's bytes by digest (see `kept.rs`).
    fn keep(&self, source: ToolSource<'_>, read: &Read<'_>) {
        if let (Some(kept), ToolSource::Builtin(name)) = (&self.kept, source)
            && builtin::builtin(name).is_some()
        {
            kept.keep(&read.digest, &read.bytes);
        }
    }

    /// [`Hands::load`] of the component whose digest is `digest`
    /// (`sha256:<hex>`): the bytes are hashed and compared first, so a
    /// component that is not the pinned one is refused before its imports
    /// are read, and is never compiled or cached.
    pub async fn load_pinned(
        &self,
        source: ToolSource<'_>,
        digest: &str,
    ) -> Result<Arc<LoadedTool>, PinnedLoadError> {
        let mut read = read(source, self.installed.as_deref())?;
        self.keep(source, &read);
        if read.digest != digest
            && let ToolSource::Builtin(name) = source
            && builtin::builtin(name).is_some()
            && let Some(kept) = self.kept.as_ref().and_then(|k| k.get(digest))
        {
            // The built-in this binary embeds is not the one the session
            // froze: run the bytes the session froze, kept by digest.
            let bytes = kept.map_err(|reason| LoadError::Kept {
                name: name.to_owned(),
                reason,
            })?;
            read = Read {
                label: format!("{name} (kept {digest})"),
                bytes: bytes.into(),
                digest: digest.to_owned(),
            };
        }
        if read.digest != digest {
            return Err(PinnedLoadError::Mismatch {
                label: read.label,
                expected: digest.to_owned(),
                actual: read.digest,
            });
        }
        Ok(self.load_read(read).await?)
    }

    /// Judge the imports → compile (or take from the cache) → link →
    /// describe → cache: each step refuses before the next, dearer one runs.
    async fn load_read(&self, read: Read<'_>) -> Result<Arc<LoadedTool>, LoadError> {
        let Read {
            label,
            bytes,
            digest,
        } = read;
        if let Some(hit) = self
            .loaded
            .lock()
            .ok()
            .and_then(|m| m.get(&digest).cloned())
        {
            return Ok(hit);
        }
        // Each phase's time, for `RUST_LOG=longhand_hands=debug`.
        let started = Instant::now();
        let imports = component::imports_of(&label, &bytes)?;
        let capabilities = component::judge_imports(&label, &imports)?;
        let judged = started.elapsed();
        let component::Compiled {
            component: compiled,
            cache_to,
            fresh,
        } = component::compile(&self.engine, self.cache.as_ref(), &label, &bytes, &digest)?;
        if fresh {
            self.compiles
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let link_err = |e: wasmtime::Error| LoadError::Link {
            label: label.clone(),
            reason: format!("{e:#}"),
        };
        let compiled_at = started.elapsed();
        let instance_pre = self.linker.instantiate_pre(&compiled).map_err(link_err)?;
        let ours = bindings::CommandToolPre::new(instance_pre.clone());
        let linked = started.elapsed();
        let (info, validators, exports) = match ours {
            Ok(pre) => {
                let raw = self.describe(&label, &pre).await?;
                let (info, validators) = component::validate_info(&label, raw)?;
                (info, validators, component::Exports::World(pre))
            }
            // Ours, but not as this host knows it (a changed `tools`
            // interface): said as it is, never guessed around.
            Err(e) if derived::exports_our_world(&self.engine, &compiled) => {
                return Err(link_err(e));
            }
            Err(_) => {
                let (info, validators, functions) =
                    derived::derive(&self.engine, &label, &compiled, instance_pre).map_err(
                        |reason| LoadError::Link {
                            label: label.clone(),
                            reason,
                        },
                    )?;
                (
                    info,
                    validators,
                    component::Exports::Functions(Arc::new(functions)),
                )
            }
        };
        tracing::debug!(
            component = %label,
            fresh,
            judged_us = judged.as_micros(),
            compiled_us = (compiled_at - judged).as_micros(),
            linked_us = (linked - compiled_at).as_micros(),
            described_us = (started.elapsed() - linked).as_micros(),
            "loaded"
        );
        // Only components that passed every check are cached.
        if let (Some(cache), Some(entry)) = (&self.cache, cache_to) {
            component::remember(cache, &entry, &compiled);
        }
        let tool = Arc::new(LoadedTool {
            label,
            digest: digest.clone(),
            info,
            capabilities,
            exports,
            validators,
        });
        if let Ok(mut map) = self.loaded.lock() {
            map.insert(digest, tool.clone());
        }
        Ok(tool)
    }

    /// Run a component's `describe` like any call: fresh instance, no
    /// grants, default limits, and a slot of the instance pool.
    async fn describe(
        &self,
        label: &str,
        pre: &bindings::CommandToolPre<CallState>,
    ) -> Result<bindings::longhand::tool::types::ComponentInfo, LoadError> {
        let permit =
            self.permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| LoadError::Describe {
                    label: label.to_owned(),
                    reason: "the tool host is shutting down".to_owned(),
                })?;
        let limits = Limits::default();
        let describe_err = |reason: String| LoadError::Describe {
            label: label.to_owned(),
            reason,
        };
        let (state, stdio) = CallBuilder::new(&limits, self.fd_share).build();
        let (store, watch) = self
            .store(state, &limits)
            .map_err(|e| describe_err(format!("{e:#}")))?;
        let mut seat = Seat {
            store,
            _permit: permit,
        };
        // The guest future owns what it uses, so that it can move to a
        // thread of its own if it runs long; the seat comes back with the
        // result and is dropped here, not on a low-priority thread.
        let describing = pre.clone();
        let deadline = watch.deadline;
        let guest = async move {
            let raw = exec::within(deadline, async {
                let instance = describing.instantiate_async(&mut seat.store).await?;
                instance
                    .longhand_tool_tools()
                    .call_describe(&mut seat.store)
                    .await
            })
            .await;
            (raw, seat)
        };
        let raw = match self.offloader.run(guest, &watch).await {
            Ok((raw, _seat)) => raw,
            Err(exec::Lost::Overdue) => Err(exec::TimedOut),
            Err(lost @ exec::Lost::Panicked) => return Err(describe_err(lost.to_string())),
        };
        let raw = raw
            .map_err(|_| describe_err(format!("timed out after {:?}", limits.timeout)))?
            .map_err(|e| {
                let (_, stderr) = stdio.take();
                describe_err(format!("{e:#}{}", panic_note(&stderr.text)))
            })?;
        bound::describe(raw).map_err(describe_err)
    }

    /// A store for one call: its limiter and fuel, and the epoch watch that
    /// traps it at its timeout and lets it leave the caller's thread when it
    /// runs long (see [`exec`]).
    fn store(
        &self,
        state: CallState,
        limits: &Limits,
    ) -> wasmtime::Result<(Store<CallState>, exec::Watch)> {
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_fuel(limits.fuel)?;
        let watch = exec::arm(&mut store, limits.timeout, |s| {
            (s.limiter.peak_memory, s.limiter.memory_limit_hit)
        });
        Ok((store, watch))
    }

    /// Run tool `name` of `tool` on `input` with `grants`, in a fresh instance.
    ///
    /// Never panics and never returns a host error for guest misbehaviour:
    /// every failure is a [`CallError`] in the outcome, and the receipt is
    /// filled as far as the call got.
    pub async fn call(
        &self,
        tool: &LoadedTool,
        grants: &Grants,
        name: &str,
        input: &serde_json::Value,
    ) -> CallOutcome {
        self.call_with(tool, grants, name, input, CallOptions::default())
            .await
    }

    /// [`Hands::call`] with per-call `options` (an HTTP tape).
    pub async fn call_with(
        &self,
        tool: &LoadedTool,
        grants: &Grants,
        name: &str,
        input: &serde_json::Value,
        options: CallOptions,
    ) -> CallOutcome {
        let started = Instant::now();
        let mut receipt = Receipt {
            component_digest: tool.digest.clone(),
            tool: name.to_owned(),
            ..Receipt::default()
        };
        let result = self
            .call_inner(tool, grants, name, input, &mut receipt, options)
            .await;
        receipt.wall_us = started.elapsed().as_micros() as u64;
        CallOutcome { result, receipt }
    }

    async fn call_inner(
        &self,
        tool: &LoadedTool,
        grants: &Grants,
        name: &str,
        input: &serde_json::Value,
        receipt: &mut Receipt,
        options: CallOptions,
    ) -> Result<serde_json::Value, CallError> {
        let input_text = input.to_string();
        receipt.input_bytes = input_text.len() as u64;
        if let Some(expected) = &grants.component_digest
            && expected != &tool.digest
        {
            return Err(CallError::Refused {
                message: format!(
                    "the grants are for component {expected}, but {} is {}; review the new \
                     component and update the grant's digest",
                    tool.label, tool.digest
                ),
            });
        }
        grants.validate().map_err(|e| CallError::Refused {
            message: e.to_string(),
        })?;
        let Some(validator) = tool.validators.get(name) else {
            return Err(CallError::NotFound {
                message: format!(
                    "{} has no tool `{name}`; it offers: {}",
                    tool.label,
                    tool.info
                        .tools
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        validate_input(validator, input, receipt)?;
        // A derived tool's input becomes the function's arguments here,
        // before a slot is taken: what does not fit is for the model.
        let target = match &tool.exports {
            component::Exports::World(pre) => Target::World {
                pre: pre.clone(),
                name: name.to_owned(),
                input: input_text,
            },
            component::Exports::Functions(functions) => {
                let Some(func) = functions.funcs.get(name) else {
                    return Err(CallError::NotFound {
                        message: format!("{} has no function for tool `{name}`", tool.label),
                    });
                };
                let args = func
                    .arguments(input)
                    .map_err(|message| CallError::InvalidInput { message })?;
                Target::Function {
                    pre: functions.pre.clone(),
                    export: func.export,
                    args,
                    results: func.result_count(),
                }
            }
        };

        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError::Host {
                message: "the tool host is shutting down".to_owned(),
            })?;

        let limits = &grants.limits;
        let mut builder = CallBuilder::new(limits, self.fd_share);
        if let Some(files) = options.files {
            builder.fs.record(files);
        }
        caps::prepare_all(grants, &mut builder).map_err(|e| CallError::Refused {
            message: format!("{e:#}"),
        })?;
        builder
            .fs
            .refuse_requested(
                tool.info
                    .requests
                    .dirs
                    .iter()
                    .map(|d| (d.guest_path.as_str(), d.access, d.why.as_str())),
            )
            .map_err(|message| CallError::Host { message })?;
        if let Some(tape) = options.tape {
            builder.tape(tape);
        }
        let (state, stdio) = builder.build();
        let journal = state.journal.clone();
        let (store, watch) = self.store(state, limits).map_err(|e| CallError::Host {
            message: format!("{e:#}"),
        })?;
        let mut seat = Seat {
            store,
            _permit: permit,
        };

        // The guest future owns everything it uses (the seat, a handle to
        // the component, its input), so that it can move to a thread of its
        // own if it runs long; it hands the seat back for the receipt.
        let deadline = watch.deadline;
        let guest = async move {
            let run = exec::within(deadline, async {
                match target {
                    Target::World { pre, name, input } => {
                        let instance = pre.instantiate_async(&mut seat.store).await?;
                        instance
                            .longhand_tool_tools()
                            .call_call(&mut seat.store, &name, &input)
                            .await
                    }
                    Target::Function {
                        pre,
                        export,
                        args,
                        results,
                    } => {
                        let instance = pre.instantiate_async(&mut seat.store).await?;
                        let func = instance.get_func(&mut seat.store, export).ok_or_else(|| {
                            wasmtime::Error::msg("the derived function is not exported")
                        })?;
                        let mut out = vec![wasmtime::component::Val::Bool(false); results];
                        func.call_async(&mut seat.store, &args, &mut out).await?;
                        Ok(derived::output(out))
                    }
                }
            })
            .await;
            (run, seat)
        };
        let (run, fuel_left, peak_memory, memory_limit_hit) =
            match self.offloader.run(guest, &watch).await {
                Ok((run, seat)) => {
                    let limiter = &seat.store.data().limiter;
                    let (peak, hit) = (limiter.peak_memory, limiter.memory_limit_hit);
                    (run, seat.store.get_fuel().unwrap_or(0), peak, hit)
                }
                // Its thread is starved of CPU: the figures are the last
                // tick's, and the guest stops when the thread next runs.
                Err(exec::Lost::Overdue) => {
                    let m = watch.meter();
                    let run = Err(exec::TimedOut);
                    (run, m.fuel_left, m.peak_memory, m.memory_limit_hit)
                }
                Err(lost @ exec::Lost::Panicked) => {
                    return Err(CallError::Host {
                        message: lost.to_string(),
                    });
                }
            };
        receipt.fuel_used = limits.fuel.saturating_sub(fuel_left);
        receipt.peak_memory_bytes = peak_memory;
        let (stdout, stderr) = stdio.take();
        receipt.stdout = stdout;
        receipt.stderr = stderr;
        let mut ungranted = None;
        if let Ok(mut j) = journal.lock() {
            ungranted = j.ungranted.take();
            receipt.used = std::mem::take(&mut j.used);
            receipt.denied = std::mem::take(&mut j.denied);
            receipt.limits_hit = std::mem::take(&mut j.limits_hit);
            receipt.logs = std::mem::take(&mut j.logs);
            receipt.logs_dropped = j.logs_dropped;
            receipt.progress = j.progress.take();
            receipt.http_bytes_in = j.http_bytes_in;
            receipt.bytes_written = j.bytes_written();
        }

        if memory_limit_hit {
            receipt.limits_hit.push(format!(
                "memory growth refused at {} MiB",
                limits.memory_bytes >> 20
            ));
        }
        let result = match run {
            Err(exec::TimedOut) => Err(CallError::Limit {
                message: format!("timeout of {:?} reached", limits.timeout),
            }),
            Ok(Err(err)) => Err(classify_trap(
                &err,
                memory_limit_hit,
                limits,
                &receipt.stderr.text,
            )),
            Ok(Ok(Err(err))) => Err(tool_error(bound::tool_error(err, limits.max_output_bytes))),
            Ok(Ok(Ok(output))) => {
                receipt.output_bytes = output.len() as u64;
                if output.len() as u64 > limits.max_output_bytes {
                    Err(CallError::Limit {
                        message: format!(
                            "output of {} bytes exceeds the {} byte limit",
                            output.len(),
                            limits.max_output_bytes
                        ),
                    })
                } else {
                    serde_json::from_str(&output).map_err(|e| CallError::Failed {
                        message: format!("the tool returned output that is not JSON: {e}"),
                    })
                }
            }
        };
        if let Err(CallError::Limit { message }) = &result {
            receipt.limits_hit.push(message.clone());
        }
        // A tool that reached for a directory it asks for and was not
        // granted failed for want of the grant, whatever it made of the
        // refusal ("not found", a bare failure): say so, naming the grant.
        match (result, ungranted) {
            (
                Err(
                    CallError::NotFound { .. }
                    | CallError::AccessDenied { .. }
                    | CallError::Failed { .. },
                ),
                Some(dir),
            ) => Err(CallError::AccessDenied {
                resource: dir.guest_path,
                reason: dir.advice,
            }),
            (result, _) => result,
        }
    }
}

/// What one call runs: our world's `call`, or one derived function with
/// its arguments already converted (see `derived.rs`).
enum Target {
    World {
        pre: bindings::CommandToolPre<CallState>,
        name: String,
        input: String,
    },
    Function {
        pre: wasmtime::component::InstancePre<CallState>,
        export: wasmtime::component::ComponentExportIndex,
        args: Vec<wasmtime::component::Val>,
        results: usize,
    },
}

/// A component's bytes, read and hashed: the first step of every load.
struct Read<'a> {
    label: String,
    bytes: std::borrow::Cow<'a, [u8]>,
    digest: String,
}

/// Read a component's bytes and hash them. A name that is no built-in is
/// looked up in `installed`, and its bytes hashed here again.
fn read<'a>(
    source: ToolSource<'a>,
    installed: Option<&dyn Installed>,
) -> Result<Read<'a>, LoadError> {
    if let ToolSource::Builtin(name) = source
        && builtin::builtin(name).is_none()
        && let Some(installed) = installed
    {
        let found = installed
            .resolve(name)
            .map_err(|reason| LoadError::Installed {
                name: name.to_owned(),
                reason,
            })?;
        if let Some(found) = found {
            let digest = digest_of(&found.bytes);
            if digest != found.digest {
                return Err(LoadError::Installed {
                    name: name.to_owned(),
                    reason: format!(
                        "its bytes are {digest}, but it was installed as {}; \
                         reinstall it (`longhand tool install`)",
                        found.digest
                    ),
                });
            }
            return Ok(Read {
                label: name.to_owned(),
                bytes: found.bytes.into(),
                digest,
            });
        }
    }
    let (label, bytes): (String, std::borrow::Cow<'a, [u8]>) = match source {
        ToolSource::Builtin(name) => {
            let b = builtin::builtin(name).ok_or_else(|| match builtin::unbuilt(name) {
                Some(why) => LoadError::Unbuilt {
                    name: name.to_owned(),
                    why,
                },
                None => LoadError::UnknownBuiltin {
                    name: name.to_owned(),
                    known: builtin::BUILTINS
                        .iter()
                        .map(|b| b.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                },
            })?;
            (name.to_owned(), b.wasm().into())
        }
        ToolSource::File(path) => {
            let owned = std::fs::read(path).map_err(|cause| LoadError::Read {
                path: path.to_owned(),
                cause,
            })?;
            (path.display().to_string(), owned.into())
        }
        ToolSource::Bytes { label, bytes } => (label.to_owned(), bytes.into()),
    };
    // Built-ins are part of the binary: their digests were computed when
    // they were embedded, not hashed again by every process.
    let digest = match source {
        ToolSource::Builtin(name) => builtin::builtin(name)
            .map(|b| b.digest.to_owned())
            .unwrap_or_else(|| digest_of(&bytes)),
        _ => digest_of(&bytes),
    };
    Ok(Read {
        label,
        bytes,
        digest,
    })
}

fn tool_error(err: bindings::longhand::tool::types::ToolError) -> CallError {
    use bindings::longhand::tool::types::ToolError as E;
    match err {
        E::InvalidInput(message) => CallError::InvalidInput { message },
        E::NotFound(message) => CallError::NotFound { message },
        E::AccessDenied(d) => CallError::AccessDenied {
            resource: d.resource,
            reason: d.reason,
        },
        E::Failed(message) => CallError::Failed { message },
    }
}

/// A call's store and its place in the instance pool. They travel together
/// (to a guest thread and back) and drop in field order: the store frees its
/// pool slot before the permit admits the next call, so a call its caller
/// gave up on never lets a new one find the pool full.
struct Seat {
    store: Store<CallState>,
    _permit: OwnedSemaphorePermit,
}

/// Turn a wasmtime error into the cause a person can act on.
fn classify_trap(
    err: &wasmtime::Error,
    memory_limit_hit: bool,
    limits: &Limits,
    stderr: &str,
) -> CallError {
    let limit = |message: String| CallError::Limit { message };
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            return limit(format!("timeout of {:?} reached", limits.timeout));
        }
        Some(Trap::OutOfFuel) => {
            return limit(format!("fuel limit of {} exhausted", limits.fuel));
        }
        Some(Trap::StackOverflow) => {
            return limit("stack overflow: the guest exhausted its call stack".to_owned());
        }
        _ => {}
    }
    if memory_limit_hit {
        return limit(format!(
            "memory limit of {} MiB reached",
            limits.memory_bytes >> 20
        ));
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return CallError::Crashed {
            message: format!(
                "the tool exited with status {}{}",
                exit.0,
                panic_note(stderr)
            ),
        };
    }
    // Host-side bounds trap with their own error types, wrapped in context
    // by whichever host function hit them: look for the type, not the words.
    if let Some(ResourceTableError::Full) = cause::<ResourceTableError>(err) {
        return limit(format!(
            "resource table full: the call held more than {} host resources (handles)",
            call::MAX_RESOURCES
        ));
    }
    match cause::<FieldMapError>(err) {
        Some(FieldMapError::TotalSizeTooBig) => {
            let bound = budget::per_object_bytes(
                limits.host_memory_bytes(),
                call::MAX_RESOURCES,
                call::MAX_HTTP_FIELDS_BYTES,
            );
            return limit(format!(
                "HTTP header fields of more than {} KiB (their share of host_memory)",
                bound >> 10
            ));
        }
        Some(FieldMapError::TooManyFields) => {
            return limit("HTTP header map with too many fields".to_owned());
        }
        _ => {}
    }
    // The first line says where, the root cause says why; the backtrace is
    // for debugging and stays out of the message.
    let first = err.to_string();
    let first = first.lines().next().unwrap_or_default().to_owned();
    let root = err.root_cause().to_string();
    let trap = match err.downcast_ref::<Trap>() {
        Some(t) => t.to_string(),
        None if root != first && !root.is_empty() => format!("{first}: {root}"),
        None => first,
    };
    CallError::Crashed {
        message: format!("{trap}{}", panic_note(stderr)),
    }
}

/// The first error of type `E` in `err`'s chain, whether wasmtime wrapped
/// it with context or a host function returned it as another error's source.
fn cause<E>(err: &wasmtime::Error) -> Option<&E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    err.downcast_ref::<E>()
        .or_else(|| err.chain().find_map(|e| e.downcast_ref::<E>()))
}

/// The guest's panic message from stderr, if it printed one.
fn panic_note(stderr: &str) -> String {
    let Some(at) = stderr.find("panicked at") else {
        return String::new();
    };
    let text: String = stderr[at..].lines().take(3).collect::<Vec<_>>().join(" ");
    format!(" (guest {})", text.chars().take(500).collect::<String>())
}

/// Check input against the tool's schema; name the first few violations.
/// The check is metered (see [`schema`]): a schema and input that would cost
/// more than its step budget end the call with a limit error, recorded in
/// the receipt, before the guest runs.
fn validate_input(
    validator: &schema::InputSchema,
    input: &serde_json::Value,
    receipt: &mut Receipt,
) -> Result<(), CallError> {
    match validator.validate(input) {
        Ok(()) => Ok(()),
        Err(schema::Rejection::Invalid(errors)) => Err(CallError::InvalidInput {
            message: errors.join("; "),
        }),
        Err(schema::Rejection::Limit(message)) => {
            receipt.limits_hit.push(message.clone());
            Err(CallError::Limit { message })
        }
    }
}
