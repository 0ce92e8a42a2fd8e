//! Outbound HTTP for guests: the one door out of the sandbox.
//!
//! Every `wasi:http/outgoing-handler.handle` call lands in
//! [`HttpPolicy::send`], which, in order:
//! 1. refuses a host that no [`HostPattern`] grants (by name and port);
//! 2. resolves the name itself and drops every address that is loopback,
//!    private, link-local, cloud-metadata or otherwise special unless a
//!    pattern names that address literally — and then connects to an address
//!    it checked, so DNS rebinding between check and connect is impossible;
//! 3. adds secrets for matching hosts (overwriting any header of that name the
//!    guest set), never over clear-text HTTP to a non-loopback address;
//! 4. caps the response body and redacts secret values from the response
//!    headers and body before the guest can read them.
//!
//! Each decision is written to the call's [`Journal`] so the receipt shows
//! what was used and what was denied. This module never sees guest memory and
//! must not touch the component instance.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_LENGTH, HOST, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

use super::grants::{HostPattern, SecretGrant};
use super::receipt::Journal;

/// Text that replaces a secret value found in a response.
pub const REDACTED: &str = "[REDACTED]";

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
}

impl HttpPolicy {
    fn deny(&self, resource: String, reason: String) -> HttpError {
        self.journal
            .lock()
            .map(|mut j| j.deny("http", resource, reason))
            .ok();
        HttpError::HttpRequestDenied
    }

    /// Decide on, and if allowed send, one guest request.
    pub(crate) async fn send(
        self: Arc<Self>,
        mut req: http::Request<WasiBody>,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let uri = req.uri().clone();
        let scheme_https = match uri.scheme_str() {
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
        let port = uri
            .port_u16()
            .unwrap_or(if scheme_https { 443 } else { 80 });
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

        let matching: Vec<&HostPattern> = self
            .hosts
            .iter()
            .filter(|p| p.matches(&host, port))
            .collect();
        if matching.is_empty() {
            return Err(self.deny(resource, "host not granted".to_owned()));
        }

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
                let ip = canonical_ip(addr.ip());
                let Some(class) = special_class(ip) else {
                    return true;
                };
                let named = matching.iter().any(|p| {
                    p.names_ip(addr.ip())
                        || p.names_ip(ip)
                        || (class == "loopback" && host_is_localhost && p.names_localhost())
                });
                if !named {
                    refused.push(format!("{ip} ({class})"));
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
        let dest_loopback = allowed.iter().all(|a| canonical_ip(a.ip()).is_loopback());
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
            exchange(TokioIo::new(tls), req).await?
        } else {
            exchange(TokioIo::new(stream), req).await?
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

        let secrets: Vec<Vec<u8>> = self
            .secrets
            .iter()
            .flat_map(|s| encodings(s.value.expose()))
            .collect();
        let (mut parts, incoming) = response.into_parts();
        if !secrets.is_empty() {
            // Redaction may change the body's length.
            parts.headers.remove(CONTENT_LENGTH);
            // A header *name* can carry a secret too: drop such headers.
            let tainted: Vec<http::HeaderName> = parts
                .headers
                .keys()
                .filter(|name| {
                    secrets.iter().any(|s| {
                        contains(
                            &name.as_str().as_bytes().to_ascii_lowercase(),
                            &s.to_ascii_lowercase(),
                        )
                    })
                })
                .cloned()
                .collect();
            for name in tainted {
                parts.headers.remove(&name);
            }
            for value in parts.headers.values_mut() {
                let bytes = value.as_bytes();
                if secrets.iter().any(|s| contains(bytes, s)) {
                    let redacted = redact(bytes, &secrets);
                    if let Ok(v) = HeaderValue::from_bytes(&redacted) {
                        *value = v;
                    }
                }
            }
        }
        let body = GuardedBody {
            inner: incoming,
            secrets,
            carry: BytesMut::new(),
            seen: 0,
            limit: self.max_response_bytes,
            journal: self.journal.clone(),
            resource,
            done: false,
        };
        Ok(http::Response::from_parts(parts, body.boxed_unsync()))
    }
}

async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
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

/// IPv4-mapped and NAT64 IPv6 addresses are judged as the IPv4 address they
/// carry, so `::ffff:127.0.0.1` is loopback.
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            // 64:ff9b::/96, the well-known NAT64 prefix.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|x| *x == 0) {
                let o = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            IpAddr::V6(v6)
        }
        v4 => v4,
    }
}

/// Why an address is off limits without a literal grant, or `None` for an
/// ordinary public address.
pub(crate) fn special_class(ip: IpAddr) -> Option<&'static str> {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4 == Ipv4Addr::new(169, 254, 169, 254)
                || v4 == Ipv4Addr::new(100, 100, 100, 200)
            {
                Some("cloud metadata")
            } else if v4.is_private() {
                Some("private")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
                Some("shared address space")
            } else if v4.is_unspecified() || o[0] == 0 {
                Some("unspecified")
            } else if v4.is_broadcast() || v4.is_multicast() || o[0] >= 240 {
                Some("broadcast/multicast/reserved")
            } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
                Some("IETF protocol assignment")
            } else if (o[0] == 198 && (o[1] & 0xfe) == 18) || v4.is_documentation() {
                Some("benchmarking/documentation")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                Some("cloud metadata")
            } else if (s[0] & 0xfe00) == 0xfc00 {
                Some("private")
            } else if (s[0] & 0xffc0) == 0xfe80 {
                Some("link-local")
            } else if (s[0] & 0xff00) == 0xff00 {
                Some("multicast")
            } else if s[0] == 0x2001 && s[1] == 0xdb8 {
                Some("documentation")
            } else if s[0] == 0x2002 {
                // 6to4 embeds an IPv4 address; judge it by that.
                let v4 =
                    Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
                special_class(IpAddr::V4(v4))
            } else {
                None
            }
        }
    }
}

/// The forms in which a server is likely to reflect a secret: raw, JSON
/// string-escaped, percent-encoded and base64 (standard and URL-safe).
/// Reflections in other encodings (compressed, split, transformed) cannot be
/// caught this way; a granted host is trusted not to do that on purpose.
pub(crate) fn encodings(secret: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut forms = vec![secret.as_bytes().to_vec()];
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"').to_owned();
    forms.push(json.as_bytes().to_vec());
    forms.push(json.replace('/', "\\/").into_bytes());
    let pct: String = secret
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    forms.push(pct.into_bytes());
    for engine in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        forms.push(engine.encode(secret).into_bytes());
    }
    forms.sort();
    forms.dedup();
    forms.retain(|f| !f.is_empty());
    // Longest first, so a form is never cut by a shorter one inside it.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Replace every occurrence of each secret in `data` by [`REDACTED`].
pub(crate) fn redact(data: &[u8], secrets: &[Vec<u8>]) -> Vec<u8> {
    let mut out = data.to_vec();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        if !contains(&out, secret) {
            continue;
        }
        let mut next = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(secret) {
                next.extend_from_slice(REDACTED.as_bytes());
                i += secret.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    out
}

/// A response body that stops at the size limit and redacts secrets, even
/// when a secret is split across chunks: the last `longest - 1` bytes of each
/// chunk are held back until the next chunk (or the end) shows whether they
/// start a secret.
struct GuardedBody {
    inner: hyper::body::Incoming,
    secrets: Vec<Vec<u8>>,
    carry: BytesMut,
    seen: u64,
    limit: u64,
    journal: Arc<Mutex<Journal>>,
    resource: String,
    done: bool,
}

impl GuardedBody {
    fn hold_back(&self) -> usize {
        self.secrets
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .saturating_sub(1)
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
                if this.carry.is_empty() {
                    return Poll::Ready(None);
                }
                let rest = this.carry.split().freeze();
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(redact(
                    &rest,
                    &this.secrets,
                ))))));
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
                    if let Ok(mut j) = this.journal.lock() {
                        j.http_bytes_in += data.len() as u64;
                    }
                    if this.seen > this.limit {
                        this.journal
                            .lock()
                            .map(|mut j| {
                                j.limit_hit(format!(
                                    "http response from {} exceeded {} bytes",
                                    this.resource, this.limit
                                ))
                            })
                            .ok();
                        this.done = true;
                        this.carry.clear();
                        return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(
                            this.limit,
                        )))));
                    }
                    if this.secrets.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    this.carry.extend_from_slice(&data);
                    let redacted = redact(&this.carry, &this.secrets);
                    let keep = this.hold_back().min(redacted.len());
                    let emit = redacted.len() - keep;
                    this.carry = BytesMut::from(&redacted[emit..]);
                    if emit > 0 {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(
                            &redacted[..emit],
                        )))));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_addresses_are_classified() {
        for (ip, class) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "shared address space"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("64:ff9b::a00:1", "private"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fc00::1", "private"),
            ("fe80::1", "link-local"),
            ("2002:7f00:1::", "loopback"),
        ] {
            assert_eq!(special_class(ip.parse().unwrap()), Some(class), "{ip}");
        }
        for ip in ["1.1.1.1", "93.184.216.34", "2606:4700::1111"] {
            assert_eq!(special_class(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn encoded_reflections_are_redacted() {
        let forms = encodings("a/b+c");
        for reflected in ["a/b+c", "a\\/b+c", "a%2Fb%2Bc", "YS9iK2M=", "YS9iK2M"] {
            assert_eq!(
                redact(reflected.as_bytes(), &forms),
                b"[REDACTED]",
                "{reflected}"
            );
        }
    }

    #[test]
    fn redaction_replaces_every_occurrence() {
        let secrets = vec![b"hunter2".to_vec()];
        assert_eq!(
            redact(b"a hunter2 b hunter2", &secrets),
            b"a [REDACTED] b [REDACTED]"
        );
        assert_eq!(redact(b"hunter", &secrets), b"hunter");
    }
}
