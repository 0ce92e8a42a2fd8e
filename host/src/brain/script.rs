//! A scripted model: answer turn *k* with the *k*-th response of a list,
//! whatever the request says.
//!
//! Unlike a cassette, a script does not check that the conversation matches
//! a recording, so it is the tool for driving the real loop through a fixed
//! plan: producing an example's cassette (`run --script … --record …`),
//! benchmarks, and crash tests where a call in doubt changes what the model
//! is told. The turn is the loop's step number, carried in the request (not
//! sent on any wire), so the provider is stateless: a resumed process that
//! re-sends a request gets the same answer, and a run longer than the
//! context window (where old turns are dropped from the request) still gets
//! answer *k* at turn *k*.

use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;

use super::model::{Message, ModelError, ModelProvider, ModelRequest, ModelResponse};

/// A script file: `{"responses": [ModelResponse, …]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    responses: Vec<ModelResponse>,
}

/// Plays a script of responses by turn.
#[derive(Debug, Clone)]
pub struct ScriptProvider {
    responses: Vec<ModelResponse>,
}

impl ScriptProvider {
    /// A script from responses in memory.
    pub fn new(responses: Vec<ModelResponse>) -> Self {
        Self { responses }
    }

    /// Read a script file.
    pub fn open(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
        let file: ScriptFile = serde_json::from_str(&text)
            .map_err(|e| format!("script {} is not valid: {e}", path.display()))?;
        Ok(Self::new(file.responses))
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
        self.responses.get(turn).cloned().ok_or_else(|| {
            ModelError::BadResponse(format!(
                "the script has {} responses and turn {} was asked for",
                self.responses.len(),
                turn + 1
            ))
        })
    }
}
