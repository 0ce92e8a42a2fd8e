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
//!
//! A store that does not answer is not idle. While it is unreachable (a
//! database restarting, a network partition) the worker keeps running what
//! runs, says on stderr that it is waiting, and asks again with a backoff
//! from [`POLL`] doubling to [`MAX_BACKOFF`]; `--until-idle` exits only on
//! an answer that no session is runnable, never on a failure. The worker
//! exits with an error only once the store has not answered for
//! `--store-retry-for` (default [`STORE_RETRY_FOR`]) in a row, at start
//! too: a supervisor then sees a failure, not a worker that found nothing.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use std::sync::Arc;

use super::Outcome;
use super::env::{hands, open_store, open_url, owner};
use longhand_brain::model::ratelimit::RateLimited;
use longhand_brain::{RunEnd, RunError};
use longhand_session::{SessionId, Store, StoreError};

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

/// The longest wait between two attempts at an unreachable store.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// How long the store may go without answering before the worker gives up
/// (`--store-retry-for`): long enough for a database to restart or fail
/// over, short enough that a store gone for good is reported.
const STORE_RETRY_FOR: &str = "5m";

/// How many times in a row a session whose run stopped on a store error is
/// tried again before `--until-idle` stops waiting for it: a store that
/// answers claims but fails that one session's appends is a fault to
/// report, not one to retry forever.
const STORE_FAILURES_PER_SESSION: u32 = 10;

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
    /// How long the store may be unreachable, in a row, before the worker
    /// exits with an error (`30s`, `5m`, `1h`). Until then it waits and
    /// retries with a backoff, saying so on stderr; `--until-idle` never
    /// takes an unreachable store for an idle one. Default 5m.
    #[arg(long, value_name = "DURATION", default_value = STORE_RETRY_FOR,
          value_parser = humantime::parse_duration)]
    pub store_retry_for: Duration,
}

impl WorkerArgs {
    /// A worker running `concurrency` sessions at once, every other flag
    /// at its default: the built-in worker of `serve` and `triggers run`.
    pub fn with_concurrency(concurrency: usize) -> Self {
        WorkerArgs {
            concurrency,
            until_idle: false,
            rates: Vec::new(),
            store: None,
            store_retry_for: humantime::parse_duration(STORE_RETRY_FOR)
                .expect("the default --store-retry-for is a duration"),
        }
    }
}

/// A store that has not answered since `since`; the next attempt after
/// `backoff`.
struct Outage {
    since: Instant,
    backoff: Duration,
}

impl Outage {
    /// Record one more failed attempt: the error to exit with once the
    /// store has failed for `limit`, else `None` after saying on stderr
    /// when the next attempt comes.
    fn failed(
        outage: &mut Option<Outage>,
        owner: &str,
        what: &str,
        error: &dyn std::fmt::Display,
        limit: Duration,
    ) -> Option<anyhow::Error> {
        let now = Instant::now();
        let o = outage.get_or_insert(Outage {
            since: now,
            backoff: POLL / 2,
        });
        o.backoff = (o.backoff * 2).min(MAX_BACKOFF);
        let down = now.duration_since(o.since);
        if down >= limit {
            return Some(anyhow::anyhow!(
                "the session store has not answered for {:.0} s ({what}: {error}); giving up \
                 (--store-retry-for {:.0} s). Check that the database is up and reachable, then \
                 start the worker again",
                down.as_secs_f64(),
                limit.as_secs_f64()
            ));
        }
        eprintln!(
            "worker {owner}: the session store is unreachable ({what}: {error}); \
             retrying in {:.1} s (down {:.0} s; giving up after {:.0} s)",
            o.backoff.as_secs_f64(),
            down.as_secs_f64(),
            limit.as_secs_f64()
        );
        None
    }

    /// The store answered: say so if it had not been.
    fn over(outage: &mut Option<Outage>, owner: &str) {
        if let Some(o) = outage.take() {
            eprintln!(
                "worker {owner}: the session store answers again after {:.1} s",
                o.since.elapsed().as_secs_f64()
            );
        }
    }
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
        let limit = longhand_brain::model::ratelimit::RateLimit::parse(limit)
            .map_err(|e| super::usage(format!("--rate `{spec}`: {e}")))?;
        limits.insert(provider.to_owned(), limit);
    }
    let retry_for = args.store_retry_for;
    let owner = owner();
    let mut outage: Option<Outage> = None;
    let store = loop {
        let opened = match &args.store {
            Some(url) => open_url(url).await,
            None => open_store().await,
        };
        match opened {
            Ok(store) => break store,
            // Only a store that could not be reached is waited for; a bad
            // URL or a store built without PostgreSQL is not going to
            // change.
            Err(e) if unreachable(&e) => {
                if let Some(give_up) = Outage::failed(
                    &mut outage,
                    &owner,
                    "opening it",
                    &format!("{e:#}"),
                    retry_for,
                ) {
                    return Err(give_up);
                }
                if let Some(o) = &outage {
                    tokio::time::sleep(o.backoff).await;
                }
            }
            Err(e) => return Err(e),
        }
    };
    Outage::over(&mut outage, &owner);
    // The engine lives as long as the process.
    let hands: &'static longhand_hands::Hands = Box::leak(Box::new(hands()?));
    // One set of providers for every session this worker runs, each
    // wrapped in its provider's limit (shared by every session).
    let services = Arc::new(
        super::run::services(None).wrap(move |p| match limits.get(p.name()) {
            Some(limit) => Arc::new(RateLimited::new(p, limit.clone())),
            None => p,
        }),
    );
    let ttl = longhand_brain::lease_ttl();
    let mut running: HashSet<SessionId> = HashSet::new();
    // Sessions left alone for a while: one that could not be woken (until
    // its lease would have run out, as before claims took back our own
    // leases), one whose run failed (a moment, so a store that is back
    // gets it going again at once without spinning on a broken one).
    let mut resting: HashMap<SessionId, Instant> = HashMap::new();
    // Sessions whose run stopped on a store error, with how many times in
    // a row: `--until-idle` waits for them (they are runnable, only
    // resting) instead of taking the store's silence about them for idle.
    let mut store_failed: HashMap<SessionId, u32> = HashMap::new();
    // A session's priority is frozen at its start: read once, not per poll.
    let mut priorities: HashMap<SessionId, i64> = HashMap::new();
    let mut pool = FuturesUnordered::new();
    let mut last_claim: Option<Instant> = None;
    eprintln!(
        "worker {owner}: running up to {} sessions of this store",
        args.concurrency
    );
    loop {
        // Whether the store answered a claim on this round that no
        // session is runnable: the only thing `--until-idle` exits on.
        let mut answered = false;
        if running.len() < args.concurrency {
            if let Some(at) = last_claim {
                tokio::time::sleep(MIN_CLAIM_GAP.saturating_sub(at.elapsed())).await;
            }
            last_claim = Some(Instant::now());
            let free = args.concurrency - running.len();
            resting.retain(|_, until| *until > Instant::now());
            let skip: Vec<SessionId> = running.iter().chain(resting.keys()).cloned().collect();
            let claimed = match store.claim_runnable(&owner, ttl, free, &skip).await {
                Ok(claimed) => {
                    Outage::over(&mut outage, &owner);
                    answered = true;
                    claimed
                }
                // A store that fails for a while (a restarting server):
                // keep running what runs, and look again after a backoff.
                Err(e) => {
                    if let Some(give_up) =
                        Outage::failed(&mut outage, &owner, "looking for sessions", &e, retry_for)
                    {
                        return Err(give_up);
                    }
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
        if pool.is_empty() && args.until_idle && answered && store_failed.is_empty() {
            return Ok(Outcome::Done);
        }
        // With every slot busy only an ending session matters; otherwise a
        // change in the store (or the poll interval) sends us claiming.
        let full = running.len() >= args.concurrency;
        tokio::select! {
            Some((session, end)) = pool.next() => {
                running.remove(&session);
                match &end {
                    Err(e) if store_fault(e) => {
                        let n = store_failed.entry(session.clone()).or_default();
                        *n += 1;
                        if *n >= STORE_FAILURES_PER_SESSION {
                            eprintln!(
                                "worker {owner}: {session} stopped on a store error {n} times \
                                 in a row; no longer waiting for it"
                            );
                            store_failed.remove(&session);
                        }
                    }
                    _ => {
                        store_failed.remove(&session);
                    }
                }
                if end.is_err() {
                    resting.insert(session.clone(), Instant::now() + AFTER_FAILURE);
                }
                report(&owner, &session, end);
            }
            _ = store.wait_for_change(POLL), if !full && outage.is_none() => {}
            _ = tokio::time::sleep(outage.as_ref().map_or(POLL, |o| o.backoff)),
                if full || outage.is_some() => {}
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
                let p = longhand_brain::launch::frozen_of(store, &id)
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

/// Whether opening the store failed because it could not be reached (as
/// opposed to a bad URL, a refused login or a store too new), so waiting
/// may help.
fn unreachable(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<StoreError>(),
            Some(StoreError::Db { .. } | StoreError::Io { .. })
        )
    }) && !error.chain().any(|cause| {
        let text = cause.to_string();
        text.contains("password authentication failed") || text.contains("does not exist")
    })
}

/// Whether a run stopped because the store failed under it (and so will
/// run again once the store is back), not because of the session itself.
fn store_fault(error: &RunError) -> bool {
    matches!(
        error,
        RunError::Store(StoreError::Db { .. } | StoreError::Io { .. }) | RunError::LeaseLost(_)
    )
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

#[cfg(test)]
mod tests {
    /// The built-in worker of `serve` and `triggers run` is `longhand
    /// worker` with its defaults: a flag added later takes its default
    /// there too, or this fails.
    #[test]
    fn the_built_in_worker_is_the_worker_with_its_defaults() {
        use clap::{Args, FromArgMatches};
        let matches = super::WorkerArgs::augment_args(clap::Command::new("worker"))
            .try_get_matches_from(["worker", "--concurrency", "3"])
            .unwrap();
        let parsed = super::WorkerArgs::from_arg_matches(&matches).unwrap();
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", super::WorkerArgs::with_concurrency(3))
        );
    }
}
