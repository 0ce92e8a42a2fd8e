//! `longhand serve`: the HTTP API and the web page, a door like `cli/`.
//!
//! What it owns: routing, the bearer token, the error shape, the SSE
//! stream of a session's events, the OpenAPI document and the page's
//! embedded assets. What it must not do: fold events or change sessions
//! itself — it reads the [`Store`], the memory bank and
//! [`load_state`](longhand_brain::load_state), and every change goes
//! through a [`Backend`] (the CLI's own functions), so the API and the CLI
//! cannot disagree about what `approve` or `pause` means.
//!
//! Security choices (docs/serve.md argues them):
//! - every `/api/` route needs `Authorization: Bearer <token>`, compared
//!   in constant time ([`auth`]);
//! - bound to a loopback address, requests must name a loopback host
//!   (`Host: 127.0.0.1:…`, `localhost`, `[::1]`), so a web page elsewhere
//!   cannot reach the API through DNS rebinding;
//! - a request a web page elsewhere could make a browser send is refused,
//!   token or not ([`csrf`]): a cross-site `Sec-Fetch-Site` or a foreign
//!   `Origin` (403), and a change without `Content-Type: application/json`
//!   (415);
//! - every response carries a strict Content-Security-Policy (scripts and
//!   styles from this server only, no inline code, no framing), `nosniff`,
//!   `no-referrer` and `no-store`; the page never puts data into HTML
//!   (text nodes only) and shows invisible and bidi characters as marks;
//!   a blob keeps its own policy, `sandbox`;
//! - a client has [`HEADER_TIMEOUT`] to send a request's head and
//!   [`BODY_TIMEOUT`] for its body, then the connection is closed, so a
//!   stalled upload holds nothing;
//! - a server fault is answered with the code `internal` and logged, never
//!   sent: its text can name host paths.

pub mod api;
pub mod auth;
pub mod backend;
pub mod csrf;
pub mod error;
pub mod hooks;
mod page;
mod sse;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::handler::Handler;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};

pub use auth::Token;
pub use backend::{AnswerRequest, Backend, StartRequest};
pub use error::ApiError;

use longhand_session::Store;

/// The OpenAPI 3.1 document, hand-written beside the routes; a test checks
/// that it names every route the router has.
pub const OPENAPI: &str = include_str!("openapi.json");

/// The Content-Security-Policy of every response: nothing but this
/// server's own scripts, styles and API; no inline script or style, no
/// plugins, no framing, no forms posting elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// Largest request body, in bytes (every body is a small JSON object).
pub const MAX_BODY: usize = 64 * 1024;

/// How long a client has to send a request's line and headers, from the
/// connection's start or the end of its previous request (an idle
/// keep-alive connection is closed after it too). Enough for any client
/// that means to send one; a stalled one is dropped.
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a client has to send a whole request body once its handler
/// reads it: [`MAX_BODY`] in this time is 2 KiB/s, far below any real
/// link. Past it the answer is 408 and the connection is closed.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What the server needs.
pub struct Config {
    /// The session store.
    pub store: Arc<dyn Store>,
    /// How sessions are started, steered and answered.
    pub backend: Arc<dyn Backend>,
    /// The token every API request must present; `None` only on a
    /// loopback address with `--no-auth`.
    pub token: Option<Token>,
    /// Requests must name a loopback host (the server is bound to one).
    pub loopback_hosts_only: bool,
    /// The memory bank's file.
    pub memory_db: PathBuf,
    /// Webhook triggers by name (`POST /hooks/<name>`).
    pub hooks: std::collections::HashMap<String, hooks::Hook>,
    /// Webhook signatures already used (replays are refused).
    pub seen_hooks: hooks::Seen,
}

/// The shared state of every handler.
#[derive(Clone)]
pub struct AppState(Arc<Config>);

impl std::ops::Deref for AppState {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.0
    }
}

/// The API's routes as the router has them, recorded as they are added so
/// the OpenAPI test sees exactly what is served.
struct Routes {
    router: Router<AppState>,
    listed: Vec<(&'static str, &'static str)>,
}

impl Routes {
    fn new() -> Self {
        Self {
            router: Router::new(),
            listed: Vec::new(),
        }
    }

    fn add(
        mut self,
        method: &'static str,
        path: &'static str,
        route: MethodRouter<AppState>,
    ) -> Self {
        self.listed.push((method, path));
        self.router = self.router.route(path, route);
        self
    }

    fn get<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("get", path, get(handler))
    }

    fn post<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add("post", path, post(handler))
    }
}

fn api_routes() -> Routes {
    Routes::new()
        .get("/api/openapi.json", api::openapi)
        .get("/api/sessions", api::list_sessions)
        .post("/api/sessions", api::start_session)
        .get("/api/sessions/{id}", api::get_session)
        .get("/api/sessions/{id}/events", api::list_events)
        .get("/api/sessions/{id}/events/stream", sse::stream)
        .get("/api/sessions/{id}/plan", api::get_plan)
        .get("/api/sessions/{id}/blobs/{digest}", api::get_blob)
        .get("/api/sessions/{id}/previews", api::previews)
        .get("/api/agents", api::list_agents)
        .post("/api/sessions/{id}/pause", api::pause)
        .post("/api/sessions/{id}/cancel", api::cancel)
        .post("/api/sessions/{id}/send", api::send)
        .post("/api/sessions/{id}/resume", api::resume)
        .get("/api/approvals", api::list_approvals)
        .post(
            "/api/sessions/{id}/approvals/{request}/approve",
            api::approve,
        )
        .post("/api/sessions/{id}/approvals/{request}/deny", api::deny)
        .get("/api/memory", api::search_memory)
        .get("/api/memory/{id}", api::get_memory)
}

/// Every API route as `(method, path)`, paths in OpenAPI's `{param}` form.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    api_routes().listed
}

/// The whole application: the API behind the token, the page, the JSON
/// fallbacks, and the headers every response carries.
pub fn app(config: Config) -> Router {
    let state = AppState(Arc::new(config));
    let api = api_routes()
        .router
        .layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/app.css", get(page::style))
        .route("/favicon.svg", get(page::icon))
        // Signed with the trigger's own secret, not the API token.
        .route("/hooks/{name}", post(hooks::fire))
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Serve `app` on `listener` until the task is dropped: HTTP/1.1, each
/// connection on its own task, its request heads bounded by
/// [`HEADER_TIMEOUT`] (bodies are bounded by [`BODY_TIMEOUT`] where they
/// are read).
///
/// Not `axum::serve`: it gives hyper no timer, so hyper's header timeout
/// never fires and a client that opens a connection and sends nothing, or
/// half a header, holds it forever.
pub async fn run(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors or a connection reset before accept: the
            // listener itself is fine; wait a moment rather than spin.
            Err(e) => {
                tracing::warn!("serve: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            // A client that went away or broke the protocol: nothing to do.
            let _ = connection.await;
        });
    }
}

/// Whether `addr` is a loopback address (127.0.0.0/8, ::1).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

async fn not_found() -> ApiError {
    ApiError::not_found(
        "route_not_found",
        "no such route; /api/openapi.json lists them",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; /api/openapi.json lists them",
    )
}

/// `Authorization: Bearer <token>` on every API route.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer);
    match presented {
        Some(p) if token.matches(p) => next.run(request).await,
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is wrong",
        )
        .into_response(),
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send `Authorization: Bearer <token>`; `longhand serve` printed the token when it \
             made it, and keeps it in the data directory's serve-token file",
        )
        .into_response(),
    }
}

/// The host check and the headers of every response.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = if state.loopback_hosts_only && !loopback_host(&request) {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "this server answers requests for 127.0.0.1, localhost or [::1] only",
        )
        .into_response()
    } else if let Some(refused) = csrf::refusal(&request) {
        refused.into_response()
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    // A handler's own policy stands (a blob's `sandbox`); every other
    // response gets the page's.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    for (name, value) in [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Whether the request's `Host` names this machine's loopback.
fn loopback_host(request: &Request) -> bool {
    let Some(host) = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        // HTTP/1.1 requires Host; a request without one came from no browser.
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_names_every_route_and_no_other() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        let paths = doc["paths"].as_object().expect("paths");
        let routes = routes();
        for (method, path) in &routes {
            assert!(
                paths.get(*path).and_then(|p| p.get(*method)).is_some(),
                "{method} {path} is served but not in openapi.json"
            );
        }
        for (path, item) in paths {
            for method in item.as_object().expect("path item").keys() {
                if method == "parameters" {
                    continue;
                }
                assert!(
                    routes.iter().any(|(m, p)| m == method && p == path),
                    "openapi.json names {method} {path}, which is not served"
                );
            }
        }
    }

    #[test]
    fn loopback_hosts_are_told_apart() {
        let with = |host: &str| {
            let request = Request::builder()
                .header(header::HOST, host)
                .body(axum::body::Body::empty())
                .unwrap();
            loopback_host(&request)
        };
        for ok in [
            "127.0.0.1:7700",
            "localhost",
            "LOCALHOST:1",
            "[::1]:80",
            "127.1.2.3",
        ] {
            assert!(with(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:7700",
            "10.0.0.1:7700",
            "[::2]:1",
            "localhost.evil",
        ] {
            assert!(!with(bad), "{bad}");
        }
    }
}
