//! Handoffs: the model's handoff checked and the worker's context
//! replaced with it (or sent back), and the harness's own when the model's
//! tries ran out (`decide`'s `FallbackHandoff`).

use crate::core::ctx::Ctx;
use crate::core::prompts;
use crate::error::{RunError, json_error};
use crate::work::handoff::{self, Handoff};
use longhand_session::Event;

impl Ctx<'_> {
    /// Check the handoff the model wrote; replace the worker's context
    /// with it, or send it back (`decide` counts the refusals and asks
    /// for [`Ctx::fallback_handoff`] when they run out).
    pub(crate) async fn accept_handoff(&mut self) -> Result<(), RunError> {
        let Some(reply) = self.journal.state.handoff_reply.clone() else {
            return Ok(());
        };
        let bytes = self.get(&reply.response).await?;
        let text = serde_json::from_slice::<crate::model::ModelResponse>(&bytes)
            .map_err(json_error("a model response blob"))?
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
                .await
            }
        }
    }

    /// Replace the worker's context with a handoff the harness builds from
    /// the plan and what the task changed: the model's tries ran out.
    pub(crate) async fn fallback_handoff(&mut self) -> Result<(), RunError> {
        let goal = self.journal.state.goal.clone().unwrap_or_default();
        let mut fallback = Handoff::from_plan(
            &goal,
            self.journal.state.plan.as_ref(),
            &self.journal.state.in_doubt,
        );
        fallback.artifacts = self.changed_paths().await?;
        fallback.artifacts.truncate(handoff::MAX_ITEMS);
        self.write_handoff(fallback, false).await
    }

    pub(crate) async fn write_handoff(
        &mut self,
        handoff: Handoff,
        by_model: bool,
    ) -> Result<(), RunError> {
        let task = self
            .journal
            .state
            .plan
            .as_ref()
            .and_then(|p| p.current.clone());
        let context_tokens = self
            .journal
            .state
            .conversation
            .as_ref()
            .map_or(0, |c| c.context_tokens);
        let handoff_blob = self.put(serde_json::to_vec(&handoff).unwrap_or_default());
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
                // Briefed from the handoff itself: the state learns it only
                // by folding the `handoff` event written below.
                let (text, _) = self
                    .worker_briefing(task_id, Some(&handoff), &found)
                    .await?;
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

    /// The paths the worker's changing calls named in the current task
    /// (fields named `path`, `*_path`, `to`, `dest`), in order, once each.
    pub(crate) async fn changed_paths(&mut self) -> Result<Vec<String>, RunError> {
        let mut paths: Vec<String> = Vec::new();
        for blob in self.journal.state.changes.clone() {
            let bytes = self.get(&blob).await?;
            let Ok(serde_json::Value::Object(input)) = serde_json::from_slice(&bytes) else {
                continue;
            };
            for (key, value) in input {
                let named = key == "path" || key.ends_with("_path") || key == "to" || key == "dest";
                if let (true, Some(path)) = (named, value.as_str())
                    && !paths.iter().any(|p| p == path)
                {
                    paths.push(prompts::cut(path, 300));
                }
            }
        }
        Ok(paths)
    }
}
