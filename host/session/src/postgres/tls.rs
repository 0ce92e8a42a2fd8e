//! TLS for the PostgreSQL store, through rustls (the ring provider, as
//! everywhere in Longhand).
//!
//! The store URL takes libpq's two settings, in the URI query
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

use crate::store::StoreError;

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
    fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(StoreError::Invalid(format!(
                    "the store URL's sslmode={other} is not one of disable, prefer, require, \
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

/// The TLS settings of a store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `sslmode`; `Disable` when the URL has none.
    pub mode: SslMode,
    /// `sslrootcert`.
    pub root: Option<RootCert>,
}

/// Splits `url` into what the driver parses (without `sslmode` and
/// `sslrootcert`, which it does not know in full) and the TLS settings.
pub fn split_url(url: &str) -> Result<(String, TlsSettings), StoreError> {
    let mut mode = None;
    let mut root = None;
    let mut take = |key: &str, value: String| -> Result<bool, StoreError> {
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
        return Err(StoreError::Invalid(format!(
            "the store URL's sslmode={} needs sslrootcert=<PEM file of the CA that signed the \
             server's certificate> (or sslrootcert=system for a publicly signed one)",
            settings.mode.as_str()
        )));
    }
    Ok((rest, settings))
}

/// `%xx` escapes of a URI query value.
fn percent_decode(text: &str) -> Result<String, StoreError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    StoreError::Invalid(format!("the store URL has a bad %-escape in {text:?}"))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| StoreError::Invalid(format!("the store URL's {text:?} is not UTF-8")))
}

/// The `key=value` words of a libpq connection string, each with its raw
/// text; values may be single-quoted with `\` escapes.
fn key_values(text: &str) -> Result<Vec<(String, String, String)>, StoreError> {
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
            return Err(StoreError::Invalid(format!(
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
                        return Err(StoreError::Invalid(
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
) -> Result<MakeRustls, StoreError> {
    config.ssl_mode(settings.mode.driver());
    let roots = match &settings.root {
        None => None,
        Some(root) => Some(Arc::new(load_roots(root)?)),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Invalid(format!("TLS cannot be set up: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match &roots {
        Some(roots) => {
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots.clone(),
                provider.clone(),
            )
            .build()
            .map_err(|e| StoreError::Invalid(format!("TLS cannot be set up: {e}")))?;
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

fn load_roots(root: &RootCert) -> Result<rustls::RootCertStore, StoreError> {
    let path = match root {
        RootCert::System => {
            return Ok(rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            });
        }
        RootCert::File(path) => path,
    };
    let bad = |why: String| {
        StoreError::Invalid(format!(
            "the store URL's sslrootcert={}: {why}",
            path.display()
        ))
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_either_url_form() {
        let (rest, s) = split_url(
            "postgres://u:p@db:5432/x?application_name=a&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p@db:5432/x?application_name=a");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root, Some(RootCert::File("/etc/ca.pem".into())));
        let (rest, s) =
            split_url("host=db user=u sslmode=require sslrootcert='/a b/ca.pem' dbname=x").unwrap();
        assert_eq!(rest, "host=db user=u dbname=x");
        assert_eq!(s.mode, SslMode::Require);
        assert_eq!(s.root, Some(RootCert::File("/a b/ca.pem".into())));
        // Absent: plain TCP, as before.
        let (rest, s) = split_url("postgres://u@db/x").unwrap();
        assert_eq!(
            (rest.as_str(), s.mode),
            ("postgres://u@db/x", SslMode::Disable)
        );
        let (_, s) = split_url("postgres://u@db/x?sslrootcert=system&sslmode=verify-ca").unwrap();
        assert_eq!(s.root, Some(RootCert::System));
    }

    #[test]
    fn bad_tls_settings_are_refused_with_what_to_do() {
        let err = split_url("postgres://u@db/x?sslmode=maybe").unwrap_err();
        assert!(err.to_string().contains("not one of disable"), "{err}");
        let err = split_url("postgres://u@db/x?sslmode=verify-full").unwrap_err();
        assert!(err.to_string().contains("needs sslrootcert="), "{err}");
        let mut config = tokio_postgres::Config::new();
        let settings = TlsSettings {
            mode: SslMode::VerifyFull,
            root: Some(RootCert::File("/nonexistent/ca.pem".into())),
        };
        let err = connector(&mut config, &settings).err().unwrap().to_string();
        assert!(
            err.contains("/nonexistent/ca.pem") && err.contains("cannot be read"),
            "{err}"
        );
        let dir = tempfile::TempDir::new().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let settings = TlsSettings {
            mode: SslMode::VerifyCa,
            root: Some(RootCert::File(empty)),
        };
        let err = connector(&mut config, &settings).err().unwrap().to_string();
        assert!(err.contains("holds no certificate"), "{err}");
    }

    /// A CA that signed nothing the test server has (made once with
    /// openssl; only its certificate is kept).
    const WRONG_CA: &str = r#"-----BEGIN CERTIFICATE-----
MIIBjDCCATKgAwIBAgIUNsrSX72ddSmEhtKP/VgYaK3tc1swCgYIKoZIzj0EAwIw
IzEhMB8GA1UEAwwYTm90IHRoZSBMb25naGFuZCB0ZXN0IENBMCAXDTI2MTIwMTIy
NTE0MFoYDzIxMjYxMTA3MjI1MTQwWjAjMSEwHwYDVQQDDBhOb3QgdGhlIExvbmdo
YW5kIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAR0ZXM7+96xWkYD
4cZ9vTp5vSWqW4WBJ3dmoUNGdSqn44lKkF86dSJFWF1e+kZmBDXu32gCOec/Vcbn
TH+YveIQo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwIBBjAdBgNV
HQ4EFgQUk03XcFvCFg02jtrWk1vQ2q3fXqcwCgYIKoZIzj0EAwIDSAAwRQIhANQg
9vtHJ0GtD5gdTRIUHMUCs6XW+fBm11dn5AF8aX1pAiAHpT58KY4L1dwVrRpk9HJ3
F19fInPwyHTgJD+S5yD1mA==
-----END CERTIFICATE-----
"#;

    /// `LONGHAND_TEST_PG` and `LONGHAND_TEST_PG_TLS_CA` (what
    /// `.ci/setup-postgres.sh` prints), or `None` after saying the test is
    /// skipped — a failure instead under `LONGHAND_REQUIRE_EXTERNAL=1`.
    fn tls_server() -> Option<(String, PathBuf)> {
        let url = crate::conformance::postgres_url()?;
        match std::env::var("LONGHAND_TEST_PG_TLS_CA") {
            Ok(ca) if !ca.is_empty() => Some((url, PathBuf::from(ca))),
            _ if std::env::var("LONGHAND_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1") => panic!(
                "LONGHAND_REQUIRE_EXTERNAL=1 but LONGHAND_TEST_PG_TLS_CA is not set: run \
                 `eval \"$(.ci/setup-postgres.sh)\"` first"
            ),
            _ => {
                eprintln!(
                    "skipped: PostgreSQL TLS test (set LONGHAND_TEST_PG_TLS_CA to the CA of the \
                     server in LONGHAND_TEST_PG, e.g. `eval \"$(.ci/setup-postgres.sh)\"`)"
                );
                None
            }
        }
    }

    /// The server as a key=value string naming host `host` but connecting
    /// to the address in `url`, with a schema of its own (created, and
    /// dropped by the returned guard's caller).
    async fn words(url: &str, host: &str, extra: &str) -> (String, String) {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let addr = match &config.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            other => panic!("a TCP server is needed for TLS, not {other:?}"),
        };
        let schema = format!(
            "lh_tls_{}",
            crate::store::SessionId::generate(0).as_str()[2..].to_lowercase()
        );
        let (admin, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let password =
            String::from_utf8_lossy(config.get_password().unwrap_or_default()).into_owned();
        let text = format!(
            "host={host} hostaddr={addr} port={} user={} password='{password}' dbname={} \
             options='-c search_path={schema}' {extra}",
            config.get_ports().first().copied().unwrap_or(5432),
            config.get_user().unwrap_or_default(),
            config.get_dbname().unwrap_or_default(),
        );
        (text, schema)
    }

    async fn drop_schema(url: &str, schema: &str) {
        let (admin, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }

    /// Whether the store's connections are encrypted, as the server sees.
    async fn encrypted(store: &super::super::PostgresStore) -> bool {
        let mut pooled = store.conn().await.unwrap();
        pooled
            .conn()
            .unwrap()
            .client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    #[tokio::test]
    async fn verify_full_connects_with_the_servers_ca_and_refuses_any_other() {
        use super::super::PostgresStore;
        use crate::store::Store;
        let Some((url, ca)) = tls_server() else {
            return;
        };
        let ca = ca.display().to_string();
        // The right CA and the certificate's name: encrypted, and the
        // store works over it.
        let (text, schema) = words(
            &url,
            "localhost",
            &format!("sslmode=verify-full sslrootcert={ca}"),
        )
        .await;
        let store = PostgresStore::connect(&text).await.unwrap();
        assert!(encrypted(&store).await, "not encrypted");
        assert!(store.list().await.unwrap().is_empty());
        // A name the certificate does not carry: refused by verify-full,
        // accepted by verify-ca (chain only).
        let wrong_name = text.replace("host=localhost", "host=db.invalid");
        let err = PostgresStore::connect(&wrong_name)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("does not verify against the CA in {ca}")),
            "{err}"
        );
        assert!(err.contains("db.invalid"), "{err}");
        let chain_only = wrong_name.replace("sslmode=verify-full", "sslmode=verify-ca");
        let store = PostgresStore::connect(&chain_only).await.unwrap();
        assert!(encrypted(&store).await);
        // Another CA: refused, naming the file and the failure.
        let dir = tempfile::TempDir::new().unwrap();
        let wrong = dir.path().join("wrong-ca.pem");
        std::fs::write(&wrong, WRONG_CA).unwrap();
        let other_ca = text.replace(&ca, &wrong.display().to_string());
        let err = PostgresStore::connect(&other_ca)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "does not verify against the CA in {}",
                wrong.display()
            )),
            "{err}"
        );
        assert!(
            err.contains("UnknownIssuer") || err.contains("unknown issuer"),
            "{err}"
        );
        let public = text.replace(&format!("sslrootcert={ca}"), "sslrootcert=system");
        let err = PostgresStore::connect(&public)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("the public CAs"), "{err}");
        // require without a CA: encrypted, not authenticated (libpq's
        // meaning); without sslmode: plain, as before.
        let encrypt_only = text.replace(
            &format!("sslmode=verify-full sslrootcert={ca}"),
            "sslmode=require",
        );
        let store = PostgresStore::connect(&encrypt_only).await.unwrap();
        assert!(encrypted(&store).await);
        let plain = text.replace(&format!("sslmode=verify-full sslrootcert={ca}"), "");
        let store = PostgresStore::connect(&plain).await.unwrap();
        assert!(!encrypted(&store).await);
        drop_schema(&url, &schema).await;
    }

    /// What a PostgreSQL server without TLS answers an SSLRequest with:
    /// `N`. Under a mode that requires TLS the store refuses to go on in
    /// plain text.
    #[tokio::test]
    async fn a_server_without_tls_is_refused_when_the_url_requires_it() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 8];
                    if socket.read_exact(&mut request).await.is_ok()
                        && request == [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]
                    {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let _ = socket.write_all(b"N").await;
                    }
                    let mut rest = Vec::new();
                    let _ = socket.read_to_end(&mut rest).await;
                });
            }
        });
        let dir = tempfile::TempDir::new().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, WRONG_CA).unwrap();
        for query in [
            "sslmode=require".to_owned(),
            format!("sslmode=verify-full&sslrootcert={}", ca.display()),
        ] {
            let url = format!("postgres://u:p@127.0.0.1:{port}/db?{query}");
            let err = super::super::PostgresStore::connect(&url)
                .await
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("the server does not accept TLS, and the store URL requires it"),
                "{err}"
            );
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
