//! What each role is told: system prompts and the briefings fresh
//! contexts start from.
//!
//! A briefing is built once, stored as a blob and named by the event that
//! starts the context (`task_started`, `handoff`, `role_started`), so a
//! resumed worker sends exactly what was sent before. Every part is
//! bounded — the plan listing, the progress notes, the failures, the
//! memories — so a fresh context costs the same at task 200 as at task 2.

use std::fmt::Write as _;

use super::state::Role;
use crate::work::handoff::{self, Handoff};
use crate::work::plan::{self, Check, PlanState, Task};

/// Tasks listed in a briefing's plan overview; the rest are counted.
pub const MAX_LISTED_TASKS: usize = 40;
/// Longest text kept of one failure, progress note or memory.
pub const MAX_LINE: usize = 1500;
/// Longest worker claim shown to the judge.
pub const MAX_CLAIM: usize = 8 * 1024;

/// The system prompt of `role`.
pub fn system_prompt(role: Role, instructions: &str) -> String {
    match role {
        Role::Worker | Role::Handoff => instructions.to_owned(),
        Role::Planner => format!(
            "You are the planner of a long-running agent. You turn a goal into a plan of small \
             tasks, each with checks that a harness runs to decide whether it is done: the \
             worker who does a task never decides that. You call no tools. Answer with one JSON \
             object and nothing else, of this shape:\n{}\nRules: every task has at least one \
             check; a command check names one of the commands listed in the briefing (you cannot \
             write commands); a tool check names one of the read-only tools listed and a jq \
             expression over its output that is true when the task is done; a judge check gives \
             a rubric a strict reviewer can apply. Ids are short (letters, digits, - _ .). Keep \
             tasks small enough to finish in one sitting.",
            plan::PLAN_SCHEMA
        ),
        Role::Judge => "You are the judge. You grade one task's result against its rubric, \
                        strictly: pass only when every point of the rubric is met. You did not \
                        do the work and owe it nothing. You may use the read-only tools to look \
                        at the artifacts; you cannot change anything. When you have decided, \
                        answer without calling a tool, with one JSON object: {\"pass\": true or \
                        false, \"reasons\": [\"...\"], \"missing\": [\"what would have to change \
                        to pass\"]}."
            .to_owned(),
    }
}

/// The instruction appended to the worker's context to get a handoff.
pub fn handoff_instruction() -> String {
    format!(
        "[harness] Your context is nearly full and is about to be replaced. Write the handoff \
         the next context will start from: call no tool, answer with one JSON object of this \
         shape:\n{}\nBe exact: name files and what is in them, decisions and why, what is left \
         to do.",
        handoff::SCHEMA
    )
}

/// What the handoff writer is told after its answer was refused (the
/// answer itself comes just before this in the request).
pub fn handoff_refused(problems: &str) -> String {
    format!(
        "[harness] That handoff was refused: {}. Write it again as one JSON object of the shape \
         above; call no tool.",
        cut(problems, MAX_LINE)
    )
}

/// What a worker's briefing is made of.
pub struct WorkerBriefing<'a> {
    /// The session's goal.
    pub goal: &'a str,
    /// The plan and its statuses.
    pub plan: &'a PlanState,
    /// The task.
    pub task: &'a Task,
    /// This attempt and the most allowed.
    pub attempt: u32,
    /// See `attempt`.
    pub max_attempts: u32,
    /// Failed checks of the last attempt.
    pub failures: &'a [String],
    /// The latest handoff.
    pub handoff: Option<&'a Handoff>,
    /// The newest progress notes, oldest first.
    pub progress: &'a [String],
    /// Memories: (id, text).
    pub memories: &'a [(String, String)],
}

/// The first message of a worker's context.
pub fn worker(b: &WorkerBriefing<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Goal\n{}\n", b.goal.trim());
    let task = b.task;
    let _ = writeln!(
        out,
        "# Your task: {} — {} (attempt {} of {})",
        task.id, task.title, b.attempt, b.max_attempts
    );
    if !task.description.trim().is_empty() {
        let _ = writeln!(out, "{}", task.description.trim());
    }
    if task.done_when.is_empty() {
        out.push_str("\nThe task is done when you say so.\n");
    } else {
        out.push_str(
            "\n## Done when\nWhen you say you are done, the harness runs these checks; you \
             cannot run, change or skip them:\n",
        );
        for check in &task.done_when {
            let _ = writeln!(out, "- {}", describe(check));
        }
    }
    if !b.failures.is_empty() {
        out.push_str("\n## What failed in the last attempt\n");
        for failure in b.failures {
            let _ = writeln!(out, "- {}", cut(failure, MAX_LINE));
        }
    }
    if let Some(handoff) = b.handoff {
        let _ = writeln!(
            out,
            "\n## Handoff from the previous context\n{}",
            handoff.render().trim_end()
        );
    }
    if !b.progress.is_empty() {
        out.push_str("\n## Progress notes (newest last)\n");
        for note in b.progress {
            let _ = writeln!(out, "- {}", cut(note, MAX_LINE));
        }
    }
    out.push_str("\n## The plan\n");
    overview(&mut out, b.plan);
    if !b.memories.is_empty() {
        out.push_str("\n## From memory\n");
        for (id, text) in b.memories {
            let _ = writeln!(out, "- ({id}) {}", cut(text, MAX_LINE));
        }
    }
    out.push_str(
        "\nWork on this task only. When it is done, answer without calling a tool and say \
         what you did and where the results are.\n",
    );
    out
}

/// The first message of the judge's context.
pub fn judge(task: &Task, rubric: &str, claim: &str, changed: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Task: {} — {}", task.id, task.title);
    if !task.description.trim().is_empty() {
        let _ = writeln!(out, "{}", task.description.trim());
    }
    let _ = writeln!(out, "\n# Rubric\n{}", rubric.trim());
    let _ = writeln!(
        out,
        "\n# What the worker says it did\n{}",
        cut(claim.trim(), MAX_CLAIM)
    );
    if !changed.is_empty() {
        out.push_str("\n# What the worker's calls changed in this task\n");
        for path in changed {
            let _ = writeln!(out, "- {}", cut(path, 300));
        }
    }
    out.push_str(
        "\nLook at the artifacts with the tools before you decide; the worker's word is not \
         evidence. Then answer with the verdict object.\n",
    );
    out
}

/// Why the planner is asked, for its briefing.
pub enum PlannerAsk<'a> {
    /// Write the plan.
    Create,
    /// Extend the operator's plan.
    Extend(&'a PlanState),
    /// Revise after a failure.
    Revise {
        /// The plan.
        plan: &'a PlanState,
        /// The failed task.
        task: &'a str,
        /// Its failed checks.
        failures: &'a [String],
    },
}

/// What the planner may name.
pub struct Catalogue<'a> {
    /// Read-only tools (for tool checks), with descriptions.
    pub read_only_tools: Vec<(&'a str, &'a str)>,
    /// Every tool the worker has.
    pub worker_tools: Vec<&'a str>,
    /// Command checks: (name, argv).
    pub commands: Vec<(&'a str, String)>,
}

/// The first message of the planner's context.
pub fn planner(
    goal: &str,
    instructions: &str,
    catalogue: &Catalogue<'_>,
    ask: &PlannerAsk<'_>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Goal\n{}\n", goal.trim());
    let _ = writeln!(
        out,
        "# The worker's instructions\n{}\n",
        cut(instructions.trim(), 4 * MAX_LINE)
    );
    let _ = writeln!(
        out,
        "# The worker's tools\n{}\n",
        if catalogue.worker_tools.is_empty() {
            "(none)".to_owned()
        } else {
            catalogue.worker_tools.join(", ")
        }
    );
    out.push_str("# Checks you may use\nCommand checks (by name):\n");
    if catalogue.commands.is_empty() {
        out.push_str("- (none)\n");
    }
    for (name, argv) in &catalogue.commands {
        let _ = writeln!(out, "- `{name}`: runs {argv}");
    }
    out.push_str("Read-only tools for tool checks:\n");
    if catalogue.read_only_tools.is_empty() {
        out.push_str("- (none)\n");
    }
    for (name, description) in &catalogue.read_only_tools {
        let _ = writeln!(out, "- `{name}`: {}", cut(description, 200));
    }
    out.push_str("Judge checks: any rubric.\n\n");
    match ask {
        PlannerAsk::Create => out.push_str("Write the plan for the goal.\n"),
        PlannerAsk::Extend(plan) => {
            out.push_str(
                "# The operator's plan\nAdd the tasks and checks the goal still needs. Keep \
                 every task and check below as it is (you may add checks to them); answer with \
                 the whole plan.\n",
            );
            plan_json(&mut out, plan);
        }
        PlannerAsk::Revise {
            plan,
            task,
            failures,
        } => {
            let _ = writeln!(
                out,
                "# Revise the plan\nTask `{task}` failed its checks on every attempt. Change the \
                 approach: split it, add tasks before it (and make it depend on them), or \
                 reword it. Existing checks cannot be removed or changed; you may add checks. \
                 Answer with the whole revised plan. Its failures:"
            );
            for failure in *failures {
                let _ = writeln!(out, "- {}", cut(failure, MAX_LINE));
            }
            out.push_str("\nStatuses now:\n");
            overview(&mut out, plan);
            out.push('\n');
            plan_json(&mut out, plan);
        }
    }
    out
}

fn plan_json(out: &mut String, plan: &PlanState) {
    let json = serde_json::to_string_pretty(&plan.plan).unwrap_or_default();
    let _ = writeln!(out, "```json\n{json}\n```");
}

/// One line per task with its status, bounded.
fn overview(out: &mut String, plan: &PlanState) {
    let tasks = &plan.plan.tasks;
    for task in tasks.iter().take(MAX_LISTED_TASKS) {
        let _ = writeln!(
            out,
            "- [{}] {}: {}",
            plan.status(&task.id).as_str(),
            task.id,
            cut(&task.title, 200)
        );
    }
    if tasks.len() > MAX_LISTED_TASKS {
        let counts = plan.counts();
        let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let _ = writeln!(
            out,
            "- … {} more tasks ({} in all: {})",
            tasks.len() - MAX_LISTED_TASKS,
            tasks.len(),
            summary.join(", ")
        );
    }
}

/// A check as the worker is told about it.
fn describe(check: &Check) -> String {
    match check {
        Check::Tool {
            tool,
            input,
            expect,
        } => format!(
            "the tool `{tool}` called with {input} gives an output where `{expect}` is true"
        ),
        Check::Command { name } => format!("the command check `{name}` passes (exits 0)"),
        Check::Judge { rubric } => format!("a judge agrees that: {}", cut(rubric.trim(), MAX_LINE)),
    }
}

/// `text` cut to `max` bytes on a character boundary, with `…` when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}
