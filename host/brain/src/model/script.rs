//! A scripted model: answer turn *k* with the *k*-th response of a list.
//!
//! Unlike a cassette, a script does not check the whole conversation — tool
//! results may differ from run to run — only that the request's last answer
//! is the script's answer of the turn before (text and calls by name and
//! arguments), and it fails the run (`Diverged`) when it is not or when the
//! script is exhausted. It is the tool for driving the real loop through a
//! fixed plan: producing an example's cassette (`run --script … --record …`),
//! benchmarks, and crash tests where a call in doubt changes what the model
//! is told. The turn is the loop's step number, carried in the request (not
//! sent on any wire), so the provider is stateless: a resumed process that
//! re-sends a request gets the same answer, and a run longer than the
//! context window (where old turns are dropped from the request) still gets
//! answer *k* at turn *k*.

use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;

use super::error::ModelError;
use super::model_provider::ModelProvider;
use super::types::MAX_CALLS_PER_ANSWER;
use super::types::{Message, ModelRequest, ModelResponse};

/// A script file: `{"responses": [ModelResponse, …]}`, and for a tree of
/// sub-agents `"agents": {"<agent name>": [ModelResponse, …], …}`: each
/// agent's sessions answered by their own turns from their own list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    responses: Vec<ModelResponse>,
    #[serde(default)]
    agents: std::collections::BTreeMap<String, Vec<ModelResponse>>,
}

/// Plays a script of responses by turn.
#[derive(Debug, Clone)]
pub struct ScriptProvider {
    responses: Vec<ModelResponse>,
    agents: std::collections::BTreeMap<String, Vec<ModelResponse>>,
}

impl ScriptProvider {
    /// A script from responses in memory.
    pub fn new(responses: Vec<ModelResponse>) -> Self {
        Self {
            responses,
            agents: Default::default(),
        }
    }

    /// The responses for the agent asking: its own list, or the main one.
    fn responses_for(&self, req: &ModelRequest) -> &[ModelResponse] {
        self.agents
            .get(&req.agent)
            .map_or(self.responses.as_slice(), Vec::as_slice)
    }

    /// Read a script file.
    pub fn open(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
        let file: ScriptFile = serde_json::from_str(&text)
            .map_err(|e| format!("script {} is not valid: {e}", path.display()))?;
        Ok(Self {
            responses: file.responses,
            agents: file.agents,
        })
    }
}

#[async_trait]
impl ModelProvider for ScriptProvider {
    fn name(&self) -> &str {
        "script"
    }

    fn model(&self) -> &str {
        "script"
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        // As strict as the real APIs: a conversation that breaks the
        // pairing of tool calls and results is refused as they refuse it,
        // so every scripted run is held to the rule.
        if let Err(why) = super::pairing::check_messages(&req.messages) {
            return Err(ModelError::BadRequest {
                status: 400,
                body: why,
            });
        }
        // The loop numbers its turns from 1; a request built elsewhere
        // (step 0) counts the answers it carries, as before.
        let turn = match req.step {
            0 => req
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Assistant { .. }))
                .count(),
            step => usize::try_from(step - 1).unwrap_or(usize::MAX),
        };
        if turn > 0 {
            self.check_previous(req, turn)?;
        }
        // Past its end a script has nothing to say; asking again will not
        // change that, so the run fails rather than retrying.
        let responses = self.responses_for(req);
        responses
            .get(turn)
            .cloned()
            .ok_or_else(|| ModelError::Diverged {
                turn,
                expected_excerpt: format!(
                    "script exhausted: it has {} responses and turn {} was asked for",
                    responses.len(),
                    turn + 1
                ),
                got_excerpt: last_answer(req).map(excerpt).unwrap_or_default(),
            })
    }
}

impl ScriptProvider {
    /// The request for turn `turn` must carry the script's answer of the
    /// turn before as its last answer (same text and the same calls by
    /// name and arguments; the loop may rename call ids). Anything else
    /// means the run is not where the script thinks it is, and every later
    /// answer would be played into the wrong conversation silently.
    fn check_previous(&self, req: &ModelRequest, turn: usize) -> Result<(), ModelError> {
        let Some(expected) = self.responses_for(req).get(turn - 1) else {
            return Ok(());
        };
        let got = last_answer(req);
        // A fresh context (a task's first turn, the judge's, the planner's,
        // one rebuilt from a handoff) carries no answer to compare: its
        // first message is a briefing.
        if got.is_none() && req.step > 0 {
            return Ok(());
        }
        let same = got.is_some_and(|(text, calls)| {
            let text_ok = match (&expected.text, text) {
                (Some(want), Some(have)) => have.starts_with(want.as_str()),
                (None, None) => true,
                (None, Some(have)) => have.starts_with('['),
                (Some(_), None) => false,
            };
            // The loop runs at most MAX_CALLS_PER_ANSWER calls of an
            // answer and keeps only those.
            let kept = expected.tool_calls.len().min(MAX_CALLS_PER_ANSWER);
            text_ok
                && calls.len() == kept
                && calls
                    .iter()
                    .zip(&expected.tool_calls)
                    .all(|(a, b)| a.name == b.name && a.arguments == b.arguments)
        });
        if same {
            return Ok(());
        }
        Err(ModelError::Diverged {
            turn,
            expected_excerpt: excerpt((&expected.text, &expected.tool_calls)),
            got_excerpt: got.map(excerpt).unwrap_or_else(|| "no answer".to_owned()),
        })
    }
}

/// The text and calls of the request's last assistant message.
fn last_answer(req: &ModelRequest) -> Option<(&Option<String>, &Vec<super::types::ToolCall>)> {
    req.messages.iter().rev().find_map(|m| match m {
        Message::Assistant {
            text, tool_calls, ..
        } => Some((text, tool_calls)),
        _ => None,
    })
}

fn excerpt((text, calls): (&Option<String>, &Vec<super::types::ToolCall>)) -> String {
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    let text = text.as_deref().unwrap_or("");
    format!(
        "text {:?}, calls [{}]",
        &text[..text.floor_char_boundary(120)],
        names.join(", ")
    )
}
