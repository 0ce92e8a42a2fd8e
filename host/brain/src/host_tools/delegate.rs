//! Sub-agents: the host tool `delegate` starts a child session of a named
//! `[agents.<name>]` agent, runs it, and returns its answer as the tool's
//! result.
//!
//! **Attenuation.** A child never holds more than its parent, by the one
//! rule of [`attenuation::covers`] (directories, modes, hosts as patterns,
//! environment names, secrets, budget slices). It is checked when the call
//! is admitted, on the frozen agents, and again at spawn, on the grants
//! each would run with; anything more is refused with an error the model
//! reads, and no child starts.
//!
//! **Budget.** A child's limits are its slice (`[agents.<name>]`
//! `max_steps`, `max_tool_calls`, token caps), and the slice is taken out
//! of what the parent has left: counted as spent by the parent from the
//! start (`child_started.slice`), so children together can never spend more
//! than the parent had. A slice that does not fit is refused.
//!
//! **Crash safety.** The call is announced (`tool_started`, fsynced) before
//! the child is created; the child's id is recorded (`child_started`)
//! before it runs. A crash before that record leaves, at most, a child
//! nobody names, which never runs: recovery starts a new one. After it,
//! recovery wakes that child and waits for it. A child is never run twice
//! and never lost. Depth and fan-out are capped by `[delegation]`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde_json::{Value, json};

use crate::agent::attenuation::{self, Capabilities, Refusal};
use crate::agent::frozen::Frozen;
use crate::core::ctx::{BindChild, Child, Ctx, RunEnd};
use crate::error::{LogError, RunError, tool_error as error};
use crate::model::ToolDef;
use longhand_hands::Grants;
use longhand_session::{Event, PauseKind, PauseReason, SessionId, SessionStatus};

/// The tool's name.
pub const DELEGATE: &str = "delegate";
/// The component its calls are recorded under.
pub const COMPONENT: &str = "agents";
/// `tool_started.component_digest` of a delegation: no binary ran.
pub const HOST_DIGEST: &str = "host:delegate";
/// Longest goal given to a child, in bytes.
pub const MAX_CHILD_GOAL: usize = 16 * 1024;

/// `delegate` as a host tool: offered when the agent has children it may
/// still start at its depth. It writes (a child session is created) and
/// runs as a child session — started, recorded and awaited by the loop's
/// delegation (below), never inline.
pub(crate) struct Delegate;

#[async_trait::async_trait]
impl crate::tools::Toolset for Delegate {
    fn component(&self) -> &str {
        COMPONENT
    }

    fn digest(&self) -> &str {
        HOST_DIGEST
    }

    fn offer(&self, offer: &crate::tools::Offer<'_>) -> Vec<crate::tools::Offered> {
        def(offer.frozen)
            .map(|def| super::offered(def, longhand_hands::Effect::Writes))
            .into_iter()
            .collect()
    }

    fn fingerprint_parts(&self, frozen: &Frozen) -> (String, Value) {
        super::fingerprint_parts(frozen)
    }

    fn runs(&self) -> crate::tools::Runs {
        crate::tools::Runs::AsChild
    }

    async fn call(
        &self,
        _: &crate::tools::CallCx<'_>,
        _: &crate::tools::Registered,
        _: &Value,
    ) -> crate::tools::Outcome {
        // The loop never calls it: `Runs::AsChild` calls go to
        // `Ctx::delegate_group`, which starts children through `Launch`.
        crate::tools::Outcome {
            ok: false,
            result: error("failed", "delegate runs as a child session, not inline")
                .to_string()
                .into_bytes(),
            receipt: Value::Null,
        }
    }
}

/// The `delegate` tool, when the agent has children and may still start
/// them at its depth.
pub fn def(frozen: &Frozen) -> Option<ToolDef> {
    if frozen.agents.is_empty() || frozen.depth >= frozen.delegation.max_depth {
        return None;
    }
    let names: Vec<&String> = frozen.agents.keys().collect();
    let listing: Vec<String> = frozen
        .agents
        .iter()
        .map(|(name, child)| format!("`{name}`: {}", child.description))
        .collect();
    Some(ToolDef {
        name: DELEGATE.to_owned(),
        description: format!(
            "Hand a self-contained piece of work to a sub-agent, which runs in its own session \
             with its own tools (never more than yours) and budget, and returns its final \
             answer. Agents: {}",
            listing.join("; ")
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": names},
                "goal": {"type": "string", "maxLength": MAX_CHILD_GOAL,
                          "description": "what the sub-agent must do, fully stated"}
            },
            "required": ["agent", "goal"],
            "additionalProperties": false
        }),
    })
}

/// `answer` read as JSON (the object in it) and checked against `schema`.
fn checked_result(schema: &str, answer: &str) -> Result<Value, String> {
    let compiled = longhand_hands::schema::SchemaLoader::new()
        .compile(schema)
        .map_err(|e| e.to_string())?;
    let json = crate::work::plan::json_in(answer).unwrap_or(answer);
    let value: Value =
        serde_json::from_str(json).map_err(|e| format!("the answer is not JSON ({e})"))?;
    compiled.validate(&value).map_err(|r| match r {
        longhand_hands::schema::Rejection::Invalid(errors) => errors.join("; "),
        longhand_hands::schema::Rejection::Limit(why) => why,
    })?;
    Ok(value)
}

/// A child ready to run, or why it will not.
enum Prepared<'h> {
    /// Its agent's name and the child, ready to run.
    Ready(String, Box<dyn Child + 'h>),
    /// Refused before it ran.
    Done(ChildEnd),
}

/// How a child ended, for its `delegate` call.
enum ChildEnd {
    /// It finished: its answer.
    Answered(Value),
    /// It did not start or did not finish: why, for the model.
    Refused(Value),
    /// It paused: this session pauses too, the call left open.
    Paused(PauseReason),
}

/// The limits a slice covers, as `child_started.slice` names them.
fn slice_of(frozen: &Frozen) -> BTreeMap<String, u64> {
    let l = &frozen.limits;
    let mut slice = BTreeMap::from([
        ("max_steps".to_owned(), l.max_steps),
        ("max_tool_calls".to_owned(), l.max_tool_calls),
        ("max_input_tokens".to_owned(), l.max_input_tokens),
        ("max_output_tokens".to_owned(), l.max_output_tokens),
    ]);
    if l.max_cost_micros > 0 {
        slice.insert("max_cost_micros".to_owned(), l.max_cost_micros);
    }
    slice
}

impl<'h> Ctx<'h> {
    /// Run the `delegate` calls of one answer (ids and inputs, in order):
    /// each checked and announced in turn, then their children run side by
    /// side (`[delegation] max_concurrent` at a time), then each recorded in
    /// order. A child that paused leaves its call open and pauses this
    /// session once its siblings ended.
    ///
    /// Boxed as a `Send` future: a child's run is a run, whose future
    /// holds this one, and a type cannot contain itself.
    pub(crate) fn delegate_group(
        &mut self,
        step: u64,
        calls: Vec<(String, Value)>,
    ) -> Pin<Box<dyn Future<Output = Result<(), RunError>> + Send + '_>> {
        Box::pin(self.delegate_group_inner(step, calls))
    }

    async fn delegate_group_inner(
        &mut self,
        step: u64,
        calls: Vec<(String, Value)>,
    ) -> Result<(), RunError> {
        type Run<'r> = Pin<
            Box<
                dyn Future<Output = (usize, String, Box<dyn Child + 'r>, Result<RunEnd, RunError>)>
                    + Send
                    + 'r,
            >,
        >;
        let at_once = self.agent.frozen.delegation.max_concurrent.max(1) as usize;
        for chunk in calls.chunks(at_once) {
            let mut ends: Vec<(usize, ChildEnd)> = Vec::new();
            let mut runs: Vec<Run<'h>> = Vec::new();
            for (index, (call_id, input)) in chunk.iter().enumerate() {
                let input_blob = self.put(input.to_string().into_bytes());
                let mut refused = self.check_delegation(input).err();
                if refused.is_none() {
                    refused = self.check_attenuation(input).await.err();
                }
                if refused.is_none() {
                    refused = self.check_budget(input).err();
                }
                if let Some(value) = refused {
                    ends.push((index, ChildEnd::Refused(value)));
                    continue;
                }
                self.write(vec![Event::ToolStarted {
                    step,
                    call_id: call_id.clone(),
                    component: COMPONENT.to_owned(),
                    component_digest: HOST_DIGEST.to_owned(),
                    tool: DELEGATE.to_owned(),
                    effect: "writes".to_owned(),
                    input: input_blob,
                }])
                .await?;
                match self.prepare_child(call_id, input).await? {
                    Prepared::Done(end) => ends.push((index, end)),
                    Prepared::Ready(name, mut runner) => runs.push(Box::pin(async move {
                        let end = runner.run().await;
                        (index, name, runner, end)
                    })),
                }
            }
            for (index, name, runner, end) in futures_util::future::join_all(runs).await {
                ends.push((index, self.child_end(&name, runner.as_ref(), end?)));
            }
            ends.sort_by_key(|(index, _)| *index);
            let mut finished = Vec::new();
            let mut paused = None;
            for (index, end) in ends {
                let call_id = chunk[index].0.clone();
                let (ok, value) = match end {
                    ChildEnd::Answered(value) => (true, value),
                    ChildEnd::Refused(value) => (false, value),
                    ChildEnd::Paused(reason) => {
                        // The call stays open; the session pauses below.
                        paused.get_or_insert(reason);
                        continue;
                    }
                };
                let result = self.put(value.to_string().into_bytes());
                finished.push(Event::ToolFinished {
                    step,
                    call_id,
                    ok,
                    result,
                    receipt: Value::Null,
                });
            }
            self.write(finished).await?;
            if let Some(reason) = paused {
                return self.write(vec![Event::Paused { reason }]).await;
            }
        }
        Ok(())
    }

    /// Start (or, after a crash, find) the child of `call_id`, run it to
    /// its end and record the result.
    ///
    /// Boxed as a `Send` future: a child's run is a run, whose future
    /// holds this one, and a type cannot contain itself.
    pub(crate) fn finish_delegation(
        &mut self,
        step: u64,
        call_id: String,
        input: Value,
    ) -> Pin<Box<dyn Future<Output = Result<(), RunError>> + Send + '_>> {
        Box::pin(self.finish_delegation_inner(step, call_id, input))
    }

    async fn finish_delegation_inner(
        &mut self,
        step: u64,
        call_id: String,
        input: Value,
    ) -> Result<(), RunError> {
        let (ok, value) = match self.run_child(&call_id, &input).await? {
            ChildEnd::Answered(value) => (true, value),
            ChildEnd::Refused(value) => (false, value),
            ChildEnd::Paused(reason) => {
                // The call stays open: resuming this session wakes the
                // child (resumed with it) and waits for it again.
                return self.write(vec![Event::Paused { reason }]).await;
            }
        };
        let result = self.put(value.to_string().into_bytes());
        self.write(vec![Event::ToolFinished {
            step,
            call_id,
            ok,
            result,
            receipt: Value::Null,
        }])
        .await
    }

    /// The child agent named by `input`, after its name, goal, depth and
    /// fan-out are checked; an error value for the model otherwise.
    fn check_delegation(&self, input: &Value) -> Result<(), Value> {
        // Exactly the schema: `agent` and `goal`, both text, nothing else
        // (the model's input reaches no further than these two fields).
        let fields_ok = input.as_object().is_some_and(|o| {
            o.keys().all(|k| k == "agent" || k == "goal")
                && o.get("agent").is_some_and(Value::is_string)
                && o.get("goal").is_some_and(Value::is_string)
        });
        if !fields_ok {
            return Err(error(
                "invalid-input",
                "give exactly {\"agent\": <name>, \"goal\": <text>}",
            ));
        }
        let frozen = &self.agent.frozen;
        let name = input
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let goal = input
            .get("goal")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !frozen.agents.contains_key(name) {
            return Err(error(
                "invalid-input",
                format!(
                    "no agent {:?}; the agents are: {}",
                    name.chars().take(64).collect::<String>(),
                    frozen.agents.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        if goal.trim().is_empty() || goal.len() > MAX_CHILD_GOAL {
            return Err(error(
                "invalid-input",
                format!("`goal` must be 1 to {MAX_CHILD_GOAL} bytes of text"),
            ));
        }
        if frozen.depth >= frozen.delegation.max_depth {
            return Err(error(
                "denied",
                format!(
                    "delegation is at most {} levels deep",
                    frozen.delegation.max_depth
                ),
            ));
        }
        if self.journal.state.children.len() as u32 >= frozen.delegation.max_children {
            return Err(error(
                "denied",
                format!(
                    "this session may start at most {} children",
                    frozen.delegation.max_children
                ),
            ));
        }
        Ok(())
    }

    /// Whether the child's grants fit within this agent's; an error value
    /// for the model otherwise.
    async fn check_attenuation(&self, input: &Value) -> Result<(), Value> {
        let name = input
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(child) = self.agent.frozen.agents.get(name) else {
            return Err(error("invalid-input", format!("no agent {name:?}")));
        };
        let Err(refusals) = attenuation::covers(
            &Capabilities::of_frozen(&self.agent.frozen),
            &Capabilities::of_frozen(&child.frozen),
        ) else {
            return Ok(());
        };
        let errors: Vec<String> = refusals.iter().map(ToString::to_string).collect();
        Err(error(
            "denied",
            format!(
                "agent {name} would hold more than this agent does: {}",
                errors.join("; ")
            ),
        ))
    }

    /// Whether the child's slice fits in what this session has left.
    fn check_budget(&self, input: &Value) -> Result<(), Value> {
        let frozen = &self.agent.frozen;
        let name = input
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(child) = frozen.agents.get(name) else {
            return Err(error("invalid-input", format!("no agent {name:?}")));
        };
        let limits = &frozen.limits;
        let used = |name: &str| -> u64 {
            let spent = match name {
                "max_steps" => self.journal.state.steps,
                "max_tool_calls" => self.journal.state.tool_calls,
                "max_input_tokens" => self.journal.state.input_tokens,
                "max_output_tokens" => self.journal.state.output_tokens,
                "max_cost_micros" => self.journal.state.cost_micros,
                _ => 0,
            };
            spent + self.journal.state.reserved.get(name).copied().unwrap_or(0)
        };
        // What is left of each limit this session has; the slice must fit.
        let mut left = Capabilities::default();
        for limit_name in slice_of(&child.frozen).into_keys() {
            let configured = match limit_name.as_str() {
                "max_steps" => limits.max_steps,
                "max_tool_calls" => limits.max_tool_calls,
                "max_input_tokens" => limits.max_input_tokens,
                "max_cost_micros" => limits.max_cost_micros,
                _ => limits.max_output_tokens,
            };
            let max =
                crate::core::decide::limit(&self.journal.state.raised, &limit_name, configured);
            if limit_name == "max_cost_micros" && max == 0 {
                // No money limit here: nothing to slice.
                continue;
            }
            let spent = used(&limit_name);
            left.budget.insert(limit_name, max.saturating_sub(spent));
        }
        let slice = Capabilities {
            budget: slice_of(&child.frozen),
            ..Capabilities::default()
        };
        if let Err(refusals) = attenuation::covers(&left, &slice)
            && let Some(Refusal::Budget {
                limit,
                wanted,
                left,
            }) = refusals.first()
        {
            return Err(error(
                "limit",
                format!(
                    "agent {name} needs {wanted} of {limit} and this session has {left} \
                     left; do the work here or ask for less"
                ),
            ));
        }
        Ok(())
    }

    /// The child session's end as the tool's result: its answer, or why
    /// it did not finish.
    async fn run_child(&mut self, call_id: &str, input: &Value) -> Result<ChildEnd, RunError> {
        match self.prepare_child(call_id, input).await? {
            Prepared::Done(end) => Ok(end),
            Prepared::Ready(name, mut runner) => {
                let end = runner.run().await?;
                Ok(self.child_end(&name, runner.as_ref(), end))
            }
        }
    }

    /// The child of `call_id`, ready to run: created (and recorded) or,
    /// after a crash, woken; or why it cannot run.
    async fn prepare_child(
        &mut self,
        call_id: &str,
        input: &Value,
    ) -> Result<Prepared<'h>, RunError> {
        let name = input
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let goal = input
            .get("goal")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(child) = self
            .agent
            .frozen
            .agents
            .get(&name)
            .map(|c| c.frozen.clone())
        else {
            return Ok(Prepared::Done(ChildEnd::Refused(error(
                "invalid-input",
                format!("no agent {name:?}"),
            ))));
        };
        let hands = self.hands;
        let agent = match crate::agent::bind::bind(hands, *child, |v| std::env::var(v).ok()).await {
            Ok(agent) => agent,
            Err(e) => {
                return Ok(Prepared::Done(ChildEnd::Refused(error(
                    "failed",
                    format!("agent {name}: {e}"),
                ))));
            }
        };
        // Attenuation, on the grants each side runs with.
        let parent: Vec<&Grants> = self.agent.components.iter().map(|c| &c.grants).collect();
        let wanted: Vec<&Grants> = agent.components.iter().map(|c| &c.grants).collect();
        if let Err(refusals) = attenuation::covers(
            &Capabilities::of_grants(&parent),
            &Capabilities::of_grants(&wanted),
        ) {
            let errors: Vec<String> = refusals.iter().map(ToString::to_string).collect();
            return Ok(Prepared::Done(ChildEnd::Refused(error(
                "denied",
                format!(
                    "agent {name} would hold more than this agent does: {}",
                    errors.join("; ")
                ),
            ))));
        }
        // Recorded before: this child, woken from its log and run with
        // what its own log froze.
        let recorded = match self.journal.state.children.get(call_id) {
            Some(child_id) => Some(child_id.parse::<SessionId>().map_err(|_| {
                RunError::Log(LogError::Inconsistent(format!(
                    "child id {child_id} does not parse"
                )))
            })?),
            None => None,
        };
        // A kit that cannot be built refuses the call; nothing is created.
        let launched = match recorded {
            Some(id) => {
                let mut agent = agent;
                let bind: BindChild<'_> = Box::new(move |frozen| {
                    agent.frozen = frozen;
                    Ok(agent)
                });
                self.launch.wake(self.parent(), id, bind).await
            }
            None => {
                let first = vec![Event::Delegated {
                    parent: self.session.as_str().to_owned(),
                    call_id: call_id.to_owned(),
                    agent: name.clone(),
                    depth: self.agent.frozen.depth + 1,
                }];
                let slice = slice_of(&agent.frozen);
                let launched = self.launch.start(self.parent(), agent, &goal, first).await;
                if let Ok(child) = &launched {
                    let child = child.session().as_str().to_owned();
                    self.write(vec![Event::ChildStarted {
                        call_id: call_id.to_owned(),
                        child,
                        agent: name.clone(),
                        slice,
                    }])
                    .await?;
                }
                launched
            }
        };
        let runner = match launched {
            Ok(runner) => runner,
            Err(RunError::Launch(e)) => {
                return Ok(Prepared::Done(ChildEnd::Refused(error(
                    "failed",
                    format!("agent {name}: {e}"),
                ))));
            }
            Err(e) => return Err(e),
        };
        Ok(Prepared::Ready(name, runner))
    }

    /// How a child's run ended, for its `delegate` call.
    fn child_end(&self, name: &str, runner: &dyn Child, end: RunEnd) -> ChildEnd {
        let child_id = runner.session().as_str().to_owned();
        match end.status {
            // The child's session id is in `child_started`, not here: the
            // model needs the answer, and a replayed run the same bytes.
            SessionStatus::Finished => {
                let answer = end.detail.unwrap_or_default();
                let schema = self
                    .agent
                    .frozen
                    .agents
                    .get(name)
                    .and_then(|c| c.result_schema.as_deref());
                match schema {
                    None => ChildEnd::Answered(json!({"agent": name, "answer": answer})),
                    Some(schema) => match checked_result(schema, &answer) {
                        Ok(result) => ChildEnd::Answered(json!({"agent": name, "result": result})),
                        Err(why) => ChildEnd::Refused(error(
                            "invalid-result",
                            format!(
                                "agent {name}'s answer does not match its result schema: {why}"
                            ),
                        )),
                    },
                }
            }
            SessionStatus::Paused => {
                let kind = runner
                    .state()
                    .pause
                    .as_ref()
                    .map_or(PauseKind::Plan, |p| p.kind);
                ChildEnd::Paused(PauseReason {
                    kind,
                    limit: None,
                    detail: format!(
                        "sub-agent {name} (session {child_id}) paused: {}; act on it there \
                         (e.g. `longhand approvals`), then `longhand resume {}`",
                        end.detail.unwrap_or_default(),
                        self.session
                    ),
                })
            }
            status => ChildEnd::Refused(error(
                "child",
                format!(
                    "agent {name} (session {child_id}) ended {status}: {}",
                    end.detail.unwrap_or_default()
                ),
            )),
        }
    }
}
