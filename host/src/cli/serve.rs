//! `longhand serve`: the HTTP API and the web page (see [`crate::serve`]),
//! and — unless `--no-worker` — a worker running the store's runnable
//! sessions in the same process, so a session started or resumed from the
//! page runs without a separate `longhand worker`.
//!
//! This file is the [`Backend`] the server changes sessions through: the
//! CLI's own `run --detach`, `resume --detach`, `pause | cancel | send`,
//! `approve | deny` and `plan --json`, called as functions.
//!
//! Refused (exit 2): `--no-auth` on an address other than loopback (the
//! API can start agents and approve their calls: nobody off this machine
//! may reach it without the token), a token file others can read, an
//! `--agents` directory that does not exist, an address it cannot bind.
//! A webhook whose secret variable is not set does not stop it: that hook
//! is disabled, with a warning on stderr naming the variable.
//!
//! The token is written to its file only after the listener is bound, so
//! the start that writes it is one that serves, and prints it.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;

use super::settings::data_dir;
use super::{Outcome, exit, exit_code, message_of, usage};
use crate::serve::auth::TokenError;
use crate::serve::{AnswerRequest, ApiError, Backend, StartRequest, Token};
use longhand_brain::RunError;
use longhand_brain::agent::config::SessionLimits;
use longhand_brain::control::approvals::AnswerError;
use longhand_hands::Hands;
use longhand_session::{Control, ControlKind, SessionId, SessionStatus, Store, StoreError};

/// `longhand serve` flags.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen on this address. Default 127.0.0.1:7700 (this machine only);
    /// port 0 picks a free port (printed).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub addr: SocketAddr,
    /// Directories whose agents `POST /api/sessions` may start (the
    /// directory and below). Repeatable. Default none: the API starts no
    /// agent.
    #[arg(long = "agents", value_name = "DIR")]
    pub agents: Vec<PathBuf>,
    /// Do not run the store's runnable sessions in this process (leave them
    /// to `longhand worker` processes). Default: run them.
    #[arg(long)]
    pub no_worker: bool,
    /// Sessions the built-in worker runs at once. Default 4.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Serve the API without a token: any process of this machine may then
    /// use it. Loopback addresses only. Default off.
    #[arg(long)]
    pub no_auth: bool,
}

/// `longhand serve`.
pub async fn serve(args: ServeArgs) -> anyhow::Result<Outcome> {
    let loopback = crate::serve::is_loopback(&args.addr);
    if args.no_auth && !loopback {
        return Err(usage(format!(
            "refusing to serve {} without a token: the API starts agents and approves their \
             calls, so off this machine it needs one; drop --no-auth (a token is made on first \
             start), or bind 127.0.0.1",
            args.addr
        )));
    }
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1"));
    }
    let dir = data_dir().ok_or_else(|| {
        usage("cannot find a data directory: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)")
    })?;
    let token_error = |e: TokenError| match e {
        TokenError::Unsafe(_) => usage(e),
        TokenError::Io { .. } => anyhow::Error::new(e),
    };
    // Read (or made in memory) now, so an unsafe file stops the start
    // first; a new one is written once the listener is bound.
    let token = if args.no_auth {
        None
    } else {
        Some(Token::load_or_new(&dir).map_err(token_error)?)
    };
    let mut roots = Vec::new();
    for root in &args.agents {
        let real = std::fs::canonicalize(root)
            .map_err(|e| usage(format!("--agents {}: {e}", root.display())))?;
        if !real.is_dir() {
            return Err(usage(format!(
                "--agents {}: not a directory",
                root.display()
            )));
        }
        roots.push(real);
    }
    // Webhook triggers of the agents served; one whose secret is not set
    // is disabled, and the operator told which variable to set.
    let (hooks, warnings) =
        crate::serve::hooks::load(&roots, |name| std::env::var(name).ok()).map_err(usage)?;
    for warning in warnings {
        eprintln!("warning: {}", super::term::printable(&warning));
    }
    let store = super::env::open_store().await?;
    // The engine lives as long as the process.
    let hands: &'static Hands = Box::leak(Box::new(super::env::hands()?));
    let backend = CliBackend {
        store: store.clone(),
        hands,
        owner: format!("serve@{}", super::env::owner()),
        roots,
    };
    // An address in use or a port this user may not bind: the operator
    // picks another (exit 2).
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| usage(format!("cannot listen on {}: {e}", args.addr)))?;
    let bound = listener
        .local_addr()
        .context("reading the address listened on")?;
    // Serving is certain now: keep a new token, and print it below.
    let token = token.map(Token::keep).transpose().map_err(token_error)?;
    let app = crate::serve::app(crate::serve::Config {
        store,
        backend: Arc::new(backend),
        token: token.clone(),
        loopback_hosts_only: loopback,
        memory_db: longhand_brain::memory::default_path(&dir),
        hooks,
        seen_hooks: Default::default(),
    });
    announce(bound, token.as_ref())?;
    let worker = async {
        if args.no_worker {
            return std::future::pending().await;
        }
        super::worker::worker(super::worker::WorkerArgs::with_concurrency(
            args.concurrency,
        ))
        .await
    };
    tokio::select! {
        served = crate::serve::run(listener, app) => {
            served.context("serving HTTP")?;
            Ok(Outcome::Done)
        }
        ended = worker => ended.context("the built-in worker stopped"),
        _ = tokio::signal::ctrl_c() => Ok(Outcome::Done),
    }
}

/// Says where the server is, and the token if this start made it (the
/// only time it is printed).
fn announce(bound: SocketAddr, token: Option<&Token>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let url = format!("http://{bound}");
    writeln!(out, "listening on {url}")?;
    match token {
        None => writeln!(out, "no token (--no-auth): open {url}/")?,
        Some(t) if t.created => {
            writeln!(out, "token: {}", t.secret())?;
            writeln!(
                out,
                "made now and shown once; kept in {} (mode 600)",
                t.path.display()
            )?;
            writeln!(out, "open {url}/#token={}", t.secret())?;
        }
        Some(t) => writeln!(
            out,
            "open {url}/ with the token kept in {}",
            t.path.display()
        )?,
    }
    out.flush()?;
    Ok(())
}

/// The CLI's session operations, for the server.
struct CliBackend {
    store: Arc<dyn Store>,
    hands: &'static Hands,
    /// The lease owner and `by` of what the API does: not the built-in
    /// worker's name, so the two never share a lease.
    owner: String,
    /// Canonical `--agents` directories.
    roots: Vec<PathBuf>,
}

/// An error of a CLI function as the API answers it: the store's and the
/// lease's refusals by type, then the CLI's own exit-code map (usage is the
/// client's to fix; anything else is the server's fault).
fn api_error(error: anyhow::Error) -> ApiError {
    let lease_held = || {
        ApiError::from_store(StoreError::LeaseHeld {
            owner: String::new(),
            expires_ms: 0,
            holder: String::new(),
            now_ms: 0,
        })
    };
    for cause in error.chain() {
        let store = match cause.downcast_ref::<RunError>() {
            Some(RunError::Store(e)) => Some(e),
            Some(RunError::LeaseLost(_)) => return lease_held(),
            _ => cause.downcast_ref::<StoreError>(),
        };
        match store {
            Some(StoreError::NotFound { what }) => {
                return ApiError::not_found("session_not_found", format!("{what} not found"));
            }
            Some(StoreError::LeaseHeld { .. } | StoreError::Fenced { .. }) => return lease_held(),
            _ => {}
        }
    }
    let message = message_of(&error);
    match exit_code(&Err(error)) {
        exit::USAGE => ApiError::invalid(message),
        _ => ApiError::internal(message),
    }
}

#[async_trait]
impl Backend for CliBackend {
    async fn start(&self, request: StartRequest) -> Result<SessionId, ApiError> {
        if !request.agent.is_absolute() {
            return Err(ApiError::invalid(
                "`agent` must be an absolute path on the server's machine",
            ));
        }
        let real = std::fs::canonicalize(&request.agent)
            .map_err(|e| ApiError::invalid(format!("no agent at that path: {e}")))?;
        if !self.roots.iter().any(|root| real.starts_with(root)) {
            return Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "agent_not_allowed",
                if self.roots.is_empty() {
                    "this server starts no agent: start it with `--agents DIR`".to_owned()
                } else {
                    "the agent is not under a directory `serve --agents` allows".to_owned()
                },
            ));
        }
        let path = real
            .to_str()
            .ok_or_else(|| ApiError::invalid("the agent's path is not UTF-8"))?;
        let args = super::run::Start {
            agent: PathBuf::from(path),
            goal: request.goal,
            priority: request.priority,
            ..Default::default()
        };
        let started = super::run::start(&args, self.hands, &self.owner)
            .await
            .map_err(api_error)?;
        let session = started.runner.session().clone();
        started
            .runner
            .detach()
            .await
            .map_err(|e| api_error(e.into()))?;
        Ok(session)
    }

    async fn resume(
        &self,
        session: &SessionId,
        raise: BTreeMap<String, u64>,
    ) -> Result<SessionStatus, ApiError> {
        for (name, value) in &raise {
            SessionLimits::default()
                .set(name, *value)
                .map_err(|e| ApiError::invalid(format!("raise: {e}")))?;
        }
        let services = std::sync::Arc::new(super::run::services(None));
        let mut runner = super::run::wake(
            self.store.clone(),
            self.hands,
            &services,
            session.clone(),
            &self.owner,
        )
        .await
        .map_err(api_error)?;
        runner
            .resume(raise)
            .await
            .map_err(|e| api_error(e.into()))?;
        let status = runner.state().status;
        runner.detach().await.map_err(|e| api_error(e.into()))?;
        Ok(status)
    }

    async fn control(
        &self,
        session: &SessionId,
        kind: ControlKind,
        text: Option<String>,
    ) -> Result<Control, ApiError> {
        super::control::post_to(self.store.as_ref(), session, kind, text, &self.owner)
            .await
            .map(|(control, _)| control)
            .map_err(api_error)
    }

    async fn answer(
        &self,
        session: &SessionId,
        request: &str,
        answer: AnswerRequest,
    ) -> Result<String, ApiError> {
        let answer = match answer {
            AnswerRequest::Approve { scope, expires } => {
                super::approvals::approval(&scope, expires.as_deref())
            }
            AnswerRequest::Deny { reason } => super::approvals::denial(&reason),
        }
        .map_err(api_error)?;
        let store = self.store.as_ref();
        match longhand_brain::control::approvals::answer(
            store,
            session,
            request,
            answer,
            &self.owner,
        )
        .await
        {
            Ok(()) => Ok(super::approvals::root_of(store, session.as_str()).await),
            Err(e @ AnswerError::Unknown { .. }) => {
                Err(ApiError::not_found("request_not_found", e.to_string()))
            }
            Err(e @ AnswerError::Answered { .. }) => {
                Err(ApiError::conflict("not_pending", e.to_string()))
            }
            Err(AnswerError::Store(e)) => Err(ApiError::from_store(e)),
            Err(AnswerError::Run(e)) => Err(api_error(e.into())),
        }
    }

    async fn plan(&self, session: &SessionId) -> Result<serde_json::Value, ApiError> {
        super::plan::plan_value(self.store.as_ref(), session)
            .await
            .map_err(api_error)
    }

    fn agent_roots(&self) -> Vec<PathBuf> {
        self.roots.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_errors_become_api_errors_by_type() {
        let code = |e: anyhow::Error| api_error(e).code;
        let missing = StoreError::NotFound {
            what: "session s-1".into(),
        };
        assert_eq!(code(missing.into()), "session_not_found");
        let held = StoreError::LeaseHeld {
            owner: "w".into(),
            expires_ms: 0,
            holder: String::new(),
            now_ms: 0,
        };
        assert_eq!(
            code(anyhow::Error::new(RunError::Store(held)).context("waking")),
            "lease_held"
        );
        assert_eq!(
            code(RunError::LeaseLost("taken".into()).into()),
            "lease_held"
        );
        let refused = code(usage("no goal: pass --goal"));
        assert_eq!(refused, "invalid_request");
        assert_eq!(api_error(usage("no goal")).message, "no goal");
        // What no row names is the server's fault, and its text stays in
        // the server's log.
        let internal = api_error(anyhow::anyhow!("disk at /secret/path failed"));
        assert_eq!(internal.code, "internal");
        assert!(!internal.message.contains("/secret/path"));
    }
}
