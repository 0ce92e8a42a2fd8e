//! The planned session's actions: recording plans, starting tasks in fresh
//! contexts, running checks, reading the planner's and the judge's answers,
//! finishing tasks and replacing a full context with a handoff.
//!
//! Each action ends in the events that record it; [`decide`](super::decide)
//! reads them back from the fold. Nothing here decides what comes next.

use std::sync::Arc;

use super::bind::PlanNames;
use super::briefing::{self, Catalogue, PlannerAsk, WorkerBriefing};
use super::config::{DEFAULT_CONTEXT_WINDOW, ModelConfig};
use super::decide::{MAX_HANDOFF_TRIES, MAX_REJECTED, PlanPolicy, PlannerPurpose, Role};
use super::handoff::{self, Handoff};
use super::model::{ModelProvider, ToolDef};
use super::plan::{self, Check, OPERATOR, PLANNER};
use super::runner::{LogError, RunError, Runner};
use crate::checks::resolve::{GrantedDir, resolve};
use crate::hands::Effect;
use crate::session::event::MAX_INLINE_TEXT;
use crate::session::{Event, PauseKind, PauseReason};

/// Bytes of a command's output kept in a check's detail (its tail: the
/// end of a test run says what failed).
const DETAIL_TAIL: usize = 2048;

/// A judge's verdict.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Verdict {
    pass: bool,
    #[serde(default)]
    reasons: Vec<String>,
    #[serde(default)]
    missing: Vec<String>,
}

impl Runner<'_> {
    /// The plan settings `decide` reads, for a planned agent.
    pub(super) fn plan_policy(&self) -> Option<PlanPolicy> {
        let frozen = &self.agent.frozen;
        let plan = frozen.plan.as_ref()?;
        let window = frozen
            .model
            .context_window
            .unwrap_or(DEFAULT_CONTEXT_WINDOW);
        Some(PlanPolicy {
            has_file: plan.operator.is_some(),
            planner: plan.config.planner_mode(),
            max_attempts: plan.config.max_attempts,
            steps_per_attempt: plan.config.steps_per_attempt,
            max_revisions: plan.config.max_revisions,
            handoff_tokens: (window as f64 * plan.config.handoff_at) as u64,
            max_parallel: plan.config.max_parallel_tasks,
        })
    }

    /// What `usage` of the current request's provider and model cost, by
    /// the frozen price; `None` when no price is known.
    pub(super) fn cost_of(&self, usage: &super::model::Usage) -> Option<u64> {
        let role = self
            .state
            .pending_request
            .as_ref()
            .map_or("worker", |p| p.role.as_str());
        let model = match role {
            "planner" => self.model_config(Role::Planner),
            "judge" => self.model_config(Role::Judge),
            _ => self.model_config(Role::Worker),
        };
        let price = self
            .agent
            .frozen
            .prices
            .get(&super::bind::price_key(model))?;
        Some(price.cost_micros(&super::pricing::UsageLike::from(usage)))
    }

    /// The pause for asking `role` when a money limit is in force and its
    /// model has no frozen price: its answer's cost could not be counted,
    /// so the limit would not hold. `run` refuses such an agent at start;
    /// this holds the line for sessions started before that check, or
    /// whose limit a `--raise` put in place.
    pub(super) fn unpriced_pause(&self, role: Role) -> Option<crate::session::PauseReason> {
        let max = super::decide::limit(
            &self.state.raised,
            "max_cost_micros",
            self.agent.frozen.limits.max_cost_micros,
        );
        let model = self.model_config(role);
        if max == 0
            || self
                .agent
                .frozen
                .prices
                .contains_key(&super::bind::price_key(model))
        {
            return None;
        }
        Some(crate::session::PauseReason {
            kind: crate::session::PauseKind::Limit,
            limit: Some("max_cost_micros".to_owned()),
            detail: format!(
                "model `{}` (provider {}) has no price, so max_cost_micros = {max} cannot be                  counted; give it a price in prices.toml (`longhand resume` reads it for a                  model the session has none for), or resume with --raise max_cost_micros=0 to                  run without a money limit",
                model.model,
                model.provider.as_str()
            ),
        })
    }

    /// The model settings of `role`.
    pub(super) fn model_config(&self, role: Role) -> &ModelConfig {
        let frozen = &self.agent.frozen;
        let own = match role {
            Role::Planner => frozen.roles.planner.as_ref(),
            Role::Judge => frozen.roles.judge.as_ref(),
            Role::Worker | Role::Handoff => None,
        };
        own.unwrap_or(&frozen.model)
    }

    /// The provider that answers `role`.
    pub(super) fn provider_for(&self, role: Role) -> Arc<dyn ModelProvider> {
        self.kit.provider(role)
    }

    /// The tools `role` is offered: the worker all of the agent's (and
    /// no plan-editing tool: there is none to offer), the judge the
    /// read-only ones, the planner none.
    pub(super) fn tools_for(&self, role: Role) -> Vec<ToolDef> {
        match role {
            Role::Worker | Role::Handoff => {
                let mut defs = self.agent.defs.clone();
                if self.kit.memory.is_some() {
                    defs.extend(super::recall::defs(&self.agent.frozen.memory));
                }
                defs.extend(super::delegate::def(&self.agent.frozen));
                if !self.agent.frozen.skills.is_empty() {
                    defs.push(super::skills::load_tool_def(&self.agent.frozen.skills));
                }
                defs
            }
            Role::Judge => self
                .agent
                .defs
                .iter()
                .filter(|d| {
                    self.agent
                        .tools
                        .get(&d.name)
                        .is_some_and(|t| t.spec.effect == Effect::ReadOnly)
                })
                .cloned()
                .collect(),
            Role::Planner => Vec::new(),
        }
    }

    /// Record the operator's plan.
    pub(super) async fn create_plan(&mut self) -> Result<(), RunError> {
        let plan = self
            .agent
            .frozen
            .plan
            .as_ref()
            .and_then(|p| p.operator.clone())
            .unwrap_or_default();
        let plan = serde_json::to_value(&plan).map_err(super::runner::json_error("the plan"))?;
        self.write(vec![Event::PlanCreated {
            plan,
            author: OPERATOR.to_owned(),
        }])
        .await
    }

    /// Start the planner's conversation.
    pub(super) async fn start_planner(&mut self, purpose: PlannerPurpose) -> Result<(), RunError> {
        let goal = self.state.goal.clone().unwrap_or_default();
        let read_only: Vec<(String, String)> = self
            .tools_for(Role::Judge)
            .into_iter()
            .map(|d| (d.name, d.description))
            .collect();
        let worker_tools: Vec<String> = self.agent.defs.iter().map(|d| d.name.clone()).collect();
        let commands: Vec<(String, String)> = self
            .agent
            .frozen
            .checks
            .iter()
            .map(|(name, c)| (name.clone(), format!("{:?}", c.argv)))
            .collect();
        let catalogue = Catalogue {
            read_only_tools: read_only
                .iter()
                .map(|(n, d)| (n.as_str(), d.as_str()))
                .collect(),
            worker_tools: worker_tools.iter().map(String::as_str).collect(),
            commands: commands
                .iter()
                .map(|(n, a)| (n.as_str(), a.clone()))
                .collect(),
        };
        let (ask, task) = match (&purpose, &self.state.plan) {
            (PlannerPurpose::Extend, Some(plan)) => (PlannerAsk::Extend(plan), None),
            (PlannerPurpose::Revise { task }, Some(plan)) => (
                PlannerAsk::Revise {
                    plan,
                    task,
                    failures: &self.state.failures,
                },
                Some(task.clone()),
            ),
            _ => (PlannerAsk::Create, None),
        };
        let text = briefing::planner(&goal, &self.agent.frozen.instructions, &catalogue, &ask);
        let briefing = self.put(text.into_bytes());
        self.write(vec![Event::RoleStarted {
            role: PLANNER.to_owned(),
            task,
            check: None,
            briefing,
        }])
        .await
    }

    /// Check the planner's answer; record the plan or send the errors back.
    pub(super) async fn accept_plan(&mut self, step: u64) -> Result<(), RunError> {
        let text = self.answer_text().await?;
        let names = PlanNames::of(&self.agent);
        let plan = match plan::parse_answer(&text) {
            Ok(plan) => plan,
            Err(error) => return self.reject(step, error).await,
        };
        let mut errors = plan.validate(names.names(), true);
        errors.extend(predicate_errors(self.hands, &plan).await);
        if !errors.is_empty() {
            let message = format!(
                "The plan was not accepted. Fix these and answer with the whole plan again:\n- {}",
                errors.join("\n- ")
            );
            return self.reject(step, message).await;
        }
        let value = serde_json::to_value(&plan).map_err(super::runner::json_error("the plan"))?;
        let Some(old) = self.state.plan.as_ref().map(|p| p.plan.clone()) else {
            return self
                .write(vec![Event::PlanCreated {
                    plan: value,
                    author: PLANNER.to_owned(),
                }])
                .await;
        };
        let weakened = plan::weakened(&old, &plan);
        let allow = self
            .agent
            .frozen
            .plan
            .as_ref()
            .is_some_and(|p| p.config.allow_weaken);
        let reason = match self
            .state
            .conversation
            .as_ref()
            .and_then(|c| c.task.clone())
        {
            Some(task) => format!("task {task} failed its checks on every attempt"),
            None => "the planner extends the operator's plan".to_owned(),
        };
        let accepted = weakened.is_empty() || allow;
        let mut events = vec![Event::PlanRevised {
            plan: value,
            author: PLANNER.to_owned(),
            reason,
            accepted,
            weakened,
        }];
        if !accepted && self.rejected() + 1 >= MAX_REJECTED {
            events.push(plan_pause(format!(
                "the planner's revisions kept removing or changing checks ({MAX_REJECTED} \
                 refused); see `longhand log`"
            )));
        }
        self.write(events).await
    }

    /// Start an attempt at `task` in a fresh context.
    pub(super) async fn start_task(&mut self, task_id: String) -> Result<(), RunError> {
        let query = self
            .state
            .plan
            .as_ref()
            .and_then(|p| p.plan.task(&task_id))
            .map(|t| format!("{} {}", t.title, t.description))
            .unwrap_or_default();
        let found = self.memories_for(&query).await;
        let (text, attempt) = self.worker_briefing(&task_id, false, &found).await?;
        let memories = found.into_iter().map(|(id, _)| id).collect();
        let briefing = self.put(text.into_bytes());
        self.write(vec![Event::TaskStarted {
            task: task_id,
            attempt,
            briefing,
            memories,
            child: None,
        }])
        .await
    }

    /// The briefing of the worker on `task_id`: for a new attempt, or (with
    /// `handoff`) to carry the current one on after a handoff.
    async fn worker_briefing(
        &mut self,
        task_id: &str,
        continuing: bool,
        memories: &[(String, String)],
    ) -> Result<(String, u32), RunError> {
        let handoff = match &self.state.latest_handoff {
            Some(blob) => {
                let blob = blob.clone();
                serde_json::from_slice::<Handoff>(&self.get(&blob).await?).ok()
            }
            None => None,
        };
        let Some(plan) = &self.state.plan else {
            return Err(inconsistent("a task starts but there is no plan"));
        };
        let Some(task) = plan.plan.task(task_id) else {
            return Err(inconsistent(&format!("task {task_id} is not in the plan")));
        };
        let record = plan.tasks.get(task_id).cloned().unwrap_or_default();
        let attempt = if continuing {
            record.attempts.max(1)
        } else {
            record.attempts + 1
        };
        let config = self.agent.frozen.plan.as_ref().map(|p| p.config.clone());
        // Numbered across the session: a fresh set after a person's
        // resume or a revision goes on from the attempts before it.
        let max_attempts = record.fresh_from
            + task
                .max_attempts
                .or(config.as_ref().map(|c| c.max_attempts))
                .unwrap_or(1);
        let keep = config.as_ref().map_or(10, |c| c.progress_notes);
        let progress: Vec<String> = self
            .state
            .progress
            .iter()
            .rev()
            .take(keep)
            .rev()
            .map(|n| n.text.clone())
            .collect();
        // A handoff is about the task it was written in; a later task
        // learns what came before from the progress notes.
        let handoff = handoff.filter(|h| h.current_task.as_deref() == Some(task_id));
        let failures = if continuing {
            Vec::new()
        } else {
            self.state.failures.clone()
        };
        let text = briefing::worker(&WorkerBriefing {
            goal: self.state.goal.as_deref().unwrap_or_default(),
            plan,
            task,
            attempt,
            max_attempts,
            failures: &failures,
            handoff: handoff.as_ref(),
            progress: &progress,
            memories,
        });
        Ok((text, attempt))
    }

    /// Run harness check `index` of `task_id` and record its result.
    pub(super) async fn run_check(&mut self, task_id: String, index: u32) -> Result<(), RunError> {
        let check = self
            .state
            .plan
            .as_ref()
            .and_then(|p| p.plan.task(&task_id))
            .and_then(|t| t.done_when.get(index as usize))
            .cloned()
            .ok_or_else(|| inconsistent(&format!("task {task_id} has no check {index}")))?;
        let event = match &check {
            Check::Command { name } => self.command_check(&task_id, index, name).await,
            Check::Tool {
                tool,
                input,
                expect,
            } => {
                self.tool_check(&task_id, index, tool, input, expect)
                    .await?
            }
            Check::Judge { .. } => {
                return Err(inconsistent("a judge check is not a harness check"));
            }
        };
        self.write(vec![event]).await
    }

    async fn command_check(&mut self, task: &str, index: u32, name: &str) -> Event {
        let finished = |passed: bool, detail: String, output, confinement| Event::CheckFinished {
            task: task.to_owned(),
            check: index,
            kind: "command".to_owned(),
            passed,
            detail,
            output,
            confinement,
        };
        let Some(config) = self.agent.frozen.checks.get(name).cloned() else {
            return finished(
                false,
                format!("the command check `{name}` is not defined in agent.toml"),
                None,
                None,
            );
        };
        let dirs = self.granted_dirs();
        let resolved = match resolve(name, &config, &dirs, |v| std::env::var(v).ok()) {
            Ok(resolved) => resolved,
            Err(error) => return finished(false, error.to_string(), None, None),
        };
        // One marker per check of this session, the same on every run: a
        // run after a crash first kills what the dead run left behind.
        let marker = format!("{}/{task}/{index}", self.session);
        match crate::checks::command::run_as(&resolved.spec, &marker).await {
            Err(error) => finished(false, format!("it could not run: {error}"), None, None),
            Ok(mut outcome) => {
                // The model knows the directories by their guest paths;
                // the host's layout is none of its business.
                outcome.stdout = to_guest_paths(&outcome.stdout, &dirs);
                outcome.stderr = to_guest_paths(&outcome.stderr, &dirs);
                let mut detail = match (outcome.timed_out, outcome.code) {
                    (true, _) => format!("timed out after {} ms", outcome.wall_ms),
                    (false, Some(code)) => format!("exit code {code}"),
                    (false, None) => "killed by a signal".to_owned(),
                };
                if !outcome.passed {
                    let tail = tail(
                        &format!("{}\n{}", outcome.stdout, outcome.stderr),
                        DETAIL_TAIL,
                    );
                    detail.push_str(&format!("; the end of its output:\n{tail}"));
                }
                let output = serde_json::json!({
                    "code": outcome.code,
                    "timed_out": outcome.timed_out,
                    "wall_ms": outcome.wall_ms,
                    "stdout": outcome.stdout,
                    "stderr": outcome.stderr,
                    "dropped_bytes": outcome.dropped_bytes,
                    "notes": resolved.notes,
                });
                let output = self.put(output.to_string().into_bytes());
                let confinement = serde_json::to_value(&outcome.confinement).ok();
                finished(outcome.passed, detail, Some(output), confinement)
            }
        }
    }

    async fn tool_check(
        &mut self,
        task: &str,
        index: u32,
        tool: &str,
        input: &serde_json::Value,
        expect: &str,
    ) -> Result<Event, RunError> {
        let (ok, result, _receipt) = self.execute(tool, input).await;
        let output = self.put(result.clone());
        let (passed, detail) = if !ok {
            (
                false,
                format!("the tool call failed: {}", String::from_utf8_lossy(&result)),
            )
        } else {
            match serde_json::from_slice::<serde_json::Value>(&result) {
                Err(e) => (false, format!("the tool's output is not JSON: {e}")),
                Ok(value) => {
                    match crate::checks::tool::predicate_holds(self.hands, expect, &value).await {
                        Ok(verdict) => (verdict.holds, verdict.detail),
                        Err(error) => (false, error.to_string()),
                    }
                }
            }
        };
        Ok(Event::CheckFinished {
            task: task.to_owned(),
            check: index,
            kind: "tool".to_owned(),
            passed,
            detail,
            output: Some(output),
            confinement: None,
        })
    }

    /// The agent's granted directories, as command checks see them.
    fn granted_dirs(&self) -> Vec<GrantedDir> {
        super::bind::granted_dirs(
            self.agent
                .components
                .iter()
                .flat_map(|c| c.grants.dirs.iter()),
        )
    }

    /// Start the judge on check `index` of `task_id`.
    pub(super) async fn start_judge(
        &mut self,
        task_id: String,
        index: u32,
    ) -> Result<(), RunError> {
        let changed = self.changed_paths().await?;
        let claim = self.claim_text().await?;
        let plan = self.state.plan.as_ref();
        let task = plan.and_then(|p| p.plan.task(&task_id));
        let (Some(task), Some(Check::Judge { rubric })) =
            (task, task.and_then(|t| t.done_when.get(index as usize)))
        else {
            return Err(inconsistent(&format!(
                "task {task_id} has no judge check {index}"
            )));
        };
        let text = briefing::judge(task, rubric, &claim, &changed);
        let briefing = self.put(text.into_bytes());
        self.write(vec![Event::RoleStarted {
            role: super::state::JUDGE.to_owned(),
            task: Some(task_id),
            check: Some(index),
            briefing,
        }])
        .await
    }

    /// Read the judge's final answer as its verdict.
    pub(super) async fn accept_verdict(&mut self, step: u64) -> Result<(), RunError> {
        let Some((task, check)) = self
            .state
            .conversation
            .as_ref()
            .and_then(|c| Some((c.task.clone()?, c.check?)))
        else {
            return Err(inconsistent("a verdict without a task and check"));
        };
        let text = self.answer_text().await?;
        let parsed = plan::json_in(&text)
            .ok_or_else(|| "the answer holds no JSON object".to_owned())
            .and_then(|json| {
                serde_json::from_str::<Verdict>(json)
                    .map_err(|e| format!("the verdict does not match its shape: {e}"))
            });
        let verdict = match parsed {
            Ok(verdict) => verdict,
            Err(error) if self.rejected() + 1 < MAX_REJECTED => {
                let message = format!(
                    "The verdict was not readable ({error}). Answer with one JSON object: \
                     {{\"pass\": true or false, \"reasons\": [...], \"missing\": [...]}}."
                );
                return self
                    .write(vec![Event::Error {
                        step: Some(step),
                        message,
                    }])
                    .await;
            }
            Err(error) => Verdict {
                pass: false,
                reasons: vec![format!(
                    "the judge gave no readable verdict in {MAX_REJECTED} answers: {error}"
                )],
                missing: Vec::new(),
            },
        };
        let mut detail = verdict.reasons.join("; ");
        if !verdict.missing.is_empty() {
            detail.push_str(&format!("; missing: {}", verdict.missing.join("; ")));
        }
        let output = self.put(serde_json::to_vec(&verdict).unwrap_or_default());
        self.write(vec![Event::CheckFinished {
            task,
            check,
            kind: "judge".to_owned(),
            passed: verdict.pass,
            detail,
            output: Some(output),
            confinement: None,
        }])
        .await
    }

    /// Record the end of a task and its progress note.
    pub(super) async fn finish_task(
        &mut self,
        task_id: String,
        done: bool,
    ) -> Result<(), RunError> {
        let claim = self.claim_text().await?;
        let plan = self.state.plan.as_ref();
        let task = plan.and_then(|p| p.plan.task(&task_id));
        let record = plan
            .and_then(|p| p.tasks.get(&task_id))
            .cloned()
            .unwrap_or_default();
        let title = task.map(|t| t.title.clone()).unwrap_or_default();
        let checks: Vec<String> = task
            .map(|t| {
                t.done_when
                    .iter()
                    .zip(&record.checks)
                    .map(|(c, r)| {
                        let result = match r {
                            Some(true) => "passed",
                            Some(false) => "failed",
                            None => "not run",
                        };
                        format!("{} {result}", c.label())
                    })
                    .collect()
            })
            .unwrap_or_default();
        let status = if done { "done" } else { "failed" };
        let mut text = format!(
            "{task_id} ({title}): {status} after {} attempt(s)",
            record.attempts
        );
        if !checks.is_empty() {
            text.push_str(&format!("; checks: {}", checks.join(", ")));
        }
        if !done && !self.state.failures.is_empty() {
            text.push_str(&format!(
                "; failures: {}",
                briefing::cut(&self.state.failures.join(" | "), 600)
            ));
        }
        if !claim.trim().is_empty() {
            text.push_str(&format!(". Worker: {}", briefing::cut(claim.trim(), 600)));
        }
        self.write(vec![
            Event::TaskFinished {
                task: task_id.clone(),
                status: status.to_owned(),
                attempts: record.attempts,
            },
            Event::ProgressNoted {
                task: task_id,
                text: briefing::cut(&text, MAX_INLINE_TEXT - 8),
            },
        ])
        .await
    }

    /// Check the handoff the model wrote; replace the worker's context
    /// with it, or send it back, or (after [`MAX_HANDOFF_TRIES`] bad ones)
    /// build one from the plan.
    pub(super) async fn accept_handoff(&mut self) -> Result<(), RunError> {
        let Some(reply) = self.state.handoff_reply.clone() else {
            return Ok(());
        };
        let bytes = self.get(&reply.response).await?;
        let text = serde_json::from_slice::<super::model::ModelResponse>(&bytes)
            .map_err(super::runner::json_error("a model response blob"))?
            .text
            .unwrap_or_default();
        match handoff::parse(&text) {
            Ok(handoff) => self.write_handoff(handoff, true).await,
            Err(problems) => {
                let message = problems.join("; ");
                self.write(vec![Event::Error {
                    step: Some(reply.step),
                    message: format!("the handoff was refused: {message}"),
                }])
                .await?;
                if self.state.handoff_tries < MAX_HANDOFF_TRIES {
                    return Ok(());
                }
                let goal = self.state.goal.clone().unwrap_or_default();
                let mut fallback =
                    Handoff::from_plan(&goal, self.state.plan.as_ref(), &self.state.in_doubt);
                fallback.artifacts = self.changed_paths().await?;
                fallback.artifacts.truncate(handoff::MAX_ITEMS);
                self.write_handoff(fallback, false).await
            }
        }
    }

    async fn write_handoff(&mut self, handoff: Handoff, by_model: bool) -> Result<(), RunError> {
        let task = self.state.plan.as_ref().and_then(|p| p.current.clone());
        let context_tokens = self
            .state
            .conversation
            .as_ref()
            .map_or(0, |c| c.context_tokens);
        let handoff_blob = self.put(serde_json::to_vec(&handoff).unwrap_or_default());
        // The briefing reads the latest handoff from the state: fold it in
        // first by building from the value directly.
        // Memories relevant to where the work stands now.
        let found = self
            .memories_for(&format!(
                "{} {}",
                handoff.status,
                handoff.remaining.join(" ")
            ))
            .await;
        let text = match &task {
            Some(task_id) => {
                self.state.latest_handoff = Some(handoff_blob.clone());
                let (text, _) = self.worker_briefing(task_id, true, &found).await?;
                text
            }
            None => handoff.render(),
        };
        let briefing = self.put(text.into_bytes());
        self.write(vec![Event::Handoff {
            task,
            handoff: handoff_blob,
            briefing,
            context_tokens,
            by_model,
            memories: found.into_iter().map(|(id, _)| id).collect(),
        }])
        .await
    }

    /// Finish a planned session: every task is done.
    pub(super) async fn finish_plan(&mut self) -> Result<(), RunError> {
        let plan = self.state.plan.as_ref();
        let n = plan.map_or(0, |p| p.plan.tasks.len());
        let mut text = format!("All {n} tasks of the plan are done; their checks passed.\n");
        for note in &self.state.progress {
            text.push_str(&format!("- {}\n", note.text));
        }
        let finished = self.finished(text).await;
        self.write(vec![finished]).await
    }

    /// The paths the worker's changing calls named in the current task
    /// (fields named `path`, `*_path`, `to`, `dest`), in order, once each.
    async fn changed_paths(&mut self) -> Result<Vec<String>, RunError> {
        let mut paths: Vec<String> = Vec::new();
        for blob in self.state.changes.clone() {
            let bytes = self.get(&blob).await?;
            let Ok(serde_json::Value::Object(input)) = serde_json::from_slice(&bytes) else {
                continue;
            };
            for (key, value) in input {
                let named = key == "path" || key.ends_with("_path") || key == "to" || key == "dest";
                if let (true, Some(path)) = (named, value.as_str())
                    && !paths.iter().any(|p| p == path)
                {
                    paths.push(briefing::cut(path, 300));
                }
            }
        }
        Ok(paths)
    }

    /// The text of the worker's claim (its last answer of the attempt).
    async fn claim_text(&mut self) -> Result<String, RunError> {
        let Some(blob) = self.state.claim.clone() else {
            return Ok(String::new());
        };
        let bytes = self.get(&blob).await?;
        Ok(
            serde_json::from_slice::<super::model::ModelResponse>(&bytes)
                .ok()
                .and_then(|r| r.text)
                .unwrap_or_default(),
        )
    }

    /// The text of the last answer.
    async fn answer_text(&mut self) -> Result<String, RunError> {
        Ok(self
            .last_response()
            .await?
            .and_then(|r| r.text)
            .unwrap_or_default())
    }

    /// Answers of the current conversation refused so far.
    fn rejected(&self) -> u32 {
        self.state.conversation.as_ref().map_or(0, |c| c.rejected)
    }

    /// Send the planner's answer back with `message`, or pause when it has
    /// had its tries.
    async fn reject(&mut self, step: u64, message: String) -> Result<(), RunError> {
        let mut events = vec![Event::Error {
            step: Some(step),
            message: message.clone(),
        }];
        if self.rejected() + 1 >= MAX_REJECTED {
            events.push(plan_pause(format!(
                "the planner gave no valid plan in {MAX_REJECTED} answers; the last problem: {}",
                briefing::cut(&message, 1000)
            )));
        }
        self.write(events).await
    }
}

/// The tool checks of `plan` whose jq expression does not compile, one
/// sentence each. Evaluated in the sandbox (`checks::tool`), so a hostile
/// expression costs at most its limits.
pub(super) async fn predicate_errors(
    hands: &crate::hands::Hands,
    plan: &plan::Plan,
) -> Vec<String> {
    let mut errors = Vec::new();
    for task in &plan.tasks {
        for check in &task.done_when {
            if let Check::Tool { expect, .. } = check
                && let Err(e) = crate::checks::tool::validate_predicate(hands, expect).await
            {
                errors.push(format!("task {:?}: {e}", task.id));
            }
        }
    }
    errors
}

fn plan_pause(detail: String) -> Event {
    Event::Paused {
        reason: PauseReason {
            kind: PauseKind::Plan,
            limit: None,
            detail,
        },
    }
}

fn inconsistent(what: &str) -> RunError {
    RunError::Log(LogError::Inconsistent(what.to_owned()))
}

/// `text` with every granted directory's host path replaced by its guest
/// path (longest first, so a nested grant wins).
fn to_guest_paths(text: &str, dirs: &[GrantedDir]) -> String {
    let mut dirs: Vec<&GrantedDir> = dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.host.as_os_str().len()));
    let mut out = text.to_owned();
    for dir in dirs {
        let host = dir.host.to_string_lossy();
        if !host.is_empty() && host != "/" {
            out = out.replace(host.as_ref(), &dir.guest);
        }
    }
    out
}

/// The last `max` bytes of `text`, on a character boundary.
fn tail(text: &str, max: usize) -> String {
    let text = text.trim_end();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_output_names_guest_paths_not_host_ones() {
        let dirs = [
            GrantedDir {
                host: "/srv/agent/out/run-1".into(),
                guest: "/out".into(),
                writable: true,
            },
            GrantedDir {
                host: "/srv/agent/out/run-1/crate".into(),
                guest: "/crate".into(),
                writable: false,
            },
        ];
        let text = "error at /srv/agent/out/run-1/crate/src/lib.rs:3\n\
                    wrote /srv/agent/out/run-1/target/x";
        assert_eq!(
            to_guest_paths(text, &dirs),
            "error at /crate/src/lib.rs:3\nwrote /out/target/x"
        );
    }

    #[test]
    fn a_tail_is_cut_on_a_character_boundary() {
        let text = format!("{}é end", "x".repeat(10));
        let cut = tail(&text, 5);
        assert!(cut.starts_with('…'));
        assert!(cut.ends_with(" end"));
        assert_eq!(tail("short", 100), "short");
    }
}
