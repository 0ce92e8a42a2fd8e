//! The web page: three files embedded in the binary (no CDN, no build
//! step). They hold no data: the page asks the API for everything with the
//! token the operator gives it, and puts what it gets into the document as
//! text only (`textContent`, never `innerHTML`), since event text is model
//! and tool output.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// `GET /`.
pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /app.js`.
pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /app.css`.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
