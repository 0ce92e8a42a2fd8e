//! A scripted model: answer turn *k* with the *k*-th response of a list,
//! whatever the request says.
//!
//! Unlike a cassette, a script does not check that the conversation matches
//! a recording, so it is the tool for driving the real loop through a fixed
//! plan: producing an example's cassette (`run --script … --record …`),
//! benchmarks, and crash tests where a call in doubt changes what the model
//! is told. The turn is the number of assistant messages already in the
//! request, so the provider is stateless: a resumed process that re-sends a
//! request gets the same answer. Limitation: once the loop drops old turns
//! to fit `context_tokens`, that count no longer equals the turn number, so
//! scripts longer than the context budget replay the wrong answers; give
//! such runs a large `context_tokens`.

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
        let turn = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        self.responses.get(turn).cloned().ok_or_else(|| {
            ModelError::BadResponse(format!(
                "the script has {} responses and turn {} was asked for",
                self.responses.len(),
                turn + 1
            ))
        })
    }
}
