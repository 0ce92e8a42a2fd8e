//! Outbound HTTP for guests: the one door out of the sandbox.
//!
//! Every `wasi:http/outgoing-handler.handle` call lands in
//! [`HttpPolicy::send`], which, in order:
//! 1. refuses a host that no [`HostPattern`] grants (by name and port);
//! 2. resolves the name itself and drops every address that
//!    [`super::addr`] classes as special (loopback, private, link-local,
//!    cloud metadata, the rest of the IANA special-purpose registries, IPv6
//!    outside global unicast) unless a pattern names that address literally —
//!    and then connects to an address it checked, so DNS rebinding between
//!    check and connect is impossible;
//! 3. adds secrets for matching hosts (overwriting any header of that name the
//!    guest set), never over clear-text HTTP to a non-loopback address, and
//!    asks for an uncompressed answer to such a request: a compressed one is
//!    refused, since redaction cannot look inside it;
//! 4. caps the response body and, when the call holds any secret, redacts
//!    every reflection of one ([`super::redact`]) from the response headers
//!    and body before the guest can read them.
//!
//! Each decision is written to the call's [`Journal`] so the receipt shows
//! what was used and what was denied. A call with an HTTP tape
//! ([`super::tape`]) records around [`HttpPolicy::send`], or replays with
//! only step 1 ([`HttpPolicy::admit`]) and nothing resolved or sent. This module never sees guest memory and
//! must not touch the component instance.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, HOST, HeaderValue, TE, TRANSFER_ENCODING,
};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

use super::addr;
use super::budget::HostBudget;
use super::grants::{HostPattern, SecretGrant};
use super::receipt::Journal;
use super::redact::{self, REDACTED, Redactor};

/// A request past [`HttpPolicy::admit`]: where it goes and which grants
/// let it.
pub(crate) struct Admitted {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// `host:port` (`[v6]:port`), as receipts name it.
    pub resource: String,
    /// The host patterns that match it.
    pub matching: Vec<HostPattern>,
}

/// How long to wait for a TCP connection and TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long to wait for the response head once the request is sent.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);

/// The outbound HTTP policy of one call.
pub(crate) struct HttpPolicy {
    pub hosts: Vec<HostPattern>,
    pub secrets: Vec<SecretGrant>,
    pub max_response_bytes: u64,
    pub max_requests: u32,
    pub journal: Arc<Mutex<Journal>>,
    /// The call's descriptor budget: each connection holds one socket
    /// until its response is read or dropped.
    pub budget: Arc<HostBudget>,
}

impl HttpPolicy {
    fn deny(&self, resource: String, reason: String) -> HttpError {
        self.record_denial("http", resource, reason);
        HttpError::HttpRequestDenied
    }

    fn record_denial(&self, capability: &str, resource: String, reason: String) {
        self.journal
            .lock()
            .map(|mut j| j.deny(capability, resource, reason))
            .ok();
    }

    /// Note in the receipt that secrets `found` (indexes into `secrets`)
    /// came back from `resource` and were withheld from the guest.
    fn record_reflections(&self, found: &[usize], resource: &str, place: &str) {
        for &i in found {
            if let Some(secret) = self.secrets.get(i) {
                self.record_denial(
                    "secret",
                    secret.name.clone(),
                    format!(
                        "reflected by {resource} in the response {place}; the guest got {REDACTED}"
                    ),
                );
            }
        }
    }

    /// The checks a request passes before anything leaves the host: a
    /// scheme of http or https, a host name, the call's request count, and
    /// a grant matching host and port. Each refusal is in the receipt.
    /// [`super::tape`] runs these alone when it answers from a recording.
    pub(crate) fn admit(&self, uri: &http::Uri) -> Result<Admitted, HttpError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => {
                return Err(self.deny(
                    uri.to_string(),
                    format!("scheme {other:?} is not allowed; use http or https"),
                ));
            }
        };
        let Some(host) = uri
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
        else {
            return Err(HttpError::HttpRequestUriInvalid);
        };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let resource = match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
            _ => format!("{host}:{port}"),
        };

        let count = {
            let mut journal = self
                .journal
                .lock()
                .map_err(|_| HttpError::InternalError(None))?;
            journal.http_requests += 1;
            journal.http_requests
        };
        if count > self.max_requests {
            return Err(self.deny(
                resource,
                format!("more than {} requests in one call", self.max_requests),
            ));
        }

        let matching: Vec<HostPattern> = self
            .hosts
            .iter()
            .filter(|p| p.matches(&host, port))
            .cloned()
            .collect();
        if matching.is_empty() {
            return Err(self.deny(resource, "host not granted".to_owned()));
        }
        Ok(Admitted {
            https,
            host,
            port,
            resource,
            matching,
        })
    }

    /// Names of the secrets [`HttpPolicy::send`] adds to a request for
    /// `host:port` (over https, or to loopback).
    pub(crate) fn secrets_for(&self, host: &str, port: u16) -> Vec<String> {
        self.secrets
            .iter()
            .filter(|s| s.host.matches(host, port))
            .map(|s| s.name.clone())
            .collect()
    }

    /// Decide on, and if allowed send, one guest request.
    pub(crate) async fn send(
        self: Arc<Self>,
        mut req: http::Request<WasiBody>,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let uri = req.uri().clone();
        let Admitted {
            https: scheme_https,
            host,
            port,
            resource,
            matching,
        } = self.admit(&uri)?;

        let addrs = match resolve(&host, port).await {
            Ok(addrs) => addrs,
            Err(err) => {
                self.journal
                    .lock()
                    .map(|mut j| j.deny("http", resource.clone(), format!("cannot resolve: {err}")))
                    .ok();
                return Err(HttpError::DestinationNotFound);
            }
        };
        let host_is_localhost = host.eq_ignore_ascii_case("localhost");
        let mut refused = Vec::new();
        let allowed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|addr| {
                let Some(special) = addr::special(addr.ip()) else {
                    return true;
                };
                let named = matching.iter().any(|p| {
                    p.names_ip(addr.ip())
                        || p.names_ip(special.judged)
                        || (special.is_loopback() && host_is_localhost && p.names_localhost())
                });
                if !named {
                    refused.push(format!("{} ({special})", addr.ip()));
                }
                named
            })
            .collect();
        if allowed.is_empty() {
            return Err(self.deny(
                resource,
                format!(
                    "resolves to {}, which needs a grant naming the address itself",
                    refused.join(", ")
                ),
            ));
        }

        // Secrets: the host adds them; the guest's own value is replaced.
        let dest_loopback = allowed
            .iter()
            .all(|a| addr::special(a.ip()).is_some_and(|s| s.is_loopback()));
        let mut injected = Vec::new();
        for secret in self.secrets.iter().filter(|s| s.host.matches(&host, port)) {
            if !scheme_https && !dest_loopback {
                self.journal
                    .lock()
                    .map(|mut j| {
                        j.deny(
                            "secret",
                            secret.name.clone(),
                            format!("not sent to {resource} over plain http"),
                        )
                    })
                    .ok();
                continue;
            }
            let Ok(name) = http::HeaderName::from_bytes(secret.header.as_bytes()) else {
                continue;
            };
            let Ok(mut value) = HeaderValue::from_str(&secret.header_value()) else {
                continue;
            };
            value.set_sensitive(true);
            req.headers_mut().insert(name, value);
            injected.push(secret.name.clone());
        }
        if !injected.is_empty() {
            // A compressed reflection is invisible to redaction: ask for the
            // answer as it is (whatever the guest asked for), and refuse a
            // compressed one below. `TE` could ask for a compressed transfer.
            req.headers_mut()
                .insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
            req.headers_mut().remove(TE);
            // A byte range could fetch an echo of the secret in pieces
            // shorter than the redaction window, one request at a time.
            req.headers_mut().remove(http::header::RANGE);
            req.headers_mut().remove(http::header::IF_RANGE);
        }

        // The request line carries only path and query; Host comes from the URI.
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_owned();
        *req.uri_mut() = http::Uri::builder()
            .path_and_query(path.as_str())
            .build()
            .map_err(|_| HttpError::HttpRequestUriInvalid)?;
        let host_header = match uri.port_u16() {
            Some(p) => format!("{}:{p}", uri.host().unwrap_or(&host)),
            None => uri.host().unwrap_or(&host).to_owned(),
        };
        if let Ok(v) = HeaderValue::from_str(&host_header) {
            req.headers_mut().insert(HOST, v);
        }
        let method = req.method().clone();

        // The socket counts against the call's descriptors for as long as
        // the connection lives (the token rides in its task).
        let held = self
            .budget
            .admit_token("an HTTP connection")
            .map_err(|_| HttpError::ConnectionLimitReached)?;
        let stream = connect(&allowed).await?;
        let response = if scheme_https {
            let server_name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| HttpError::HttpRequestUriInvalid)?;
            let tls = tokio::time::timeout(
                CONNECT_TIMEOUT,
                tls_connector().connect(server_name, stream),
            )
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(|e| HttpError::Tls(std::io::Error::other(e)))?;
            exchange(TokioIo::new(tls), req, held).await?
        } else {
            exchange(TokioIo::new(stream), req, held).await?
        };

        let status = response.status().as_u16();
        self.journal
            .lock()
            .map(|mut j| {
                j.use_cap(
                    "http",
                    resource.clone(),
                    format!(
                        "{method} {path} -> {status}{}",
                        if injected.is_empty() {
                            String::new()
                        } else {
                            format!(" (secret {} added)", injected.join(", "))
                        }
                    ),
                )
            })
            .ok();

        let (mut parts, incoming) = response.into_parts();
        if !injected.is_empty()
            && let Some(coding) = compression(&parts.headers)
        {
            // Dropping the response closes the connection unread.
            self.record_denial(
                "http",
                resource,
                format!(
                    "answered a request carrying secret {} with {coding}; compressed answers \
                     to requests with secrets are refused, since redaction cannot look inside them",
                    injected.join(", ")
                ),
            );
            return Err(match coding {
                Coding::Content(_) => HttpError::HttpResponseContentCoding(None),
                Coding::Transfer(_) => HttpError::HttpResponseTransferCoding(None),
            });
        }

        let redactor = if self.secrets.is_empty() {
            None
        } else {
            let values: Vec<&str> = self.secrets.iter().map(|s| s.value.expose()).collect();
            match Redactor::shared(&values) {
                Ok(r) => Some(r),
                Err(err) => {
                    // Fail closed: an unredacted answer could carry a secret.
                    self.record_denial("http", resource, format!("response withheld: {err}"));
                    return Err(HttpError::InternalError(Some(
                        "the host could not check the response for secrets".to_owned(),
                    )));
                }
            }
        };
        let stream = match &redactor {
            Some(redactor) => {
                // Redaction may change the body's length.
                parts.headers.remove(CONTENT_LENGTH);
                let found = redact_headers(&mut parts.headers, redactor);
                self.record_reflections(&found, &resource, "headers");
                Some(redactor.stream())
            }
            None => None,
        };
        let body = GuardedBody {
            inner: incoming,
            redact: stream,
            seen: 0,
            limit: self.max_response_bytes,
            policy: self.clone(),
            resource,
            done: false,
        };
        Ok(http::Response::from_parts(parts, body.boxed_unsync()))
    }
}

/// How a response is compressed, named for the receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Coding {
    Content(&'static str),
    Transfer(&'static str),
}

impl std::fmt::Display for Coding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Content(c) => write!(f, "content-encoding {c}"),
            Self::Transfer(c) => write!(f, "transfer-encoding {c}"),
        }
    }
}

/// The first coding other than identity (or, for transfer, chunked) in
/// the response headers. The name is the server's text only when it is a
/// registered coding: anything else could itself carry a secret.
fn compression(headers: &HeaderMap) -> Option<Coding> {
    const KNOWN: &[&str] = &[
        "gzip",
        "x-gzip",
        "deflate",
        "br",
        "zstd",
        "compress",
        "x-compress",
        "dcb",
        "dcz",
        "exi",
        "pack200-gzip",
        "aes128gcm",
    ];
    let name = |c: &str| {
        KNOWN
            .iter()
            .find(|k| k.eq_ignore_ascii_case(c))
            .copied()
            .unwrap_or("an unknown coding")
    };
    let codings = |value: &HeaderValue| -> Vec<String> {
        String::from_utf8_lossy(value.as_bytes())
            .split(',')
            .map(|c| c.split(';').next().unwrap_or_default().trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect()
    };
    for value in headers.get_all(CONTENT_ENCODING) {
        if let Some(c) = codings(value)
            .iter()
            .find(|c| !c.eq_ignore_ascii_case("identity"))
        {
            return Some(Coding::Content(name(c)));
        }
    }
    for value in headers.get_all(TRANSFER_ENCODING) {
        if let Some(c) = codings(value)
            .iter()
            .find(|c| !c.eq_ignore_ascii_case("identity") && !c.eq_ignore_ascii_case("chunked"))
        {
            return Some(Coding::Transfer(name(c)));
        }
    }
    None
}

/// Redact the response headers in place; return which secrets were found.
///
/// A header whose *name* carries a secret is dropped. Values are scanned as
/// one text, one value a line, so an echo wrapped across several headers is
/// caught like one wrapped across lines of a body.
fn redact_headers(headers: &mut HeaderMap, redactor: &Arc<Redactor>) -> Vec<usize> {
    let mut found = Vec::new();
    let tainted: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| {
            let hit = redactor.find(name.as_str().as_bytes());
            found.extend(hit.secrets);
            !hit.spans.is_empty()
        })
        .cloned()
        .collect();
    for name in tainted {
        headers.remove(&name);
    }
    let mut joined = Vec::new();
    let mut ranges = Vec::new();
    for value in headers.values() {
        let start = joined.len();
        joined.extend_from_slice(value.as_bytes());
        ranges.push(start..joined.len());
        joined.push(b'\n');
    }
    let hit = redactor.find(&joined);
    found.extend(hit.secrets);
    if !hit.spans.is_empty() {
        for (value, range) in headers.values_mut().zip(ranges) {
            if hit
                .spans
                .iter()
                .any(|s| s.start < range.end && range.start < s.end)
            {
                let redacted = redact::replace(&joined, range, &hit.spans);
                // Only visible bytes were removed and ASCII added, so this
                // cannot fail; if it did, the marker alone is still safe.
                *value = HeaderValue::from_bytes(&redacted)
                    .unwrap_or_else(|_| HeaderValue::from_static(REDACTED));
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

pub(crate) async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "DNS lookup timed out")
            })??
            .collect();
    if addrs.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no addresses",
        ));
    }
    Ok(addrs)
}

async fn connect(addrs: &[SocketAddr]) -> Result<tokio::net::TcpStream, HttpError> {
    let mut last = HttpError::ConnectionRefused;
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true).ok();
                return Ok(stream);
            }
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
                last = HttpError::ConnectionRefused;
            }
            Ok(Err(err)) => last = HttpError::Connect(err),
            Err(_) => last = HttpError::ConnectionTimeout,
        }
    }
    Err(last)
}

async fn exchange<S>(
    io: TokioIo<S>,
    req: http::Request<WasiBody>,
    held: Arc<()>,
) -> Result<http::Response<hyper::body::Incoming>, HttpError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) =
        tokio::time::timeout(CONNECT_TIMEOUT, hyper::client::conn::http1::handshake(io))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)??;
    // The connection task ends when the response body is dropped or done.
    tokio::spawn(async move {
        let _held = held;
        if let Err(err) = conn.await {
            tracing::debug!(%err, "guest http connection ended with an error");
        }
    });
    tokio::time::timeout(FIRST_BYTE_TIMEOUT, sender.send_request(req))
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)?
        .map_err(HttpError::from)
}

fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .ok()
        .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
    });
    match config {
        Some(c) => tokio_rustls::TlsConnector::from(c.clone()),
        // The ring provider always supports the default versions; this arm
        // exists only so a broken build cannot panic.
        None => tokio_rustls::TlsConnector::from(Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap_or_else(|_| unreachable!("TLS 1.3 is supported by ring"))
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        )),
    }
}

/// A response body that stops at the size limit and, when the call holds
/// secrets, comes out through a [`redact::Stream`]: reflections are
/// replaced even when split across chunks, and only the bytes a reflection
/// could still be completed by are held back (bounded by the body limit,
/// since they are part of the body).
struct GuardedBody {
    inner: hyper::body::Incoming,
    redact: Option<redact::Stream>,
    seen: u64,
    limit: u64,
    policy: Arc<HttpPolicy>,
    resource: String,
    done: bool,
}

impl GuardedBody {
    /// Pass redacted `out` on, noting any secret the stream has found.
    fn out(&mut self, out: Vec<u8>) -> Option<Bytes> {
        if let Some(stream) = &mut self.redact {
            let found = stream.take_hits();
            self.policy
                .record_reflections(&found, &self.resource, "body");
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    }
}

impl Body for GuardedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        loop {
            if this.done {
                let rest = match &mut this.redact {
                    Some(stream) => stream.finish(),
                    None => Vec::new(),
                };
                let rest = this.out(rest);
                this.redact = None;
                return Poll::Ready(rest.map(|b| Ok(Frame::data(b))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.done = true,
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(HttpError::from(err)))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        // Trailers are dropped: they could carry a secret
                        // and no tool needs them.
                        continue;
                    };
                    this.seen += data.len() as u64;
                    if let Ok(mut j) = this.policy.journal.lock() {
                        j.http_bytes_in += data.len() as u64;
                    }
                    if this.seen > this.limit {
                        this.policy
                            .journal
                            .lock()
                            .map(|mut j| {
                                j.limit_hit(format!(
                                    "http response from {} exceeded {} bytes",
                                    this.resource, this.limit
                                ))
                            })
                            .ok();
                        this.done = true;
                        // What is held back is never let out.
                        this.redact = None;
                        return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                            this.limit,
                        )))));
                    }
                    let Some(stream) = &mut this.redact else {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    };
                    let out = stream.push(&data);
                    if let Some(bytes) = this.out(out) {
                        return Poll::Ready(Some(Ok(Frame::data(bytes))));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn compressed_answers_are_recognised() {
        for (pairs, want) in [
            (vec![], None),
            (vec![("content-encoding", "identity")], None),
            (vec![("transfer-encoding", "chunked")], None),
            (
                vec![("content-encoding", "gzip")],
                Some(Coding::Content("gzip")),
            ),
            (
                vec![("content-encoding", "identity, BR")],
                Some(Coding::Content("br")),
            ),
            (
                vec![
                    ("content-encoding", "identity"),
                    ("content-encoding", "zstd"),
                ],
                Some(Coding::Content("zstd")),
            ),
            (
                vec![("content-encoding", "secret-looking-token")],
                Some(Coding::Content("an unknown coding")),
            ),
            (
                vec![("transfer-encoding", "gzip, chunked")],
                Some(Coding::Transfer("gzip")),
            ),
        ] {
            assert_eq!(compression(&headers(&pairs)), want, "{pairs:?}");
        }
    }

    #[test]
    fn headers_are_redacted_by_name_value_and_across_values() {
        let secret = "abcdefghijklmnopqrstuvwxyz";
        let redactor = Redactor::shared(&[secret]).unwrap();
        let mut map = headers(&[
            ("x-plain", "nothing here"),
            ("x-echo", &format!("Bearer {secret}")),
            ("x-abcdefghijklmnop", "1"),
            ("x-wrap-1", "token=abcdefghij"),
            ("x-wrap-2", "klmnopqrstuvwxyz;"),
            ("x-b64", "QmVhcmVyIGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6"),
        ]);
        assert_eq!(redact_headers(&mut map, &redactor), vec![0]);
        let get = |n: &str| map.get(n).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(get("x-plain").as_deref(), Some("nothing here"));
        assert_eq!(get("x-echo").as_deref(), Some("Bearer [REDACTED]"));
        assert_eq!(get("x-abcdefghijklmnop"), None);
        assert_eq!(get("x-wrap-1").as_deref(), Some("token=[REDACTED]"));
        assert_eq!(get("x-wrap-2").as_deref(), Some("[REDACTED];"));
        assert!(get("x-b64").is_some_and(|v| v.contains(REDACTED)));
    }
}
