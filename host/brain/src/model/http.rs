//! The one HTTP provider, [`HttpProvider`], and its plumbing: the client,
//! the API key wrapper, the mapping from HTTP failures to [`ModelError`],
//! body and stream reading with timeouts.
//!
//! A wire format ([`Wire`]: chat completions, Responses, Anthropic
//! Messages) only builds a request body, names its path and key header,
//! and reads an answer — whole, or event by event from a stream through a
//! [`StreamFold`]. Everything else is here, once: sending, the two clocks
//! below, status classification (which decides retries), key redaction.
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
//! [`ModelError::Timeout`], naming the [`Clock`] that ran out, which the
//! loop retries.
//!
//! Everything that can carry text a server sent us into an error goes
//! through [`Redactor`], which removes the API key (servers do echo keys
//! back, e.g. OpenAI's "Incorrect API key provided: sk-…") and bounds the
//! length, so errors stay small enough for the event log.

use std::fmt;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};

use serde_json::Value;

use super::error::{Clock, ModelError};
use super::model_provider::ModelProvider;
use super::sse::{SseEvent, SseParser};
use super::types::{ModelRequest, ModelResponse, WireFormat};

/// What every HTTP provider is configured with; its [`Wire`] adds what is
/// particular to one API.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// API root, without the wire format's path (`/chat/completions`,
    /// `/responses`, `/v1/messages`). Default empty, which means the wire
    /// format's public API.
    pub base_url: String,
    /// Sent in the wire format's key header. Default `None` (for local
    /// servers, or gateways that add the key themselves).
    pub api_key: Option<ApiKey>,
    /// The model name, as the server knows it. No default.
    pub model: String,
    /// Stream the answer. Default `true`: a long answer keeps the
    /// connection busy (so idle proxies do not cut it) and a stall is
    /// caught by `idle_timeout` instead of waiting out `deadline`.
    pub stream: bool,
    /// Bound on one whole request, connect to last byte, however lively
    /// the stream. Default 30 min: long enough for a long answer from a
    /// reasoning model; a stall is `idle_timeout`'s job.
    pub deadline: Duration,
    /// Bound on every wait for the next byte of the answer: connecting and
    /// waiting for the status line, then each gap between chunks of the
    /// body (streamed or not). Default 120 s.
    pub idle_timeout: Duration,
}

impl HttpConfig {
    /// The defaults above, for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: String::new(),
            api_key: None,
            model: model.into(),
            stream: true,
            deadline: Duration::from_secs(30 * 60),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// One model API's wire format: everything about a request and its answer
/// that differs between APIs, and nothing else.
pub trait Wire: fmt::Debug + Send + Sync + 'static {
    /// Folds a streamed answer, one event at a time.
    type Fold: StreamFold + Send;
    /// Which format this is (also the provider's name).
    const FORMAT: WireFormat;
    /// The public API's root, used when the base URL is empty.
    const DEFAULT_BASE_URL: &'static str;
    /// Appended to the base URL.
    const PATH: &'static str;
    /// The key header and the text before the key in it.
    const KEY_HEADER: (&'static str, &'static str);
    /// Headers sent with every request besides the key.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    /// The request body.
    fn body(&self, model: &str, stream: bool, req: &ModelRequest) -> Value;
    /// Reads a whole (non-streamed) answer, or the error object a server
    /// sent in it with a 2xx status.
    fn parse(&self, body: &Value, redact: Redactor<'_>) -> Result<ModelResponse, ModelError>;
    /// A fresh fold for one streamed answer.
    fn fold(&self) -> Self::Fold;
}

/// The state of one streamed answer.
pub trait StreamFold {
    /// Takes one event. `Ok(true)` means the answer is complete and the
    /// rest of the stream is not read.
    fn event(&mut self, ev: &SseEvent, redact: Redactor<'_>) -> Result<bool, ModelError>;
    /// The answer, once the stream ended; `complete` says whether
    /// [`event`](Self::event) said so. A stream that ends before its end
    /// event is [`ModelError::BadResponse`]`("truncated stream")` unless
    /// the format can tell the answer is whole anyway.
    fn finish(self, complete: bool) -> Result<ModelResponse, ModelError>;
}

/// An SSE event's data as JSON.
pub(crate) fn event_json(data: &str, redact: Redactor<'_>) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| {
        ModelError::BadResponse(format!(
            "unparseable stream event ({e}): {}",
            redact.clean(data)
        ))
    })
}

/// A [`ModelProvider`] speaking the wire format `W` over HTTP.
#[derive(Debug)]
pub struct HttpProvider<W> {
    cfg: HttpConfig,
    wire: W,
    url: String,
    client: reqwest::Client,
}

#[cfg(test)]
impl<W> HttpProvider<W> {
    /// The URL requests go to, for tests of a wire format's defaults.
    pub(super) fn url(&self) -> &str {
        &self.url
    }
}

impl<W: Wire + Default> HttpProvider<W> {
    /// Builds the provider with the wire format's defaults (and its HTTP
    /// client); sends nothing.
    pub fn new(cfg: HttpConfig) -> Result<Self, ModelError> {
        Self::with_wire(cfg, W::default())
    }
}

impl<W: Wire> HttpProvider<W> {
    /// Builds the provider (and its HTTP client); sends nothing.
    pub fn with_wire(cfg: HttpConfig, wire: W) -> Result<Self, ModelError> {
        let base = if cfg.base_url.is_empty() {
            W::DEFAULT_BASE_URL
        } else {
            &cfg.base_url
        };
        let url = format!("{}{}", trim_base(base), W::PATH);
        Ok(Self {
            cfg,
            wire,
            url,
            client: client()?,
        })
    }

    /// The wire format's settings.
    pub fn wire(&self) -> &W {
        &self.wire
    }

    async fn read_stream(
        &self,
        mut resp: reqwest::Response,
        redact: Redactor<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let mut folding = Folding::new(self.wire.fold());
        let mut complete = false;
        while let Some(chunk) = next_chunk(&mut resp, self.cfg.idle_timeout, redact).await? {
            if folding.push(&chunk, redact)? {
                complete = true;
                break;
            }
        }
        folding.finish(complete)
    }
}

/// A streamed answer being read: bytes in, through the SSE parser, into a
/// wire format's fold. No I/O, so tests can feed it any split of a stream.
pub(crate) struct Folding<F> {
    sse: SseParser,
    fold: F,
}

impl<F: StreamFold> Folding<F> {
    pub fn new(fold: F) -> Self {
        Self {
            sse: SseParser::default(),
            fold,
        }
    }

    /// Feeds one chunk; `Ok(true)` once the answer is complete (the rest
    /// of the stream need not be read).
    pub fn push(&mut self, chunk: &[u8], redact: Redactor<'_>) -> Result<bool, ModelError> {
        for ev in self.sse.push(chunk)? {
            if self.fold.event(&ev, redact)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The answer, once the stream ended or said it is complete.
    pub fn finish(self, complete: bool) -> Result<ModelResponse, ModelError> {
        self.fold.finish(complete)
    }
}

#[async_trait::async_trait]
impl<W: Wire> ModelProvider for HttpProvider<W> {
    fn name(&self) -> &str {
        W::FORMAT.as_str()
    }

    fn model(&self) -> &str {
        &self.cfg.model
    }

    async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let redact = Redactor(self.cfg.api_key.as_ref());
        let body = serde_json::to_vec(&self.wire.body(&self.cfg.model, self.cfg.stream, req))
            .map_err(|e| ModelError::BadRequest {
                status: 0,
                body: format!("request does not serialize: {e}"),
            })?;
        let mut rb = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in W::HEADERS {
            rb = rb.header(*name, *value);
        }
        if let Some(k) = &self.cfg.api_key {
            let (name, prefix) = W::KEY_HEADER;
            rb = rb.header(name, k.header(prefix)?);
        }
        let idle = self.cfg.idle_timeout;
        within_deadline(self.cfg.deadline, async {
            let resp = send(rb, idle, self.cfg.stream, redact).await?;
            if self.cfg.stream {
                self.read_stream(resp, redact).await
            } else {
                self.wire
                    .parse(&json_body(resp, idle, redact).await?, redact)
            }
        })
        .await
    }
}

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
pub struct Redactor<'a>(pub Option<&'a ApiKey>);

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
            return ModelError::Timeout(Clock::Server);
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
            408 => ModelError::Timeout(Clock::Server),
            // 409: a conflict the official SDKs retry (lock contention).
            409 | 500..=599 => ModelError::Server { status, body },
            400..=499 if super::error::says_context_overflow(&body) => {
                ModelError::ContextOverflow { status, body }
            }
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

/// The HTTP client the providers share the settings of: the host's one
/// client ([`crate::http_client`]), its failure as a transport error.
pub(crate) fn client() -> Result<reqwest::Client, ModelError> {
    crate::http_client::client().map_err(|e| ModelError::Transport(e.to_string()))
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
        .unwrap_or(Err(ModelError::Timeout(Clock::Deadline {
            after: deadline,
        })))
}

/// Sends `req`, and turns any non-2xx answer into its error (reading the
/// error body first). Connecting, sending and waiting for the status line
/// together may take at most `idle`: until the first byte of the answer
/// the server has given no sign of life.
pub(crate) async fn send(
    req: reqwest::RequestBuilder,
    idle: Duration,
    streamed: bool,
    redact: Redactor<'_>,
) -> Result<reqwest::Response, ModelError> {
    let resp = tokio::time::timeout(idle, req.send())
        .await
        .map_err(|_| {
            ModelError::Timeout(Clock::Idle {
                after: idle,
                streamed,
            })
        })?
        .map_err(|e| redact.transport(&e))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers().clone();
    let body = match read_all(resp, idle, redact).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e @ ModelError::Timeout(_)) => return Err(e),
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
    // The answer is one body: a wait here is for the whole answer.
    let bytes = read_all(resp, idle, redact).await.map_err(|e| match e {
        ModelError::Timeout(Clock::Idle { after, .. }) => ModelError::Timeout(Clock::Idle {
            after,
            streamed: false,
        }),
        other => other,
    })?;
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
        Err(_) => Err(ModelError::Timeout(Clock::Idle {
            after: idle,
            streamed: true,
        })),
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
        assert!(matches!(r.status(408, &h, ""), ModelError::Timeout(_)));
        assert!(matches!(
            r.status(429, &h, ""),
            ModelError::RateLimited { retry_after: None }
        ));
    }
}
