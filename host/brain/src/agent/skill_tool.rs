//! The skills as the model meets them: the catalogue in the system prompt
//! ([`catalogue`]) and the host tool `skill__load` ([`load_tool_def`],
//! [`load`]). Pure functions over the skills a session froze: no file is
//! read here, and no event written (the loop records the call).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::skills::types::{LOAD, MAX_CATALOGUE, MAX_NAME, Skill};
use crate::model::types::ToolDef;

/// The skills as the model is told of them: one line per skill, name and
/// description, at most [`MAX_CATALOGUE`] bytes. Skills past the budget
/// are listed by name only, then counted: `skill__load` still lists every
/// name in its schema. Empty for no skills.
pub fn catalogue(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = format!("Skills (load one with {LOAD} when the task matches its description):\n");
    let mut rest = skills;
    while let Some((skill, tail)) = rest.split_first() {
        let line = format!("- {}: {}\n", skill.name, skill.description);
        // Keep room for the names-only tail.
        if out.len() + line.len() + 256 > MAX_CATALOGUE {
            break;
        }
        out.push_str(&line);
        rest = tail;
    }
    if !rest.is_empty() {
        out.push_str("Also (load to read what they do):");
        let mut shown = 0;
        for skill in rest {
            if out.len() + skill.name.len() + 40 > MAX_CATALOGUE {
                break;
            }
            let _ = write!(out, " {}", skill.name);
            shown += 1;
        }
        if shown < rest.len() {
            let _ = write!(out, " and {} more", rest.len() - shown);
        }
        out.push('\n');
    }
    out
}

/// The `skill__load` tool. Offer it only when `skills` is not empty (an
/// empty `enum` is not a valid schema).
pub fn load_tool_def(skills: &[Skill]) -> ToolDef {
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    ToolDef {
        name: LOAD.to_owned(),
        description: "Load a skill: its instructions and the tools it uses. Load the skill whose \
                      description matches the task before starting it, then follow the \
                      instructions."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": names, "description": "the skill's name"}
            },
            "required": ["name"],
            "additionalProperties": false
        }),
    }
}

/// Answer a `skill__load` call: `Ok({"name", "instructions", "tools"})`,
/// or `Err({"error": {"kind", "message"}})` for input that is not
/// `{"name": <a known skill>}`, which the model reads and may correct.
/// The input is the model's and may be anything: nothing of it longer than
/// a skill name is echoed back.
pub fn load(skills: &[Skill], input: &Value) -> Result<Value, Value> {
    let error = |kind: &str, message: String| json!({"error": {"kind": kind, "message": message}});
    let Some(object) = input.as_object() else {
        return Err(error(
            "invalid-input",
            "the input is an object: {\"name\": \"<skill name>\"}".to_owned(),
        ));
    };
    if let Some(extra) = object.keys().find(|k| k.as_str() != "name") {
        return Err(error(
            "invalid-input",
            format!(
                "unknown field `{}`: the input holds only `name`",
                clip(extra)
            ),
        ));
    }
    let Some(name) = object.get("name").and_then(Value::as_str) else {
        return Err(error(
            "invalid-input",
            "`name` is required and is a string: the name of a skill".to_owned(),
        ));
    };
    match skills.iter().find(|s| s.name == name) {
        Some(skill) => Ok(json!({
            "name": skill.name,
            "instructions": skill.instructions,
            "tools": skill.tools,
        })),
        None => {
            let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            Err(error(
                "not-found",
                format!(
                    "no skill named `{}`; the skills are: {}",
                    clip(name),
                    if known.is_empty() {
                        "(none)".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ))
        }
    }
}

/// `text` cut to at most [`MAX_NAME`] bytes (at a char boundary), marked
/// with `…` when cut.
fn clip(text: &str) -> String {
    if text.len() <= MAX_NAME {
        return text.to_owned();
    }
    let mut end = MAX_NAME;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
