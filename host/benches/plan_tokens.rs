//! Tokens sent per model request over a long planned run.
//!
//! The real loop (`freeze`/`bind`, `Runner::start`, `run`, the SQLite
//! store, the json tool in its sandbox) drives a 2,000-step planned run:
//! 10 tasks of 200 worker answers each (199 tool calls, then a claim that a
//! tool check confirms). The model is a deterministic stand-in that reports
//! as input tokens what a provider would bill for the request it got: its
//! JSON size / 4 (system, messages, tools). When the context passes
//! `handoff_at` of the window it writes a valid handoff.
//!
//! Printed: the worker's input tokens at step 100 and step 2,000, the mean
//! over steps 51–150 and 1,901–2,000 (a whole handoff cycle each, so the
//! sawtooth does not decide the ratio), and their ratios. Baseline in the
//! same run: the same 2,000 steps as a single loop with a context budget
//! larger than the run (no plan, no handoff), where every request carries
//! the whole history. Goal: planned ratio ≤ 1.2.
//!
//! `cargo bench -p longhand-host --bench plan_tokens`

use std::sync::{Arc, Mutex};

use anyhow::Result;
use async_trait::async_trait;
use longhand_brain::Runner;
use longhand_brain::agent::config::AgentConfig;
use longhand_brain::model::{
    Message, ModelError, ModelProvider, ModelRequest, ModelResponse, ToolCall, Usage,
};
use longhand_hands::{Hands, HandsConfig};
use longhand_session::{Event, SqliteStore, Store};

const TASKS: usize = 10;
const STEPS_PER_TASK: usize = 200;

/// A model that works through tasks: 99 calls, then "done"; a handoff when
/// asked for one. Reports usage from the request's size.
struct Worker {
    answers: Mutex<usize>,
    /// Answers per claim of "done".
    claim_every: usize,
}

fn usage_of(req: &ModelRequest) -> u64 {
    let bytes = req.system.len()
        + serde_json::to_string(&req.messages).map_or(0, |s| s.len())
        + serde_json::to_string(&req.tools).map_or(0, |s| s.len());
    (bytes / 4) as u64
}

#[async_trait]
impl ModelProvider for Worker {
    fn name(&self) -> &str {
        "bench"
    }
    fn model(&self) -> &str {
        "bench"
    }
    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let usage = Usage {
            input_tokens: usage_of(req),
            output_tokens: 40,
            ..Usage::default()
        };
        let asks_handoff = matches!(req.messages.last(), Some(Message::User { text }) if text.starts_with("[harness] Your context is nearly full"));
        let mut response = ModelResponse {
            usage,
            ..ModelResponse::default()
        };
        if asks_handoff {
            response.text = Some(
                serde_json::json!({
                    "goal": "bench", "current_task": null,
                    "status": "querying values; the next query continues the count",
                    "decisions": ["one query per answer"], "artifacts": ["/data/v.json"]
                })
                .to_string(),
            );
            return Ok(response);
        }
        let mut answers = self.answers.lock().map_err(|_| ModelError::Diverged {
            turn: 0,
            expected_excerpt: String::new(),
            got_excerpt: "poisoned".into(),
        })?;
        *answers += 1;
        if (*answers).is_multiple_of(self.claim_every) {
            response.text = Some("Task done: every value queried.".to_owned());
        } else {
            response.text = Some(format!("Query {} of the task.", *answers % STEPS_PER_TASK));
            response.tool_calls = vec![ToolCall {
                id: format!("q{}", *answers),
                name: "json__query".to_owned(),
                arguments: serde_json::json!({"filter": ".n", "input": {"n": *answers}})
                    .to_string(),
            }];
        }
        Ok(response)
    }
}

fn config(planned: bool) -> Result<AgentConfig> {
    let mut text = String::from(
        r#"
        name = "tokens"
        instructions = "Query each value with json__query, one per answer, until the task is done."
        [model]
        provider = "openai"
        model = "bench"
        stream = false
        context_window = 16000
        [limits]
        max_steps = 1000000
        max_tool_calls = 1000000
        max_wall_secs = 1000000
        max_input_tokens = 1000000000000
        max_output_tokens = 1000000000000
        context_tokens = 100000000
        [[tools]]
        component = "json"
        only = ["query"]
    "#,
    );
    if planned {
        text.push_str("[plan]\nfile = \"plan.toml\"\nsteps_per_attempt = 1000\nhandoff_at = 0.6\n");
    }
    Ok(toml::from_str(&text)?)
}

fn plan_toml() -> String {
    let mut out = String::new();
    for i in 0..TASKS {
        let deps = if i == 0 {
            "[]".to_owned()
        } else {
            format!("[\"t{}\"]", i - 1)
        };
        out.push_str(&format!(
            "[[tasks]]\nid = \"t{i}\"\ntitle = \"query batch {i}\"\ndepends_on = {deps}\n\
             [[tasks.done_when]]\nkind = \"tool\"\ntool = \"json__query\"\n\
             input = {{ filter = \".ok\", input = {{ ok = true }} }}\n\
             expect = \".results[0] == true\"\n\n"
        ));
    }
    out
}

/// Worker input tokens by worker answer (1-based), and handoffs.
async fn run(hands: &Hands, planned: bool) -> Result<(Vec<u64>, usize)> {
    let base = tempfile::tempdir()?;
    std::fs::write(base.path().join("plan.toml"), plan_toml())?;
    let frozen = longhand_brain::freeze(hands, &config(planned)?, base.path(), |_| None).await?;
    let bound = longhand_brain::bind(hands, frozen, |_| None).await?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(base.path()).await?);
    let provider = Arc::new(Worker {
        answers: Mutex::new(0),
        // The single loop finishes at its first claim: it claims at the end.
        claim_every: if planned {
            STEPS_PER_TASK
        } else {
            TASKS * STEPS_PER_TASK
        },
    });
    let mut runner = Runner::start(store.clone(), hands, bound, provider, "bench", "bench").await?;
    let end = runner.run().await?;
    let session = runner.session().clone();
    drop(runner);
    anyhow::ensure!(
        end.status.as_str() == "finished" || !planned,
        "the planned run ended {:?}: {:?}",
        end.status,
        end.detail
    );
    let mut tokens = Vec::new();
    let mut handoffs = 0;
    let mut role = String::new();
    for record in store.read(&session, 1).await? {
        match record.event {
            Event::ModelRequested { role: r, .. } => role = r,
            Event::ModelResponded { input_tokens, .. } if role == "worker" => {
                tokens.push(input_tokens)
            }
            Event::Handoff { .. } => handoffs += 1,
            _ => {}
        }
    }
    Ok((tokens, handoffs))
}

fn mean(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len().max(1) as f64
}

fn report(name: &str, tokens: &[u64], handoffs: usize) {
    let at = |step: usize| tokens.get(step - 1).copied().unwrap_or(0);
    let last = tokens.len();
    let early = mean(&tokens[50.min(last)..150.min(last)]);
    let late = mean(&tokens[last.saturating_sub(100)..]);
    println!(
        "{name:<8} steps {last:>5}  handoffs {handoffs:>3}  tokens@100 {:>7}  tokens@{last} {:>7}  \
         ratio {:>6.2}  mean 51-150 {early:>8.0}  mean last 100 {late:>8.0}  ratio {:>6.2}",
        at(100),
        at(last),
        at(last) as f64 / at(100).max(1) as f64,
        late / early.max(1.0),
    );
}

fn main() -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let hands = Hands::new(HandsConfig::default())?;
        println!(
            "# tokens per worker request over {} steps ({TASKS} tasks x {STEPS_PER_TASK}); window \
             16000, handoff_at 0.6",
            TASKS * STEPS_PER_TASK
        );
        let (planned, handoffs) = run(&hands, true).await?;
        report("planned", &planned, handoffs);
        let (single, _) = run(&hands, false).await?;
        report("single", &single, 0);
        Ok(())
    })
}
