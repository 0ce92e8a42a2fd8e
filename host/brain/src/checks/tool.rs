//! The predicate of a `tool` check: a jq expression over the JSON output of
//! a sandboxed tool call, which must yield true.
//!
//! The expression may come from a planner model, so it is hostile input: it
//! can loop forever (`repeat(1)`), allocate without bound or crash the
//! evaluator. It is therefore never evaluated in the host. It runs inside
//! the sandbox, as a call of the built-in `json` component's `query` tool
//! (jaq), with no grant but tight limits ([`LIMITS`]): a bad expression
//! costs at most one short sandboxed call and fails its check.
//!
//! The rule: the check passes iff the expression yields **at least one
//! result and every result is JSON `true`**. No result, `false`, a
//! non-boolean (`1`, `"true"`), a mix, more than [`MAX_RESULTS`] results,
//! or an error raised while evaluating all fail. So `.ok`, `.items | length
//! > 0` and `all(.tests[]; .passed)` read the way they look, and a filter
//! like `.[]` on an empty array cannot pass by saying nothing.
//!
//! This module owns the verdict and the split between the expression's
//! fault and the host's; running the checked tool call itself is the
//! caller's (with that tool's own grants).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use longhand_hands::{CallError, Grants, Hands, Limits, ToolSource};

/// Most results an expression may yield. A predicate says one thing; a
/// stream longer than this fails the check without being read further.
pub const MAX_RESULTS: u64 = 16;

/// Characters kept of a verdict's or an error's detail: enough for a jq
/// error and a few values, small enough for an event and the worker's next
/// context.
pub const MAX_DETAIL_CHARS: usize = 2000;

/// The limits of one evaluation: 2 s of wall time, 64 MiB of memory,
/// 2 billion fuel (about a second of computation), 256 KiB of output. A
/// predicate over a tool's output (at most 1 MiB by default) needs a few
/// milliseconds and a few megabytes.
pub const LIMITS: Limits = Limits {
    memory_bytes: 64 << 20,
    timeout: Duration::from_secs(2),
    fuel: 2_000_000_000,
    max_output_bytes: 256 << 10,
    max_http_response_bytes: 0,
    max_stdio_bytes: 4 << 10,
    max_http_requests: 0,
    max_write_bytes: 0,
    max_host_bytes: None,
    // The json evaluator is granted no program; these bound nothing.
    command_memory_bytes: 1 << 20,
    processes: 1,
};

/// Whether the predicate held, and what the expression yielded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// At least one result, and every result `true`.
    pub holds: bool,
    /// What it yielded (`true`; `false`; `no result`; `2 results: true,
    /// 1`), or the error it raised, cut to [`MAX_DETAIL_CHARS`].
    pub detail: String,
}

/// Why a predicate has no verdict. Each fails its check; they differ in
/// who acts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PredicateError {
    /// The expression does not parse or names an undefined filter. Whoever
    /// wrote it (planner, operator) fixes it; feed the message back.
    #[error("the check's jq expression does not compile: {message}")]
    Compile {
        /// jq's error, with the column; cut to [`MAX_DETAIL_CHARS`].
        message: String,
    },
    /// The sandbox stopped the evaluation: a limit of [`LIMITS`] (an
    /// endless or runaway expression, an output too large) or a crash of
    /// the evaluator. The expression is at fault, as above.
    #[error("the check's jq expression was stopped: {message}")]
    Stopped {
        /// Which limit, or the crash; cut to [`MAX_DETAIL_CHARS`].
        message: String,
    },
    /// The host could not evaluate at all (the `json` component did not
    /// load, no instance slot). Says nothing about the work or the
    /// expression: retry later, or abort.
    #[error("cannot evaluate the check's jq expression: {message}")]
    Host {
        /// Why.
        message: String,
    },
}

/// Evaluate `expr` on `value` in the sandbox and judge the results by the
/// rule in the module docs. A runtime error of the expression (`.a` of a
/// string, `error("x")`) is a verdict that does not hold, with the error
/// as its detail: it is a fact about this value.
pub async fn predicate_holds(
    hands: &Hands,
    expr: &str,
    value: &Value,
) -> Result<Verdict, PredicateError> {
    let results = match evaluate(hands, expr, value).await? {
        Evaluated::Results { results, truncated } => (results, truncated),
        Evaluated::Raised(message) => {
            return Ok(Verdict {
                holds: false,
                detail: cut(&format!("the expression raised an error: {message}")),
            });
        }
    };
    Ok(judge(&results.0, results.1))
}

/// Check that `expr` compiles, for a plan validator: it is evaluated on
/// `null` under the same limits and only a compile error (or a host fault)
/// is reported; an expression that fails or loops on `null` passes here
/// and fails its check later.
pub async fn validate_predicate(hands: &Hands, expr: &str) -> Result<(), PredicateError> {
    match evaluate(hands, expr, &Value::Null).await {
        Ok(_) | Err(PredicateError::Stopped { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

enum Evaluated {
    Results {
        results: Vec<Value>,
        truncated: bool,
    },
    Raised(String),
}

async fn evaluate(hands: &Hands, expr: &str, value: &Value) -> Result<Evaluated, PredicateError> {
    let json_tool =
        hands
            .load(ToolSource::Builtin("json"))
            .await
            .map_err(|e| PredicateError::Host {
                message: cut(&e.to_string()),
            })?;
    let grants = Grants {
        limits: LIMITS,
        ..Grants::default()
    };
    let input = json!({ "filter": expr, "input": value, "max_results": MAX_RESULTS });
    let outcome = hands.call(&json_tool, &grants, "query", &input).await;
    match outcome.result {
        Ok(output) => {
            let truncated = output.get("truncated") == Some(&Value::Bool(true));
            match output.get("results") {
                Some(Value::Array(results)) => Ok(Evaluated::Results {
                    results: results.clone(),
                    truncated,
                }),
                _ => Err(PredicateError::Host {
                    message: cut(&format!("the json component answered {output}")),
                }),
            }
        }
        Err(CallError::InvalidInput { message }) if is_compile_error(&message) => {
            Err(PredicateError::Compile {
                message: cut(&message),
            })
        }
        Err(CallError::InvalidInput { message } | CallError::Failed { message }) => {
            Ok(Evaluated::Raised(message))
        }
        Err(e @ (CallError::Limit { .. } | CallError::Crashed { .. })) => {
            Err(PredicateError::Stopped {
                message: cut(&e.to_string()),
            })
        }
        Err(e) => Err(PredicateError::Host {
            message: cut(&e.to_string()),
        }),
    }
}

/// The `json` component reports a lexer or parser error as "`filter` does
/// not parse: …" and an undefined name as "`filter`: undefined …"; a
/// runtime error is "`filter`: " and jaq's text, where a value raised by
/// `error(..)` is printed as JSON (quoted), so it cannot pose as either.
fn is_compile_error(message: &str) -> bool {
    message.starts_with("`filter` does not parse") || message.starts_with("`filter`: undefined ")
}

fn judge(results: &[Value], truncated: bool) -> Verdict {
    if truncated {
        return Verdict {
            holds: false,
            detail: cut(&format!(
                "more than {MAX_RESULTS} results (a predicate should yield one boolean): {}",
                list(results)
            )),
        };
    }
    let holds = !results.is_empty() && results.iter().all(|r| *r == Value::Bool(true));
    let detail = match results {
        [] => "no result".to_owned(),
        [one] => one.to_string(),
        many => format!("{} results: {}", many.len(), list(many)),
    };
    Verdict {
        holds,
        detail: cut(&detail),
    }
}

fn list(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `text` cut to [`MAX_DETAIL_CHARS`] characters, saying how much was cut.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_DETAIL_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({} more bytes cut)", &text[..at], text.len() - at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        let t = Value::Bool(true);
        assert!(judge(std::slice::from_ref(&t), false).holds);
        assert!(judge(&[t.clone(), t.clone()], false).holds);
        assert!(!judge(&[], false).holds);
        assert!(!judge(&[json!(false)], false).holds);
        assert!(!judge(&[json!(1)], false).holds);
        assert!(!judge(&[json!("true")], false).holds);
        assert!(!judge(&[t.clone(), json!(false)], false).holds);
        assert!(!judge(&vec![t; MAX_RESULTS as usize], true).holds);
        assert_eq!(judge(&[], false).detail, "no result");
        assert_eq!(
            judge(&[json!(true), json!(1)], false).detail,
            "2 results: true, 1"
        );
    }

    #[test]
    fn details_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_DETAIL_CHARS + 10);
        let c = cut(&long);
        assert!(c.starts_with(&"é".repeat(MAX_DETAIL_CHARS)));
        assert!(c.ends_with("(20 more bytes cut)"), "{c}");
        assert_eq!(cut("short"), "short");
    }
}
