//! The Streamable HTTP transport: one endpoint, `/mcp`.
//!
//! - `POST` takes one JSON-RPC message. `initialize` creates a session and
//!   answers with its `Mcp-Session-Id`; every later message must carry it
//!   (missing: 400, unknown or ended: 404). A notification or response is
//!   answered `202 Accepted`; a `tools/call` with an SSE stream (when the
//!   client accepts one) carrying its progress and then its result; any
//!   other request with JSON.
//! - `GET` is `405`: the server sends nothing unasked, so there is no
//!   stream to open.
//! - `DELETE` ends the session and stops its calls.
//!
//! Checks, in order, before anything is handled: the `Host` header must
//! name a loopback host; an `Origin`, when sent, must be this server's own
//! origin (`http(s)://` + the `Host` header, port included) or one the
//! operator allowed, and a `Sec-Fetch-Site`, when sent, must say
//! `same-origin` or `none` unless the origin was allowed (403 otherwise:
//! DNS rebinding and cross-site defence, as the spec asks — a page served
//! from another port of this machine is another site); a `POST` must say
//! `Content-Type: application/json` (415), so no HTML form or `text/plain`
//! request a browser sends without asking can reach a tool; an `MCP-Protocol-Version` header must be a
//! version we speak and, on a session, the one it agreed (400).
//!
//! A dropped connection stops the call it was waiting for. The spec says a
//! disconnect should not by itself be read as cancellation, because a
//! client may resume the stream; this server offers no resumption (no
//! event ids), so the result would have nowhere to go and the call would
//! only hold a sandbox slot until its timeout.
//!
//! Where it listens is the caller's choice; the CLI refuses anything but
//! loopback, since there is no authentication here.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::protocol::{self, Incoming, code};
use super::server::{Outbox, Server, Session};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use longhand_hands::bound;
use serde_json::Value;

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The version header.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// Sessions open at once. A session lives until `DELETE`, or until an
/// `initialize` finds this many open: then the one used least recently
/// with no call in flight is ended (its client gets 404 and, as the spec
/// says, initializes again), and if every session has a call in flight the
/// `initialize` is answered 503. A client that died without `DELETE` so
/// costs a slot only until it is needed.
pub const MAX_SESSIONS: usize = 256;

/// A session and when a request last named it.
struct Entry {
    session: Arc<Session>,
    used: Instant,
}

struct App {
    server: Arc<Server>,
    sessions: Mutex<HashMap<String, Entry>>,
    origins: Vec<String>,
}

/// The `/mcp` router. `origins` are browser origins allowed besides the
/// server's own (default none).
pub fn router(server: Arc<Server>, origins: Vec<String>) -> Router {
    let app = Arc::new(App {
        server,
        sessions: Mutex::new(HashMap::new()),
        origins,
    });
    Router::new()
        .route("/mcp", post(on_post).get(on_get).delete(on_delete))
        .with_state(app)
}

/// Serve on `listener` until `stop` resolves; then return at once,
/// dropping open connections (and so stopping their calls).
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Arc<Server>,
    origins: Vec<String>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tokio::select! {
        served = axum::serve(listener, router(server, origins)).into_future() => served,
        () = stop => Ok(()),
    }
}

/// A JSON body already serialized (an outgoing message's text).
fn json_text(text: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let body = protocol::error(Value::Null, code, message.to_owned());
    (status, axum::Json(body)).into_response()
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host.eq_ignore_ascii_case("localhost")
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `host[:port]` → host (an IPv6 literal keeps its brackets).
fn host_part(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// The Host and Origin checks; `Err` says why the caller gets a 403.
fn check_caller(origins: &[String], headers: &HeaderMap) -> Result<(), &'static str> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !is_loopback_host(host_part(host)) {
        return Err("Host must name a loopback address");
    }
    let origin = headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or(""));
    let allowed = origin.is_some_and(|o| origins.iter().any(|a| a == o));
    if let Some(origin) = origin
        && !allowed
    {
        let own = origin
            .split_once("://")
            .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && rest == host);
        if !own {
            return Err(
                "Origin not allowed: only this server's own origin or one given with --allow-origin",
            );
        }
    }
    if let Some(site) = header_text(headers, "sec-fetch-site")
        && !allowed
        && !matches!(site, "same-origin" | "none")
    {
        return Err("cross-site request refused (Sec-Fetch-Site)");
    }
    Ok(())
}

/// A `POST` must carry JSON by its own say-so: a browser sends form and
/// `text/plain` bodies across sites without asking, never `application/json`.
fn is_json(headers: &HeaderMap) -> bool {
    header_text(headers, header::CONTENT_TYPE.as_str()).is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    })
}

fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn on_get(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(why) = check_caller(&app.origins, &headers) {
        return rpc_error(StatusCode::FORBIDDEN, code::INVALID_REQUEST, why);
    }
    let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    response
}

async fn on_delete(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(why) = check_caller(&app.origins, &headers) {
        return rpc_error(StatusCode::FORBIDDEN, code::INVALID_REQUEST, why);
    }
    let Some(id) = header_text(&headers, SESSION_HEADER) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Mcp-Session-Id header required",
        );
    };
    let removed = app.sessions.lock().ok().and_then(|mut s| s.remove(id));
    match removed {
        Some(Entry { session, .. }) => {
            session.cancel_all();
            StatusCode::NO_CONTENT.into_response()
        }
        None => rpc_error(
            StatusCode::NOT_FOUND,
            code::INVALID_REQUEST,
            "unknown session",
        ),
    }
}

fn new_session_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

/// Stops the request's call if the response is dropped before it is
/// answered (the client went away).
struct CancelOnDrop {
    session: Arc<Session>,
    id: Value,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.session.cancel(&self.id);
    }
}

async fn on_post(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(why) = check_caller(&app.origins, &headers) {
        return rpc_error(StatusCode::FORBIDDEN, code::INVALID_REQUEST, why);
    }
    if !is_json(&headers) {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::INVALID_REQUEST,
            "Content-Type must be application/json",
        );
    }
    let accept = header_text(&headers, header::ACCEPT.as_str()).unwrap_or("*/*");
    let accepts_sse = accept.contains("text/event-stream");
    if !(accept.contains("application/json") || accepts_sse || accept.contains("*/*")) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            code::INVALID_REQUEST,
            "Accept must allow application/json or text/event-stream",
        );
    }
    let message = match protocol::parse(&body) {
        Ok(m) => m,
        Err(refused) => return (StatusCode::BAD_REQUEST, axum::Json(refused.0)).into_response(),
    };
    let version_header = header_text(&headers, VERSION_HEADER);
    if let Some(v) = version_header
        && !protocol::VERSIONS.contains(&v)
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            &format!("unsupported MCP-Protocol-Version: {}", bound::name(v)),
        );
    }
    let session_id = header_text(&headers, SESSION_HEADER);
    if let (None, Incoming::Request { method, .. }) = (session_id, &message)
        && method == "initialize"
    {
        return initialize(&app, message).await;
    }
    let Some(session_id) = session_id else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "Mcp-Session-Id header required (send initialize first)",
        );
    };
    let session = app.sessions.lock().ok().and_then(|mut s| {
        let entry = s.get_mut(session_id)?;
        entry.used = Instant::now();
        Some(entry.session.clone())
    });
    let Some(session) = session else {
        return rpc_error(
            StatusCode::NOT_FOUND,
            code::INVALID_REQUEST,
            "unknown session",
        );
    };
    if let (Some(v), Some(agreed)) = (version_header, session.version())
        && v != agreed
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            &format!(
                "MCP-Protocol-Version {} is not the session's {agreed}",
                bound::name(v)
            ),
        );
    }
    let (id, is_call) = match &message {
        Incoming::Request { id, method, .. } => (id.clone(), method == "tools/call"),
        Incoming::Notification { .. } | Incoming::Response => {
            let (out, _) = Outbox::new();
            session.handle(message, &out);
            return StatusCode::ACCEPTED.into_response();
        }
    };
    let (out, mut answers) = Outbox::new();
    session.handle(message, &out);
    // Only the call's task (if any) holds a sender now: the channel closes
    // when the call answers or is cancelled.
    drop(out);
    let guard = CancelOnDrop {
        session: session.clone(),
        id,
    };
    if is_call && accepts_sse {
        let events = stream::unfold((answers, guard), |(mut answers, guard)| async move {
            let message = answers.recv().await?;
            let event = Event::default().event("message").data(message.text);
            Some((Ok::<_, Infallible>(event), (answers, guard)))
        });
        return Sse::new(events).into_response();
    }
    while let Some(message) = answers.recv().await {
        if message.success.is_some() {
            drop(guard);
            return json_text(message.text);
        }
    }
    drop(guard);
    // Cancelled by the client: it expects no answer.
    StatusCode::ACCEPTED.into_response()
}

/// Whether a new session fits, ending the least recently used idle one
/// when [`MAX_SESSIONS`] are open.
fn make_room(app: &App) -> bool {
    let Ok(mut sessions) = app.sessions.lock() else {
        return false;
    };
    if sessions.len() < MAX_SESSIONS {
        return true;
    }
    let idle = sessions
        .iter()
        .filter(|(_, e)| e.session.calls_in_flight() == 0)
        .min_by_key(|(_, e)| e.used)
        .map(|(id, _)| id.clone());
    match idle {
        Some(id) => {
            sessions.remove(&id);
            true
        }
        None => false,
    }
}

async fn initialize(app: &App, message: Incoming) -> Response {
    if !make_room(app) {
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            code::INVALID_REQUEST,
            "too many sessions, each with a call in flight: end one with DELETE",
        );
    }
    let Some(session_id) = new_session_id() else {
        return rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INVALID_REQUEST,
            "no randomness for a session id",
        );
    };
    let session = Session::new(app.server.clone());
    let (out, mut answers) = Outbox::new();
    session.handle(message, &out);
    drop(out);
    let Some(answer) = answers.recv().await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let success = answer.success == Some(true);
    let mut response = json_text(answer.text);
    if success {
        if let Ok(mut sessions) = app.sessions.lock() {
            let used = Instant::now();
            sessions.insert(session_id.clone(), Entry { session, used });
        }
        if let Ok(value) = HeaderValue::from_str(&session_id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins() {
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "[::1]", "LOCALHOST."] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "localhost.evil.com", "", "[::2]"] {
            assert!(!is_loopback_host(host), "{host}");
        }
        assert_eq!(host_part("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_part("[::1]:8080"), "[::1]");
        assert_eq!(host_part("localhost"), "localhost");
    }

    fn caller(pairs: &[(&'static str, &str)]) -> Result<(), &'static str> {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).expect("header"));
        }
        check_caller(&["http://tool.example".to_owned()], &headers)
    }

    #[test]
    fn only_this_servers_origin_or_an_allowed_one_may_call() {
        let host = ("host", "127.0.0.1:7701");
        assert!(caller(&[host]).is_ok());
        assert!(caller(&[host, ("origin", "http://127.0.0.1:7701")]).is_ok());
        assert!(
            caller(&[
                host,
                ("origin", "http://tool.example"),
                ("sec-fetch-site", "cross-site")
            ])
            .is_ok()
        );
        assert!(caller(&[host, ("sec-fetch-site", "same-origin")]).is_ok());
        assert!(caller(&[host, ("sec-fetch-site", "none")]).is_ok());
        for refused in [
            vec![host, ("origin", "http://127.0.0.1:8000")],
            vec![host, ("origin", "http://localhost:7701")],
            vec![host, ("origin", "null")],
            vec![host, ("origin", "http://evil.example")],
            vec![host, ("sec-fetch-site", "same-site")],
            vec![host, ("sec-fetch-site", "cross-site")],
            vec![("host", "evil.example:7701")],
        ] {
            assert!(caller(&refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn a_post_must_say_it_carries_json() {
        let with = |ct: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_str(ct).expect("header"),
            );
            is_json(&headers)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        for refused in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
        ] {
            assert!(!with(refused), "{refused}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }
}
