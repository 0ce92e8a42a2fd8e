//! Plans as data: a task graph whose tasks are finished by checks the
//! harness runs, never by the worker's word.
//!
//! A [`Plan`] comes from the operator (`plan.toml` in the agent directory,
//! frozen with the agent), from the planner role (JSON validated by
//! [`Plan::validate`]), or both (the planner extends the operator's plan).
//! Every change is an event (`plan_created`, `plan_revised`,
//! `task_started`, `check_finished`, `task_finished`), and
//! [`PlanState`] is their fold: pure, so `longhand plan` and a resumed
//! worker see the same statuses.
//!
//! The **ratchet** ([`weakened`]): a revision may add tasks and checks; it
//! may not remove or change a check (nor drop a task that has one) unless
//! the agent allows it. A refused revision is logged as well as an
//! accepted one.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Most tasks a plan may hold.
pub const MAX_TASKS: usize = 200;
/// Most checks one task may hold.
pub const MAX_CHECKS: usize = 16;
/// Longest task id, in bytes.
pub const MAX_ID: usize = 64;
/// Longest title, description, rubric or predicate, in bytes.
pub const MAX_TEXT: usize = 4096;

/// A task graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Tasks, in the order written (the tie-break after priority).
    #[serde(default)]
    pub tasks: Vec<Task>,
}

/// One unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Unique within the plan: `[A-Za-z0-9_.-]`, at most [`MAX_ID`] bytes.
    pub id: String,
    /// One line.
    pub title: String,
    /// What to do, for the worker.
    #[serde(default)]
    pub description: String,
    /// Tasks that must be done before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Higher runs first among ready tasks (default 0).
    #[serde(default)]
    pub priority: i64,
    /// Attempts before the task fails; the agent's `[plan] max_attempts`
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// What must hold for the task to be done. A task with no check is
    /// done when the worker says so — allowed, but `longhand plan` shows
    /// it, and the validator of the planner's output refuses it.
    #[serde(default)]
    pub done_when: Vec<Check>,
}

/// A check the harness runs on a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// A sandboxed tool call whose JSON output must make `expect` (a jq
    /// expression) yield `true`.
    Tool {
        /// The tool as the model knows it (`fs__stat`).
        tool: String,
        /// Its input.
        #[serde(default)]
        input: serde_json::Value,
        /// jq over the output; passes when every result is `true` (and
        /// there is at least one).
        #[serde(default = "always")]
        expect: String,
    },
    /// A native command named in agent.toml's `[checks]`: the plan names
    /// it, it never says what runs.
    Command {
        /// The `[checks.<name>]` table.
        name: String,
    },
    /// The judge role grades the task against this rubric.
    Judge {
        /// What a passing piece of work looks like.
        rubric: String,
    },
}

fn always() -> String {
    "true".to_owned()
}

impl Check {
    /// `tool`, `command` or `judge`.
    pub fn kind(&self) -> &'static str {
        match self {
            Check::Tool { .. } => "tool",
            Check::Command { .. } => "command",
            Check::Judge { .. } => "judge",
        }
    }

    /// One line, for people and for ratchet messages.
    pub fn label(&self) -> String {
        match self {
            Check::Tool { tool, expect, .. } => format!("tool {tool} expecting `{expect}`"),
            Check::Command { name } => format!("command `{name}`"),
            Check::Judge { rubric } => {
                let line = rubric.lines().next().unwrap_or_default();
                let end = line.floor_char_boundary(60);
                format!("judge: {}", &line[..end])
            }
        }
    }
}

/// Where a plan or a revision came from: `operator`, or the planner
/// (whose name is the planner role's, `core::state::roles::PLANNER`).
pub const OPERATOR: &str = "operator";

/// What a plan may name, for validation: the agent's tools and command
/// checks.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    /// Tool names as the model knows them (`fs__read`).
    pub tools: &'a BTreeSet<String>,
    /// `[checks.<name>]` names.
    pub commands: &'a BTreeSet<String>,
}

impl Plan {
    /// Every problem with this plan, each a sentence saying what to change;
    /// empty when it is valid. `require_checks` refuses tasks without a
    /// check (the planner's output must say how each task is verified).
    pub fn validate(&self, names: Names<'_>, require_checks: bool) -> Vec<String> {
        let mut errors = Vec::new();
        if self.tasks.is_empty() {
            errors.push("the plan has no tasks; give at least one".to_owned());
        }
        if self.tasks.len() > MAX_TASKS {
            errors.push(format!(
                "the plan has {} tasks; at most {MAX_TASKS} are allowed",
                self.tasks.len()
            ));
        }
        let mut ids = BTreeSet::new();
        for task in &self.tasks {
            let id = &task.id;
            if id.is_empty()
                || id.len() > MAX_ID
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            {
                errors.push(format!(
                    "task id {id:?} is not valid: use 1 to {MAX_ID} characters of A-Z a-z 0-9 _ - ."
                ));
            }
            if !ids.insert(id.as_str()) {
                errors.push(format!("task id {id:?} is used twice; ids must be unique"));
            }
            if task.title.trim().is_empty() {
                errors.push(format!("task {id:?} has no title"));
            }
            for (what, text) in [("title", &task.title), ("description", &task.description)] {
                if text.len() > MAX_TEXT {
                    errors.push(format!(
                        "task {id:?}: the {what} is {} bytes; at most {MAX_TEXT}",
                        text.len()
                    ));
                }
            }
            if task.max_attempts == Some(0) {
                errors.push(format!("task {id:?}: max_attempts must be at least 1"));
            }
            if require_checks && task.done_when.is_empty() {
                errors.push(format!(
                    "task {id:?} has no check in done_when; say how the harness verifies it \
                     (a tool, command or judge check)"
                ));
            }
            if task.done_when.len() > MAX_CHECKS {
                errors.push(format!(
                    "task {id:?} has {} checks; at most {MAX_CHECKS}",
                    task.done_when.len()
                ));
            }
            for check in &task.done_when {
                match check {
                    Check::Tool { tool, expect, .. } => {
                        if !names.tools.contains(tool) {
                            errors.push(format!(
                                "task {id:?}: the tool check names {tool:?}, which this agent \
                                 does not have; it has: {}",
                                join(names.tools)
                            ));
                        }
                        if expect.len() > MAX_TEXT {
                            errors.push(format!("task {id:?}: a tool check's expect is too long"));
                        }
                    }
                    Check::Command { name } => {
                        if !names.commands.contains(name) {
                            errors.push(format!(
                                "task {id:?}: the command check names {name:?}, which agent.toml \
                                 does not define; defined: {}",
                                join(names.commands)
                            ));
                        }
                    }
                    Check::Judge { rubric } => {
                        if rubric.trim().is_empty() || rubric.len() > MAX_TEXT {
                            errors.push(format!(
                                "task {id:?}: a judge rubric must be 1 to {MAX_TEXT} bytes"
                            ));
                        }
                    }
                }
            }
        }
        for task in &self.tasks {
            for dep in &task.depends_on {
                if !ids.contains(dep.as_str()) {
                    errors.push(format!(
                        "task {:?} depends on {dep:?}, which is not in the plan",
                        task.id
                    ));
                }
            }
        }
        if errors.is_empty()
            && let Some(cycle) = self.cycle()
        {
            errors.push(format!(
                "the dependencies form a cycle through {}; a task cannot wait for itself",
                cycle.join(" → ")
            ));
        }
        errors
    }

    /// A dependency cycle, as task ids, if there is one.
    fn cycle(&self) -> Option<Vec<String>> {
        let deps: BTreeMap<&str, &Vec<String>> = self
            .tasks
            .iter()
            .map(|t| (t.id.as_str(), &t.depends_on))
            .collect();
        // 0 unvisited, 1 on the path, 2 done.
        let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
        fn visit<'a>(
            id: &'a str,
            deps: &BTreeMap<&'a str, &'a Vec<String>>,
            mark: &mut BTreeMap<&'a str, u8>,
            path: &mut Vec<&'a str>,
        ) -> bool {
            match mark.get(id) {
                Some(1) => {
                    path.push(id);
                    return true;
                }
                Some(2) => return false,
                _ => {}
            }
            mark.insert(id, 1);
            path.push(id);
            for dep in deps.get(id).map(|d| d.iter()).into_iter().flatten() {
                if visit(dep.as_str(), deps, mark, path) {
                    return true;
                }
            }
            path.pop();
            mark.insert(id, 2);
            false
        }
        for task in &self.tasks {
            let mut path = Vec::new();
            if visit(task.id.as_str(), &deps, &mut mark, &mut path) {
                let last = *path.last()?;
                let start = path.iter().position(|p| *p == last)?;
                return Some(path[start..].iter().map(|s| (*s).to_owned()).collect());
            }
        }
        None
    }

    /// The task with this id.
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }
}

fn join(names: &BTreeSet<String>) -> String {
    if names.is_empty() {
        return "none".to_owned();
    }
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// The checks `new` drops or changes compared with `old`, one line each:
/// a check of a task in `old` that the same task in `new` does not hold
/// verbatim (a changed check is a removal plus an addition), or every check
/// of a task `new` drops. Empty when `new` only adds.
pub fn weakened(old: &Plan, new: &Plan) -> Vec<String> {
    let mut lost = Vec::new();
    for task in &old.tasks {
        let kept = new.task(&task.id);
        for check in &task.done_when {
            if !kept.is_some_and(|k| k.done_when.contains(check)) {
                let how = if kept.is_some() {
                    "removed or changed"
                } else {
                    "removed with its task"
                };
                lost.push(format!("task {:?}: {} {how}", task.id, check.label()));
            }
        }
    }
    lost
}

/// A task's lifecycle. `pending`, `ready` and `blocked` are derived from
/// the dependencies; the others are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Waiting for a dependency.
    Pending,
    /// Every dependency is done; not started.
    Ready,
    /// Being worked on.
    Running,
    /// Its checks passed.
    Done,
    /// It ran out of attempts.
    Failed,
    /// A dependency failed.
    Blocked,
}

impl TaskStatus {
    /// The name used in events and output.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Ready => "ready",
            TaskStatus::Running => "running",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
            TaskStatus::Blocked => "blocked",
        }
    }
}

/// What the log says about one task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskRecord {
    /// `running`, `done` or `failed` once recorded; `None` before it started.
    pub status: Option<TaskStatus>,
    /// Attempts started, all of them, across processes and resumes: what
    /// `longhand plan` shows.
    pub attempts: u32,
    /// Of `attempts`, those started before the current set: a person's
    /// resume or a plan revision gives a failed task a fresh set of
    /// `max_attempts`, counted from here (see [`TaskRecord::in_set`]).
    /// Default 0.
    pub fresh_from: u32,
    /// The last result of each check (by index in `done_when`), in the
    /// attempt that ran it last; `None` until one ran.
    pub checks: Vec<Option<bool>>,
    /// Checks with a result in the current attempt, by index.
    pub checked: BTreeSet<u32>,
    /// The child session the task runs in (parallel tasks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

impl TaskRecord {
    /// Attempts started in the current set: what `max_attempts` bounds.
    pub fn in_set(&self) -> u32 {
        self.attempts.saturating_sub(self.fresh_from)
    }

    /// A failed task gets a fresh set of attempts; the count goes on.
    pub fn fresh_set(&mut self) {
        self.status = None;
        self.fresh_from = self.attempts;
    }
}

/// The plan and what happened to its tasks, folded from events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanState {
    /// The plan in force.
    pub plan: Plan,
    /// Revisions accepted.
    pub revision: u32,
    /// Per task id.
    pub tasks: BTreeMap<String, TaskRecord>,
    /// The task being worked on.
    pub current: Option<String>,
    /// Whether the planner wrote or extended this plan (an `extend`
    /// planner runs once, before work starts).
    pub planner_ran: bool,
}

impl PlanState {
    /// A new plan state.
    pub fn new(plan: Plan) -> Self {
        let mut state = Self::default();
        state.replace(plan);
        state
    }

    /// Put a revised plan in force: records of kept tasks stay (their
    /// check results re-aligned to the new check lists); a failed task the
    /// revision keeps gets a fresh set of attempts — that is what a
    /// revision after a failure is for.
    pub fn replace(&mut self, plan: Plan) {
        let mut tasks = BTreeMap::new();
        for task in &plan.tasks {
            let old_task = self.plan.task(&task.id);
            let mut record = self.tasks.remove(&task.id).unwrap_or_default();
            let old_checks = old_task.map(|t| t.done_when.as_slice()).unwrap_or(&[]);
            record.checks = task
                .done_when
                .iter()
                .map(|c| {
                    old_checks
                        .iter()
                        .position(|o| o == c)
                        .and_then(|i| record.checks.get(i).copied().flatten())
                })
                .collect();
            record.checked.clear();
            if record.status == Some(TaskStatus::Failed) {
                record.fresh_set();
            }
            tasks.insert(task.id.clone(), record);
        }
        if self
            .current
            .as_ref()
            .is_some_and(|c| !tasks.contains_key(c))
        {
            self.current = None;
        }
        self.tasks = tasks;
        self.plan = plan;
    }

    /// A task's status, with the derived ones worked out.
    pub fn status(&self, id: &str) -> TaskStatus {
        if let Some(status) = self.tasks.get(id).and_then(|r| r.status) {
            return status;
        }
        let Some(task) = self.plan.task(id) else {
            return TaskStatus::Pending;
        };
        let mut ready = true;
        for dep in &task.depends_on {
            match self.status(dep) {
                TaskStatus::Done => {}
                TaskStatus::Failed | TaskStatus::Blocked => return TaskStatus::Blocked,
                _ => ready = false,
            }
        }
        if ready {
            TaskStatus::Ready
        } else {
            TaskStatus::Pending
        }
    }

    /// The next task to start: the ready one of highest priority, the
    /// earliest written among equals.
    pub fn next_ready(&self) -> Option<&Task> {
        let mut best: Option<&Task> = None;
        for task in &self.plan.tasks {
            if self.status(&task.id) == TaskStatus::Ready
                && best.is_none_or(|b| task.priority > b.priority)
            {
                best = Some(task);
            }
        }
        best
    }

    /// Tasks running in child sessions: (task id, session id).
    pub fn children(&self) -> Vec<(String, String)> {
        self.plan
            .tasks
            .iter()
            .filter_map(|t| {
                let record = self.tasks.get(&t.id)?;
                match (record.status, &record.child) {
                    (Some(TaskStatus::Running), Some(child)) => Some((t.id.clone(), child.clone())),
                    _ => None,
                }
            })
            .collect()
    }

    /// Whether every task is done.
    pub fn all_done(&self) -> bool {
        self.plan
            .tasks
            .iter()
            .all(|t| self.status(&t.id) == TaskStatus::Done)
    }

    /// Counts of tasks by status, in [`TaskStatus`] order.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for task in &self.plan.tasks {
            *counts.entry(self.status(&task.id).as_str()).or_default() += 1;
        }
        counts
    }
}

/// Read an operator's plan file (`plan.toml`: `[[tasks]]` tables, each
/// with `[[tasks.done_when]]` checks). Checked for shape and the graph here;
/// the names it uses are checked against the agent when it is frozen.
pub fn load_file(path: &std::path::Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("plan file {}: cannot read: {e}", path.display()))?;
    let plan: Plan =
        toml::from_str(&text).map_err(|e| format!("plan file {}: {e}", path.display()))?;
    // Names are checked later, against the agent: here, only the shape.
    let all: BTreeSet<String> = plan
        .tasks
        .iter()
        .flat_map(|t| &t.done_when)
        .filter_map(|c| match c {
            Check::Tool { tool, .. } => Some(tool.clone()),
            Check::Command { name } => Some(name.clone()),
            Check::Judge { .. } => None,
        })
        .collect();
    let errors = plan.validate(
        Names {
            tools: &all,
            commands: &all,
        },
        false,
    );
    if !errors.is_empty() {
        return Err(format!(
            "plan file {}: {}",
            path.display(),
            errors.join("; ")
        ));
    }
    Ok(plan)
}

/// The tool checks of `plan` whose jq expression does not compile, one
/// sentence each: the one check of a plan that needs the tool host, run on
/// the operator's plan when the agent is frozen and on each plan the
/// planner writes. Evaluated in the sandbox (`checks::tool`), so a hostile
/// expression costs at most its limits.
pub async fn predicate_errors(hands: &longhand_hands::Hands, plan: &Plan) -> Vec<String> {
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

/// The JSON shape the planner answers with, for its instructions.
pub const PLAN_SCHEMA: &str = r#"{"tasks": [{"id": "short-id", "title": "one line",
  "description": "what to do", "depends_on": ["other-id"], "priority": 0,
  "done_when": [
    {"kind": "command", "name": "<a command check the agent defines>"},
    {"kind": "tool", "tool": "<tool name>", "input": {}, "expect": "<jq over the output, true when done>"},
    {"kind": "judge", "rubric": "what a passing piece of work looks like"}]}]}"#;

/// Read a plan the planner wrote: the JSON object in `text` (a fenced
/// block or the whole text).
pub fn parse_answer(text: &str) -> Result<Plan, String> {
    let json = json_in(text).ok_or_else(|| {
        "the answer holds no JSON object; answer with the plan as one JSON object".to_owned()
    })?;
    serde_json::from_str(json).map_err(|e| format!("the plan does not match the schema: {e}"))
}

/// The JSON object in a model's text: a ```json fenced block if there is
/// one, else from the first `{` to the last `}`.
pub fn json_in(text: &str) -> Option<&str> {
    if let Some(start) = text.find("```") {
        let rest = &text[start + 3..];
        let body = rest.find('\n').map(|n| &rest[n + 1..]).unwrap_or(rest);
        if let Some(end) = body.find("```") {
            let inner = body[..end].trim();
            if inner.starts_with('{') {
                return Some(inner);
            }
        }
    }
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| &text[start..=end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, deps: &[&str], checks: Vec<Check>) -> Task {
        Task {
            id: id.into(),
            title: format!("do {id}"),
            description: String::new(),
            depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
            priority: 0,
            max_attempts: None,
            done_when: checks,
        }
    }

    fn tests_check() -> Check {
        Check::Command {
            name: "tests".into(),
        }
    }

    fn names() -> (BTreeSet<String>, BTreeSet<String>) {
        (["fs__stat".to_owned()].into(), ["tests".to_owned()].into())
    }

    #[test]
    fn validation_names_every_problem() {
        let (tools, commands) = names();
        let names = Names {
            tools: &tools,
            commands: &commands,
        };
        let plan = Plan {
            tasks: vec![
                task("a", &["zz"], vec![Check::Command { name: "rm".into() }]),
                task("a", &[], vec![]),
                task(
                    "bad id!",
                    &[],
                    vec![Check::Tool {
                        tool: "net__get".into(),
                        input: serde_json::Value::Null,
                        expect: "true".into(),
                    }],
                ),
            ],
        };
        let errors = plan.validate(names, true);
        let all = errors.join("\n");
        for needle in [
            "depends on \"zz\"",
            "\"rm\", which agent.toml does not define",
            "used twice",
            "has no check",
            "\"bad id!\" is not valid",
            "\"net__get\", which this agent does not have",
        ] {
            assert!(all.contains(needle), "{needle} not in:\n{all}");
        }
        let ok = Plan {
            tasks: vec![task("a", &[], vec![tests_check()])],
        };
        assert!(ok.validate(names, true).is_empty());
    }

    #[test]
    fn a_cycle_is_refused() {
        let (tools, commands) = names();
        let names = Names {
            tools: &tools,
            commands: &commands,
        };
        let plan = Plan {
            tasks: vec![
                task("a", &["c"], vec![]),
                task("b", &["a"], vec![]),
                task("c", &["b"], vec![]),
            ],
        };
        let errors = plan.validate(names, false);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("cycle"), "{errors:?}");
    }

    #[test]
    fn statuses_follow_dependencies_and_priority_orders_ready_tasks() {
        let mut low = task("low", &[], vec![]);
        low.priority = -1;
        let mut high = task("high", &[], vec![]);
        high.priority = 5;
        let plan = Plan {
            tasks: vec![low, task("after", &["high"], vec![]), high],
        };
        let mut state = PlanState::new(plan);
        assert_eq!(state.next_ready().map(|t| t.id.as_str()), Some("high"));
        assert_eq!(state.status("after"), TaskStatus::Pending);
        state.tasks.get_mut("high").unwrap().status = Some(TaskStatus::Done);
        assert_eq!(state.status("after"), TaskStatus::Ready);
        // Equal priority: the earlier written first.
        assert_eq!(state.next_ready().map(|t| t.id.as_str()), Some("after"));
        state.tasks.get_mut("high").unwrap().status = Some(TaskStatus::Failed);
        assert_eq!(state.status("after"), TaskStatus::Blocked);
        assert!(!state.all_done());
    }

    #[test]
    fn the_ratchet_sees_removed_and_changed_checks_only() {
        let judge = Check::Judge {
            rubric: "clear".into(),
        };
        let old = Plan {
            tasks: vec![
                task("a", &[], vec![tests_check(), judge.clone()]),
                task("b", &[], vec![tests_check()]),
            ],
        };
        // Adding a task and a check weakens nothing.
        let mut more = old.clone();
        more.tasks[0].done_when.push(Check::Judge {
            rubric: "also fast".into(),
        });
        more.tasks.push(task("c", &[], vec![]));
        assert!(weakened(&old, &more).is_empty());
        // A changed rubric is a removal; a dropped task loses its checks.
        let mut less = old.clone();
        less.tasks[0].done_when[1] = Check::Judge {
            rubric: "anything".into(),
        };
        less.tasks.remove(1);
        let lost = weakened(&old, &less);
        assert_eq!(lost.len(), 2, "{lost:?}");
        assert!(lost[0].contains("judge: clear removed or changed"));
        assert!(lost[1].contains("removed with its task"));
    }

    #[test]
    fn a_revision_keeps_records_and_gives_a_failed_task_fresh_attempts() {
        let old = Plan {
            tasks: vec![task("a", &[], vec![tests_check()])],
        };
        let mut state = PlanState::new(old.clone());
        let record = state.tasks.get_mut("a").unwrap();
        record.status = Some(TaskStatus::Failed);
        record.attempts = 3;
        record.checks = vec![Some(false)];
        let mut new = old;
        new.tasks[0]
            .done_when
            .insert(0, Check::Judge { rubric: "r".into() });
        state.replace(new);
        let record = &state.tasks["a"];
        assert_eq!(record.status, None);
        // The count goes on; the new set starts empty.
        assert_eq!(record.attempts, 3);
        assert_eq!(record.in_set(), 0);
        assert_eq!(record.checks, vec![None, Some(false)]);
        assert_eq!(state.status("a"), TaskStatus::Ready);
    }

    #[test]
    fn answers_are_read_from_fences_or_bare_objects() {
        let fenced = "Here:\n```json\n{\"tasks\": []}\n```\nDone.";
        assert_eq!(parse_answer(fenced).unwrap(), Plan::default());
        assert_eq!(
            parse_answer("ok {\"tasks\": []} ok").unwrap(),
            Plan::default()
        );
        assert!(parse_answer("no json").unwrap_err().contains("no JSON"));
        assert!(
            parse_answer("{\"tasks\": [{\"id\": 1}]}")
                .unwrap_err()
                .contains("schema")
        );
    }
}
