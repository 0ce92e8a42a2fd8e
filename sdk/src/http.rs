//! Blocking HTTP for tools, over the `wasi:http/outgoing-handler` import.
//!
//! [`fetch`] sends one request and reads the response body up to a cap. It
//! owns three decisions tool authors should not have to make again:
//!
//! * **Errors say who acts.** A host the operator has not granted comes back
//!   from the host as `HTTP-request-denied`; that becomes
//!   [`ToolError::AccessDenied`] naming the host, so the model asks for a grant
//!   instead of retrying. Network failures become [`ToolError::Failed`] with
//!   the host named; a malformed URL, method or header is
//!   [`ToolError::InvalidInput`].
//! * **Bodies are capped.** The body is read up to `max_body_bytes` and the
//!   rest is left unread; [`Response::truncated`] says so. A tool's output ends
//!   up in a model's context, and nothing there needs a 2 GB download.
//! * **Request bodies have a length.** A body is sent with `content-length`, so
//!   the host does not fall back to chunked encoding, which some servers refuse.
//!
//! It does not follow redirects (the tool sees the 3xx and its `location`), does
//! not decompress, and does not accept credentials in the URL: secrets are the
//! host's to add, by name, to requests it lets through.
//!
//! Only a component running in a Longhand host can send requests. Compiled for
//! another target (unit tests), [`fetch`] validates the request and then
//! returns [`ToolError::Failed`].

use std::borrow::Cow;

use crate::ToolError;
use crate::bindings::wasi::http::outgoing_handler;
use crate::bindings::wasi::http::types::{
    self as wasi_http, ErrorCode, Fields, HeaderError, IncomingBody, Method, OutgoingBody,
    OutgoingRequest, Scheme,
};
use crate::bindings::wasi::io::streams::StreamError;

/// Default cap on the response body: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1 << 20;

/// `blocking-write-and-flush` accepts at most this many bytes per call.
const WRITE_CHUNK: usize = 4096;

/// How much to ask for per read while draining a response body.
const READ_CHUNK: u64 = 64 * 1024;

/// An HTTP request. Build one with [`Request::new`] or [`Request::get`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method, e.g. `GET`; case-insensitive.
    pub method: String,
    /// An absolute `http://` or `https://` URL. Non-ASCII characters and
    /// spaces in the path and query are percent-encoded; the fragment is not
    /// sent.
    pub url: String,
    /// Header names and values, sent in order.
    pub headers: Vec<(String, String)>,
    /// The body, if any. Sent with a `content-length` header.
    pub body: Option<Vec<u8>>,
    /// The most body bytes to read from the response; the rest is dropped and
    /// [`Response::truncated`] is set. Default [`DEFAULT_MAX_BODY_BYTES`].
    pub max_body_bytes: u64,
}

impl Request {
    /// A request with no headers and no body.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets the response body cap.
    pub fn max_body_bytes(mut self, max: u64) -> Self {
        self.max_body_bytes = max;
        self
    }
}

/// An HTTP response, with its body read up to the request's cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase, as the host reports them) and values; values
    /// that are not UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The body, at most `max_body_bytes` long.
    pub body: Vec<u8>,
    /// True if the body was longer than `max_body_bytes` and was cut.
    pub truncated: bool,
}

impl Response {
    /// The body as text, with invalid UTF-8 replaced by U+FFFD.
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` and waits for the response.
///
/// A response with any status is `Ok`: a 404 or a 500 is information for the
/// tool to pass on, not a failure of the transport.
pub fn fetch(request: &Request) -> Result<Response, ToolError> {
    let method = normalize_method(&request.method)?;
    let target = Target::parse(&request.url)?;
    if !cfg!(target_arch = "wasm32") {
        return Err(ToolError::failed(
            "HTTP requests can only be sent by a component running in a Longhand host",
        ));
    }
    send(request, &method, &target)
}

/// The parts of a URL that `wasi:http` wants separately.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    https: bool,
    authority: String,
    path_with_query: String,
}

impl Target {
    fn parse(url: &str) -> Result<Self, ToolError> {
        let bad = |why: &str| ToolError::invalid_input(format!("`url` {url:?}: {why}"));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("must start with http:// or https://"))?;
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return Err(bad("only http:// and https:// URLs are supported"));
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(bad(
                "must not carry credentials (user@host); the host adds granted secrets itself",
            ));
        }
        check_authority(authority).map_err(bad)?;
        let tail = tail.split_once('#').map_or(tail, |(before, _)| before);
        let mut path_with_query = percent_encode_loose(tail);
        if !path_with_query.starts_with('/') {
            path_with_query.insert(0, '/');
        }
        Ok(Self {
            https,
            authority: authority.to_owned(),
            path_with_query,
        })
    }
}

/// Checks `host[:port]`, where host is a DNS name, an IPv4 address or an IPv6
/// address in brackets.
fn check_authority(authority: &str) -> Result<(), &'static str> {
    if authority.is_empty() {
        return Err("has no host");
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or("has an unclosed `[`")?;
        if v6.is_empty()
            || !v6
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return Err("has an invalid IPv6 address");
        }
        match after {
            "" => (v6, None),
            _ => (
                v6,
                Some(after.strip_prefix(':').ok_or("has text after `]`")?),
            ),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err("has an invalid port");
    }
    if host.is_empty() {
        return Err("has no host");
    }
    if !authority.starts_with('[')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        return Err(
            "host must be ASCII letters, digits, `-` and `.` (give internationalized names in punycode)",
        );
    }
    Ok(())
}

/// Percent-encodes the bytes a URL path or query may not contain literally
/// (controls, space, non-ASCII, and `"<>\^`{|}`), leaving everything else,
/// including existing `%XX` escapes, as given. Models write URLs with spaces
/// and accents; rejecting those would only cost a round trip.
fn percent_encode_loose(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b <= b' ' || b >= 0x7f || b"\"<>\\^`{|}".contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

/// Uppercases the method and checks it is an HTTP token.
fn normalize_method(method: &str) -> Result<String, ToolError> {
    let is_tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(ToolError::invalid_input(format!(
            "`method` {method:?} is not an HTTP method"
        )));
    }
    Ok(method.to_ascii_uppercase())
}

fn wasi_method(method: &str) -> Method {
    match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_owned()),
    }
}

/// The `wasi:http` dance: build the request, hand it to the host, stream the
/// body out, wait for the response, stream its body in.
///
/// Resource handles are dropped children-first (a stream before its body, a
/// body before its response): the host traps on a parent dropped while a
/// child is alive.
fn send(request: &Request, method: &str, target: &Target) -> Result<Response, ToolError> {
    let host = target.authority.as_str();
    let mut entries: Vec<(String, Vec<u8>)> = request
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone().into_bytes()))
        .collect();
    if let Some(body) = &request.body
        && !request
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        entries.push((
            "content-length".to_owned(),
            body.len().to_string().into_bytes(),
        ));
    }
    let headers = Fields::from_list(&entries).map_err(header_error)?;

    let outgoing = OutgoingRequest::new(headers);
    let invalid = |what: &str| ToolError::invalid_input(format!("the host refused the {what}"));
    outgoing
        .set_method(&wasi_method(method))
        .map_err(|()| invalid("method"))?;
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| invalid("scheme"))?;
    outgoing
        .set_authority(Some(host))
        .map_err(|()| invalid("host"))?;
    outgoing
        .set_path_with_query(Some(&target.path_with_query))
        .map_err(|()| invalid("path"))?;

    // Take the body handle before `handle` consumes the request; write it
    // only after, since the host starts draining it once the request is sent.
    let outgoing_body = match &request.body {
        Some(_) => Some(
            outgoing
                .body()
                .map_err(|()| ToolError::failed("the request body was already taken"))?,
        ),
        None => None,
    };
    let future = outgoing_handler::handle(outgoing, None).map_err(|code| error_code(code, host))?;
    if let (Some(body), Some(bytes)) = (outgoing_body, &request.body) {
        write_body(body, bytes, host)?;
    }

    future.subscribe().block();
    let incoming = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(error_code(code, host)),
        Some(Err(())) => return Err(ToolError::failed("the response was already taken")),
        None => {
            return Err(ToolError::failed(
                "the response was not ready after waiting",
            ));
        }
    };
    drop(future);

    let status = incoming.status();
    let header_fields = incoming.headers();
    let headers = header_fields
        .entries()
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    drop(header_fields);

    let body = incoming
        .consume()
        .map_err(|()| ToolError::failed("the response body was already taken"))?;
    let (bytes, truncated) = read_body(&body, request.max_body_bytes, host)?;
    drop(IncomingBody::finish(body));
    drop(incoming);

    Ok(Response {
        status,
        headers,
        body: bytes,
        truncated,
    })
}

fn write_body(body: OutgoingBody, bytes: &[u8], host: &str) -> Result<(), ToolError> {
    let stream = body
        .write()
        .map_err(|()| ToolError::failed("the request body stream was already taken"))?;
    for chunk in bytes.chunks(WRITE_CHUNK) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| stream_error(e, host))?;
    }
    drop(stream);
    OutgoingBody::finish(body, None).map_err(|code| error_code(code, host))
}

/// Reads at most `max` bytes, asking for one more to learn whether the body
/// was longer.
fn read_body(body: &IncomingBody, max: u64, host: &str) -> Result<(Vec<u8>, bool), ToolError> {
    let stream = body
        .stream()
        .map_err(|()| ToolError::failed("the response body stream was already taken"))?;
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut truncated = false;
    loop {
        let wanted = (max.saturating_add(1) - bytes.len() as u64).min(READ_CHUNK);
        match stream.blocking_read(wanted) {
            Ok(chunk) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > limit {
                    bytes.truncate(limit);
                    truncated = true;
                    break;
                }
            }
            Err(StreamError::Closed) => break,
            Err(e) => return Err(stream_error(e, host)),
        }
    }
    drop(stream);
    Ok((bytes, truncated))
}

fn stream_error(error: StreamError, host: &str) -> ToolError {
    match error {
        StreamError::Closed => ToolError::failed(format!("{host}: the connection was closed")),
        StreamError::LastOperationFailed(e) => match wasi_http::http_error_code(&e) {
            Some(code) => error_code(code, host),
            None => ToolError::failed(format!("{host}: {}", e.to_debug_string())),
        },
    }
}

fn header_error(error: HeaderError) -> ToolError {
    ToolError::invalid_input(match error {
        HeaderError::InvalidSyntax => "`headers`: a header name or value is not valid HTTP",
        HeaderError::Forbidden => {
            "`headers`: a header is not allowed (the host sets hop-by-hop headers such as \
             host, connection and transfer-encoding itself)"
        }
        HeaderError::Immutable => "`headers`: the header list cannot be changed",
    })
}

/// Classifies a `wasi:http` error code: who acts, and what to tell the model.
fn error_code(code: ErrorCode, host: &str) -> ToolError {
    use ErrorCode as E;
    let failed = |what: &str| ToolError::failed(format!("{host}: {what}"));
    match code {
        E::HttpRequestDenied => ToolError::access_denied(
            host,
            "outgoing HTTP requests to this host are not granted to this tool",
        ),
        E::DestinationIpProhibited => {
            ToolError::access_denied(host, "the host resolves to an address that is not allowed")
        }
        E::DnsTimeout => failed("DNS lookup timed out"),
        E::DnsError(p) => failed(&format!(
            "DNS lookup failed{}",
            p.rcode.map(|r| format!(" ({r})")).unwrap_or_default()
        )),
        E::DestinationNotFound => failed("no such host"),
        E::DestinationUnavailable | E::DestinationIpUnroutable => failed("host unreachable"),
        E::ConnectionRefused => failed("connection refused"),
        E::ConnectionTerminated => failed("the connection closed unexpectedly"),
        E::ConnectionTimeout => failed("timed out connecting"),
        E::ConnectionReadTimeout | E::HttpResponseTimeout => {
            failed("timed out waiting for the response")
        }
        E::ConnectionWriteTimeout => failed("timed out sending the request"),
        E::ConnectionLimitReached => failed("too many connections"),
        E::TlsProtocolError => failed("TLS handshake failed"),
        E::TlsCertificateError => failed("the server's TLS certificate was rejected"),
        E::TlsAlertReceived(p) => failed(&format!(
            "the server sent a TLS alert{}",
            p.alert_message
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )),
        E::HttpRequestMethodInvalid => ToolError::invalid_input("`method` is not valid"),
        E::HttpRequestUriInvalid => ToolError::invalid_input("`url` is not valid"),
        E::HttpRequestUriTooLong => ToolError::invalid_input("`url` is too long"),
        E::HttpRequestBodySize(_) => ToolError::invalid_input("the request body is too large"),
        E::HttpRequestHeaderSectionSize(_) | E::HttpRequestHeaderSize(_) => {
            ToolError::invalid_input("`headers` are too large")
        }
        E::HttpResponseBodySize(_) => failed("the response body exceeds the host's limit"),
        E::InternalError(Some(message)) => failed(&message),
        other => failed(&format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn urls_split_into_wasi_parts() {
        assert_eq!(
            target("https://api.example.com/v1/items?page=2#top"),
            Target {
                https: true,
                authority: "api.example.com".into(),
                path_with_query: "/v1/items?page=2".into(),
            }
        );
        let t = target("HTTP://localhost:8080");
        assert!(!t.https);
        assert_eq!(t.authority, "localhost:8080");
        assert_eq!(t.path_with_query, "/");
        assert_eq!(target("http://h?q=1").path_with_query, "/?q=1");
        assert_eq!(target("http://[::1]:80/").authority, "[::1]:80");
    }

    #[test]
    fn paths_are_percent_encoded_loosely() {
        assert_eq!(
            target("https://example.com/a b/é?q=x y&r=%20").path_with_query,
            "/a%20b/%C3%A9?q=x%20y&r=%20"
        );
    }

    #[test]
    fn bad_urls_are_invalid_input() {
        for url in [
            "example.com",
            "ftp://example.com/",
            "https:///path",
            "https://user:pw@example.com/",
            "https://exa mple.com/",
            "https://exämple.com/",
            "https://example.com:port/",
            "https://example.com:/",
            "https://[::1/",
        ] {
            assert!(
                matches!(Target::parse(url), Err(ToolError::InvalidInput(_))),
                "{url} should be rejected"
            );
        }
    }

    #[test]
    fn methods_are_tokens() {
        assert_eq!(normalize_method("get").unwrap(), "GET");
        assert_eq!(normalize_method("PROPFIND").unwrap(), "PROPFIND");
        assert!(normalize_method("").is_err());
        assert!(normalize_method("GET /").is_err());
        assert!(matches!(wasi_method("PATCH"), Method::Patch));
        assert!(matches!(wasi_method("PROPFIND"), Method::Other(m) if m == "PROPFIND"));
    }

    #[test]
    fn denied_hosts_are_access_denied() {
        assert_eq!(
            error_code(ErrorCode::HttpRequestDenied, "example.com"),
            ToolError::access_denied(
                "example.com",
                "outgoing HTTP requests to this host are not granted to this tool"
            )
        );
        assert_eq!(
            error_code(ErrorCode::ConnectionRefused, "localhost:1"),
            ToolError::failed("localhost:1: connection refused")
        );
    }

    #[test]
    fn native_fetch_fails_honestly() {
        let err = fetch(&Request::get("https://example.com/")).unwrap_err();
        assert!(matches!(err, ToolError::Failed(_)));
        let err = fetch(&Request::get("nope")).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(_)));
    }
}
