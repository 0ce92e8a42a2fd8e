//! The web page: four files embedded in the binary (no CDN, no build
//! step). They hold no data: the page asks the API for everything with the
//! token the operator gives it, and puts what it gets into the document as
//! text only (`textContent`, never `innerHTML`), since event text is model
//! and tool output.
//!
//! Text a person reads before deciding (an approval's tool and arguments,
//! a goal, model output) is shown through the page's one `visible()`
//! function, which writes every character of
//! [`HIDDEN`](crate::cli::term::HIDDEN) — bidi overrides and marks,
//! zero-width and other invisible characters, controls — as a marked
//! `⟨U+202E⟩` instead of itself. The table is the CLI's: it is written
//! into the script here, where the placeholder [`RULE_SLOT`] stands, so the
//! terminal and the browser cannot disagree about what is shown escaped.

use std::fmt::Write as _;
use std::sync::LazyLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("page/index.html");
const SCRIPT_SOURCE: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");
const ICON: &str = include_str!("page/favicon.svg");

/// Where the script's source holds the hidden-character table.
pub const RULE_SLOT: &str = "/*HIDDEN_RANGES*/";

/// The script as served: [`SCRIPT_SOURCE`] with the table in its slot.
static SCRIPT: LazyLock<String> = LazyLock::new(|| script_with(crate::cli::term::HIDDEN));

/// `source`'s slot filled with `ranges` as a JavaScript array literal of
/// `[first, last]` code points.
fn script_with(ranges: &[(u32, u32)]) -> String {
    let mut table = String::new();
    for (i, (lo, hi)) in ranges.iter().enumerate() {
        if i > 0 {
            table.push_str(", ");
        }
        let _ = write!(table, "[0x{lo:x}, 0x{hi:x}]");
    }
    SCRIPT_SOURCE.replacen(RULE_SLOT, &table, 1)
}

fn asset(content_type: &'static str, body: impl IntoResponse) -> Response {
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
    asset("text/javascript; charset=utf-8", SCRIPT.as_str())
}

/// `GET /app.css`.
pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// `GET /favicon.svg`: from this server, as the CSP's `img-src 'self'`
/// allows (a `data:` icon would need the policy widened).
pub async fn icon() -> Response {
    asset("image/svg+xml", ICON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_carries_the_clis_hidden_character_table() {
        assert_eq!(SCRIPT_SOURCE.matches(RULE_SLOT).count(), 1);
        let served = SCRIPT.as_str();
        assert!(!served.contains(RULE_SLOT));
        for (lo, hi) in crate::cli::term::HIDDEN {
            assert!(served.contains(&format!("[0x{lo:x}, 0x{hi:x}]")), "{lo:x}");
        }
    }
}
