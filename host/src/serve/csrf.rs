//! Cross-site requests: what a web page elsewhere may make a browser send
//! to this server, and why none of it changes anything.
//!
//! A page on any site can make the browser of the person running `longhand
//! serve` send a "simple" request to `http://127.0.0.1:7700` — a form post
//! or a `fetch(…, {mode: "no-cors"})` with a `text/plain`, form-encoded or
//! multipart body, and no custom header. It cannot read the answer, but
//! with `--no-auth` the request itself would approve, deny, cancel or
//! start sessions. The token alone stops it (a cross-site page cannot add
//! `Authorization` without a CORS preflight this server never grants),
//! but these rules hold with and without the token:
//!
//! 1. **`Sec-Fetch-Site`**, when present (every current browser sends it),
//!    must be `same-origin` or `none` (typed into the address bar) on every
//!    `/api/` request and every request that may change state: `same-site`
//!    (another port of 127.0.0.1) and `cross-site` are refused, 403
//!    `cross_site`.
//! 2. **`Origin`**, when present, must be this server's own: its
//!    `host[:port]` equal to the request's `Host` (which the host check
//!    already holds to loopback when bound there), scheme `http` or
//!    `https` (a TLS proxy in front); `null` and any other origin are
//!    refused, 403 `cross_origin`. Browsers send `Origin` on every
//!    cross-origin request and every `POST`, so an older browser without
//!    `Sec-Fetch-Site` is still caught here.
//! 3. **`Content-Type: application/json`** on every request with a method
//!    other than `GET`, `HEAD` or `OPTIONS`, empty body or not: a browser
//!    sends that type cross-site only after a CORS preflight, which this
//!    server never answers with `Access-Control-Allow-*`, so a page
//!    elsewhere cannot send it at all. Anything else — `text/plain`,
//!    `application/x-www-form-urlencoded`, `multipart/form-data`, none —
//!    is refused, 415 `unsupported_media_type`.
//!
//! Webhooks (`POST /hooks/<name>`) keep rules 1 and 2 but not 3: they are
//! sent by other servers (no cookies, no token, no browser), their body is
//! whatever text the sender signs (form-encoded from some senders), and
//! the HMAC signature over it is what protects them — a page elsewhere
//! cannot sign.
//!
//! No route that changes state answers `GET`, and no response carries
//! `Access-Control-Allow-Origin`, so a page elsewhere can neither act
//! through a link nor read an answer (the event stream included).

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};

use super::error::ApiError;

/// Why `request` may not be served, if it may not (rules 1–3 above).
pub fn refusal(request: &Request) -> Option<ApiError> {
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let path = request.uri().path();
    if safe && !path.starts_with("/api/") {
        // The page and its assets: a link from anywhere may open them, and
        // they hold no data.
        return None;
    }
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("");
        if !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none") {
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "cross_site",
                format!(
                    "refused: the browser says this request comes from another site \
                     (Sec-Fetch-Site: {}); use the page this server serves, or a client \
                     that is not a browser",
                    printable(site)
                ),
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !same_origin(origin.to_str().unwrap_or(""), headers)
    {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_origin",
            "refused: the request's Origin is not this server's; only the page this server \
             serves may call it from a browser",
        ));
    }
    if !safe && !path.starts_with("/hooks/") && !json_content(headers) {
        return Some(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a request that changes something must say `Content-Type: application/json` \
             (send `{}` when there is nothing to say); other types are what a web page \
             elsewhere can send without asking, so they are refused",
        ));
    }
    None
}

/// Whether `origin` (`scheme://host[:port]`) is the server the request
/// names in `Host`.
fn same_origin(origin: &str, headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        // `null` (a sandboxed frame, a file, a data: URL) and nonsense.
        return false;
    };
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
        && !authority.is_empty()
        && authority.eq_ignore_ascii_case(host)
}

/// Whether the body is declared JSON: `application/json`, parameters
/// (`; charset=utf-8`) allowed, nothing else.
fn json_content(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .is_some_and(|essence| essence.eq_ignore_ascii_case("application/json"))
}

/// A header value quoted back in a message, short and without controls.
fn printable(text: &str) -> String {
    text.chars()
        .take(40)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, path: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "127.0.0.1:7700");
        for (n, v) in headers {
            builder = builder.header(*n, *v);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    fn code(method: &str, path: &str, headers: &[(&str, &str)]) -> Option<&'static str> {
        refusal(&request(method, path, headers)).map(|e| e.code)
    }

    #[test]
    fn what_a_page_elsewhere_can_send_is_refused() {
        let approve = "/api/sessions/s-1/approvals/ap-1/approve";
        let json = ("Content-Type", "application/json");
        // The page itself, curl, the CLI: served.
        assert_eq!(code("POST", approve, &[json]), None);
        assert_eq!(
            code(
                "POST",
                approve,
                &[("Content-Type", "Application/JSON; charset=utf-8")]
            ),
            None
        );
        assert_eq!(
            code(
                "POST",
                approve,
                &[
                    json,
                    ("Origin", "http://127.0.0.1:7700"),
                    ("Sec-Fetch-Site", "same-origin")
                ]
            ),
            None
        );
        assert_eq!(code("GET", "/api/sessions", &[]), None);
        // Simple requests a browser sends cross-site without a preflight.
        for t in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "application/json-seq",
        ] {
            assert_eq!(
                code("POST", approve, &[("Content-Type", t)]),
                Some("unsupported_media_type"),
                "{t}"
            );
        }
        assert_eq!(code("POST", approve, &[]), Some("unsupported_media_type"));
        assert_eq!(
            code("DELETE", "/api/x", &[]),
            Some("unsupported_media_type")
        );
        // Another origin, another port, `null`: refused, JSON or not.
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:7701",
            "http://127.0.0.1",
            "null",
            "http://127.0.0.1:7700.evil",
            "ftp://127.0.0.1:7700",
        ] {
            assert_eq!(
                code("POST", approve, &[json, ("Origin", origin)]),
                Some("cross_origin"),
                "{origin}"
            );
        }
        for site in ["cross-site", "same-site", "bogus"] {
            assert_eq!(
                code("POST", approve, &[json, ("Sec-Fetch-Site", site)]),
                Some("cross_site"),
                "{site}"
            );
            assert_eq!(
                code("GET", "/api/sessions", &[("Sec-Fetch-Site", site)]),
                Some("cross_site")
            );
        }
        // The page may be linked to from anywhere.
        assert_eq!(code("GET", "/", &[("Sec-Fetch-Site", "cross-site")]), None);
        // Webhooks: any body type (the signature protects them), but not
        // from a browser elsewhere.
        assert_eq!(
            code("POST", "/hooks/h", &[("Content-Type", "text/plain")]),
            None
        );
        assert_eq!(
            code("POST", "/hooks/h", &[("Sec-Fetch-Site", "cross-site")]),
            Some("cross_site")
        );
    }
}
