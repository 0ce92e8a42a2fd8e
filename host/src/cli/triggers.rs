//! `longhand triggers <AGENT>...`: fire the agents' timer triggers
//! (`every`, `cron`) and run the sessions they start.
//!
//! Each firing starts a detached session, exactly as `run --detach` would;
//! this process also runs them, like `longhand worker` (unless
//! `--no-worker`: then workers elsewhere on the store do). Webhook
//! triggers fire through `longhand serve`, which checks their signatures.
//! A firing is recorded before its session starts: a crash in between
//! loses that firing rather than repeating it (a timer that fires twice
//! does the work twice; one that misses a beat fires at the next).

use std::path::PathBuf;
use std::time::Duration;

use super::worker::WorkerArgs;
use super::{Outcome, usage};
use crate::triggers::{Decision, StateFile, decide, next_after};
use longhand_brain::agent::config::AgentConfig;
use longhand_brain::agent::trigger::When;
use longhand_hands::Hands;
use longhand_session::{Clock, SystemClock};

/// How often due timers are looked for, at most.
const TICK: Duration = Duration::from_secs(1);

/// `longhand triggers` flags.
#[derive(Debug, clap::Args)]
pub struct TriggersArgs {
    /// Agent directories (or agent.toml files) whose `[[triggers]]` fire.
    #[arg(required = true)]
    pub agents: Vec<PathBuf>,
    /// Only start the sessions; leave running them to `longhand worker`s.
    #[arg(long)]
    pub no_worker: bool,
    /// Sessions run at once by the built-in worker. Default 4.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Stop after this many firings, run what they started to the end,
    /// and exit (for a one-off catch-up, and for tests).
    #[arg(long, value_name = "N")]
    pub firings: Option<u64>,
    /// Answer every firing's session from a script file instead of the
    /// agent's model (offline runs and tests; see `run --script`).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

struct Timer {
    key: String,
    agent: PathBuf,
    when: When,
    missed: longhand_brain::agent::trigger::Missed,
    goal: Option<String>,
}

/// `longhand triggers`.
pub async fn triggers(args: TriggersArgs) -> anyhow::Result<Outcome> {
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1"));
    }
    let mut timers = Vec::new();
    for path in &args.agents {
        let (config, _) = AgentConfig::load(path)?;
        let agent =
            std::fs::canonicalize(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        for t in &config.triggers {
            let when = t.when().map_err(usage)?;
            if matches!(when, When::Webhook { .. }) {
                continue;
            }
            timers.push(Timer {
                key: format!("{}/{}", config.name, t.name),
                agent: agent.clone(),
                when,
                missed: t.missed,
                goal: t.goal.clone(),
            });
        }
    }
    if timers.is_empty() {
        return Err(usage(
            "none of these agents has a timer trigger (`[[triggers]]` with `every` or `cron`); webhooks fire through `longhand serve`",
        ));
    }
    let dir = super::settings::data_dir().ok_or_else(|| {
        usage("cannot find a data directory: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)")
    })?;
    // A damaged state file stops the scheduler before anything fires.
    StateFile::lock(&dir)?.read().map_err(usage)?;
    let hands: &'static Hands = Box::leak(Box::new(super::env::hands()?));
    let owner = format!("triggers@{}", super::env::owner());
    for t in &timers {
        eprintln!("triggers: {} ({})", t.key, t.agent.display());
    }
    let schedule = schedule(&timers, &dir, hands, &owner, &args);
    if args.no_worker {
        schedule.await?;
        return Ok(Outcome::Done);
    }
    if args.firings.is_some() {
        // Fire them all, then run what they started to the end.
        schedule.await?;
        let worker = WorkerArgs {
            until_idle: true,
            ..WorkerArgs::with_concurrency(args.concurrency)
        };
        return super::worker::worker(worker).await;
    }
    let worker = super::worker::worker(WorkerArgs::with_concurrency(args.concurrency));
    tokio::select! {
        fired = schedule => fired.map(|()| Outcome::Done),
        ended = worker => ended,
        _ = tokio::signal::ctrl_c() => Ok(Outcome::Done),
    }
}

/// Fire due timers until `--firings` is reached (or for ever).
async fn schedule(
    timers: &[Timer],
    dir: &std::path::Path,
    hands: &'static Hands,
    owner: &str,
    args: &TriggersArgs,
) -> anyhow::Result<()> {
    let mut fired = 0u64;
    loop {
        let now = SystemClock.now_ms();
        // Decide and record under the lock; start the sessions after.
        let due: Vec<(&Timer, u64)> = {
            let file = StateFile::lock(dir)?;
            let mut state = file.read().map_err(usage)?;
            let mut due = Vec::new();
            for t in timers {
                if args.firings.is_some_and(|n| fired + due.len() as u64 >= n) {
                    break;
                }
                let last = *state.last_ms.entry(t.key.clone()).or_insert(now);
                match decide(&t.when, t.missed, last, now) {
                    Decision::Wait => {}
                    Decision::Skip { slot } => {
                        eprintln!(
                            "triggers: {} missed its firings up to {}; skipped (missed = \"skip\")",
                            t.key,
                            humantime::format_rfc3339_seconds(at(slot))
                        );
                        state.last_ms.insert(t.key.clone(), slot);
                    }
                    Decision::Fire { slot } => {
                        state.last_ms.insert(t.key.clone(), slot);
                        due.push((t, slot));
                    }
                }
            }
            file.write(&state)?;
            due
        };
        for (t, slot) in due {
            fired += 1;
            match start(t, hands, owner, args.script.as_ref()).await {
                Ok(session) => eprintln!(
                    "triggers: {} fired for {}: session {session}",
                    t.key,
                    humantime::format_rfc3339_seconds(at(slot))
                ),
                Err(e) => eprintln!(
                    "triggers: {} fired but its session did not start: {e:#}",
                    t.key
                ),
            }
        }
        if args.firings.is_some_and(|n| fired >= n) {
            return Ok(());
        }
        // Sleep until the next firing, a tick at most.
        let now = SystemClock.now_ms();
        let next = timers
            .iter()
            .filter_map(|t| next_after(&t.when, now.saturating_sub(1)))
            .min()
            .unwrap_or(now + 1000);
        let wait = Duration::from_millis(next.saturating_sub(now).clamp(10, 1000));
        tokio::time::sleep(wait.min(TICK)).await;
    }
}

/// Start a detached session of `t`'s agent, as `run --detach` does.
async fn start(
    t: &Timer,
    hands: &'static Hands,
    owner: &str,
    script: Option<&PathBuf>,
) -> anyhow::Result<longhand_session::SessionId> {
    let agent = t
        .agent
        .to_str()
        .ok_or_else(|| usage("the agent's path is not UTF-8"))?;
    let args = super::run::Start {
        agent: PathBuf::from(agent),
        goal: t.goal.clone(),
        script: script.cloned(),
        ..Default::default()
    };
    let started = super::run::start(&args, hands, owner).await?;
    let session = started.runner.session().clone();
    started.runner.detach().await?;
    Ok(session)
}

fn at(ms: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_millis(ms)
}
