//! The one HTTP client of the host's own requests: model providers
//! (`brain::model`) and the telemetry exporter (`telemetry`) build theirs
//! here, so both speak with the same TLS and the same rules.
//!
//! A ground-floor module of the host: it imports nothing from the crate, and
//! everything that sends a request of the host's own imports it, never the
//! other way round (the exporter used to reach up into `brain::model` for
//! it). It is not in `hands`: the hands' HTTP (`hands/src/net.rs`) is the
//! *guest's*, on its own hyper connections behind per-grant host and address
//! checks; this client carries requests the operator configured (a model's
//! base URL, an OTLP endpoint) and has none of those checks to share.
//!
//! What it must not do: read ambient state. No proxy from the environment
//! (reqwest's `system-proxy` feature is off), no system certificate store,
//! so nothing outside the configuration decides where prompts and spans go.

use std::sync::Arc;

/// The client could not be built (a TLS or reqwest setting the platform
/// refuses). Not retryable: the caller reports it and stops.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ClientError(String);

/// A new client: TLS is rustls with the ring provider and the webpki
/// (Mozilla) roots, as in the tool host (one crypto stack in the binary, no
/// system state read); HTTP/1.1 only; `User-Agent: longhand/<version>`.
pub fn client() -> Result<reqwest::Client, ClientError> {
    builder()?
        .build()
        .map_err(|e| ClientError(format!("building HTTP client: {e}")))
}

/// [`client`]'s settings, for a caller that adds its own (the registry
/// client of `dist/` sets a redirect policy and bounds).
pub fn builder() -> Result<reqwest::ClientBuilder, ClientError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ClientError(format!("building TLS config: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .user_agent(concat!("longhand/", env!("CARGO_PKG_VERSION"))))
}
