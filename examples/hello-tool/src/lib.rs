//! A complete Longhand tool: one typed input, one trait impl, one export.
//! `tests/host.rs` builds it for wasm32-wasip2 and runs it in the real host.

use longhand_sdk::{Effect, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Input of `greet`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetInput {
    /// Who to greet.
    pub name: String,
}

/// Output of `greet`.
#[derive(Serialize)]
pub struct Greeting {
    /// The greeting.
    pub text: String,
}

/// Greets someone by name.
pub struct Greet;

impl Tool for Greet {
    const NAME: &'static str = "greet";
    const DESCRIPTION: &'static str = "Greets someone by name.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = GreetInput;
    type Output = Greeting;

    fn call(input: GreetInput) -> Result<Greeting, ToolError> {
        if input.name.trim().is_empty() {
            return Err(ToolError::invalid_input("`name` is empty"));
        }
        Ok(Greeting {
            text: format!("Hello, {}!", input.name),
        })
    }
}

longhand_sdk::export! {
    name: "hello",
    description: "Greets people.",
    tools: [Greet],
}
