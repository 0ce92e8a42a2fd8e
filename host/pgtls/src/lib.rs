//! TLS for Longhand's PostgreSQL connections, through rustls (the ring
//! provider, as everywhere in Longhand): the session store's
//! (`longhand-session`) and the databases granted to tools
//! (`longhand-hands`). A crate of its own so that both floors share one
//! reading of `sslmode` without reaching each other.
//!
//! A PostgreSQL URL takes libpq's two settings, in the URI query
//! (`postgres://…/db?sslmode=verify-full&sslrootcert=/etc/ca.pem`) or as
//! `key=value` words:
//!
//! | `sslmode`     | TLS                       | certificate checked                  |
//! |---------------|---------------------------|--------------------------------------|
//! | *(absent)*    | no (plain TCP, as before) | —                                    |
//! | `disable`     | no                        | —                                    |
//! | `prefer`      | if the server offers it   | as `require`                         |
//! | `require`     | yes, or refuse to connect | only with `sslrootcert` (chain)      |
//! | `verify-ca`   | yes                       | chain up to `sslrootcert`            |
//! | `verify-full` | yes                       | chain, and the host name in the URL  |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the
//! public CAs Longhand carries (webpki-roots). `verify-ca` and
//! `verify-full` need it: there is no default file to fall back on. As in
//! libpq, `require` without `sslrootcert` encrypts but does not
//! authenticate the server (a man in the middle can read everything):
//! use `verify-full` on any network you do not trust.
//!
//! The absent default stays plain TCP, as it was before TLS existed here,
//! so an existing `LONGHAND_STORE` keeps working; docs/fleet.md says to add
//! `sslmode=verify-full`.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode as DriverMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// A URL's TLS settings that cannot be used, or TLS that cannot be set up;
/// the message says which and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError(pub String);

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SettingsError {}

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it, else plain.
    Prefer,
    /// TLS or no connection.
    Require,
    /// TLS, the server's chain checked against `sslrootcert`.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<Self, SettingsError> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(SettingsError(format!(
                    "the URL's sslmode={other} is not one of disable, prefer, require, \
                     verify-ca, verify-full"
                )));
            }
        })
    }

    /// As the URL writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What the driver is told: it knows only disable, prefer, require;
    /// the verifying modes are `require` plus our certificate checks.
    fn driver(self) -> DriverMode {
        match self {
            SslMode::Disable => DriverMode::Disable,
            SslMode::Prefer => DriverMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverMode::Require,
        }
    }

    /// Whether a server without TLS is refused.
    pub fn requires_tls(self) -> bool {
        !matches!(self, SslMode::Disable | SslMode::Prefer)
    }
}

/// Where trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file.
    File(PathBuf),
    /// The public CAs of webpki-roots (`sslrootcert=system`).
    System,
}

impl RootCert {
    fn describe(&self) -> String {
        match self {
            RootCert::File(path) => format!("the CA in {}", path.display()),
            RootCert::System => "the public CAs (sslrootcert=system)".to_owned(),
        }
    }
}

/// The TLS settings of a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `sslmode`; `Disable` when the URL has none.
    pub mode: SslMode,
    /// `sslrootcert`.
    pub root: Option<RootCert>,
}

/// Splits `url` into what the driver parses (without `sslmode` and
/// `sslrootcert`, which it does not know in full) and the TLS settings.
pub fn split_url(url: &str) -> Result<(String, TlsSettings), SettingsError> {
    let mut mode = None;
    let mut root = None;
    let mut take = |key: &str, value: String| -> Result<bool, SettingsError> {
        match key {
            "sslmode" => mode = Some(SslMode::parse(&value)?),
            "sslrootcert" => {
                root = Some(match value.as_str() {
                    "system" => RootCert::System,
                    path => RootCert::File(PathBuf::from(path)),
                })
            }
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&').filter(|p| !p.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if !take(key, percent_decode(value)?)? {
                        kept.push(pair);
                    }
                }
                match kept.is_empty() {
                    true => base.to_owned(),
                    false => format!("{base}?{}", kept.join("&")),
                }
            }
        }
    } else {
        let mut kept = Vec::new();
        for (key, value, raw) in key_values(url)? {
            if !take(&key, value)? {
                kept.push(raw);
            }
        }
        kept.join(" ")
    };
    let settings = TlsSettings {
        mode: mode.unwrap_or(SslMode::Disable),
        root,
    };
    if matches!(settings.mode, SslMode::VerifyCa | SslMode::VerifyFull) && settings.root.is_none() {
        return Err(SettingsError(format!(
            "the URL's sslmode={} needs sslrootcert=<PEM file of the CA that signed the \
             server's certificate> (or sslrootcert=system for a publicly signed one)",
            settings.mode.as_str()
        )));
    }
    Ok((rest, settings))
}

/// `%xx` escapes of a URI query value.
fn percent_decode(text: &str) -> Result<String, SettingsError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| SettingsError(format!("the URL has a bad %-escape in {text:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| SettingsError(format!("the URL's {text:?} is not UTF-8")))
}

/// The `key=value` words of a libpq connection string, each with its raw
/// text; values may be single-quoted with `\` escapes.
fn key_values(text: &str) -> Result<Vec<(String, String, String)>, SettingsError> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            return Ok(out);
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next().map(|(_, c)| c) != Some('=') {
            return Err(SettingsError(format!(
                "the store connection string has `{key}` without `=value`"
            )));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                    Some((_, c)) => value.push(c),
                    None => {
                        return Err(SettingsError(
                            "the store connection string has an unclosed quote".into(),
                        ));
                    }
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                value.push(c);
            }
        }
        let end = chars.peek().map_or(text.len(), |(i, _)| *i);
        out.push((key, value, text[start..end].trim_end().to_owned()));
    }
}

/// Sets the driver's mode and builds the connector for `settings`.
pub fn connector(
    config: &mut tokio_postgres::Config,
    settings: &TlsSettings,
) -> Result<MakeRustls, SettingsError> {
    config.ssl_mode(settings.mode.driver());
    let roots = match &settings.root {
        None => None,
        Some(root) => Some(Arc::new(load_roots(root)?)),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| SettingsError(format!("TLS cannot be set up: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match &roots {
        Some(roots) => {
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots.clone(),
                provider.clone(),
            )
            .build()
            .map_err(|e| SettingsError(format!("TLS cannot be set up: {e}")))?;
            Arc::new(Verifier {
                webpki,
                check_name: settings.mode == SslMode::VerifyFull,
                provider: provider.clone(),
            })
        }
        None => Arc::new(Encrypted { provider }),
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustls {
        connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        root: settings.root.clone(),
    })
}

fn load_roots(root: &RootCert) -> Result<rustls::RootCertStore, SettingsError> {
    let path = match root {
        RootCert::System => {
            return Ok(rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            });
        }
        RootCert::File(path) => path,
    };
    let bad =
        |why: String| SettingsError(format!("the URL's sslrootcert={}: {why}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(format!("is not a PEM file of certificates: {e}")))?;
        store
            .add(cert)
            .map_err(|e| bad(format!("holds a certificate rustls refuses: {e}")))?;
    }
    if store.is_empty() {
        return Err(bad(
            "holds no certificate (expected PEM `BEGIN CERTIFICATE` blocks)".into(),
        ));
    }
    Ok(store)
}

/// Chain (and, for `verify-full`, name) checks against the configured CAs.
#[derive(Debug)]
struct Verifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    check_name: bool,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            // verify-ca: a chain to a trusted CA is enough, whatever name
            // the certificate carries.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `require`/`prefer` without `sslrootcert`: libpq's meaning — the channel
/// is encrypted and the handshake's signatures are checked, but any
/// certificate is accepted (the server is not authenticated).
#[derive(Debug)]
struct Encrypted {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Encrypted {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The driver's TLS factory: one connector, a fresh handshake per
/// connection.
#[derive(Clone)]
pub struct MakeRustls {
    connector: tokio_rustls::TlsConnector,
    root: Option<RootCert>,
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = TlsError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, TlsError> {
        let name = ServerName::try_from(domain.to_owned()).map_err(|e| {
            TlsError(format!(
                "{domain:?} cannot be checked against a certificate: {e}"
            ))
        })?;
        Ok(RustlsConnect {
            connector: self.connector.clone(),
            name,
            root: self.root.clone(),
        })
    }
}

/// One handshake.
pub struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
    root: Option<RootCert>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, TlsError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let host = self.name.to_str().into_owned();
            match self.connector.connect(self.name, stream).await {
                Ok(tls) => Ok(RustlsStream(tls)),
                Err(e) => Err(TlsError(handshake_failed(&host, self.root.as_ref(), &e))),
            }
        })
    }
}

/// Says what failed, and against which CA.
fn handshake_failed(host: &str, root: Option<&RootCert>, error: &std::io::Error) -> String {
    let cert_error = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
    match (cert_error, root) {
        (true, Some(root)) => format!(
            "the certificate of {host} does not verify against {}: {error}",
            root.describe()
        ),
        _ => format!("the TLS handshake with {host} failed: {error}"),
    }
}

/// A TLS failure, in words (the driver boxes it as the cause).
#[derive(Debug)]
pub struct TlsError(String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// An encrypted connection.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for RustlsStream<S> {
    /// No channel binding: SCRAM then authenticates without it (what the
    /// server accepts unless a client demands `channel_binding=require`).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}
