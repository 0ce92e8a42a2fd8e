//! HTTP plumbing shared by the providers: the client, the API key wrapper,
//! the mapping from HTTP failures to [`ModelError`], and body reading with
//! timeouts.
//!
//! Two clocks bound a request, and they answer different questions. The
//! idle timeout asks "is the server still there?": it bounds every wait for
//! the next byte, the first one (connecting, sending, waiting for the
//! status line) included, so a stalled server is noticed within it however
//! long the answer as a whole runs. The deadline asks "is this worth
//! waiting for?": it bounds the whole exchange, last byte included, and is
//! long (minutes) because a streamed answer from a reasoning model can
//! legitimately take that long while sending a byte every second. A single
//! whole-request timeout cannot do both: short, it kills long healthy
//! streams; long, a stall holds the session for all of it. Both expire as
//! [`ModelError::Timeout`], which the loop retries.
//!
//! Everything that can carry text a server sent us into an error goes
//! through [`Redactor`], which removes the API key (servers do echo keys
//! back, e.g. OpenAI's "Incorrect API key provided: sk-…") and bounds the
//! length, so errors stay small enough for the event log.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};

use super::ModelError;

/// An API key. Its `Debug` prints `ApiKey([redacted])` and it has no
/// `Display`, so it cannot end up in a log line or an error by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The key as a header value marked sensitive (so hyper and reqwest
    /// never print it), with `prefix` before it (`"Bearer "` or `""`).
    pub(crate) fn header(&self, prefix: &str) -> Result<HeaderValue, ModelError> {
        let mut v = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ModelError::Auth {
                status: 0,
                body: "the API key contains characters not allowed in an HTTP header".into(),
            }
        })?;
        v.set_sensitive(true);
        Ok(v)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl From<String> for ApiKey {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for ApiKey {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

/// The most of a server's error body we keep in an error.
const MAX_BODY: usize = 2000;

/// Cleans server text before it goes into an error: removes the key,
/// bounds the length.
#[derive(Clone, Copy)]
pub(crate) struct Redactor<'a>(pub Option<&'a ApiKey>);

impl Redactor<'_> {
    pub fn clean(&self, s: &str) -> String {
        let mut s = match self.0 {
            Some(k) if !k.expose().is_empty() => s.replace(k.expose(), "[redacted]"),
            _ => s.to_owned(),
        };
        if s.len() > MAX_BODY {
            s.truncate(s.floor_char_boundary(MAX_BODY));
            s.push('…');
        }
        s
    }

    /// Maps a reqwest error (sending, or reading the body).
    pub fn transport(&self, e: &reqwest::Error) -> ModelError {
        if e.is_timeout() {
            return ModelError::Timeout;
        }
        // reqwest's Display hides the cause; walk the chain so "connection
        // refused" or "reset by peer" reaches the event log.
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        ModelError::Transport(self.clean(&msg))
    }

    /// Maps a non-2xx status and its body.
    pub fn status(&self, status: u16, headers: &HeaderMap, body: &str) -> ModelError {
        let body = self.clean(body);
        match status {
            429 => ModelError::RateLimited {
                retry_after: retry_after(headers, SystemTime::now()),
            },
            401 | 403 => ModelError::Auth { status, body },
            408 => ModelError::Timeout,
            // 409: a conflict the official SDKs retry (lock contention).
            409 | 500..=599 => ModelError::Server { status, body },
            400..=499 => ModelError::BadRequest { status, body },
            _ => ModelError::BadResponse(format!("unexpected HTTP {status}: {body}")),
        }
    }
}

/// How long the server asked us to wait: `retry-after-ms` (OpenAI), else
/// `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The HTTP client the providers share the settings of.
///
/// TLS is rustls with the ring provider and the webpki (Mozilla) roots, as
/// in the tool host: one crypto stack in the binary, no system state read.
/// HTTP/1.1 only; no proxy from the environment (reqwest's `system-proxy`
/// feature is off), so nothing ambient decides where prompts go.
pub(crate) fn client() -> Result<reqwest::Client, ModelError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ModelError::Transport(format!("building TLS config: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .user_agent(concat!("longhand/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ModelError::Transport(format!("building HTTP client: {e}")))
}

/// Runs one whole exchange (send, then read the answer) under `deadline`;
/// past it the exchange is dropped (closing the connection) and the answer
/// is [`ModelError::Timeout`].
pub(crate) async fn within_deadline<T>(
    deadline: Duration,
    exchange: impl Future<Output = Result<T, ModelError>>,
) -> Result<T, ModelError> {
    tokio::time::timeout(deadline, exchange)
        .await
        .unwrap_or(Err(ModelError::Timeout))
}

/// Sends `req`, and turns any non-2xx answer into its error (reading the
/// error body first). Connecting, sending and waiting for the status line
/// together may take at most `idle`: until the first byte of the answer
/// the server has given no sign of life.
pub(crate) async fn send(
    req: reqwest::RequestBuilder,
    idle: Duration,
    redact: Redactor<'_>,
) -> Result<reqwest::Response, ModelError> {
    let resp = tokio::time::timeout(idle, req.send())
        .await
        .map_err(|_| ModelError::Timeout)?
        .map_err(|e| redact.transport(&e))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers().clone();
    let body = match read_all(resp, idle, redact).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(ModelError::Timeout) => return Err(ModelError::Timeout),
        Err(_) => String::new(),
    };
    Err(redact.status(status.as_u16(), &headers, &body))
}

/// Reads a whole body, chunk by chunk, each wait bounded by `idle`.
async fn read_all(
    mut resp: reqwest::Response,
    idle: Duration,
    redact: Redactor<'_>,
) -> Result<Vec<u8>, ModelError> {
    let mut body = Vec::new();
    while let Some(chunk) = next_chunk(&mut resp, idle, redact).await? {
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads a whole body and parses it as JSON; each wait for the next chunk
/// is bounded by `idle`, as in a stream.
pub(crate) async fn json_body(
    resp: reqwest::Response,
    idle: Duration,
    redact: Redactor<'_>,
) -> Result<serde_json::Value, ModelError> {
    let bytes = read_all(resp, idle, redact).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ModelError::BadResponse(format!(
            "unparseable JSON ({e}): {}",
            redact.clean(&String::from_utf8_lossy(&bytes))
        ))
    })
}

/// The next chunk of a streamed body; `None` at its end. A gap longer than
/// `idle` between chunks is a [`ModelError::Timeout`]: a stalled stream
/// must not hold a session until the deadline.
pub(crate) async fn next_chunk(
    resp: &mut reqwest::Response,
    idle: Duration,
    redact: Redactor<'_>,
) -> Result<Option<Bytes>, ModelError> {
    match tokio::time::timeout(idle, resp.chunk()).await {
        Err(_) => Err(ModelError::Timeout),
        Ok(Err(e)) => Err(redact.transport(&e)),
        Ok(Ok(c)) => Ok(c),
    }
}

/// Trims trailing slashes so `{base}/path` never doubles them.
pub(crate) fn trim_base(url: &str) -> String {
    url.trim_end_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&past).unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn key_is_redacted_and_hidden() {
        let key = ApiKey::new("sk-canary-123");
        assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
        let r = Redactor(Some(&key));
        let e = r.status(
            401,
            &HeaderMap::new(),
            "Incorrect API key provided: sk-canary-123",
        );
        assert!(!format!("{e} {e:?}").contains("sk-canary-123"));
        let long = "x".repeat(10_000);
        assert!(r.clean(&long).len() < 2100);
        assert!(key.header("Bearer ").unwrap().is_sensitive());
    }

    #[test]
    fn statuses() {
        let r = Redactor(None);
        let h = HeaderMap::new();
        assert!(matches!(r.status(500, &h, ""), ModelError::Server { .. }));
        assert!(matches!(r.status(529, &h, ""), ModelError::Server { .. }));
        assert!(matches!(r.status(403, &h, ""), ModelError::Auth { .. }));
        assert!(matches!(
            r.status(404, &h, ""),
            ModelError::BadRequest { .. }
        ));
        assert!(matches!(r.status(408, &h, ""), ModelError::Timeout));
        assert!(matches!(
            r.status(429, &h, ""),
            ModelError::RateLimited { retry_after: None }
        ));
    }
}
