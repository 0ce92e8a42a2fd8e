//! The judge: a fresh conversation grading a task against a `judge`
//! check's rubric, and its verdict recorded as `check_finished`.

use crate::core::ctx::Ctx;
use crate::core::decide::MAX_REJECTED;
use crate::core::prompts;
use crate::error::{RunError, inconsistent};
use crate::work::plan::{self, Check};
use longhand_session::Event;

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

impl Ctx<'_> {
    /// Start the judge on check `index` of `task_id`.
    pub(crate) async fn start_judge(
        &mut self,
        task_id: String,
        index: u32,
    ) -> Result<(), RunError> {
        let changed = self.changed_paths().await?;
        let claim = self.claim_text().await?;
        let plan = self.journal.state.plan.as_ref();
        let task = plan.and_then(|p| p.plan.task(&task_id));
        let (Some(task), Some(Check::Judge { rubric })) =
            (task, task.and_then(|t| t.done_when.get(index as usize)))
        else {
            return Err(inconsistent(&format!(
                "task {task_id} has no judge check {index}"
            )));
        };
        let text = prompts::judge(task, rubric, &claim, &changed);
        let briefing = self.put(text.into_bytes());
        self.write(vec![Event::RoleStarted {
            role: crate::core::state::JUDGE.to_owned(),
            task: Some(task_id),
            check: Some(index),
            briefing,
        }])
        .await
    }

    /// Read the judge's final answer as its verdict. An unreadable one is
    /// sent back, or — on the `last_try` `decide` gave it — recorded as a
    /// failed check.
    pub(crate) async fn accept_verdict(
        &mut self,
        step: u64,
        last_try: bool,
    ) -> Result<(), RunError> {
        let Some((task, check)) = self
            .journal
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
            Err(error) if !last_try => {
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
}
