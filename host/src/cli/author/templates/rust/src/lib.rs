//! The `{{name}}` tool component.

use longhand_sdk::{Effect, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetInput {
    /// Who to greet.
    pub name: String,
}

#[derive(Serialize)]
pub struct Greeting {
    pub greeting: String,
}

pub struct Greet;

impl Tool for Greet {
    const NAME: &'static str = "greet";
    const DESCRIPTION: &'static str = "Say hello to someone by name.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = GreetInput;
    type Output = Greeting;

    fn call(input: GreetInput) -> Result<Greeting, ToolError> {
        if input.name.trim().is_empty() {
            return Err(ToolError::invalid_input("`name` is empty"));
        }
        Ok(Greeting {
            greeting: format!("Hello, {}!", input.name),
        })
    }
}

longhand_sdk::export! {
    name: "{{name}}",
    description: "Says hello.",
    tools: [Greet],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_by_name() {
        let out = Greet::call(GreetInput { name: "Ada".into() }).map_err(|_| "failed");
        assert_eq!(out.map(|g| g.greeting), Ok("Hello, Ada!".to_owned()));
    }

    #[test]
    fn an_empty_name_is_invalid_input() {
        assert!(Greet::call(GreetInput { name: " ".into() }).is_err());
    }
}
