//! The [`Tool`] trait and [`Effect`]: what a tool author implements.
//!
//! This module owns the typed side of a call (deserialize the input, run,
//! serialize the output) and the JSON Schema of the input. It must not know
//! about components or WIT: [`crate::Component`] does the bookkeeping.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ToolError;
use crate::bindings::longhand::tool::types as wit;

/// What running a tool does to the world.
///
/// The session layer uses this to decide what may be re-run after a crash:
/// [`ReadOnly`](Self::ReadOnly) and [`Idempotent`](Self::Idempotent) calls are
/// re-run, [`Writes`](Self::Writes) calls are reported as "outcome unknown".
/// When in doubt, say `Writes`: claiming too little is what loses data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Only reads; running it again changes nothing.
    ReadOnly,
    /// Writes, but running it twice with the same input leaves the same result
    /// as running it once (write a whole file, PUT).
    Idempotent,
    /// Writes whose repetition is not safe (append, send, POST, delete, an
    /// edit that replaces text the first run already replaced).
    Writes,
}

impl From<Effect> for wit::Effect {
    fn from(effect: Effect) -> Self {
        match effect {
            Effect::ReadOnly => Self::ReadOnly,
            Effect::Idempotent => Self::Idempotent,
            Effect::Writes => Self::Writes,
        }
    }
}

/// One tool: a name, a description for the model, an effect and a typed call.
///
/// Implement it on a unit struct and list the struct in [`export!`](crate::export).
/// The host validates every input against the schema derived from
/// [`Input`](Self::Input) before the guest runs, but the SDK deserializes again
/// (and reports failures as [`ToolError::InvalidInput`]), so a tool never sees
/// a malformed input either way.
///
/// Doc comments on the input's fields become `description`s in the schema: they
/// are what the model reads, so write them for it. Mark the input
/// `#[serde(deny_unknown_fields)]` so that a misspelt field is an error rather
/// than silently ignored.
pub trait Tool {
    /// Unique within the component: lowercase ASCII letters, digits, `-` and
    /// `_`. Checked when the component is compiled.
    const NAME: &'static str;
    /// What it does, written for the model: when to use it, what it returns,
    /// what limits apply.
    const DESCRIPTION: &'static str;
    /// What a call does to the world.
    const EFFECT: Effect;
    /// The input, deserialized from the JSON object the host passes.
    type Input: DeserializeOwned + JsonSchema;
    /// The output, serialized to JSON for the host.
    type Output: Serialize;

    /// Runs the tool. Return an error value for anything the model could act
    /// on; panic only on a bug (the host records a trap).
    fn call(input: Self::Input) -> Result<Self::Output, ToolError>;
}

/// The JSON Schema of `T::Input`, as the host and the model receive it.
///
/// Subschemas are inlined rather than put under `$defs`: models read a flat
/// schema more reliably, and tool inputs are small. The input type's name and
/// doc comment, which schemars would put in `title` and `description`, are
/// dropped: the model reads [`Tool::DESCRIPTION`] for the tool and the field
/// docs for the fields, and "Input of `read`" would only add noise.
pub fn input_schema<T: Tool>() -> serde_json::Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let mut schema = settings.into_generator().into_root_schema_for::<T::Input>();
    schema.remove("title");
    schema.remove("description");
    schema.to_value()
}

/// Runs `T` on JSON text: deserialize, call, serialize.
///
/// A deserialization failure names the offending field by its path
/// (`range.start: invalid type: string "x", expected u64`), so the model can
/// fix exactly that field.
pub fn call_json<T: Tool>(input: &str) -> Result<String, ToolError> {
    let mut de = serde_json::Deserializer::from_str(input);
    let typed: T::Input = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ToolError::InvalidInput(inner.to_string())
        } else {
            ToolError::InvalidInput(format!("`{path}`: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ToolError::invalid_input(format!("trailing text after the input: {e}")))?;
    let output = T::call(typed)?;
    serde_json::to_string(&output).map_err(|e| {
        ToolError::failed(format!(
            "tool `{}` produced output that cannot be written as JSON: {e}",
            T::NAME
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Input of the test tool.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct AddInput {
        /// First addend.
        a: u32,
        /// Second addend.
        b: u32,
    }

    struct Add;

    impl Tool for Add {
        const NAME: &'static str = "add";
        const DESCRIPTION: &'static str = "Adds two numbers.";
        const EFFECT: Effect = Effect::ReadOnly;
        type Input = AddInput;
        type Output = u32;

        fn call(input: AddInput) -> Result<u32, ToolError> {
            input
                .a
                .checked_add(input.b)
                .ok_or_else(|| ToolError::invalid_input("the sum overflows u32"))
        }
    }

    #[test]
    fn calls_with_typed_input() {
        assert_eq!(call_json::<Add>(r#"{"a": 2, "b": 3}"#).unwrap(), "5");
    }

    #[test]
    fn bad_input_names_the_field() {
        let err = call_json::<Add>(r#"{"a": 2, "b": "three"}"#).unwrap_err();
        let ToolError::InvalidInput(message) = err else {
            panic!("expected invalid-input, got {err:?}");
        };
        assert!(message.starts_with("`b`: invalid type"), "{message}");

        let err = call_json::<Add>(r#"{"a": 2}"#).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("missing field `b`")));

        let err = call_json::<Add>(r#"{"a": 2, "b": 3, "c": 4}"#).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("unknown field `c`")));
    }

    #[test]
    fn tool_errors_pass_through() {
        let err = call_json::<Add>(r#"{"a": 4294967295, "b": 1}"#).unwrap_err();
        assert_eq!(err, ToolError::invalid_input("the sum overflows u32"));
    }

    #[test]
    fn schema_has_field_descriptions_only() {
        let schema = input_schema::<Add>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["a"]["description"], "First addend.");
        assert_eq!(schema["additionalProperties"], false);
        assert!(schema.get("title").is_none());
        assert!(schema.get("description").is_none());
    }
}
