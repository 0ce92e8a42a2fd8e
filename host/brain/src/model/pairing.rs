//! The rule every model API enforces between an answer's tool calls and
//! their results, and the one function that puts a conversation in order.
//!
//! - Chat completions: an assistant message with `tool_calls` must be
//!   followed at once by one `tool` message per `tool_call_id`; a `tool`
//!   message anywhere else is refused.
//! - Anthropic Messages: the message after one with `tool_use` blocks must
//!   be a user message that begins with a `tool_result` block for every
//!   `tool_use` id; a `tool_result` must answer a `tool_use` of the message
//!   before it.
//! - OpenAI Responses: every `function_call` needs its
//!   `function_call_output`, and an output needs its call.
//!
//! The loop's history is in log order, and the log does not always hold
//! a turn's results together: an operator's note (`longhand send`) is
//! recorded when it arrives, which can be between an answer's calls and
//! their results (a slow call, an approval wait). Every API then refuses
//! the request with a 400, so the session would pause and every resume
//! fail the same way. [`repair`] is applied to every request the loop
//! sends (`brain::turn`), so a log already in that state resumes too:
//! after an answer with calls come its results, in the order of the calls,
//! then whatever else arrived during the turn (notes), then the next
//! answer. A call with no recorded result (a log cut short) is answered as
//! unknown; a result no call asked for becomes text.
//!
//! [`check_messages`] and [`check_wire`] state the rules as the APIs
//! enforce them: the scripted model and the local test servers refuse
//! what a real API would, so every test runs against them.

use std::collections::HashSet;

use serde_json::Value;

use super::types::{Message, ToolCall, WireFormat};

/// What a call with no recorded result is answered with.
pub const NO_RESULT: &str = "no result of this call was recorded; whether it ran is unknown";

/// `messages` in the order every wire format accepts, or `None` when they
/// already are (the common case costs one pass and no copy).
pub fn repair(messages: &[Message]) -> Option<Vec<Message>> {
    if check_messages(messages).is_ok() {
        return None;
    }
    let mut out = Vec::with_capacity(messages.len() + 1);
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        i += 1;
        match message {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                // The turn: everything up to the next answer.
                let end = messages[i..]
                    .iter()
                    .position(|m| matches!(m, Message::Assistant { .. }))
                    .map_or(messages.len(), |p| i + p);
                out.push(message.clone());
                let mut results: Vec<Option<&Message>> = vec![None; tool_calls.len()];
                let mut rest = Vec::new();
                for m in &messages[i..end] {
                    match m {
                        Message::ToolResult { call_id, .. } => {
                            match tool_calls
                                .iter()
                                .zip(&results)
                                .position(|(c, r)| c.id == *call_id && r.is_none())
                            {
                                Some(k) => results[k] = Some(m),
                                None => rest.push(stray(m)),
                            }
                        }
                        other => rest.push(other.clone()),
                    }
                }
                for (call, result) in tool_calls.iter().zip(results) {
                    out.push(result.cloned().unwrap_or_else(|| missing(call)));
                }
                out.extend(rest);
                i = end;
            }
            Message::ToolResult { .. } => out.push(stray(message)),
            other => out.push(other.clone()),
        }
    }
    Some(out)
}

/// A call with no result, answered as unknown.
fn missing(call: &ToolCall) -> Message {
    Message::ToolResult {
        call_id: call.id.clone(),
        content: NO_RESULT.to_owned(),
        is_error: true,
    }
}

/// A result that answers no call before it, kept as text.
fn stray(message: &Message) -> Message {
    match message {
        Message::ToolResult {
            call_id, content, ..
        } => Message::User {
            text: format!(
                "[a result for the call `{call_id}`, which no answer just before asked for] \
                 {content}"
            ),
        },
        other => other.clone(),
    }
}

/// Whether `messages` keep the pairing rule: after an answer with calls,
/// one result per call and nothing else until all are answered; no result
/// without its call; no call left unanswered. `Err` says what is wrong, as
/// an API would.
pub fn check_messages(messages: &[Message]) -> Result<(), String> {
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m {
            Message::Assistant { tool_calls, .. } => {
                if !open.is_empty() {
                    return Err(unanswered(i, &open));
                }
                let mut seen = HashSet::new();
                for call in tool_calls {
                    if !seen.insert(call.id.as_str()) {
                        return Err(format!(
                            "messages.{i}: the tool call id `{}` is used twice",
                            call.id
                        ));
                    }
                }
                open = tool_calls.iter().map(|c| c.id.as_str()).collect();
            }
            Message::ToolResult { call_id, .. } => match open.iter().position(|c| c == call_id) {
                Some(at) => {
                    open.remove(at);
                }
                None => {
                    return Err(format!(
                        "messages.{i}: a tool result for `{call_id}` does not answer a tool \
                             call of the assistant message before it"
                    ));
                }
            },
            Message::User { .. } => {
                if !open.is_empty() {
                    return Err(unanswered(i, &open));
                }
            }
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(unanswered(messages.len(), &open))
    }
}

fn unanswered(at: usize, open: &[&str]) -> String {
    format!(
        "messages.{at}: an assistant message with tool calls must be followed by a result for \
         each call; these had none: {}",
        open.join(", ")
    )
}

/// Whether a request `body` of wire `format` keeps the pairing rules as
/// that API enforces them (see the module docs). `Err` carries the
/// API's kind of message.
pub fn check_wire(format: WireFormat, body: &Value) -> Result<(), String> {
    match format {
        WireFormat::OpenAiChat => check_chat(body),
        WireFormat::Anthropic => check_anthropic(body),
        WireFormat::OpenAiResponses => check_responses(body),
    }
}

/// The wire format a request path is for, by its end (`/chat/completions`,
/// `/responses`, `/messages`).
pub fn format_of_path(path: &str) -> Option<WireFormat> {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/chat/completions") {
        Some(WireFormat::OpenAiChat)
    } else if path.ends_with("/responses") {
        Some(WireFormat::OpenAiResponses)
    } else if path.ends_with("/messages") {
        Some(WireFormat::Anthropic)
    } else {
        None
    }
}

fn items<'a>(body: &'a Value, field: &str) -> Result<&'a [Value], String> {
    body.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| format!("`{field}` must be an array"))
}

/// Arguments of an earlier call that the server parses and refuses the
/// whole request over, as llama.cpp's server does (HTTP 500 "Failed to
/// parse tool call arguments as JSON").
fn check_arguments(at: &str, arguments: &Value) -> Result<(), String> {
    match arguments.as_str().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(_))) => Ok(()),
        _ => Err(format!(
            "{at}: Failed to parse tool call arguments as JSON: {}",
            arguments.to_string().chars().take(80).collect::<String>()
        )),
    }
}

fn check_chat(body: &Value) -> Result<(), String> {
    let messages = items(body, "messages")?;
    let mut open: Vec<&str> = Vec::new();
    // Roles alternate as strict chat templates require (Mistral's and
    // Gemma's raise "roles must alternate"): never two user or two
    // assistant messages in a row; tool results sit between an answer
    // and the next message.
    let mut last_role = "";
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if (role == "user" || role == "assistant") && role == last_role {
            return Err(format!(
                "messages[{i}]: Conversation roles must alternate user/assistant/user/assistant; \
                 two {role} messages follow each other"
            ));
        }
        if role != "system" {
            last_role = role;
        }
        if role == "assistant" {
            for (k, call) in m["tool_calls"].as_array().into_iter().flatten().enumerate() {
                check_arguments(
                    &format!("messages[{i}].tool_calls[{k}]"),
                    &call["function"]["arguments"],
                )?;
            }
        }
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            match open.iter().position(|c| *c == id) {
                Some(at) => {
                    open.remove(at);
                }
                None => {
                    return Err(format!(
                        "Invalid parameter: messages[{i}]: messages with role 'tool' must be a \
                         response to a preceding message with 'tool_calls' (tool_call_id {id:?})"
                    ));
                }
            }
            continue;
        }
        if !open.is_empty() {
            return Err(format!(
                "messages[{i}]: An assistant message with 'tool_calls' must be followed by tool \
                 messages responding to each 'tool_call_id'. The following tool_call_ids did \
                 not have response messages: {}",
                open.join(", ")
            ));
        }
        if role == "assistant" {
            open = m["tool_calls"]
                .as_array()
                .map(|calls| calls.iter().filter_map(|c| c["id"].as_str()).collect())
                .unwrap_or_default();
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages \
             responding to each 'tool_call_id'. The following tool_call_ids did not have \
             response messages: {}",
            open.join(", ")
        ))
    }
}

fn blocks(m: &Value) -> Vec<&Value> {
    match &m["content"] {
        Value::Array(blocks) => blocks.iter().collect(),
        _ => Vec::new(),
    }
}

fn check_anthropic(body: &Value) -> Result<(), String> {
    let messages = items(body, "messages")?;
    let mut asked: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if i == 0 && role != "user" {
            return Err("messages: the first message must use the \"user\" role".to_owned());
        }
        let content = blocks(m);
        let results: Vec<&str> = content
            .iter()
            .take_while(|b| b["type"] == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        if content
            .iter()
            .skip(results.len())
            .any(|b| b["type"] == "tool_result")
        {
            return Err(format!(
                "messages.{i}: `tool_result` blocks must come first in the message content, \
                 before any other block"
            ));
        }
        if role == "assistant" && !results.is_empty() {
            return Err(format!(
                "messages.{i}: `tool_result` blocks are only allowed in user messages"
            ));
        }
        if let Some(id) = results.iter().find(|id| !asked.contains(id)) {
            return Err(format!(
                "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: \
                 {id}. Each `tool_result` block must have a corresponding `tool_use` block in \
                 the previous message."
            ));
        }
        let missing: Vec<&str> = asked
            .iter()
            .filter(|id| !results.contains(id))
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks \
                 immediately after: {}. Each `tool_use` block must have a corresponding \
                 `tool_result` block in the next message.",
                missing.join(", ")
            ));
        }
        asked = if role == "assistant" {
            content
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .filter_map(|b| b["id"].as_str())
                .collect()
        } else {
            Vec::new()
        };
    }
    if asked.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "messages: `tool_use` ids were found without `tool_result` blocks immediately \
             after: {}",
            asked.join(", ")
        ))
    }
}

fn check_responses(body: &Value) -> Result<(), String> {
    let input = items(body, "input")?;
    // Calls not yet answered. Stricter than the API needs to be (it asks
    // only that each call has an output, and each output a call): nothing
    // else may come between a turn's calls and their outputs.
    let mut open: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        match item["type"].as_str() {
            Some("function_call") => {
                check_arguments(&format!("input[{i}]"), &item["arguments"])?;
                let id = item["call_id"].as_str().unwrap_or_default();
                if !seen.insert(id) {
                    return Err(format!("input[{i}]: duplicate function_call call_id {id}"));
                }
                open.push(id);
            }
            Some("function_call_output") => {
                let id = item["call_id"].as_str().unwrap_or_default();
                match open.iter().position(|c| *c == id) {
                    Some(at) => {
                        open.remove(at);
                    }
                    None => {
                        return Err(format!(
                            "input[{i}]: No tool call found for function call output with \
                             call_id {id}."
                        ));
                    }
                }
            }
            // Reasoning items precede the calls they led to.
            Some("reasoning") => {}
            _ => {
                if let Some(id) = open.first() {
                    return Err(format!(
                        "input[{i}]: No tool output found for function call {id}."
                    ));
                }
            }
        }
    }
    match open.first() {
        Some(id) => Err(format!("No tool output found for function call {id}.")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "fs__read".into(),
            arguments: "{}".into(),
        }
    }

    fn answer(ids: &[&str]) -> Message {
        Message::Assistant {
            text: None,
            tool_calls: ids.iter().map(|id| call(id)).collect(),
            reasoning: vec![],
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            call_id: id.into(),
            content: format!("out {id}"),
            is_error: false,
        }
    }

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    #[test]
    fn a_paired_conversation_is_left_alone() {
        let m = vec![
            user("goal"),
            answer(&["a", "b"]),
            result("a"),
            result("b"),
            user("note"),
            answer(&[]),
        ];
        assert_eq!(check_messages(&m), Ok(()));
        assert_eq!(repair(&m), None);
    }

    #[test]
    fn notes_between_calls_and_results_move_after_the_results() {
        let m = vec![
            user("goal"),
            answer(&["a", "b"]),
            user("note 1"),
            result("b"),
            user("note 2"),
            result("a"),
            answer(&["c"]),
            result("c"),
        ];
        assert!(check_messages(&m).is_err());
        let fixed = repair(&m).expect("repaired");
        assert_eq!(
            fixed,
            vec![
                user("goal"),
                answer(&["a", "b"]),
                result("a"),
                result("b"),
                user("note 1"),
                user("note 2"),
                answer(&["c"]),
                result("c"),
            ]
        );
        assert_eq!(check_messages(&fixed), Ok(()));
    }

    #[test]
    fn a_missing_result_is_answered_unknown_and_a_stray_one_becomes_text() {
        let m = vec![
            user("goal"),
            result("x"),
            answer(&["a", "b"]),
            result("a"),
            result("a"),
            user("note"),
        ];
        let fixed = repair(&m).expect("repaired");
        assert_eq!(check_messages(&fixed), Ok(()));
        assert!(matches!(&fixed[1], Message::User { text } if text.contains("`x`")));
        assert_eq!(fixed[3], result("a"));
        assert!(
            matches!(&fixed[4], Message::ToolResult { call_id, content, is_error: true } if call_id == "b" && content == NO_RESULT)
        );
        assert!(matches!(&fixed[5], Message::User { text } if text.contains("`a`")));
        assert_eq!(fixed[6], user("note"));
    }
}
