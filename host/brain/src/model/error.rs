//! What can go wrong calling a model, and who acts on it.
//!
//! The retry wrapper ([`super::retry`]) acts on [`ModelError::retryable`] and
//! [`ModelError::retry_after`]; the loop records every failure as a
//! `ModelFailed` event and, once retries run out, pauses or fails the session
//! with the last error. No variant ever carries an API key: providers redact
//! the key from anything a server echoes back before building an error.

use std::time::Duration;

/// A failed model call. Each variant's doc says who acts on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// HTTP 429: the provider is rate limiting us. The retry wrapper waits
    /// `retry_after` (from the `Retry-After` header, seconds or HTTP-date, or
    /// `retry-after-ms`) when given, its own backoff otherwise, and retries.
    #[error("rate limited by the model provider{}", fmt_after(*.retry_after))]
    RateLimited {
        /// How long the provider asked us to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// HTTP 5xx (or 409, or an overload error inside a stream): the provider
    /// failed. Retryable with backoff.
    #[error("model provider failed with HTTP {status}: {body}")]
    Server {
        /// HTTP status (529 for Anthropic's in-stream `overloaded_error`).
        status: u16,
        /// The start of the response body, key redacted.
        body: String,
    },
    /// No next byte within the idle timeout, or no complete answer by the
    /// deadline (also HTTP 408). Retryable. The [`Clock`] says which ran
    /// out, so the operator knows which setting to change.
    #[error("model request timed out: {0}")]
    Timeout(Clock),
    /// Connecting, sending or receiving failed below HTTP (DNS, TCP, TLS,
    /// connection reset mid-body). Retryable.
    #[error("model transport error: {0}")]
    Transport(String),
    /// HTTP 401/403: the key is missing, wrong, or lacks permission. Not
    /// retryable: the operator must fix the credentials; the session pauses.
    #[error("model provider refused our credentials (HTTP {status}): {body}")]
    Auth {
        /// HTTP status.
        status: u16,
        /// The start of the response body, key redacted.
        body: String,
    },
    /// Any other HTTP 4xx: the request itself is wrong (unknown model, bad
    /// tool schema…). Not retryable: the same request fails the same way;
    /// the session pauses for a person.
    #[error("model provider rejected the request (HTTP {status}): {body}")]
    BadRequest {
        /// HTTP status.
        status: u16,
        /// The start of the response body, key redacted.
        body: String,
    },
    /// HTTP 4xx saying the request does not fit the model's context window
    /// (OpenAI's `context_length_exceeded`, llama.cpp's
    /// `exceed_context_size_error`, Anthropic's "prompt is too long"). Not
    /// retryable as it is: the loop trims the history harder and asks once
    /// more, then pauses saying what to change (`decide`).
    #[error("the request does not fit the model's context window (HTTP {status}): {body}")]
    ContextOverflow {
        /// HTTP status.
        status: u16,
        /// The start of the response body, key redacted.
        body: String,
    },
    /// The provider answered 2xx but the answer could not be understood:
    /// unparseable JSON, a truncated stream, an error event mid-stream.
    /// Retryable once (the retry wrapper gives up on the second one), since
    /// a server that sends garbage twice will likely keep doing so.
    #[error("model provider sent a bad response: {0}")]
    BadResponse(String),
    /// Replay only: the run asked something the cassette did not record
    /// (or asked past its end). Never retryable: the run is no longer the
    /// recorded one, and the test or example that replays it must fail.
    #[error(
        "replay diverged at turn {turn}: the cassette expected {expected_excerpt:?}, the run sent {got_excerpt:?}"
    )]
    Diverged {
        /// The turn the run was at (its number of assistant messages).
        turn: usize,
        /// What the cassette recorded there, or `cassette exhausted`.
        expected_excerpt: String,
        /// What the run sent.
        got_excerpt: String,
    },
    /// Reading or writing a cassette file failed (recording only). Not
    /// retryable: the answer cannot be kept, so the run must stop.
    #[error("cassette error: {0}")]
    Cassette(String),
}

/// Which of a request's clocks ran out (see `model::http`): the idle
/// timeout (`request_timeout`), the deadline (`request_deadline`), or the
/// server's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// No byte within the idle timeout. `streamed` is false when the answer
    /// is one body (`stream = false`): the server sends nothing until the
    /// whole answer is written, so this one wait covered all of it.
    Idle {
        /// The idle timeout.
        after: Duration,
        /// Whether the answer was being streamed.
        streamed: bool,
    },
    /// No complete answer by the deadline.
    Deadline {
        /// The deadline.
        after: Duration,
    },
    /// The server said it timed out (HTTP 408, or a timeout error of its
    /// own).
    Server,
}

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs =
            |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs().max(1)));
        match self {
            Clock::Idle {
                after,
                streamed: true,
            } => write!(
                f,
                "the server sent nothing for {} (the idle timeout, `request_timeout` in [model])",
                secs(after)
            ),
            Clock::Idle {
                after,
                streamed: false,
            } => write!(
                f,
                "no answer within {} (the idle timeout, `request_timeout` in [model]); with \
                 `stream = false` the server sends nothing until the whole answer is written, so \
                 this one wait covers all of it: raise `request_timeout` or stream",
                secs(after)
            ),
            Clock::Deadline { after } => write!(
                f,
                "no complete answer within {} (the deadline, `request_deadline` in [model])",
                secs(after)
            ),
            Clock::Server => f.write_str("the server reported a timeout"),
        }
    }
}

fn fmt_after(d: Option<Duration>) -> String {
    match d {
        Some(d) => format!(" (retry after {:.3}s)", d.as_secs_f64()),
        None => String::new(),
    }
}

impl ModelError {
    /// Whether sending the same request again may succeed.
    ///
    /// True for rate limits, server errors, timeouts, transport errors and
    /// bad responses (the retry wrapper allows the last only once).
    pub fn retryable(&self) -> bool {
        match self {
            ModelError::RateLimited { .. }
            | ModelError::Server { .. }
            | ModelError::Timeout(_)
            | ModelError::Transport(_)
            | ModelError::BadResponse(_) => true,
            ModelError::Auth { .. }
            | ModelError::BadRequest { .. }
            | ModelError::ContextOverflow { .. }
            | ModelError::Diverged { .. }
            | ModelError::Cassette(_) => false,
        }
    }

    /// What kind of failure this is, for events and messages: a loop that
    /// gives up at once on a failure that is not
    /// [retryable](Self::retryable) says "failed (not retried)", not
    /// "failed after retries".
    pub fn kind(&self) -> ErrorKind {
        match self {
            ModelError::RateLimited { .. } => ErrorKind::RateLimited,
            ModelError::Server { .. } => ErrorKind::Server,
            ModelError::Timeout(_) => ErrorKind::Timeout,
            ModelError::Transport(_) => ErrorKind::Transport,
            ModelError::Auth { .. } => ErrorKind::Auth,
            ModelError::BadRequest { .. } => ErrorKind::BadRequest,
            ModelError::ContextOverflow { .. } => ErrorKind::ContextOverflow,
            ModelError::BadResponse(_) => ErrorKind::BadResponse,
            ModelError::Diverged { .. } => ErrorKind::Diverged,
            ModelError::Cassette(_) => ErrorKind::Cassette,
        }
    }

    /// How long the provider asked us to wait before retrying, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// The kinds of [`ModelError`], one per variant, without their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`ModelError::RateLimited`].
    RateLimited,
    /// [`ModelError::Server`].
    Server,
    /// [`ModelError::Timeout`].
    Timeout,
    /// [`ModelError::Transport`].
    Transport,
    /// [`ModelError::Auth`].
    Auth,
    /// [`ModelError::BadRequest`].
    BadRequest,
    /// [`ModelError::ContextOverflow`].
    ContextOverflow,
    /// [`ModelError::BadResponse`].
    BadResponse,
    /// [`ModelError::Diverged`].
    Diverged,
    /// [`ModelError::Cassette`].
    Cassette,
}

impl ErrorKind {
    /// A short snake_case name (`rate_limited`, `auth`…).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Server => "server",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Transport => "transport",
            ErrorKind::Auth => "auth",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::ContextOverflow => "context_overflow",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::Diverged => "diverged",
            ErrorKind::Cassette => "cassette",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a 4xx body says the request does not fit the context window,
/// by the codes and phrases the servers publish: OpenAI's
/// `context_length_exceeded` ("maximum context length"), llama.cpp's
/// `exceed_context_size_error`, vLLM's "maximum context length", Anthropic's
/// "prompt is too long", Ollama's and others' "context window"/"context
/// length". Matched on the start of the body only (as kept).
pub fn says_context_overflow(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "exceed_context_size",
        "maximum context length",
        "prompt is too long",
        "context window",
        "exceeds the context",
        "context length exceeded",
    ]
    .iter()
    .any(|phrase| body.contains(phrase))
}
