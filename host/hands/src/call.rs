//! The state of one call: a fresh WASI context, HTTP policy, resource
//! limiter and journal, built from the grants and dropped when the call ends.
//!
//! Nothing in a [`CallState`] outlives its call, and nothing is shared
//! between two calls except the engine and the compiled component. This
//! module owns the store's data type and the `longhand:tool/host` interface;
//! it does not decide policy (that is [`super::caps`] and [`super::net`]).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::sockets::WasiSocketsCtxView;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpHooks, WasiHttpView};

use super::bindings::longhand::tool::host::{self as host_api, LogLevel};
use super::budget::HostBudget;
use super::fs::{FsState, GuardedFsView, WriteQuota};
use super::grants::{Grants, Limits};
use super::net::HttpPolicy;
use super::process::ProcessGrant;
use super::receipt::{Captured, Journal, Progress};
use super::sockets::DeniedSocketsView;
use super::tape::Tape;

/// Store data of one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    hooks: Hooks,
    fs: FsState,
    /// What `longhand:tool/process` may run; `None`: nothing.
    process: Option<Arc<ProcessGrant>>,
    /// What `longhand:tool/sql` may reach; `None`: nothing.
    sql: Option<Arc<super::sql::SqlGrant>>,
    pub(crate) limiter: Limiter,
    pub(crate) journal: Arc<Mutex<Journal>>,
}

impl CallState {
    /// The guarded `wasi:filesystem` view (see [`super::fs`]).
    pub(crate) fn guarded_fs(&mut self) -> GuardedFsView<'_> {
        GuardedFsView {
            table: &mut self.table,
            fs: &mut self.fs,
        }
    }

    /// The recording, refusing `wasi:sockets` view (see [`super::sockets`]).
    pub(crate) fn denied_sockets(&mut self) -> DeniedSocketsView<'_> {
        DeniedSocketsView {
            inner: WasiSocketsCtxView {
                ctx: self.wasi.sockets(),
                table: &mut self.table,
            },
            journal: &self.journal,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_io::IoView for CallState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            hooks: &mut self.hooks,
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}

/// Routes `send_request` to the call's [`HttpPolicy`] (through its
/// [`Tape`], when the call records or replays), and bounds what a request
/// body may buffer before it is sent.
struct Hooks {
    policy: Arc<HttpPolicy>,
    /// Largest write to an outgoing body the host buffers; derived from the
    /// call's host budget (see [`HostBudget::per_object_bytes`]).
    body_chunk: usize,
    /// Default `None`: requests go to the network through the policy.
    tape: Option<Tape>,
}

impl WasiHttpHooks for Hooks {
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        self.body_chunk
    }

    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        let policy = self.policy.clone();
        let tape = self.tape.clone();
        Box::new(async move {
            let response = match tape {
                None => policy.send(request).await?,
                Some(tape) => tape.send(policy, request).await?,
            };
            let done: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send> =
                Box::new(async { Ok(()) });
            Ok((response, done))
        })
    }
}

/// Memory and table limits of one call, with peak tracking.
pub(crate) struct Limiter {
    memory_limit: u64,
    memory_total: u64,
    pub(crate) peak_memory: u64,
    pub(crate) memory_limit_hit: bool,
}

/// Most table elements an instance may have; tables hold function
/// references and stay small in real tools.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = (desired.saturating_sub(current)) as u64;
        let next = self.memory_total.saturating_add(grow);
        if next > self.memory_limit {
            self.memory_limit_hit = true;
            return Ok(false);
        }
        self.memory_total = next;
        self.peak_memory = self.peak_memory.max(next);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Most host-side resources (handles) a call may hold at once.
pub(crate) const MAX_RESOURCES: usize = 1024;
/// Largest header map a guest may build, in bytes; less when the call's
/// host budget spread over [`MAX_RESOURCES`] is less (see
/// [`HostBudget::per_object_bytes`]).
pub(crate) const MAX_HTTP_FIELDS_BYTES: usize = 32 << 10;
/// Largest outgoing body write the host buffers (wasmtime's default is
/// 1 MiB); less when the call's host budget is small.
const MAX_BODY_CHUNK_BYTES: usize = 64 << 10;

/// Collects the pieces of a [`CallState`] while capabilities prepare them.
pub(crate) struct CallBuilder {
    pub(crate) wasi: WasiCtxBuilder,
    /// Granted directories and the write limit; filled by the filesystem
    /// capability.
    pub(crate) fs: FsState,
    journal: Arc<Mutex<Journal>>,
    stdout: Option<CappedPipe>,
    stderr: Option<CappedPipe>,
    policy: Option<Arc<HttpPolicy>>,
    memory_limit: u64,
    budget: Arc<HostBudget>,
    tape: Option<Tape>,
    process: Option<Arc<ProcessGrant>>,
    sql: Option<Arc<super::sql::SqlGrant>>,
}

impl CallBuilder {
    /// A call with `limits`, allowed to hold `fd_limit` descriptors.
    pub(crate) fn new(limits: &Limits, fd_limit: usize) -> Self {
        let journal = Arc::new(Mutex::new(Journal::default()));
        let quota = Arc::new(WriteQuota::new(limits.max_write_bytes, journal.clone()));
        let budget = Arc::new(HostBudget::new(
            limits.host_memory_bytes(),
            fd_limit,
            journal.clone(),
        ));
        let mut wasi = WasiCtxBuilder::new();
        // Nothing ambient: no args, no inherited env, no network. This is
        // what refuses every socket: wasi:sockets is linked (so libc-built
        // guests load) but wasmtime-wasi makes no TCP or UDP socket and
        // checks no address through here (see `super::sockets`).
        wasi.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        Self {
            wasi,
            fs: FsState::new(quota, budget.clone(), journal.clone()),
            journal,
            stdout: None,
            stderr: None,
            policy: None,
            memory_limit: limits.memory_bytes,
            budget,
            tape: None,
            process: None,
            sql: None,
        }
    }

    /// Let the call run `grants`' programs (see [`super::process`]).
    pub(crate) fn process(&mut self, grants: &Grants) {
        self.process = Some(Arc::new(ProcessGrant::new(grants)));
    }

    /// Let the call reach `grants`' databases (see [`super::sql`]).
    pub(crate) fn sql(&mut self, grants: &Grants) {
        self.sql = Some(Arc::new(super::sql::SqlGrant::new(grants)));
    }

    /// Record or replay the call's HTTP exchanges on `tape`.
    pub(crate) fn tape(&mut self, tape: Tape) {
        self.tape = Some(tape);
    }

    pub(crate) fn capture_stdio(&mut self, cap: u64) {
        let out = CappedPipe::new(cap);
        let err = CappedPipe::new(cap);
        self.wasi.stdout(out.clone()).stderr(err.clone());
        self.stdout = Some(out);
        self.stderr = Some(err);
    }

    pub(crate) fn http_policy(&mut self, grants: &Grants) {
        self.policy = Some(Arc::new(HttpPolicy {
            hosts: grants.hosts.clone(),
            secrets: grants.secrets.clone(),
            max_response_bytes: grants.limits.max_http_response_bytes,
            max_requests: grants.limits.max_http_requests,
            journal: self.journal.clone(),
            budget: self.budget.clone(),
        }));
    }

    pub(crate) fn build(mut self) -> (CallState, Stdio) {
        let policy = self.policy.take().unwrap_or_else(|| {
            Arc::new(HttpPolicy {
                hosts: Vec::new(),
                secrets: Vec::new(),
                max_response_bytes: 0,
                max_requests: 0,
                journal: self.journal.clone(),
                budget: self.budget.clone(),
            })
        });
        let tape = self.tape.take();
        if let Some(tape) = &tape {
            tape.arm(&policy);
        }
        let stdio = Stdio {
            stdout: self.stdout.take(),
            stderr: self.stderr.take(),
        };
        // Guest limits cover linear memory only; host-side resources (header
        // maps, streams, pollables) are bounded here, so a guest cannot grow
        // the host through them: at most MAX_RESOURCES handles, none of them
        // larger than half the host budget spread over that many.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(
            self.budget
                .per_object_bytes(MAX_RESOURCES, MAX_HTTP_FIELDS_BYTES),
        );
        let body_chunk = self
            .budget
            .per_object_bytes(MAX_RESOURCES, MAX_BODY_CHUNK_BYTES);
        let state = CallState {
            wasi: self.wasi.build(),
            table,
            http,
            hooks: Hooks {
                policy,
                body_chunk,
                tape,
            },
            fs: self.fs,
            process: self.process,
            sql: self.sql,
            limiter: Limiter {
                memory_limit: self.memory_limit,
                memory_total: 0,
                peak_memory: 0,
                memory_limit_hit: false,
            },
            journal: self.journal,
        };
        (state, stdio)
    }
}

/// Handles to a call's captured stdout and stderr.
pub(crate) struct Stdio {
    stdout: Option<CappedPipe>,
    stderr: Option<CappedPipe>,
}

impl Stdio {
    pub(crate) fn take(&self) -> (Captured, Captured) {
        let grab =
            |p: &Option<CappedPipe>| p.as_ref().map(CappedPipe::captured).unwrap_or_default();
        (grab(&self.stdout), grab(&self.stderr))
    }
}

#[derive(Default)]
struct PipeInner {
    kept: Vec<u8>,
    dropped: u64,
}

/// An output stream that keeps the first `cap` bytes and counts the rest.
///
/// Unlike a pipe that fails when full, the guest never sees an error: a
/// tool that floods stdout keeps running (until its own limits stop it) and
/// the receipt says how much was dropped.
#[derive(Clone)]
struct CappedPipe {
    cap: u64,
    inner: Arc<Mutex<PipeInner>>,
}

impl CappedPipe {
    fn new(cap: u64) -> Self {
        Self {
            cap,
            inner: Arc::new(Mutex::new(PipeInner::default())),
        }
    }

    fn push(&self, bytes: &[u8]) {
        if let Ok(mut inner) = self.inner.lock() {
            let room = (self.cap as usize).saturating_sub(inner.kept.len());
            let take = room.min(bytes.len());
            inner.kept.extend_from_slice(&bytes[..take]);
            inner.dropped += (bytes.len() - take) as u64;
        }
    }

    fn captured(&self) -> Captured {
        self.inner
            .lock()
            .map(|inner| Captured {
                text: String::from_utf8_lossy(&inner.kept).into_owned(),
                dropped_bytes: inner.dropped,
            })
            .unwrap_or_default()
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl host_api::Host for CallState {
    fn log(&mut self, level: LogLevel, message: String) {
        let level = match level {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        if let Ok(mut journal) = self.journal.lock() {
            journal.log(level, &message);
        }
    }

    fn progress(&mut self, done: u64, total: Option<u64>, message: String) {
        if let Ok(mut journal) = self.journal.lock() {
            journal.progress = Some(Progress {
                done,
                total,
                message: super::bound::cut(message, super::receipt::MAX_LOG_LINE_BYTES),
            });
        }
    }
}

impl super::bindings::longhand::tool::types::Host for CallState {}

impl super::bindings::longhand::tool::process::Host for CallState {
    async fn run(
        &mut self,
        command: super::bindings::longhand::tool::process::Command,
    ) -> Result<
        super::bindings::longhand::tool::process::Outcome,
        super::bindings::longhand::tool::types::ToolError,
    > {
        super::process::run(self.process.clone(), self.journal.clone(), command).await
    }
}

impl super::bindings::longhand::tool::sql::Host for CallState {
    async fn query(
        &mut self,
        database: String,
        statement: String,
        params: Vec<super::bindings::longhand::tool::sql::Value>,
        max_rows: u32,
    ) -> Result<
        super::bindings::longhand::tool::sql::Rows,
        super::bindings::longhand::tool::types::ToolError,
    > {
        super::sql::query(
            self.sql.clone(),
            self.journal.clone(),
            database,
            statement,
            params,
            max_rows,
        )
        .await
    }

    async fn execute(
        &mut self,
        database: String,
        statement: String,
        params: Vec<super::bindings::longhand::tool::sql::Value>,
    ) -> Result<
        super::bindings::longhand::tool::sql::Changes,
        super::bindings::longhand::tool::types::ToolError,
    > {
        super::sql::execute(
            self.sql.clone(),
            self.journal.clone(),
            database,
            statement,
            params,
        )
        .await
    }

    async fn schema(
        &mut self,
        database: String,
    ) -> Result<
        Vec<super::bindings::longhand::tool::sql::Table>,
        super::bindings::longhand::tool::types::ToolError,
    > {
        super::sql::schema(self.sql.clone(), self.journal.clone(), database).await
    }
}

/// Link `longhand:tool/sql`.
pub(crate) fn link_sql_interface(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    super::bindings::longhand::tool::sql::add_to_linker::<CallState, HasSelf<CallState>>(
        linker,
        |s| s,
    )
}

/// Link `longhand:tool/process`.
pub(crate) fn link_process_interface(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    super::bindings::longhand::tool::process::add_to_linker::<CallState, HasSelf<CallState>>(
        linker,
        |s| s,
    )
}

/// Link `longhand:tool/host` and `longhand:tool/types`.
pub(crate) fn link_host_interface(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    host_api::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    super::bindings::longhand::tool::types::add_to_linker::<CallState, HasSelf<CallState>>(
        linker,
        |s| s,
    )?;
    Ok(())
}
