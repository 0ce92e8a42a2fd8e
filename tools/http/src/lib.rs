//! `http`: the built-in web tools — `get` (safe to repeat) and `fetch` (any
//! method).
//!
//! Two tools instead of one, because the effect belongs to the tool, not the
//! call: a GET is read-only and may be re-run after a crash, a POST may not.
//! One `fetch` with any method would have to claim `writes` for every call,
//! and every harmless GET would then come back from a crash as "outcome
//! unknown".
//!
//! The component asks for no hosts: which hosts a session may reach is the
//! operator's decision. A request to a host that was not granted comes back as
//! `access-denied` naming the host. Transport details (URL splitting, body
//! caps, error mapping) live in `longhand_sdk::http`; this crate only shapes
//! inputs and outputs for the model.

use std::collections::BTreeMap;

use longhand_sdk::http::{self, Request, Response};
use longhand_sdk::{Effect, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default cap on the response body returned to the model: 256 KiB.
const DEFAULT_MAX_BYTES: u64 = 256 * 1024;

fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}

/// Methods `get` accepts: the ones that do not change anything.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum SafeMethod {
    /// Fetch the resource.
    #[default]
    Get,
    /// Fetch only the status and headers.
    Head,
}

/// Input of `get`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetInput {
    /// Absolute `http://` or `https://` URL.
    url: String,
    /// `GET` (default) or `HEAD`.
    #[serde(default)]
    method: SafeMethod,
    /// Request headers, name to value.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Most body bytes to return; the rest is dropped and `truncated` is set.
    /// Default: 262144.
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 0, max = 16_777_216))]
    max_bytes: u64,
}

/// Input of `fetch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FetchInput {
    /// Absolute `http://` or `https://` URL.
    url: String,
    /// HTTP method, e.g. `POST`, `PUT`, `PATCH`, `DELETE`. Default: `GET`.
    #[serde(default = "default_method")]
    method: String,
    /// Request headers, name to value; set `content-type` for a body.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Request body, sent as UTF-8 text.
    body: Option<String>,
    /// Most body bytes to return; the rest is dropped and `truncated` is set.
    /// Default: 262144.
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 0, max = 16_777_216))]
    max_bytes: u64,
}

fn default_method() -> String {
    "GET".to_owned()
}

/// Output of both tools.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct FetchOutput {
    status: u16,
    /// Response headers, lowercase names; repeated headers joined with `, `.
    headers: BTreeMap<String, String>,
    /// The body as text; bytes that are not UTF-8 are replaced by U+FFFD.
    body: String,
    /// True if the body was longer than `max_bytes` and was cut.
    truncated: bool,
}

impl From<Response> for FetchOutput {
    fn from(response: Response) -> Self {
        let body = response.text().into_owned();
        let mut headers = BTreeMap::<String, String>::new();
        for (name, value) in response.headers {
            headers
                .entry(name.to_ascii_lowercase())
                .and_modify(|joined| {
                    joined.push_str(", ");
                    joined.push_str(&value);
                })
                .or_insert(value);
        }
        Self {
            status: response.status,
            headers,
            body,
            truncated: response.truncated,
        }
    }
}

fn send(
    method: &str,
    url: String,
    headers: BTreeMap<String, String>,
    body: Option<String>,
    max_bytes: u64,
) -> Result<FetchOutput, ToolError> {
    let request = Request {
        method: method.to_owned(),
        url,
        headers: headers.into_iter().collect(),
        body: body.map(String::into_bytes),
        max_body_bytes: max_bytes,
    };
    http::fetch(&request).map(FetchOutput::from)
}

/// The `get` tool.
pub(crate) struct Get;

impl Tool for Get {
    const NAME: &'static str = "get";
    const DESCRIPTION: &'static str = "HTTP GET (or HEAD) a URL and return status, headers and \
        the body as text, capped at `max_bytes` (default 256 KiB). Redirects are not followed: \
        a 3xx comes back with its `location` header. Any status is a result, not an error. \
        Only hosts the operator granted are reachable; others fail with access-denied.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = GetInput;
    type Output = FetchOutput;

    fn call(input: GetInput) -> Result<FetchOutput, ToolError> {
        let method = match input.method {
            SafeMethod::Get => "GET",
            SafeMethod::Head => "HEAD",
        };
        send(method, input.url, input.headers, None, input.max_bytes)
    }
}

/// The `fetch` tool.
pub(crate) struct Fetch;

impl Tool for Fetch {
    const NAME: &'static str = "fetch";
    const DESCRIPTION: &'static str = "Send an HTTP request with any method (POST, PUT, PATCH, \
        DELETE, ...) and an optional text body; returns status, headers and the body as text, \
        capped at `max_bytes` (default 256 KiB). Not safe to repeat: use `get` to read. \
        Redirects are not followed. Only hosts the operator granted are reachable.";
    const EFFECT: Effect = Effect::Writes;
    type Input = FetchInput;
    type Output = FetchOutput;

    fn call(input: FetchInput) -> Result<FetchOutput, ToolError> {
        send(
            &input.method,
            input.url,
            input.headers,
            input.body,
            input.max_bytes,
        )
    }
}

longhand_sdk::export! {
    name: "http",
    description: "Make HTTP requests to the hosts the operator grants.",
    tools: [Get, Fetch],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_headers_are_joined() {
        let out = FetchOutput::from(Response {
            status: 200,
            headers: vec![
                ("Set-Cookie".into(), "a=1".into()),
                ("set-cookie".into(), "b=2".into()),
                ("content-type".into(), "text/plain".into()),
            ],
            body: b"ok \xff".to_vec(),
            truncated: false,
        });
        assert_eq!(out.headers["set-cookie"], "a=1, b=2");
        assert_eq!(out.headers["content-type"], "text/plain");
        assert_eq!(out.body, "ok \u{fffd}");
    }

    #[test]
    fn get_accepts_only_safe_methods() {
        let input: Result<GetInput, _> =
            serde_json::from_str(r#"{"url": "https://example.com", "method": "POST"}"#);
        assert!(input.is_err());
        let input: GetInput =
            serde_json::from_str(r#"{"url": "https://example.com", "method": "HEAD"}"#).unwrap();
        assert!(matches!(input.method, SafeMethod::Head));
    }

    #[test]
    fn bad_urls_fail_before_any_request() {
        let err = Get::call(GetInput {
            url: "example.com".into(),
            method: SafeMethod::Get,
            headers: BTreeMap::new(),
            max_bytes: 10,
        })
        .unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(_)));
    }
}
