//! `longhand worker [--concurrency N] [--store URL]`: one process running
//! every runnable session of the store.
//!
//! Runnable: status `running` — started with `run --detach`, resumed with
//! `resume --detach`, or left running by a worker that died — and not held
//! by a live worker. The lease decides who runs a session: two workers
//! (on one machine or many sharing the store) never run one session at
//! once, because only one of them gets its lease; the other skips it.
//! Higher `--priority` first, then the longest waiting.
//!
//! Finding work is [`Store::claim_runnable`]: on SQLite a list of running
//! sessions (the lease sorts out who runs which); on PostgreSQL a claim
//! (`FOR UPDATE SKIP LOCKED`) that leases each session to exactly one
//! worker, so a fleet does not race for the same rows. Between claims the
//! worker waits with [`Store::wait_for_change`]: on PostgreSQL a
//! `NOTIFY` wakes it as soon as a session is started, resumed or released
//! anywhere; otherwise, and for leases that merely expire, it looks again
//! every [`POLL`].
//!
//! A session is never left waiting out a lease nobody uses:
//! - a worker of this machine that died (killed, crashed) is seen dead
//!   through its lease's process record, and its sessions are taken at
//!   once (`session::holder`);
//! - a run that stops on a store error (PostgreSQL restarting) releases its
//!   lease, retrying until the store is back; and a claim takes back the
//!   leases held in this worker's own name that it no longer runs.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use std::sync::Arc;

use super::Outcome;
use super::env::{hands, open_store, open_url, owner};
use crate::brain::model::ratelimit::RateLimited;
use crate::brain::{RunEnd, RunError};
use crate::session::{SessionId, Store, StoreError};

/// How often the store is asked for runnable sessions when nothing wakes
/// the worker sooner.
const POLL: Duration = Duration::from_millis(500);

/// How long a session whose run stopped with an error (a store that went
/// away, a lost lease) is left before this worker claims it again.
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// How long a session another worker holds is left alone (at most a third
/// of the lease TTL, so a dead holder's session is taken up in time).
const HELD_REST: Duration = Duration::from_secs(2);

/// The least time between two claims: a busy fleet notifies on every
/// append, and a worker with free slots need not query for each one.
const MIN_CLAIM_GAP: Duration = Duration::from_millis(50);

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
    /// The session store to work for: `postgres://user:password@host/db`
    /// (shared by workers on many machines). Default: `LONGHAND_STORE`
    /// when set, else the SQLite store in the data directory. TLS: add
    /// `?sslmode=verify-full&sslrootcert=/path/ca.pem` (without `sslmode`
    /// the connection is plain TCP).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
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
    let store = match &args.store {
        Some(url) => open_url(url).await?,
        None => open_store().await?,
    };
    // The engine lives as long as the process.
    let hands: &'static crate::hands::Hands = Box::leak(Box::new(hands()?));
    // One set of providers for every session this worker runs, each
    // wrapped in its provider's limit (shared by every session).
    let services = Arc::new(
        super::run::services(None).wrap(move |p| match limits.get(p.name()) {
            Some(limit) => Arc::new(RateLimited::new(p, limit.clone())),
            None => p,
        }),
    );
    let owner = owner();
    let ttl = crate::brain::lease_ttl();
    let mut running: HashSet<SessionId> = HashSet::new();
    // Sessions left alone for a while: one that could not be woken (until
    // its lease would have run out, as before claims took back our own
    // leases), one whose run failed (a moment, so a store that is back
    // gets it going again at once without spinning on a broken one).
    let mut resting: HashMap<SessionId, Instant> = HashMap::new();
    // A session's priority is frozen at its start: read once, not per poll.
    let mut priorities: HashMap<SessionId, i64> = HashMap::new();
    let mut pool = FuturesUnordered::new();
    let mut last_claim: Option<Instant> = None;
    eprintln!(
        "worker {owner}: running up to {} sessions of this store",
        args.concurrency
    );
    loop {
        if running.len() < args.concurrency {
            if let Some(at) = last_claim {
                tokio::time::sleep(MIN_CLAIM_GAP.saturating_sub(at.elapsed())).await;
            }
            last_claim = Some(Instant::now());
            let free = args.concurrency - running.len();
            resting.retain(|_, until| *until > Instant::now());
            let skip: Vec<SessionId> = running.iter().chain(resting.keys()).cloned().collect();
            let claimed = match store.claim_runnable(&owner, ttl, free, &skip).await {
                Ok(claimed) => claimed,
                // A store that fails for a while (a restarting server):
                // keep running what runs, and look again.
                Err(e) => {
                    eprintln!("worker {owner}: cannot look for sessions: {e}");
                    Vec::new()
                }
            };
            for session in by_priority(store.as_ref(), claimed, &mut priorities).await {
                if running.len() >= args.concurrency {
                    break;
                }
                match super::run::wake(store.clone(), hands, &services, session.clone(), &owner)
                    .await
                {
                    Ok(mut runner) => {
                        running.insert(session.clone());
                        eprintln!("worker {owner}: runs {session}");
                        pool.push(Box::pin(async move {
                            let end = runner.run().await;
                            (session, end)
                        }));
                    }
                    // Another worker got it first, or holds it: theirs. Left
                    // alone a moment, so a session held elsewhere (a child its
                    // parent drives) is not woken and bound at every poll.
                    Err(e) if held(&e) => {
                        resting.insert(session, Instant::now() + (ttl / 3).min(HELD_REST));
                    }
                    Err(e) => {
                        eprintln!("worker {owner}: cannot wake {session}: {e:#}");
                        resting.insert(session, Instant::now() + ttl);
                    }
                }
            }
        }
        if pool.is_empty() && args.until_idle {
            return Ok(Outcome::Done);
        }
        // With every slot busy only an ending session matters; otherwise a
        // change in the store (or the poll interval) sends us claiming.
        let full = running.len() >= args.concurrency;
        tokio::select! {
            Some((session, end)) = pool.next() => {
                running.remove(&session);
                if end.is_err() {
                    resting.insert(session.clone(), Instant::now() + AFTER_FAILURE);
                }
                report(&owner, &session, end);
            }
            _ = store.wait_for_change(POLL), if !full => {}
            _ = tokio::time::sleep(POLL), if full => {}
        }
    }
}

/// `claimed` ordered highest priority first, keeping the store's order
/// (the longest waiting first) among equals.
async fn by_priority(
    store: &dyn Store,
    claimed: Vec<SessionId>,
    priorities: &mut HashMap<SessionId, i64>,
) -> Vec<SessionId> {
    let mut ranked = Vec::with_capacity(claimed.len());
    for id in claimed {
        let priority = match priorities.get(&id) {
            Some(p) => *p,
            None => {
                let p = crate::brain::launch::frozen_of(store, &id)
                    .await
                    .map_or(0, |f| f.priority);
                priorities.insert(id.clone(), p);
                p
            }
        };
        ranked.push((priority, id));
    }
    // Stable: equal priorities keep the store's order.
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    ranked.into_iter().map(|(_, id)| id).collect()
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
