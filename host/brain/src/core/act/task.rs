//! The planned session's own actions: recording the operator's plan,
//! the planner's conversation and its plan or revision, starting a task's
//! attempt in a fresh context, finishing a task and the plan; and the role
//! policy the other executors read (which model and tools a role gets).
//! Checks, the judge and handoffs are `act::check`, `act::judge` and
//! `act::handoff`.
//!
//! Each action ends in the events that record it; [`decide`](crate::core::decide)
//! reads them back from the fold and picks what comes next. A refused
//! planner answer or revision is recorded here and nothing more: `decide`
//! counts the refusals and pauses after `MAX_REJECTED` of them.

use std::sync::Arc;

use crate::agent::bind::PlanNames;
use crate::agent::config::{DEFAULT_CONTEXT_WINDOW, ModelConfig};
use crate::core::ctx::Ctx;
use crate::core::decide::{PlanPolicy, PlannerPurpose};
use crate::core::prompts::{self, Catalogue, PlannerAsk, WorkerBriefing};
use crate::core::state::PLANNER;
use crate::core::state::roles::Role;
use crate::error::{RunError, inconsistent, json_error};
use crate::model::{ModelProvider, ToolDef};
use crate::work::handoff::Handoff;
use crate::work::plan::{self, OPERATOR};
use longhand_session::Event;
use longhand_session::event::MAX_INLINE_TEXT;

impl Ctx<'_> {
    /// The plan settings `decide` reads, for a planned agent.
    pub(crate) fn plan_policy(&self) -> Option<PlanPolicy> {
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
    pub(crate) fn cost_of(&self, usage: &crate::model::Usage) -> Option<u64> {
        let role = self
            .journal
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
            .get(&crate::agent::frozen::price_key(model))?;
        Some(price.cost_micros(&crate::pricing::UsageLike::from(usage)))
    }

    /// The roles whose model has no frozen price (see
    /// [`UnpricedRole`](crate::core::decide::UnpricedRole)).
    pub(crate) fn unpriced_roles(&self) -> Vec<crate::core::decide::UnpricedRole> {
        [Role::Worker, Role::Handoff, Role::Planner, Role::Judge]
            .into_iter()
            .filter_map(|role| {
                let model = self.model_config(role);
                let key = crate::agent::frozen::price_key(model);
                (!self.agent.frozen.prices.contains_key(&key)).then(|| {
                    crate::core::decide::UnpricedRole {
                        role,
                        model: model.model.clone(),
                        provider: model.provider.as_str().to_owned(),
                    }
                })
            })
            .collect()
    }

    /// The model settings of `role`.
    pub(crate) fn model_config(&self, role: Role) -> &ModelConfig {
        let frozen = &self.agent.frozen;
        let own = match role {
            Role::Planner => frozen.roles.planner.as_ref(),
            Role::Judge => frozen.roles.judge.as_ref(),
            Role::Worker | Role::Handoff => None,
        };
        own.unwrap_or(&frozen.model)
    }

    /// The provider that answers `role`.
    pub(crate) fn provider_for(&self, role: Role) -> Arc<dyn ModelProvider> {
        self.kit.provider(role)
    }

    /// The tools `role` is offered: the worker all of the agent's (and
    /// no plan-editing tool: there is none to offer), the judge the
    /// read-only ones, the planner none.
    pub(crate) fn tools_for(&self, role: Role) -> Vec<ToolDef> {
        match role {
            Role::Worker | Role::Handoff => self.tools.defs(false),
            Role::Judge => self.tools.defs(true),
            Role::Planner => Vec::new(),
        }
    }

    /// Record the operator's plan.
    pub(crate) async fn create_plan(&mut self) -> Result<(), RunError> {
        let plan = self
            .agent
            .frozen
            .plan
            .as_ref()
            .and_then(|p| p.operator.clone())
            .unwrap_or_default();
        let plan = serde_json::to_value(&plan).map_err(json_error("the plan"))?;
        self.write(vec![Event::PlanCreated {
            plan,
            author: OPERATOR.to_owned(),
        }])
        .await
    }

    /// Start the planner's conversation.
    pub(crate) async fn start_planner(&mut self, purpose: PlannerPurpose) -> Result<(), RunError> {
        let goal = self.journal.state.goal.clone().unwrap_or_default();
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
        let (ask, task) = match (&purpose, &self.journal.state.plan) {
            (PlannerPurpose::Extend, Some(plan)) => (PlannerAsk::Extend(plan), None),
            (PlannerPurpose::Revise { task }, Some(plan)) => (
                PlannerAsk::Revise {
                    plan,
                    task,
                    failures: &self.journal.state.failures,
                },
                Some(task.clone()),
            ),
            _ => (PlannerAsk::Create, None),
        };
        let text = prompts::planner(&goal, &self.agent.frozen.instructions, &catalogue, &ask);
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
    pub(crate) async fn accept_plan(&mut self, step: u64) -> Result<(), RunError> {
        let text = self.answer_text().await?;
        let names = PlanNames::of(&self.agent);
        let plan = match plan::parse_answer(&text) {
            Ok(plan) => plan,
            Err(error) => return self.reject(step, error).await,
        };
        let mut errors = plan.validate(names.names(), true);
        errors.extend(plan::predicate_errors(self.hands, &plan).await);
        if !errors.is_empty() {
            let message = format!(
                "The plan was not accepted. Fix these and answer with the whole plan again:\n- {}",
                errors.join("\n- ")
            );
            return self.reject(step, message).await;
        }
        let value = serde_json::to_value(&plan).map_err(json_error("the plan"))?;
        let Some(old) = self.journal.state.plan.as_ref().map(|p| p.plan.clone()) else {
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
            .journal
            .state
            .conversation
            .as_ref()
            .and_then(|c| c.task.clone())
        {
            Some(task) => format!("task {task} failed its checks on every attempt"),
            None => "the planner extends the operator's plan".to_owned(),
        };
        let accepted = weakened.is_empty() || allow;
        self.write(vec![Event::PlanRevised {
            plan: value,
            author: PLANNER.to_owned(),
            reason,
            accepted,
            weakened,
        }])
        .await
    }

    /// Start an attempt at `task` in a fresh context.
    pub(crate) async fn start_task(&mut self, task_id: String) -> Result<(), RunError> {
        let query = self
            .journal
            .state
            .plan
            .as_ref()
            .and_then(|p| p.plan.task(&task_id))
            .map(|t| format!("{} {}", t.title, t.description))
            .unwrap_or_default();
        let found = self.memories_for(&query).await;
        let (text, attempt) = self.worker_briefing(&task_id, None, &found).await?;
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

    /// The briefing of the worker on `task_id`: for a new attempt (with
    /// the latest handoff recorded, if any), or (`continuing`, with the
    /// handoff about to be recorded) to carry the current one on.
    pub(crate) async fn worker_briefing(
        &mut self,
        task_id: &str,
        continuing: Option<&Handoff>,
        memories: &[(String, String)],
    ) -> Result<(String, u32), RunError> {
        let handoff = match (continuing, &self.journal.state.latest_handoff) {
            (Some(handoff), _) => Some(handoff.clone()),
            (None, Some(blob)) => {
                let blob = blob.clone();
                serde_json::from_slice::<Handoff>(&self.get(&blob).await?).ok()
            }
            (None, None) => None,
        };
        let continuing = continuing.is_some();
        let Some(plan) = &self.journal.state.plan else {
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
            .journal
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
            self.journal.state.failures.clone()
        };
        let text = prompts::worker(&WorkerBriefing {
            goal: self.journal.state.goal.as_deref().unwrap_or_default(),
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

    /// Record the end of a task and its progress note.
    pub(crate) async fn finish_task(
        &mut self,
        task_id: String,
        done: bool,
    ) -> Result<(), RunError> {
        let claim = self.claim_text().await?;
        let plan = self.journal.state.plan.as_ref();
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
        if !done && !self.journal.state.failures.is_empty() {
            text.push_str(&format!(
                "; failures: {}",
                prompts::cut(&self.journal.state.failures.join(" | "), 600)
            ));
        }
        if !claim.trim().is_empty() {
            text.push_str(&format!(". Worker: {}", prompts::cut(claim.trim(), 600)));
        }
        self.write(vec![
            Event::TaskFinished {
                task: task_id.clone(),
                status: status.to_owned(),
                attempts: record.attempts,
            },
            Event::ProgressNoted {
                task: task_id,
                text: prompts::cut(&text, MAX_INLINE_TEXT - 8),
            },
        ])
        .await
    }

    /// Finish a planned session: every task is done.
    pub(crate) async fn finish_plan(&mut self) -> Result<(), RunError> {
        let plan = self.journal.state.plan.as_ref();
        let n = plan.map_or(0, |p| p.plan.tasks.len());
        let mut text = format!("All {n} tasks of the plan are done; their checks passed.\n");
        for note in &self.journal.state.progress {
            text.push_str(&format!("- {}\n", note.text));
        }
        let finished = self.finished(text).await;
        self.write(vec![finished]).await
    }

    /// The text of the worker's claim (its last answer of the attempt).
    pub(crate) async fn claim_text(&mut self) -> Result<String, RunError> {
        let Some(blob) = self.journal.state.claim.clone() else {
            return Ok(String::new());
        };
        let bytes = self.get(&blob).await?;
        Ok(
            serde_json::from_slice::<crate::model::ModelResponse>(&bytes)
                .ok()
                .and_then(|r| r.text)
                .unwrap_or_default(),
        )
    }

    /// The text of the last answer.
    pub(crate) async fn answer_text(&mut self) -> Result<String, RunError> {
        Ok(self
            .last_response()
            .await?
            .and_then(|r| r.text)
            .unwrap_or_default())
    }

    /// Send the planner's answer back with `message` (the model reads it
    /// in its history; `decide` counts it).
    pub(crate) async fn reject(&mut self, step: u64, message: String) -> Result<(), RunError> {
        self.write(vec![Event::Error {
            step: Some(step),
            message,
        }])
        .await
    }
}
