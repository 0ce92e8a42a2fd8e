//! `longhand run | resume | sessions | log`: the session commands.
//!
//! Model answers, tool results and error messages in the log are foreign
//! text: progress, `log` and `sessions` print them through
//! [`term`](super::term), one line per event, and `--json` through
//! [`json_line`].

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::env::{env, hands, open_store, owner, parse_session};
use super::settings::data_dir;
use super::term::{json_line, json_safe, one_line, printable};
use super::{Outcome, usage};
#[cfg(test)]
use longhand_brain::agent::config::ModelConfig;
use longhand_brain::agent::config::{AgentConfig, SessionLimits};
use longhand_brain::core::state::SessionState;
use longhand_brain::error::LaunchError;
use longhand_brain::launch::{Launcher, Waking};
use longhand_brain::model::ModelFlag;
use longhand_brain::services::{ModelOverride, Services, override_models};
use longhand_brain::{Frozen, bind, freeze};
use longhand_brain::{RunEnd, Runner};
use longhand_hands::Hands;
use longhand_session::{BlobRef, Event, EventRecord, SessionId, SessionStatus, Store, StoreError};

/// What starts a session, whoever asks: `longhand run`, serve's
/// `POST /api/sessions`, a trigger. The one front door: each builds this
/// value and calls [`start`]; none parses a command line to get here.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Start {
    /// An agent file (`agent.toml`) or a directory holding one.
    pub agent: PathBuf,
    /// The goal; default the agent file's `goal`.
    #[arg(long)]
    pub goal: Option<String>,
    /// Use another model: PROVIDER:MODEL[@BASE_URL], PROVIDER one of openai,
    /// openai-responses, anthropic; e.g. `openai:gpt-4o-mini`, `openai-responses:o3`,
    /// `anthropic:claude-sonnet-4-5`, `openai:llama3.1@http://127.0.0.1:11434/v1`.
    /// Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY (or the agent's api_key_env).
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub model: Option<String>,
    /// Replay model answers from this cassette instead of calling a model.
    #[arg(long, value_name = "FILE")]
    pub cassette: Option<PathBuf>,
    /// Answer turn k with the k-th response of a script file
    /// (`{"responses": [...]}`); the session fails if its last answer is not
    /// the script's answer k-1. For producing cassettes, benchmarks and tests.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cassette", "model"])]
    pub script: Option<PathBuf>,
    /// Record the model's answers into this cassette file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// With `--detach`: workers run higher priorities first (default 0).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i64,
}

/// `longhand run` flags: what starts the session, and how this command
/// shows it.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub start: Start,
    /// Print every event as one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Create the session and leave it to `longhand worker` processes:
    /// print its id and exit without running it.
    #[arg(long)]
    pub detach: bool,
}

/// `longhand resume` flags.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The session to continue.
    pub session: String,
    /// Raise a limit before continuing, e.g. `--raise max_steps=100`.
    #[arg(long = "raise", value_name = "LIMIT=VALUE")]
    pub raise: Vec<String>,
    /// Record the resume and leave the session to `longhand worker`
    /// processes instead of running it here.
    #[arg(long)]
    pub detach: bool,
    /// Record the model's answers (every role's and sub-agent's) into this
    /// cassette file, extending it (as `run --record` does).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Print every event as one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// `longhand log` flags.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The session.
    pub session: String,
    /// One event per line, as JSON (this session's own events; a child's
    /// are in its own log).
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events until the session stops running (this
    /// session's own events).
    #[arg(long)]
    pub follow: bool,
}

/// What this process runs sessions with (see `brain::launch`): providers
/// built from each session's frozen agent with keys from the environment,
/// the memory bank in the data directory, and `record` when given.
pub(super) fn services(record: Option<&Path>) -> Services {
    let services = Services::new(env).data_dir(data_dir());
    match record {
        Some(path) => services.record(path.to_owned()),
        None => services,
    }
}

/// A launch error as the CLI reports it: the operator fixes a flag, a key
/// or a file (exit 2), except a memory bank that fails to open.
fn launch_error(error: LaunchError) -> anyhow::Error {
    match error {
        LaunchError::Memory { .. } => error.into(),
        other => usage(other),
    }
}

/// The flag that replaces every model of the session, if any:
/// `--script`, `--cassette` or `--model PROVIDER:MODEL[@BASE_URL]`
/// (checked before anything is created: a bad one exits 2).
fn model_override(args: &Start) -> anyhow::Result<Option<ModelOverride>> {
    let model = match &args.model {
        Some(flag) => Some(flag.parse::<ModelFlag>().map_err(usage)?),
        None => None,
    };
    let file = |path: &PathBuf| std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
    // A cassette given with `--model` is what answers (`--script` goes
    // with neither).
    Ok(match (&args.script, &args.cassette, model) {
        (Some(script), _, _) => Some(ModelOverride::Script(file(script))),
        (None, Some(cassette), _) => Some(ModelOverride::Cassette(file(cassette))),
        (None, None, model) => model.map(ModelOverride::Model),
    })
}

/// Apply `--model PROVIDER:MODEL[@BASE_URL]` to one model config.
#[cfg(test)]
fn apply_model_flag(model: &mut ModelConfig, flag: &str) -> anyhow::Result<()> {
    flag.parse::<ModelFlag>().map_err(usage)?.apply(model);
    Ok(())
}

/// A session `start` created, its lease held.
pub(super) struct Started<'h> {
    pub runner: Runner<'h>,
}

/// `longhand run`.
pub async fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    // The agent file is checked before the tool host starts.
    AgentConfig::load(&args.start.agent)?;
    let hands = hands()?;
    let Started { mut runner } = start(&args.start, &hands, &owner()).await?;
    if args.detach {
        let session = runner.session().clone();
        runner.detach().await?;
        if args.json {
            println!(
                "{}",
                json_line(&serde_json::json!({"session": session.as_str(), "detached": true}))
            );
        } else {
            println!("session {session}");
            println!("detached: a `longhand worker` on this store runs it");
        }
        return Ok(Outcome::Done);
    }
    drive(&mut runner, args.json, 1).await
}

/// Checks the agent `args` name, freezes it and creates its session for
/// `owner`, with its goal set and its lease held: what `run` does before
/// the loop starts (`run --detach` and `serve` then detach it).
pub(super) async fn start<'h>(
    args: &Start,
    hands: &'h Hands,
    owner: &str,
) -> anyhow::Result<Started<'h>> {
    let (mut config, base) = AgentConfig::load(&args.agent)?;
    // `longhand.lock` beside the agent file pins every tool's digest.
    super::dist::apply_lock(&mut config, &base)?;
    let goal = args
        .goal
        .clone()
        .or_else(|| config.goal.clone())
        .ok_or_else(|| usage("no goal: pass --goal or set `goal` in the agent file"))?;
    // The flag is checked before anything is loaded or created. It is
    // frozen into every model of the session — the worker's, each role's,
    // each child's — before their prices are: every process that wakes
    // the session runs it so, and every answer is priced at the model that
    // gives it.
    let replace = model_override(args)?;
    let mut frozen = {
        let _working = super::progress::Working::start(
            "loading the agent's tools (a first use compiles them for this machine; cached after)",
        );
        freeze(hands, &config, &base, env).await?
    };
    if let Some(replace) = &replace {
        override_models(&mut frozen, replace);
    }
    frozen.priority = args.priority;
    let prices = longhand_brain::pricing::resolve_default(data_dir().as_deref())
        .map_err(|e| usage(format!("prices: {e}")))?;
    frozen.freeze_prices(&prices);
    // A money limit whose spend cannot be counted would not hold: refused
    // before anything exists, naming the model and where its price goes.
    if let Some(unpriced) = frozen.unpriced(None) {
        return Err(usage(unpriced.advice(&prices_file())));
    }
    let kit = Arc::new(services(args.record.as_deref()))
        .kit(&frozen)
        .map_err(launch_error)?;
    let store = open_store().await?;
    let bound = bind(hands, frozen, env).await?;
    let runner = Launcher::new(store, hands)
        .start(bound, kit, &goal, owner)
        .await?;
    Ok(Started { runner })
}

/// `longhand resume`.
pub async fn resume(args: ResumeArgs) -> anyhow::Result<Outcome> {
    let session = parse_session(&args.session)?;
    let mut raised = BTreeMap::new();
    for spec in &args.raise {
        let (name, value) = spec
            .split_once('=')
            .ok_or_else(|| usage("--raise takes LIMIT=VALUE, e.g. max_steps=100"))?;
        let value: u64 = value
            .parse()
            .map_err(|_| usage(format!("--raise {name}: `{value}` is not a whole number")))?;
        SessionLimits::default()
            .set(name, value)
            .map_err(|e| usage(format!("--raise: {e}")))?;
        raised.insert(name.to_owned(), value);
    }
    let store = open_store().await?;
    // A session that is over needs no lease, no tools and no model. The
    // log is folded once: this fold is the one the session wakes from.
    let waking = Waking::load(store.as_ref(), session.clone()).await?;
    let state = waking.state();
    if state.is_terminal() {
        if args.json {
            println!(
                "{}",
                json_line(
                    &serde_json::json!({"session": session.as_str(), "status": state.status.as_str()})
                )
            );
        } else {
            println!("session {session} is already {}", state.status);
        }
        return Ok(Outcome::Session(state.status));
    }
    // The money limit it resumes under must be countable too (the check
    // at `run`, for sessions started before it and for a raised limit).
    let mut frozen: Frozen = waking.frozen()?;
    fill_prices(&mut frozen)?;
    let cost_limit = raised
        .get("max_cost_micros")
        .or(state.raised.get("max_cost_micros"))
        .copied();
    if let Some(unpriced) = frozen.unpriced(cost_limit) {
        return Err(usage(format!(
            "{}, or resume with --raise max_cost_micros=0 to run it without a money limit",
            unpriced.advice(&prices_file())
        )));
    }
    let hands = hands()?;
    // Every role's and child's answers go into the one cassette.
    let services = Arc::new(services(args.record.as_deref()));
    let mut runner = wake_from(store, &hands, &services, waking, &owner()).await?;
    let from_seq = runner.state().last_seq + 1;
    runner.resume(raised).await?;
    if args.detach {
        runner.detach().await?;
        println!("session {session} resumed and left for a `longhand worker`");
        return Ok(Outcome::Done);
    }
    drive(&mut runner, args.json, from_seq).await
}

/// Wake `session` for `owner` with what its frozen agent names and nothing
/// else: its components bound, each role's provider built by `services`
/// from the frozen models (a flag given at `run` is frozen in them), its
/// memory bank. The lease is taken (refused if a live worker holds it).
pub(super) async fn wake<'h>(
    store: Arc<dyn Store>,
    hands: &'h Hands,
    services: &Arc<Services>,
    session: SessionId,
    owner: &str,
) -> anyhow::Result<Runner<'h>> {
    let waking = Waking::load(store.as_ref(), session).await?;
    wake_from(store, hands, services, waking, owner).await
}

/// [`wake`] from the fold `waking` holds (the log is folded once).
async fn wake_from<'h>(
    store: Arc<dyn Store>,
    hands: &'h Hands,
    services: &Arc<Services>,
    waking: Waking,
    owner: &str,
) -> anyhow::Result<Runner<'h>> {
    let mut frozen: Frozen = waking.frozen()?;
    fill_prices(&mut frozen)?;
    let kit = services.kit(&frozen).map_err(launch_error)?;
    let bound = bind(hands, frozen, env).await?;
    Ok(Launcher::new(store, hands)
        .wake(waking, bound, kit, owner)
        .await?)
}

/// The operator's price file, as refusals name it.
fn prices_file() -> PathBuf {
    let name = longhand_brain::pricing::FILE_NAME;
    data_dir().map_or_else(|| PathBuf::from(name), |d| d.join(name))
}

/// Prices for the models a woken session has none for where a money limit
/// needs one, from the operator's table as it is now (read only then; an
/// invalid file is refused, never skipped). Prices frozen at start stay.
fn fill_prices(frozen: &mut Frozen) -> anyhow::Result<()> {
    // `Some(1)`: any limit at all on this agent's own models; children
    // are asked under their own slices.
    if frozen.unpriced(Some(1)).is_none() {
        return Ok(());
    }
    match longhand_brain::pricing::resolve_default(data_dir().as_deref()) {
        Ok(prices) => frozen.fill_missing_prices(&prices),
        // Needed only where a money limit is in force.
        Err(e) if frozen.unpriced(None).is_some() => return Err(usage(format!("prices: {e}"))),
        Err(e) => tracing::warn!(error = %e, "prices not read"),
    }
    Ok(())
}

/// Run to the end, printing progress; the session's end is the outcome.
async fn drive(runner: &mut Runner<'_>, json: bool, from_seq: u64) -> anyhow::Result<Outcome> {
    let id = runner.session().clone();
    if json {
        println!(
            "{}",
            json_line(&serde_json::json!({"session": id.as_str()}))
        );
    } else {
        println!("session {id}");
    }
    let tty = !json && std::io::stderr().is_terminal();
    let started = Instant::now();
    // The status shown with an event is the session as of that event: the
    // runner may already be further on (its appends are not waited for),
    // so the line keeps its own fold of what it has printed.
    let mut shown: SessionState = runner.state().clone();
    runner.observe(Box::new(move |record: &EventRecord| {
        shown.apply(record);
        let state = &shown;
        if json {
            if let Ok(line) = serde_json::to_string(record) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", json_safe(&line));
            }
            return;
        }
        let status = format!(
            "step {} · tool calls {} · tokens {} in / {} out · {:.1}s",
            state.steps,
            state.tool_calls,
            state.input_tokens,
            state.output_tokens,
            started.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r\x1b[2K{status} · {}", record.event.kind());
        } else if let Some(line) = progress_line(&record.event) {
            let _ = writeln!(err, "{} [{status}]", one_line(&line));
        }
    }));
    // Events written before the observer was attached (session created,
    // goal, resumed) are shown first, so `--json` has no gaps.
    runner.replay_to_observer(from_seq).await?;
    let end = runner.run().await;
    if tty {
        eprintln!();
    }
    let end: RunEnd = end?;
    // The detail is the model's summary or an error: many lines are fine,
    // terminal controls are not.
    let detail = end.detail.unwrap_or_default();
    let detail = printable(&detail);
    if !json {
        match end.status {
            SessionStatus::Finished => println!("finished: {detail}"),
            SessionStatus::Paused => {
                println!("paused: {detail}\nresume with: longhand resume {id}")
            }
            SessionStatus::Failed => println!("failed: {detail}"),
            other => println!("{other}"),
        }
    }
    Ok(Outcome::Session(end.status))
}

/// One plain line per interesting event, for non-TTY progress.
fn progress_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::ModelResponded {
            step,
            input_tokens,
            output_tokens,
            latency_ms,
            ..
        } => format!(
            "step {step}: model answered ({input_tokens}/{output_tokens} tokens, {latency_ms} ms)"
        ),
        Event::ToolFinished {
            step, call_id, ok, ..
        } => {
            format!(
                "step {step}: tool call {call_id} {}",
                if *ok { "ok" } else { "failed" }
            )
        }
        Event::ToolInDoubt { call_id, .. } => format!("tool call {call_id}: outcome unknown"),
        Event::ModelFailed {
            step,
            attempt,
            error,
            ..
        } => {
            format!("step {step}: model call failed (attempt {attempt}): {error}")
        }
        Event::Paused { reason } => format!("paused: {}", reason.detail),
        Event::PlanCreated { author, plan } => format!(
            "plan by the {author}: {} tasks",
            plan.get("tasks")
                .and_then(|t| t.as_array())
                .map_or(0, Vec::len)
        ),
        Event::PlanRevised {
            accepted, reason, ..
        } => format!(
            "plan revision {} ({reason})",
            if *accepted { "accepted" } else { "refused" }
        ),
        Event::TaskStarted { task, attempt, .. } => {
            format!("task {task}: attempt {attempt} starts in a fresh context")
        }
        Event::RoleStarted { role, task, .. } => format!(
            "{role} asked{}",
            task.as_ref()
                .map(|t| format!(" about task {t}"))
                .unwrap_or_default()
        ),
        Event::CheckFinished {
            task, kind, passed, ..
        } => format!(
            "task {task}: {kind} check {}",
            if *passed { "passed" } else { "failed" }
        ),
        Event::TaskFinished { task, status, .. } => format!("task {task}: {status}"),
        Event::Handoff { context_tokens, .. } => {
            format!("context handed off at {context_tokens} tokens")
        }
        Event::Finished { .. } => "finished".to_owned(),
        Event::Failed { error } => format!("failed: {error}"),
        _ => return None,
    })
}

/// `longhand sessions`.
pub async fn sessions(json: bool) -> anyhow::Result<Outcome> {
    let store = open_store().await?;
    let list = store.list().await?;
    let mut out = std::io::stdout().lock();
    for s in &list {
        // Spend comes from the fold (a snapshot and its tail: cheap).
        let state = longhand_brain::load_state(store.as_ref(), &s.id).await?;
        let cost = if state.cost_unknown > 0 && state.cost_micros == 0 {
            "cost ?".to_owned()
        } else {
            format!(
                "${:.4}{}",
                state.cost_micros as f64 / 1e6,
                if state.cost_unknown > 0 { "+" } else { "" }
            )
        };
        let line = if json {
            let mut value = serde_json::to_value(s)?;
            if let Some(object) = value.as_object_mut() {
                object.insert(
                    "spend".to_owned(),
                    serde_json::json!({
                        "steps": state.steps,
                        "input_tokens": state.input_tokens,
                        "output_tokens": state.output_tokens,
                        "tool_calls": state.tool_calls,
                        "cost_micros": state.cost_micros,
                        "answers_without_price": state.cost_unknown,
                    }),
                );
                if let Some(parent) = &state.parent {
                    object.insert("parent".to_owned(), parent.clone().into());
                }
            }
            json_line(&value)
        } else {
            format!(
                "{}{}  {:<9} {:>6} events  {:>5} steps  {:>8}/{:<7} tokens  {:>10}  {}",
                if state.parent.is_some() { "  └ " } else { "" },
                s.id,
                s.status,
                s.last_seq,
                state.steps,
                state.input_tokens,
                state.output_tokens,
                cost,
                one_line(&s.agent_name)
            )
        };
        writeln!(out, "{line}")?;
    }
    if list.is_empty() && !json {
        writeln!(
            out,
            "no sessions yet; start one with `longhand run <agent>`"
        )?;
    }
    Ok(Outcome::Done)
}

/// `longhand log`.
pub async fn log(args: LogArgs) -> anyhow::Result<Outcome> {
    let session = parse_session(&args.session)?;
    let store = open_store().await?;
    if !args.json && !args.follow {
        let mut seen = std::collections::HashSet::new();
        return match print_tree(store.as_ref(), &session, 0, &mut seen).await? {
            0 => Err(StoreError::NotFound {
                what: format!("session {session}"),
            }
            .into()),
            _ => Ok(Outcome::Done),
        };
    }
    let mut next = 1;
    loop {
        let records = store.read(&session, next).await?;
        if next == 1 && records.is_empty() {
            return Err(StoreError::NotFound {
                what: format!("session {session}"),
            }
            .into());
        }
        let mut running = true;
        for record in &records {
            next = record.seq + 1;
            if args.json {
                println!("{}", json_line(record));
            } else {
                // One line per event: a goal, a model answer or a tool
                // result cannot print a line that looks like another event.
                println!("{}", one_line(&render(store.as_ref(), record).await));
            }
            if let Some(status) = record.event.status_after() {
                running = !matches!(
                    status,
                    SessionStatus::Finished | SessionStatus::Failed | SessionStatus::Paused
                );
            }
        }
        if !args.follow {
            return Ok(Outcome::Done);
        }
        if !running && !records.is_empty() {
            return Ok(Outcome::Done);
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// How deep `log` nests child sessions. Delegation depth is capped far
/// below this by `[delegation] max_depth`; the bound only keeps a damaged
/// log from recursing without end.
const MAX_TREE_DEPTH: usize = 32;

/// Print `session`'s events, each child session's events nested under the
/// event that started it (`child_started`, or `task_started` of a parallel
/// task), indented one level per generation. Returns how many of
/// `session`'s own events there were.
///
/// Children run beside their parent, so their events are shown as a block
/// under their start rather than interleaved by time: the tree is what an
/// operator reads to see who did what; `log --json` of each session gives
/// the exact order.
fn print_tree<'a>(
    store: &'a dyn Store,
    session: &'a SessionId,
    depth: usize,
    seen: &'a mut std::collections::HashSet<SessionId>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<usize>> + 'a>> {
    Box::pin(async move {
        if !seen.insert(session.clone()) {
            return Ok(0);
        }
        let records = store.read(session, 1).await?;
        let indent = "  │ ".repeat(depth);
        for record in &records {
            println!("{indent}{}", one_line(&render(store, record).await));
            let child = match &record.event {
                Event::ChildStarted { child, .. } => Some(child),
                Event::TaskStarted {
                    child: Some(child), ..
                } => Some(child),
                _ => None,
            };
            let Some(child) = child.and_then(|c| c.parse::<SessionId>().ok()) else {
                continue;
            };
            if depth + 1 >= MAX_TREE_DEPTH {
                println!(
                    "{indent}  │ (child session {child}: nested too deep to show; `longhand log {child}`)"
                );
                continue;
            }
            if let Err(e) = print_tree(store, &child, depth + 1, seen).await {
                println!("{indent}  │ (child session {child}: {e})");
            }
        }
        Ok(records.len())
    })
}

async fn excerpt(store: &dyn Store, blob: &BlobRef, max: usize) -> String {
    match store.get_blob(blob).await {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).replace('\n', " ");
            if text.chars().count() > max {
                format!("{}…", text.chars().take(max).collect::<String>())
            } else {
                text
            }
        }
        Err(e) => format!("<{e}>"),
    }
}

async fn render(store: &dyn Store, r: &EventRecord) -> String {
    let head = format!("#{:<5}", r.seq);
    let body = match &r.event {
        Event::SessionCreated {
            agent_name,
            config_digest,
            ..
        } => format!("session created: agent {agent_name} (config {config_digest})"),
        Event::GoalSet { goal } => format!("goal: {goal}"),
        Event::ModelRequested {
            step,
            provider,
            model,
            attempt,
            ..
        } => format!("step {step} → model {provider}/{model} (attempt {attempt})"),
        Event::ModelResponded {
            step,
            response,
            input_tokens,
            output_tokens,
            latency_ms,
            stop_reason,
            ..
        } => {
            let text = match store.get_blob(response).await {
                Ok(bytes) => describe_response(&bytes),
                Err(e) => format!("<{e}>"),
            };
            format!(
                "step {step} ← model ({input_tokens} in / {output_tokens} out tokens, {latency_ms} ms, {stop_reason}): {text}"
            )
        }
        Event::ModelFailed {
            step,
            attempt,
            error,
            retry_after_ms,
            ..
        } => format!(
            "step {step} ✗ model call failed (attempt {attempt}{}): {error}",
            retry_after_ms
                .map(|ms| format!(", retry after {ms} ms"))
                .unwrap_or_default()
        ),
        Event::ToolStarted {
            step,
            call_id,
            component,
            tool,
            effect,
            input,
            ..
        } => format!(
            "step {step}   tool {component}/{tool} [{effect}] started ({call_id}): {}",
            excerpt(store, input, 200).await
        ),
        Event::ToolFinished {
            step,
            call_id,
            ok,
            result,
            receipt,
        } => {
            let wall = receipt.get("wall_us").and_then(|v| v.as_u64()).unwrap_or(0);
            let fuel = receipt
                .get("fuel_used")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            format!(
                "step {step}   tool {} ({call_id}, {:.2} ms, fuel {fuel}): {}",
                if *ok { "ok" } else { "error" },
                wall as f64 / 1000.0,
                excerpt(store, result, 300).await
            )
        }
        Event::ToolInDoubt {
            step,
            call_id,
            reason,
        } => format!("step {step}   tool outcome unknown ({call_id}): {reason}"),
        Event::Paused { reason } => format!("paused ({:?}): {}", reason.kind, reason.detail),
        Event::Resumed {
            raised,
            note,
            cause,
        } => format!(
            "resumed{}{}{}",
            match cause {
                longhand_session::ResumeCause::Operator => "",
                longhand_session::ResumeCause::Crash => " after a crash",
                longhand_session::ResumeCause::TakeOver => " by take-over",
            },
            if raised.is_empty() {
                String::new()
            } else {
                format!(" with {raised:?}")
            },
            note.as_ref().map(|n| format!(": {n}")).unwrap_or_default()
        ),
        // A long summary is shown as its preview plus where the whole text
        // is, the way tool inputs and results are shown as excerpts: `log`
        // is one line per event, and `log --json` carries the same two
        // fields `run --json` printed.
        Event::Finished {
            summary,
            summary_blob,
        } => format!(
            "finished: {}{}",
            summary.as_deref().unwrap_or_default(),
            summary_blob
                .as_ref()
                .map(|b| format!(" [whole summary: blob {b}]"))
                .unwrap_or_default()
        ),
        Event::Failed { error } => format!("failed: {error}"),
        Event::Snapshot { through_seq, .. } => format!("snapshot through #{through_seq}"),
        Event::Error { step, message } => format!(
            "{}error: {message}",
            step.map(|s| format!("step {s} ")).unwrap_or_default()
        ),
        Event::PlanCreated { plan, author } => format!(
            "plan created by the {author}: {} tasks",
            plan.get("tasks")
                .and_then(|t| t.as_array())
                .map_or(0, Vec::len)
        ),
        Event::PlanRevised {
            plan,
            author,
            reason,
            accepted,
            weakened,
        } => format!(
            "plan revision by the {author} {} ({reason}): {} tasks{}",
            if *accepted { "accepted" } else { "refused" },
            plan.get("tasks")
                .and_then(|t| t.as_array())
                .map_or(0, Vec::len),
            if weakened.is_empty() {
                String::new()
            } else {
                format!("; removes or changes: {}", weakened.join("; "))
            }
        ),
        Event::TaskStarted {
            task,
            attempt,
            child: Some(child),
            ..
        } => format!("task {task} started (attempt {attempt}) in the child session {child}"),
        Event::TaskStarted {
            task,
            attempt,
            briefing,
            memories,
            child: None,
        } => format!(
            "task {task} started (attempt {attempt}) in a fresh context ({} bytes of briefing{})",
            briefing.bytes,
            if memories.is_empty() {
                String::new()
            } else {
                format!(", memories {}", memories.join(", "))
            }
        ),
        Event::RoleStarted {
            role, task, check, ..
        } => format!(
            "{role} started{}{}",
            task.as_ref()
                .map(|t| format!(" on task {t}"))
                .unwrap_or_default(),
            check.map(|c| format!(", check {c}")).unwrap_or_default()
        ),
        Event::CheckFinished {
            task,
            check,
            kind,
            passed,
            detail,
            confinement,
            ..
        } => format!(
            "task {task} check {check} ({kind}) {}: {}{}",
            if *passed { "passed" } else { "failed" },
            detail.replace('\n', " "),
            confinement
                .as_ref()
                .map(|c| format!(" [confinement {c}]"))
                .unwrap_or_default()
        ),
        Event::TaskFinished {
            task,
            status,
            attempts,
        } => format!(
            "task {task} {status} after {attempts} attempt{}",
            if *attempts == 1 { "" } else { "s" }
        ),
        Event::Handoff {
            task,
            context_tokens,
            by_model,
            handoff,
            ..
        } => format!(
            "handoff{} at {context_tokens} context tokens, written by the {}: {}",
            task.as_ref()
                .map(|t| format!(" in task {t}"))
                .unwrap_or_default(),
            if *by_model { "model" } else { "harness" },
            excerpt(store, handoff, 300).await
        ),
        Event::ProgressNoted { task, text } => format!("progress ({task}): {text}"),
        Event::ApprovalRequested {
            request,
            step,
            tool,
            effect,
            input,
            ..
        } => format!(
            "step {step}   approval {request} requested for {tool} [{effect}]: {}",
            excerpt(store, input, 200).await
        ),
        Event::ApprovalGranted {
            request,
            scope,
            expires_ms,
            by,
        } => format!(
            "approval {request} granted by {by} (scope {scope}{})",
            expires_ms
                .map(|ms| format!(", until {ms} ms"))
                .unwrap_or_default()
        ),
        Event::ApprovalDenied {
            request,
            reason,
            by,
        } => format!("approval {request} denied by {by}: {reason}"),
        Event::Detached { by } => format!("left for a worker by {by}"),
        Event::CallsLearned { step, calls } => format!(
            "step {step}: the answer's calls, read from it: {}",
            calls.join(", ")
        ),
        Event::ChildStarted {
            call_id,
            child,
            agent,
            slice,
        } => format!("child {child} ({agent}) started by {call_id} with {slice:?}"),
        Event::Delegated {
            parent,
            call_id,
            agent,
            depth,
        } => format!("started by {parent} ({call_id}) as {agent}, depth {depth}"),
        Event::Steered {
            control,
            kind,
            text,
            by,
        } => format!(
            "steered by {by} ({kind}, control {control}){}",
            text.as_ref().map(|t| format!(": {t}")).unwrap_or_default()
        ),
        Event::MemoryWritten {
            id, scope, text, ..
        } => format!("memory {id} written to {scope}: {text}"),
    };
    format!("{head} {body}")
}

fn describe_response(bytes: &[u8]) -> String {
    let Ok(r) = serde_json::from_slice::<longhand_brain::model::ModelResponse>(bytes) else {
        return String::from_utf8_lossy(bytes).chars().take(200).collect();
    };
    let mut parts = Vec::new();
    if let Some(text) = r.text.filter(|t| !t.is_empty()) {
        let t: String = text.replace('\n', " ").chars().take(200).collect();
        parts.push(format!("\"{t}\""));
    }
    for c in &r.tool_calls {
        let args: String = c.arguments.chars().take(120).collect();
        parts.push(format!("calls {} {args}", c.name));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_flag_parses_provider_model_and_base() {
        let mut m: ModelConfig =
            toml::from_str("provider = \"replay\"\nmodel = \"x\"\ncassette = \"c.json\"").unwrap();
        apply_model_flag(&mut m, "openai:llama3.1@http://127.0.0.1:11434/v1").unwrap();
        assert_eq!(m.provider, "openai");
        assert_eq!(m.model, "llama3.1");
        assert_eq!(m.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
        assert!(m.cassette.is_none());
        assert!(apply_model_flag(&mut m, "gpt-4o").is_err());
        for bad in [
            "openai:gpt@notaurl",
            "openai:gpt@",
            "openai:gpt@ftp://host/v1",
        ] {
            let err = apply_model_flag(&mut m, bad).unwrap_err();
            assert!(err.downcast_ref::<crate::cli::Usage>().is_some(), "{bad}");
        }
        assert_eq!(m.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
        assert!(apply_model_flag(&mut m, "bedrock:x").is_err());
    }
}
