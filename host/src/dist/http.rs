//! The HTTP client of everything `dist` fetches (manifests, components,
//! tokens), and the rules every answer goes through: redirects followed
//! only within the origin they start from, bounded waits, bodies read
//! through a bound, error bodies quoted short.
//!
//! A floor of `dist`: `registry` and `token` import it; it imports neither.

use std::time::Duration;

use super::error::{DistError, shown};

/// Largest error body quoted from a registry: 4 KiB (cut further when shown).
const MAX_ERROR_BODY_BYTES: u64 = 4 << 10;
/// Redirects followed within one origin.
pub const MAX_REDIRECTS: usize = 5;
/// Longest one request of a pull may take, body included: 10 minutes (128
/// MiB at ~220 KB/s).
pub const PULL_TIMEOUT_SECS: u64 = 600;

/// The HTTP client of pulls: the host's TLS, redirects followed only within
/// the origin they start from, bounded waits.
pub(crate) fn pull_client() -> Result<reqwest::Client, DistError> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt.previous().first().is_some_and(|first| {
            first.scheme() == attempt.url().scheme()
                && first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if !same || attempt.previous().len() > MAX_REDIRECTS {
            // Stopped, the 3xx comes back to [`send`], which says why.
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    longhand_brain::http_client::builder()
        .map_err(|e| DistError::Remote(e.to_string()))?
        .redirect(policy)
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(60))
        // A whole request, body included: a server dribbling bytes under
        // the read timeout is cut here.
        .timeout(Duration::from_secs(PULL_TIMEOUT_SECS))
        .build()
        .map_err(|e| DistError::Remote(format!("building the HTTP client: {e}")))
}

/// Send `request` (to `url`), refusing a redirect that left its origin
/// (the pull client stops those, and the 3xx comes back here).
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    url: &str,
) -> Result<reqwest::Response, DistError> {
    let response = request
        .send()
        .await
        .map_err(|e| DistError::Remote(format!("GET {url}: {}", reqwest_reason(&e))))?;
    let status = response.status();
    if status.is_redirection() {
        let to = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .unwrap_or("(no Location)");
        return Err(DistError::Refused(format!(
            "GET {url} was redirected to {} ({status}): a redirect to another host, scheme or port \
             is refused (or more than {MAX_REDIRECTS} within one)",
            shown(to, 512)
        )));
    }
    Ok(response)
}

/// reqwest's error and its causes on one line.
pub(crate) fn reqwest_reason(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The body of `response`, refused past `limit` bytes (by its
/// `Content-Length` before reading, and while reading).
pub(crate) async fn read_bounded(
    mut response: reqwest::Response,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, DistError> {
    let over = |n: u64| {
        DistError::Refused(format!(
            "{what} is {n} bytes or more, over the {limit}-byte limit; refused"
        ))
    };
    if let Some(len) = response.content_length()
        && len > limit
    {
        return Err(over(len));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| DistError::Remote(format!("reading {what}: {}", reqwest_reason(&e))))?
    {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(over(body.len() as u64 + chunk.len() as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error answer, quoting a bounded part of its body.
pub(crate) async fn error_answer(response: reqwest::Response, url: &str) -> DistError {
    let status = response.status();
    let body = read_bounded(response, MAX_ERROR_BODY_BYTES, "the error body")
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    // A manifest the registry does not have (an unknown tag or repository)
    // is a name to fix, exit 2; any other error answer is the registry's.
    if status == reqwest::StatusCode::NOT_FOUND && url.contains("/manifests/") {
        return DistError::Usage(format!(
            "GET {url}: the registry has no such tag or repository ({status}: {}); check the \
             name and tag",
            shown(body.trim(), 512)
        ));
    }
    DistError::Remote(format!(
        "GET {url}: the server answered {status}: {}",
        shown(body.trim(), 512)
    ))
}
