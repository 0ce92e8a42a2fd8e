//! The typed handoff: what a worker's context is replaced by before its
//! window fills.
//!
//! Not a summary of a summary: a record with fixed fields, written by a
//! model call, checked against this schema ([`parse`]; an invalid answer is
//! sent back with its errors, a few times), and when the model cannot
//! produce one, built by the harness from what the log knows
//! ([`Handoff::from_plan`]) so a run never stalls on it. The next context
//! is rebuilt from the plan, this handoff and the memories — see
//! `brain::core::prompts`.

use serde::{Deserialize, Serialize};

use super::plan::{PlanState, TaskStatus, json_in};

/// Most entries in one list field.
pub const MAX_ITEMS: usize = 32;
/// Longest text of one field or entry, in bytes.
pub const MAX_FIELD: usize = 2048;

/// What the next context needs to carry on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// The session's goal, restated.
    pub goal: String,
    /// The task in progress (its id), if any.
    #[serde(default)]
    pub current_task: Option<String>,
    /// Where the current task stands: what is done of it, what is next.
    pub status: String,
    /// Tasks done (ids or one line each).
    #[serde(default)]
    pub done: Vec<String>,
    /// Tasks remaining.
    #[serde(default)]
    pub remaining: Vec<String>,
    /// Decisions taken and why, so they are not re-litigated.
    #[serde(default)]
    pub decisions: Vec<String>,
    /// Questions still open.
    #[serde(default)]
    pub open_questions: Vec<String>,
    /// Tool calls whose outcome is unknown (ids and what they did).
    #[serde(default)]
    pub calls_in_doubt: Vec<String>,
    /// Files and blobs produced: paths as the tools see them, blob digests.
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// Anything else the next context must know.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The JSON shape the handoff writer answers with, for its instructions.
pub const SCHEMA: &str = r#"{"goal": "the goal, restated", "current_task": "task id or null",
  "status": "where the current task stands: what is done, what is next",
  "done": ["..."], "remaining": ["..."], "decisions": ["decision and why"],
  "open_questions": ["..."], "calls_in_doubt": ["..."],
  "artifacts": ["/path/or/sha256:digest and what it is"], "notes": ["..."]}"#;

/// Read and check a handoff from a model's answer. Every problem is a
/// sentence in the error list.
pub fn parse(text: &str) -> Result<Handoff, Vec<String>> {
    let json = json_in(text).ok_or_else(|| {
        vec!["the answer holds no JSON object; answer with the handoff as one JSON object".into()]
    })?;
    let handoff: Handoff = serde_json::from_str(json)
        .map_err(|e| vec![format!("the handoff does not match the schema: {e}")])?;
    let errors = handoff.problems();
    if errors.is_empty() {
        Ok(handoff)
    } else {
        Err(errors)
    }
}

impl Handoff {
    /// What is wrong with it, one sentence each.
    pub fn problems(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if self.status.trim().is_empty() {
            errors.push("`status` is empty: say where the current work stands".to_owned());
        }
        let texts = [("goal", &self.goal), ("status", &self.status)];
        for (name, text) in texts {
            if text.len() > MAX_FIELD {
                errors.push(format!(
                    "`{name}` is {} bytes; keep it under {MAX_FIELD}",
                    text.len()
                ));
            }
        }
        let lists = [
            ("done", &self.done),
            ("remaining", &self.remaining),
            ("decisions", &self.decisions),
            ("open_questions", &self.open_questions),
            ("calls_in_doubt", &self.calls_in_doubt),
            ("artifacts", &self.artifacts),
            ("notes", &self.notes),
        ];
        for (name, list) in lists {
            if list.len() > MAX_ITEMS {
                errors.push(format!(
                    "`{name}` has {} entries; at most {MAX_ITEMS}",
                    list.len()
                ));
            }
            if list.iter().any(|e| e.len() > MAX_FIELD) {
                errors.push(format!(
                    "an entry of `{name}` is over {MAX_FIELD} bytes; shorten it"
                ));
            }
        }
        errors
    }

    /// The handoff the harness writes when the model could not: the plan's
    /// state and the calls in doubt, which the log knows exactly.
    pub fn from_plan(goal: &str, plan: Option<&PlanState>, in_doubt: &[String]) -> Self {
        let mut handoff = Handoff {
            goal: goal.chars().take(MAX_FIELD / 2).collect(),
            status: "The previous context ran out of room before it wrote a handoff; check the \
                     files the task touches to see how far it got."
                .to_owned(),
            calls_in_doubt: in_doubt.iter().take(MAX_ITEMS).cloned().collect(),
            ..Handoff::default()
        };
        if let Some(plan) = plan {
            handoff.current_task = plan.current.clone();
            for task in &plan.plan.tasks {
                let line = format!("{}: {}", task.id, task.title);
                let line: String = line.chars().take(200).collect();
                match plan.status(&task.id) {
                    TaskStatus::Done => handoff.done.push(line),
                    _ => handoff.remaining.push(line),
                }
            }
            handoff.done.truncate(MAX_ITEMS);
            handoff.remaining.truncate(MAX_ITEMS);
        }
        handoff
    }

    /// Markdown for a briefing.
    pub fn render(&self) -> String {
        let mut out = format!("Where things stand: {}\n", self.status.trim());
        if let Some(task) = &self.current_task {
            out.push_str(&format!("Current task: {task}\n"));
        }
        let lists = [
            ("Done", &self.done),
            ("Remaining", &self.remaining),
            ("Decisions", &self.decisions),
            ("Open questions", &self.open_questions),
            (
                "Calls in doubt (their outcome is unknown)",
                &self.calls_in_doubt,
            ),
            ("Artifacts", &self.artifacts),
            ("Notes", &self.notes),
        ];
        for (title, list) in lists {
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!("{title}:\n"));
            for entry in list {
                out.push_str(&format!("- {}\n", entry.trim()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_handoff_parses_and_an_invalid_one_says_why() {
        let good = r#"```json
{"goal": "g", "current_task": "fix", "status": "tests compile", "done": ["copy"],
 "remaining": ["fix", "notes"], "decisions": ["keep the API"], "artifacts": ["/out/crate"]}
```"#;
        let handoff = parse(good).unwrap();
        assert_eq!(handoff.current_task.as_deref(), Some("fix"));
        assert!(handoff.render().contains("- keep the API"));

        let errors = parse(r#"{"goal": "g", "status": ""}"#).unwrap_err();
        assert!(errors[0].contains("`status` is empty"), "{errors:?}");
        let errors = parse(r#"{"goal": "g", "status": "s", "mood": "good"}"#).unwrap_err();
        assert!(errors[0].contains("unknown field `mood`"), "{errors:?}");
        let long = serde_json::json!({"goal": "g", "status": "s", "notes": vec!["n"; 40]});
        let errors = parse(&long.to_string()).unwrap_err();
        assert!(errors[0].contains("at most 32"), "{errors:?}");
        assert!(parse("nothing").is_err());
    }
}
