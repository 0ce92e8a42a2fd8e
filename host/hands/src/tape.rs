//! The HTTP tape: the `wasi:http` exchanges of one call, recorded or
//! replayed, for tool tests (`longhand tool call --record`, `longhand tool
//! test`).
//!
//! A [`Tape`] is a per-call option of [`super::Hands::call_with`]; a call
//! without one is untouched.
//!
//! - **Recording** wraps the real send ([`HttpPolicy::send`]): each request
//!   is kept as the guest made it (method, URL, headers, body, before the
//!   host adds anything), with the answer as the guest read it (status,
//!   headers and body after the policy's redaction), or the error it got.
//!   Secrets the host added are named, never valued, and everything leaves
//!   the tape through the call's secret redactor ([`Tape::exchanges`],
//!   [`Tape::scrub`]), so no injected value can reach a fixture file.
//! - **Replaying** replaces the send: the policy's admission checks still
//!   run ([`HttpPolicy::admit`]: scheme, request count, host grant — the
//!   replay's grants are the recorded ones, never broader), then the next
//!   recorded exchange, in order, must be this request, and its answer is
//!   served. Nothing is resolved or connected. A request that is not on the
//!   tape, or differs from it, gets an error and is written down as a
//!   [problem](Tape::problems) with a diff of expected against got, as is a
//!   recorded exchange the tool never made.
//!
//! Bounds: the bodies a tape holds (requests buffered to be kept or
//! compared, answers copied as the guest reads them) count against
//! [`MAX_TAPE_BYTES`] per call and against the call's host-memory budget,
//! like every other byte a guest can make the host hold. Past either, a
//! request body is refused (`HTTP request body size`), a response stops
//! being copied, and the tape says so: a recording that was cut is not a
//! recording, and the CLI refuses to write it.
//!
//! What this module must not do: decide who may reach what (that is
//! [`super::net`]), or know about fixture files (the CLI owns their shape).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Body as HttpBody, Frame};
use http_body_util::BodyExt;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

use super::budget::{Charge, HostBudget};
use super::net::HttpPolicy;
use super::redact::Redactor;

/// Most body bytes one call's tape holds (requests and responses
/// together): 16 MiB. Also charged to the call's host-memory budget.
pub const MAX_TAPE_BYTES: u64 = 16 << 20;

/// Longest error text kept for an exchange that failed.
const MAX_ERROR_BYTES: usize = 512;

/// Longest piece of a body shown in a diff.
const DIFF_PREVIEW_BYTES: usize = 240;

/// The error a request denied by the policy got, as a tape writes it.
const DENIED: &str = "HttpRequestDenied";

/// One request and what came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// The request as the guest made it.
    pub request: TapeRequest,
    /// The answer as the guest read it; `None` when `error` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<TapeResponse>,
    /// The error the guest got instead of an answer (a denial, a refused
    /// connection), as wasmtime names it: `ConnectionRefused`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A request as the guest made it, before the host added anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapeRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Header name (lowercase) and value pairs, in the guest's order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The request body; empty when there was none.
    #[serde(default, skip_serializing_if = "TapeBody::is_empty")]
    pub body: TapeBody,
    /// Names of the secrets the host added to the request. Never compared:
    /// a replay holds no secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets_added: Vec<String>,
}

/// An answer as the guest read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapeResponse {
    /// HTTP status.
    pub status: u16,
    /// Header name (lowercase) and value pairs.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body as far as the guest read it.
    #[serde(default)]
    pub body: TapeBody,
    /// The error reading the body ended with (a size limit), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_error: Option<String>,
}

/// A body: written as a JSON string when it is UTF-8, else as
/// `{"base64": "…"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapeBody(pub Vec<u8>);

impl TapeBody {
    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for TapeBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry(
                    "base64",
                    &base64::engine::general_purpose::STANDARD.encode(&self.0),
                )?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for TapeBody {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Encoded { base64: String },
        }
        match Repr::deserialize(d)? {
            Repr::Text(text) => Ok(Self(text.into_bytes())),
            Repr::Encoded { base64 } => base64::engine::general_purpose::STANDARD
                .decode(base64)
                .map(Self)
                .map_err(|e| serde::de::Error::custom(format!("body: bad base64: {e}"))),
        }
    }
}

/// The HTTP tape of one call: a recorder or a player. Cheap to clone; the
/// clones share one tape, so the caller keeps one to read after the call.
#[derive(Clone)]
pub struct Tape {
    inner: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Tape")
            .field("replay", &state.replay)
            .field("exchanges", &state.exchanges.len())
            .field("next", &state.next)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    replay: bool,
    /// Recorded so far, or to be replayed.
    exchanges: Vec<Exchange>,
    /// Replay: the next exchange to serve.
    next: usize,
    problems: Vec<String>,
    /// Body bytes held, against [`MAX_TAPE_BYTES`].
    kept: u64,
    /// What those bytes cost the call's host budget, given back with the tape.
    charges: Vec<Charge>,
    /// Set once a response could not be copied whole.
    cut: bool,
    /// Recording: the call's secrets, to redact everything that leaves.
    redactor: Option<Arc<Redactor>>,
}

impl Tape {
    /// A tape that records the call's exchanges.
    pub fn record() -> Self {
        Self {
            inner: Arc::default(),
        }
    }

    /// A tape that serves `exchanges`, in order, instead of the network.
    pub fn replay(exchanges: Vec<Exchange>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(State {
                replay: true,
                exchanges,
                ..State::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere leaves the tape as it was; it is still the
        // best account of the call there is.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The recorded exchanges, with every reflection of a secret the call
    /// held replaced by `[REDACTED]`. For a player: what it was given.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let state = self.lock();
        let mut out = state.exchanges.clone();
        if let Some(r) = &state.redactor {
            for e in &mut out {
                redact_exchange(r, e);
            }
        }
        out
    }

    /// What went wrong: for a player, each request that was not on the
    /// tape or differed from it, then each recorded exchange that was
    /// never requested; for a recorder, why the recording is not whole.
    /// Empty when the tape and the call agree.
    pub fn problems(&self) -> Vec<String> {
        let state = self.lock();
        let mut out = state.problems.clone();
        if state.replay {
            for (i, e) in state.exchanges.iter().enumerate().skip(state.next) {
                out.push(format!(
                    "request {} was recorded but the tool did not make it: {} {}",
                    i + 1,
                    e.request.method,
                    e.request.url
                ));
            }
        }
        out
    }

    /// Replace every reflection of a secret the call held in the strings
    /// of `value` (keys too) by `[REDACTED]`. For what a caller writes
    /// beside the exchanges: the input, the output.
    pub fn scrub(&self, value: &mut serde_json::Value) {
        let Some(r) = self.lock().redactor.clone() else {
            return;
        };
        scrub_json(&r, value);
    }

    /// Learn the call's secrets (recording), so that nothing leaves the
    /// tape unredacted. If no matcher can be built, the recording is
    /// refused rather than written unredacted.
    pub(crate) fn arm(&self, policy: &HttpPolicy) {
        let mut state = self.lock();
        if state.replay || policy.secrets.is_empty() {
            return;
        }
        let values: Vec<&str> = policy.secrets.iter().map(|s| s.value.expose()).collect();
        match Redactor::shared(&values) {
            Ok(r) => state.redactor = Some(r),
            Err(e) => state.problems.push(format!(
                "the recording cannot be checked for secrets ({e}), so it is not kept"
            )),
        }
    }

    /// Send `req` through the tape: record around the policy, or answer
    /// from the recording.
    pub(crate) async fn send(
        self,
        policy: Arc<HttpPolicy>,
        req: http::Request<WasiBody>,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let (parts, body) = req.into_parts();
        let body = self.take_body(body, &policy).await?;
        let secrets_added = match (parts.uri.host(), port_of(&parts.uri)) {
            (Some(host), Some(port)) if !self.lock().replay => {
                policy.secrets_for(host.trim_start_matches('[').trim_end_matches(']'), port)
            }
            _ => Vec::new(),
        };
        let request = TapeRequest {
            method: parts.method.to_string(),
            url: parts.uri.to_string(),
            headers: pairs(&parts.headers),
            body: TapeBody(body.to_vec()),
            secrets_added,
        };
        if self.lock().replay {
            return self.serve(&policy, &parts.uri, request);
        }
        let req = http::Request::from_parts(parts, full(body));
        match policy.clone().send(req).await {
            Ok(response) => {
                let (parts, inner) = response.into_parts();
                let index = self.push(Exchange {
                    request,
                    response: Some(TapeResponse {
                        status: parts.status.as_u16(),
                        headers: pairs(&parts.headers),
                        body: TapeBody::default(),
                        body_error: None,
                    }),
                    error: None,
                });
                let tee = Tee {
                    inner,
                    tape: self,
                    index,
                    budget: policy.budget.clone(),
                };
                Ok(http::Response::from_parts(parts, tee.boxed_unsync()))
            }
            Err(err) => {
                self.push(Exchange {
                    request,
                    response: None,
                    error: Some(error_name(&err)),
                });
                Err(err)
            }
        }
    }

    fn push(&self, exchange: Exchange) -> usize {
        let mut state = self.lock();
        state.exchanges.push(exchange);
        state.exchanges.len() - 1
    }

    /// Whether `len` more body bytes fit the tape and the call's budget;
    /// if so they are counted until the tape is dropped.
    fn keep(&self, len: usize, budget: &Arc<HostBudget>) -> bool {
        let mut state = self.lock();
        let len = len as u64;
        if state.kept.saturating_add(len) > MAX_TAPE_BYTES {
            return false;
        }
        match budget.charge(len, "the HTTP tape") {
            Ok(charge) => {
                state.kept += len;
                state.charges.push(charge);
                true
            }
            Err(_) => false,
        }
    }

    /// The whole request body, bounded: to be kept, or compared.
    async fn take_body(&self, mut body: WasiBody, policy: &HttpPolicy) -> Result<Bytes, HttpError> {
        let mut buf = Vec::new();
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            if !self.keep(data.len(), &policy.budget) {
                let what = format!(
                    "HTTP request bodies on the tape of more than {MAX_TAPE_BYTES} bytes (or the \
                     call's host_memory)"
                );
                policy.journal.lock().map(|mut j| j.limit_hit(what)).ok();
                self.lock()
                    .problems
                    .push("a request body did not fit on the tape".to_owned());
                return Err(HttpError::HttpRequestBodySize(Some(buf.len() as u64)));
            }
            buf.extend_from_slice(&data);
        }
        Ok(Bytes::from(buf))
    }

    /// Replay: admit `got` as the policy would, then serve the next
    /// exchange if it is this request.
    fn serve(
        &self,
        policy: &HttpPolicy,
        uri: &http::Uri,
        got: TapeRequest,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let admitted = policy.admit(uri);
        let mut state = self.lock();
        let n = state.next;
        let Some(want) = state.exchanges.get(n).cloned() else {
            if let Err(e) = admitted {
                // Refused by the recorded grants, as it was when recorded
                // (or a problem the tape reports as an unplayed exchange).
                return Err(e);
            }
            state.problems.push(format!(
                "request {} was not recorded: {} {}",
                n + 1,
                got.method,
                got.url
            ));
            return Err(not_on_tape(policy, uri, "is not on the recording"));
        };
        let diff = diff_request(&want.request, &got);
        let admitted = match admitted {
            Ok(a) => a,
            Err(e) => {
                // Denied now; if it was denied when recorded, that is the
                // exchange, played.
                if diff.is_empty() && want.error.as_deref() == Some(DENIED) {
                    state.next += 1;
                }
                return Err(e);
            }
        };
        state.next += 1;
        if !diff.is_empty() {
            state.problems.push(format!(
                "request {} differs from the recording (- expected, + got):\n{}",
                n + 1,
                diff.join("\n")
            ));
            return Err(not_on_tape(policy, uri, "differs from the recording"));
        }
        drop(state);
        if let Some(error) = &want.error {
            return Err(error_from_name(error));
        }
        let Some(answer) = want.response else {
            return Err(HttpError::InternalError(Some(
                "the recording has neither an answer nor an error for this request".to_owned(),
            )));
        };
        let mut response = http::Response::builder().status(answer.status);
        for (name, value) in &answer.headers {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                self.lock().problems.push(format!(
                    "request {}: the recorded response header `{name}` is not a valid header",
                    n + 1
                ));
                continue;
            };
            response = response.header(name, value);
        }
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        policy
            .journal
            .lock()
            .map(|mut j| {
                j.http_bytes_in += answer.body.0.len() as u64;
                j.use_cap(
                    "http",
                    admitted.resource.clone(),
                    format!(
                        "{} {path} -> {} (from the recording)",
                        got.method, answer.status
                    ),
                )
            })
            .ok();
        let body = Replayed {
            data: (!answer.body.is_empty()).then(|| Bytes::from(answer.body.0)),
            error: answer.body_error.as_deref().map(error_from_name),
        };
        response.body(body.boxed_unsync()).map_err(|e| {
            HttpError::InternalError(Some(format!("the recorded response is not valid: {e}")))
        })
    }
}

/// The error a request off the tape gets, written in the receipt too.
fn not_on_tape(policy: &HttpPolicy, uri: &http::Uri, why: &str) -> HttpError {
    policy
        .journal
        .lock()
        .map(|mut j| j.deny("http", uri.to_string(), format!("the request {why}")))
        .ok();
    HttpError::InternalError(Some(format!("replay: this request {why}")))
}

fn port_of(uri: &http::Uri) -> Option<u16> {
    uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })
}

fn pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn full(bytes: Bytes) -> WasiBody {
    http_body_util::Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// The name of `err` as a tape writes it: wasmtime's variant, with its
/// detail when it has one, cut short.
fn error_name(err: &HttpError) -> String {
    super::bound::cut(format!("{err:?}"), MAX_ERROR_BYTES)
}

/// The error a recorded name stands for. Variants without data come back
/// as themselves; the rest as an internal error carrying the recorded text.
fn error_from_name(name: &str) -> HttpError {
    use HttpError as E;
    match name {
        "DnsTimeout" => E::DnsTimeout,
        "DestinationNotFound" => E::DestinationNotFound,
        "DestinationUnavailable" => E::DestinationUnavailable,
        "DestinationIpProhibited" => E::DestinationIpProhibited,
        "DestinationIpUnroutable" => E::DestinationIpUnroutable,
        "ConnectionRefused" => E::ConnectionRefused,
        "ConnectionTerminated" => E::ConnectionTerminated,
        "ConnectionTimeout" => E::ConnectionTimeout,
        "ConnectionReadTimeout" => E::ConnectionReadTimeout,
        "ConnectionWriteTimeout" => E::ConnectionWriteTimeout,
        "ConnectionLimitReached" => E::ConnectionLimitReached,
        "TlsProtocolError" => E::TlsProtocolError,
        "TlsCertificateError" => E::TlsCertificateError,
        DENIED => E::HttpRequestDenied,
        "HttpRequestUriInvalid" => E::HttpRequestUriInvalid,
        "HttpResponseIncomplete" => E::HttpResponseIncomplete,
        "HttpResponseTimeout" => E::HttpResponseTimeout,
        "HttpProtocolError" => E::HttpProtocolError,
        other => match other.strip_prefix("Connect(") {
            Some(_) => E::ConnectionRefused,
            None => E::InternalError(Some(format!("recorded: {other}"))),
        },
    }
}

/// How `got` differs from `want`, one line per difference (empty when it
/// does not): method, URL, each header by name, body.
pub fn diff_request(want: &TapeRequest, got: &TapeRequest) -> Vec<String> {
    let mut out = Vec::new();
    if want.method != got.method {
        out.push(format!("- method {}", want.method));
        out.push(format!("+ method {}", got.method));
    }
    if want.url != got.url {
        out.push(format!("- url {}", want.url));
        out.push(format!("+ url {}", got.url));
    }
    let mut names: Vec<&str> = want
        .headers
        .iter()
        .chain(&got.headers)
        .map(|(n, _)| n.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let values = |h: &[(String, String)]| -> Vec<String> {
            h.iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
                .collect()
        };
        let (w, g) = (values(&want.headers), values(&got.headers));
        if w != g {
            for v in &w {
                out.push(format!("- header {name}: {v}"));
            }
            for v in &g {
                out.push(format!("+ header {name}: {v}"));
            }
        }
    }
    if want.body != got.body {
        let (w, g) = (&want.body.0, &got.body.0);
        let at = w.iter().zip(g).take_while(|(a, b)| a == b).count();
        out.push(format!(
            "  body differs at byte {at} ({} bytes expected, {} got):",
            w.len(),
            g.len()
        ));
        out.push(format!("- body {}", preview(w, at)));
        out.push(format!("+ body {}", preview(g, at)));
    }
    out
}

/// A window of `bytes` around offset `at`, quoted, for a diff line.
fn preview(bytes: &[u8], at: usize) -> String {
    let start = at.saturating_sub(DIFF_PREVIEW_BYTES / 4);
    let end = (start + DIFF_PREVIEW_BYTES).min(bytes.len());
    let text = String::from_utf8_lossy(&bytes[start.min(end)..end]);
    format!(
        "{}{:?}{}",
        if start > 0 { "…" } else { "" },
        text,
        if end < bytes.len() { "…" } else { "" }
    )
}

fn redact_text(r: &Arc<Redactor>, text: &mut String) {
    let (out, found) = r.redact(text.as_bytes());
    if !found.is_empty() || out != text.as_bytes() {
        *text = String::from_utf8_lossy(&out).into_owned();
    }
}

fn redact_exchange(r: &Arc<Redactor>, e: &mut Exchange) {
    redact_text(r, &mut e.request.url);
    let headers = e
        .request
        .headers
        .iter_mut()
        .chain(e.response.iter_mut().flat_map(|a| a.headers.iter_mut()));
    for (name, value) in headers {
        redact_text(r, name);
        redact_text(r, value);
    }
    e.request.body.0 = r.redact(&e.request.body.0).0;
    if let Some(answer) = &mut e.response {
        answer.body.0 = r.redact(&answer.body.0).0;
        if let Some(err) = &mut answer.body_error {
            redact_text(r, err);
        }
    }
    if let Some(err) = &mut e.error {
        redact_text(r, err);
    }
}

fn scrub_json(r: &Arc<Redactor>, value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => redact_text(r, s),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_json(r, v)),
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (mut key, mut v) in old {
                redact_text(r, &mut key);
                scrub_json(r, &mut v);
                map.insert(key, v);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A response body that copies what the guest reads onto the tape.
struct Tee {
    inner: WasiBody,
    tape: Tape,
    index: usize,
    budget: Arc<HostBudget>,
}

impl HttpBody for Tee {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let cut = this.tape.lock().cut;
                    let kept = !cut && this.tape.keep(data.len(), &this.budget);
                    let mut state = this.tape.lock();
                    if kept {
                        if let Some(answer) = state
                            .exchanges
                            .get_mut(this.index)
                            .and_then(|e| e.response.as_mut())
                        {
                            answer.body.0.extend_from_slice(data);
                        }
                    } else if !state.cut {
                        state.cut = true;
                        state.problems.push(format!(
                            "the answers to this call's requests hold more than the tape keeps \
                             ({MAX_TAPE_BYTES} bytes, or the call's host_memory)"
                        ));
                    }
                }
            }
            Poll::Ready(Some(Err(err))) => {
                let name = error_name(err);
                let mut state = this.tape.lock();
                if let Some(answer) = state
                    .exchanges
                    .get_mut(this.index)
                    .and_then(|e| e.response.as_mut())
                {
                    answer.body_error = Some(name);
                }
            }
            Poll::Ready(None) | Poll::Pending => {}
        }
        polled
    }
}

/// A recorded body, served: its bytes, then the error it ended with.
struct Replayed {
    data: Option<Bytes>,
    error: Option<HttpError>,
}

impl HttpBody for Replayed {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.error.take().map(Err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(url: &str, headers: &[(&str, &str)], body: &str) -> TapeRequest {
        TapeRequest {
            method: "GET".to_owned(),
            url: url.to_owned(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            body: TapeBody(body.as_bytes().to_vec()),
            secrets_added: Vec::new(),
        }
    }

    #[test]
    fn a_diff_names_each_difference_and_nothing_else() {
        let want = request("http://a/x", &[("accept", "json"), ("x-id", "1")], "hello");
        assert!(diff_request(&want, &want.clone()).is_empty());
        let mut got = request("http://a/y", &[("accept", "json"), ("x-new", "2")], "help!");
        got.method = "POST".to_owned();
        let diff = diff_request(&want, &got).join("\n");
        for line in [
            "- method GET",
            "+ method POST",
            "- url http://a/x",
            "+ url http://a/y",
            "- header x-id: 1",
            "+ header x-new: 2",
            "body differs at byte 3",
            "- body \"hello\"",
            "+ body \"help!\"",
        ] {
            assert!(diff.contains(line), "no `{line}` in:\n{diff}");
        }
        assert!(!diff.contains("accept"), "{diff}");
    }

    #[test]
    fn bodies_are_text_when_they_can_be_and_base64_otherwise() {
        for bytes in [b"plain text".to_vec(), vec![0xff, 0x00, 0x80]] {
            let json = serde_json::to_value(TapeBody(bytes.clone())).unwrap();
            assert_eq!(json.is_string(), bytes[0] != 0xff, "{json}");
            let back: TapeBody = serde_json::from_value(json).unwrap();
            assert_eq!(back.0, bytes);
        }
        assert!(serde_json::from_str::<TapeBody>(r#"{"base64": "!!"}"#).is_err());
    }

    #[test]
    fn recorded_error_names_come_back_as_the_same_error() {
        for err in [
            HttpError::ConnectionRefused,
            HttpError::HttpRequestDenied,
            HttpError::DestinationNotFound,
        ] {
            let back = error_from_name(&error_name(&err));
            assert_eq!(format!("{back:?}"), format!("{err:?}"));
        }
        assert!(matches!(
            error_from_name("Something(new)"),
            HttpError::InternalError(Some(_))
        ));
    }

    #[test]
    fn scrubbing_redacts_keys_and_values_at_any_depth() {
        let secret = "s3cr3t-value-0123456789";
        let r = Redactor::shared(&[secret]).unwrap();
        let mut v = serde_json::json!({
            "a": [format!("Bearer {secret}")],
            secret: {"deep": secret},
            "n": 1,
        });
        scrub_json(&r, &mut v);
        let text = v.to_string();
        assert!(!text.contains(secret), "{text}");
        assert!(text.contains("[REDACTED]"), "{text}");
        assert_eq!(v["n"], 1);
    }
}
