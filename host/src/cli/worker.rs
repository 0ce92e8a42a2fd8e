//! `longhand worker [--concurrency N]`: one process running every runnable
//! session of the store.
//!
//! Runnable: status `running` — started with `run --detach`, resumed with
//! `resume --detach`, or left running by a worker that died — and not held
//! by a live worker. The lease decides who runs a session: two workers
//! (on one machine or many sharing the store) never run one session at
//! once, because only one of them gets its lease; the other skips it. A
//! worker polls the store, so sessions started, resumed or approved while
//! it runs are picked up without a restart. Higher `--priority` first,
//! then the longest waiting.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use std::sync::Arc;

use super::Outcome;
use crate::brain::agent::{RunEnd, RunError, Runner};
use crate::brain::model::ratelimit::RateLimited;
use crate::session::{SessionId, SessionStatus, Store, StoreError};

/// How often the store is asked for runnable sessions when none ends.
const POLL: Duration = Duration::from_millis(500);

/// `longhand worker` flags.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Sessions run at once. Default 4.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Exit once no session is runnable (instead of waiting for more).
    #[arg(long)]
    pub until_idle: bool,
    /// A rate limit shared by all the sessions this worker runs, per
    /// provider: `PROVIDER=RPM[:TPM]` (requests, tokens per minute), e.g.
    /// `--rate openai=500:200000 --rate anthropic=50`. Repeatable.
    #[arg(long = "rate", value_name = "PROVIDER=RPM[:TPM]")]
    pub rates: Vec<String>,
}

/// `longhand worker`.
pub async fn worker(args: WorkerArgs) -> anyhow::Result<Outcome> {
    if args.concurrency == 0 {
        return Err(super::usage("--concurrency must be at least 1"));
    }
    let mut limits = std::collections::BTreeMap::new();
    for spec in &args.rates {
        let (provider, limit) = spec
            .split_once('=')
            .ok_or_else(|| super::usage(format!("--rate `{spec}`: give PROVIDER=RPM[:TPM]")))?;
        let limit = crate::brain::model::ratelimit::RateLimit::parse(limit)
            .map_err(|e| super::usage(format!("--rate `{spec}`: {e}")))?;
        limits.insert(provider.to_owned(), limit);
    }
    let store = super::run::open_store().await?;
    // The engine lives as long as the process.
    let hands: &'static crate::hands::Hands = Box::leak(Box::new(super::run::hands()?));
    let owner = super::run::owner();
    let mut running: HashSet<SessionId> = HashSet::new();
    // A session's priority is frozen at its start: read once, not per poll.
    let mut priorities: HashMap<SessionId, i64> = HashMap::new();
    let mut pool = FuturesUnordered::new();
    eprintln!(
        "worker {owner}: running up to {} sessions of this store",
        args.concurrency
    );
    loop {
        if running.len() < args.concurrency {
            for session in runnable(store.as_ref(), &running, &mut priorities).await? {
                if running.len() >= args.concurrency {
                    break;
                }
                match super::run::wake(store.clone(), hands, session.clone(), &owner).await {
                    Ok(mut runner) => {
                        // One limit per provider, shared by every session.
                        runner.wrap_providers(|p| match limits.get(p.name()) {
                            Some(limit) => Arc::new(RateLimited::new(p, limit.clone())),
                            None => p,
                        });
                        running.insert(session.clone());
                        eprintln!("worker {owner}: runs {session}");
                        pool.push(Box::pin(async move {
                            let end = runner.run().await;
                            (session, end)
                        }));
                    }
                    // Another worker got it first, or holds it: theirs.
                    Err(e) if held(&e) => {}
                    Err(e) => eprintln!("worker {owner}: cannot wake {session}: {e:#}"),
                }
            }
        }
        if pool.is_empty() && args.until_idle {
            return Ok(Outcome::Done);
        }
        tokio::select! {
            Some((session, end)) = pool.next() => {
                running.remove(&session);
                report(&owner, &session, end);
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Sessions that are running and not run by this worker, highest priority
/// first, then the longest untouched.
async fn runnable(
    store: &dyn Store,
    running: &HashSet<SessionId>,
    priorities: &mut HashMap<SessionId, i64>,
) -> anyhow::Result<Vec<SessionId>> {
    let mut candidates = Vec::new();
    for summary in store.list().await? {
        if summary.status != SessionStatus::Running || running.contains(&summary.id) {
            continue;
        }
        let priority = match priorities.get(&summary.id) {
            Some(p) => *p,
            None => {
                let p = Runner::frozen_of(store, &summary.id)
                    .await
                    .map_or(0, |f| f.priority);
                priorities.insert(summary.id.clone(), p);
                p
            }
        };
        candidates.push((priority, summary.updated_ms, summary.id));
    }
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(candidates.into_iter().map(|(_, _, id)| id).collect())
}

/// Whether waking failed because another live worker holds the session.
fn held(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<StoreError>(),
            Some(StoreError::LeaseHeld { .. } | StoreError::Fenced { .. })
        ) || matches!(
            cause.downcast_ref::<RunError>(),
            Some(
                RunError::Store(StoreError::LeaseHeld { .. } | StoreError::Fenced { .. })
                    | RunError::LeaseLost(_)
            )
        )
    })
}

fn report(owner: &str, session: &SessionId, end: Result<RunEnd, RunError>) {
    match end {
        Ok(end) => eprintln!(
            "worker {owner}: {session} {}{}",
            end.status,
            end.detail
                .map(|d| format!(": {}", super::term::printable(&d)))
                .unwrap_or_default()
        ),
        Err(e) => eprintln!("worker {owner}: {session} stopped: {e}"),
    }
}
