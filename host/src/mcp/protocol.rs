//! JSON-RPC 2.0 as MCP uses it, and the protocol versions this server
//! speaks.
//!
//! One message per frame (a stdio line, an HTTP body). Batches (arrays)
//! were allowed by 2025-03-26 only and are refused: no client we know sends
//! them, and one message per frame keeps cancellation and the HTTP answer
//! shape simple.

use serde_json::{Value, json};

/// The newest revision, answered to a client that asks for one we do not
/// speak.
pub const LATEST_VERSION: &str = "2025-11-25";

/// Every revision spoken, newest first. They differ, for what this server
/// offers, only in tool annotations (from 2025-03-26 on) and
/// `structuredContent` (from 2025-06-18 on).
pub const VERSIONS: [&str; 4] = [LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version assumed for an HTTP request that carries no
/// `MCP-Protocol-Version` header, as the transport spec says.
pub const HTTP_DEFAULT_VERSION: &str = "2025-03-26";

/// The version a server answers `initialize` with: the client's when we
/// speak it, else our latest (the client then decides whether to go on).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| VERSIONS.iter().find(|v| **v == r))
        .copied()
        .unwrap_or(LATEST_VERSION)
}

/// Whether `version` has tool annotations.
pub fn has_annotations(version: &str) -> bool {
    version != "2024-11-05"
}

/// Whether `version` has `structuredContent` in tool results.
pub fn has_structured_content(version: &str) -> bool {
    !matches!(version, "2024-11-05" | "2025-03-26")
}

/// JSON-RPC error codes used here.
pub mod code {
    /// The frame is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a JSON-RPC request (or not allowed now: before
    /// `initialize`, or a second `initialize`).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method, or a capability not offered.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Params of the wrong shape, or an unknown tool.
    pub const INVALID_PARAMS: i64 = -32602;
}

/// One parsed incoming message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// Has an id: a response is owed.
    Request {
        /// A string or a number, echoed back as given.
        id: Value,
        /// The method.
        method: String,
        /// Params (`null` when absent).
        params: Value,
    },
    /// No id: nothing is answered.
    Notification {
        /// The method.
        method: String,
        /// Params (`null` when absent).
        params: Value,
    },
    /// A response to a request of ours. This server sends none, so it is
    /// ignored.
    Response,
}

/// A message that could not be taken: the error response to send (its id
/// is the request's when one could be read, else `null`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused(pub Value);

/// Parse one frame.
pub fn parse(frame: &[u8]) -> Result<Incoming, Refused> {
    let value: Value = serde_json::from_slice(frame).map_err(|e| {
        Refused(error(
            Value::Null,
            code::PARSE_ERROR,
            format!("not JSON: {e}"),
        ))
    })?;
    classify(value)
}

/// Classify a parsed JSON value.
pub fn classify(value: Value) -> Result<Incoming, Refused> {
    let invalid = |id: Value, why: &str| Refused(error(id, code::INVALID_REQUEST, why.to_owned()));
    let Value::Object(mut map) = value else {
        return Err(invalid(
            Value::Null,
            if value.is_array() {
                "batches are not supported: send one message per frame"
            } else {
                "a JSON-RPC message is an object"
            },
        ));
    };
    let id = map.remove("id");
    // An id must be a string or a number; `null` is not an id MCP allows.
    if let Some(id) = &id
        && !(id.is_string() || id.is_number())
    {
        return Err(invalid(Value::Null, "`id` must be a string or a number"));
    }
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(
            id.unwrap_or(Value::Null),
            "`jsonrpc` must be \"2.0\"",
        ));
    }
    let params = map.remove("params").unwrap_or(Value::Null);
    match (map.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), id) => Err(invalid(
            id.unwrap_or(Value::Null),
            "`method` must be a string",
        )),
        (None, Some(_)) if map.contains_key("result") || map.contains_key("error") => {
            Ok(Incoming::Response)
        }
        (None, id) => Err(invalid(id.unwrap_or(Value::Null), "no `method`")),
    }
}

/// A success response.
pub fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A request id as a map key: `1` and `"1"` are different ids.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_negotiate_as_the_spec_says() {
        for v in VERSIONS {
            assert_eq!(negotiate(Some(v)), v);
        }
        assert_eq!(negotiate(Some("2026-07-28")), LATEST_VERSION);
        assert_eq!(negotiate(Some("1999-01-01")), LATEST_VERSION);
        assert_eq!(negotiate(None), LATEST_VERSION);
        assert!(!has_annotations("2024-11-05"));
        assert!(has_annotations("2025-03-26"));
        assert!(!has_structured_content("2025-03-26"));
        assert!(has_structured_content("2025-06-18"));
    }

    #[test]
    fn frames_are_classified() {
        let req = parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap();
        assert_eq!(
            req,
            Incoming::Request {
                id: json!(7),
                method: "ping".into(),
                params: Value::Null
            }
        );
        let note = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let resp = parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(resp, Incoming::Response);
        let code_of = |frame: &[u8]| parse(frame).unwrap_err().0["error"]["code"].clone();
        assert_eq!(code_of(b"{not json"), json!(code::PARSE_ERROR));
        assert_eq!(code_of(b"[]"), json!(code::INVALID_REQUEST));
        assert_eq!(
            code_of(br#"{"id":1,"method":"ping"}"#),
            json!(code::INVALID_REQUEST)
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            json!(code::INVALID_REQUEST)
        );
        // The id is echoed when it could be read.
        let refused = parse(br#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#).unwrap_err();
        assert_eq!(refused.0["id"], json!("x"));
        assert_ne!(id_key(&json!(1)), id_key(&json!("1")));
    }
}
