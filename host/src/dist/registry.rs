//! OCI registries: publishing a component as a CNCF wasm artifact (a
//! manifest whose config is `application/vnd.wasm.config.v0+json` and
//! whose one layer is `application/wasm`), and pulling one back.
//!
//! Publishing goes through `oci-client` (blob uploads, the manifest, the
//! registry's token dance). Pulling reads the manifest and the layer with
//! the host's own HTTP client, and `oci-client` only for a pull token:
//! `oci-client` buffers a manifest of any size and follows redirects to any
//! host, and a registry's answers are hostile input here. So a pull:
//! - refuses a manifest over [`MAX_MANIFEST_BYTES`] and a component over
//!   [`MAX_COMPONENT_BYTES`], before buffering them (by `Content-Length`,
//!   and again while reading);
//! - refuses a redirect to another scheme, host or port (one to the same
//!   origin is followed, at most [`MAX_REDIRECTS`] times);
//! - refuses a manifest that is not an OCI image manifest of exactly one
//!   `application/wasm` layer with a `vnd.wasm.config.v0` config, or that
//!   does not hash to the digest that named it;
//! - refuses a layer that is not exactly as long as, or does not hash to,
//!   what the manifest says.
//!
//! Plain HTTP is spoken to loopback registries only (127.0.0.1, ::1,
//! localhost); every other registry is HTTPS.
//!
//! `oci-client` is the cargo feature `oci` (on by default). A build without
//! it pulls from registries that answer without a token, and refuses to
//! publish or to fetch a token, saying which feature it lacks.

use std::time::Duration;

#[cfg(feature = "oci")]
use oci_client::client::{ClientConfig, ClientProtocol};
#[cfg(feature = "oci")]
use oci_client::secrets::RegistryAuth;
#[cfg(feature = "oci")]
use oci_client::{Client, Reference, RegistryOperation};
#[cfg(feature = "oci")]
use serde_json::json;

use super::error::{DistError, shown};
use super::names::is_digest;
use super::source::OciRef;
use crate::hands::digest_of;

/// The manifest media type of a published tool.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config media type of a CNCF wasm artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer media type of a CNCF wasm artifact.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// Largest manifest read: 64 KiB. A tool's manifest is under 1 KiB (two
/// descriptors and a few annotations); anything near the limit is not one.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 10;
/// Largest component pulled or downloaded: 128 MiB. Python and
/// SpiderMonkey components are 13-40 MiB.
pub const MAX_COMPONENT_BYTES: u64 = 128 << 20;
/// Largest error body quoted from a registry: 4 KiB (cut further when shown).
const MAX_ERROR_BODY_BYTES: u64 = 4 << 10;
/// Redirects followed within one origin.
pub const MAX_REDIRECTS: usize = 5;
/// Longest one request of a pull may take, body included: 10 minutes (128
/// MiB at ~220 KB/s).
pub const PULL_TIMEOUT_SECS: u64 = 600;

/// What [`pull`] fetched, every digest checked.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// `sha256:…` of the manifest bytes.
    pub manifest_digest: String,
    /// `sha256:…` of the component (the layer's digest).
    pub digest: String,
    /// The component.
    pub bytes: Vec<u8>,
}

#[cfg(feature = "oci")]
/// The process-wide rustls provider `oci-client`'s reqwest needs (it is
/// built without one, like every client here): ring, as everywhere else.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(feature = "oci")]
fn oci_client(r: &OciRef) -> Client {
    install_crypto_provider();
    let protocol = if r.is_loopback() {
        ClientProtocol::HttpsExcept(vec![r.registry.clone()])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        ..ClientConfig::default()
    })
}

#[cfg(feature = "oci")]
fn oci_reference(r: &OciRef) -> Reference {
    match (&r.tag, &r.digest) {
        (Some(tag), Some(digest)) => Reference::with_tag_and_digest(
            r.registry.clone(),
            r.repository.clone(),
            tag.clone(),
            digest.clone(),
        ),
        (None, Some(digest)) => {
            Reference::with_digest(r.registry.clone(), r.repository.clone(), digest.clone())
        }
        (tag, None) => Reference::with_tag(
            r.registry.clone(),
            r.repository.clone(),
            tag.clone().unwrap_or_else(|| "latest".to_owned()),
        ),
    }
}

#[cfg(feature = "oci")]
/// Credentials for a registry: `LONGHAND_REGISTRY_USERNAME` and
/// `LONGHAND_REGISTRY_PASSWORD` when both are set, else anonymous.
fn registry_auth(lookup: impl Fn(&str) -> Option<String>) -> RegistryAuth {
    match (
        lookup("LONGHAND_REGISTRY_USERNAME"),
        lookup("LONGHAND_REGISTRY_PASSWORD"),
    ) {
        (Some(user), Some(password)) if !user.is_empty() => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

#[cfg(feature = "oci")]
fn remote(what: &str) -> impl Fn(oci_client::errors::OciDistributionError) -> DistError + '_ {
    move |e| DistError::Remote(format!("{what}: {e}"))
}

#[cfg(feature = "oci")]
/// Push `bytes` to `target` (a tag; a digest pin is refused) as a CNCF
/// wasm artifact. Returns the manifest digest. The manifest has no
/// timestamp, so the same component published twice has the same digest.
pub async fn publish(
    target: &OciRef,
    bytes: &[u8],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, DistError> {
    if target.digest.is_some() {
        return Err(DistError::Usage(
            "publish to a tag (oci://HOST/REPO:TAG), not a digest: the registry names the digest"
                .to_owned(),
        ));
    }
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(DistError::Usage(format!(
            "the component is {} bytes, over the {MAX_COMPONENT_BYTES}-byte limit installs accept",
            bytes.len()
        )));
    }
    let client = oci_client(target);
    let reference = oci_reference(target);
    let auth = registry_auth(lookup);
    client
        .auth(&reference, &auth, RegistryOperation::Push)
        .await
        .map_err(remote(&format!("authenticating to {}", target.registry)))?;
    let layer_digest = digest_of(bytes);
    let config = serde_json::to_vec(&json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    }))
    .map_err(|e| DistError::Usage(format!("encoding the config: {e}")))?;
    let config_digest = digest_of(&config);
    client
        .push_blob(&reference, bytes.to_vec(), &layer_digest)
        .await
        .map_err(remote(&format!("uploading the component to {target}")))?;
    client
        .push_blob(&reference, config.clone(), &config_digest)
        .await
        .map_err(remote(&format!("uploading the config to {target}")))?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": [{
            "mediaType": LAYER_MEDIA_TYPE,
            "digest": layer_digest,
            "size": bytes.len(),
        }],
    }))
    .map_err(|e| DistError::Usage(format!("encoding the manifest: {e}")))?;
    let manifest_digest = digest_of(&manifest);
    client
        .push_manifest_raw(
            &reference,
            manifest,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(remote(&format!("pushing the manifest to {target}")))?;
    Ok(manifest_digest)
}

/// Whether this build can publish: pushing needs `oci-client` (the cargo
/// feature `oci`). Asked first, before a component is read or loaded.
pub fn can_publish() -> Result<(), DistError> {
    #[cfg(feature = "oci")]
    return Ok(());
    #[cfg(not(feature = "oci"))]
    Err(DistError::Usage(NO_OCI.to_owned()))
}

/// Publishing needs `oci-client` (the cargo feature `oci`).
#[cfg(not(feature = "oci"))]
pub async fn publish(
    _target: &OciRef,
    _bytes: &[u8],
    _lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, DistError> {
    Err(DistError::Usage(NO_OCI.to_owned()))
}

/// A registry that asks for a token, in a build without `oci-client`.
#[cfg(not(feature = "oci"))]
async fn pull_token(r: &OciRef) -> Result<Option<String>, DistError> {
    Err(DistError::Usage(format!(
        "{} asks for a token: {NO_OCI}",
        r.registry
    )))
}

#[cfg(not(feature = "oci"))]
const NO_OCI: &str = "this longhand was built without the registry client (cargo feature \
                      `oci`): build it with `cargo build --release` (all features) or add \
                      `--features oci`";

/// The HTTP client of pulls: the host's TLS, redirects followed only within
/// the origin they start from, bounded waits.
fn pull_client() -> Result<reqwest::Client, DistError> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt.previous().first().is_some_and(|first| {
            first.scheme() == attempt.url().scheme()
                && first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if !same || attempt.previous().len() > MAX_REDIRECTS {
            // Stopped, the 3xx comes back to [`get`], which says why.
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    crate::http_client::builder()
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

/// GET `url`, refusing a redirect that leaves its origin and any answer
/// but a success. `auth` is a bearer token.
async fn get(
    client: &reqwest::Client,
    url: &str,
    accept: Option<&str>,
    auth: Option<&str>,
) -> Result<reqwest::Response, DistError> {
    let mut request = client.get(url);
    if let Some(accept) = accept {
        request = request.header(http::header::ACCEPT, accept);
    }
    if let Some(token) = auth {
        request = request.bearer_auth(token);
    }
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
             is refused (or more than {MAX_REDIRECTS} within one); install from where the bytes are",
            shown(to, 512)
        )));
    }
    Ok(response)
}

/// reqwest's error and its causes on one line.
fn reqwest_reason(e: &reqwest::Error) -> String {
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
async fn read_bounded(
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
async fn error_answer(response: reqwest::Response, url: &str) -> DistError {
    let status = response.status();
    let body = read_bounded(response, MAX_ERROR_BODY_BYTES, "the error body")
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body);
    DistError::Remote(format!(
        "GET {url}: the server answered {status}: {}",
        shown(body.trim(), 512)
    ))
}

#[cfg(feature = "oci")]
/// A pull token, when the registry asks for one (401), through
/// `oci-client`'s implementation of the registry token protocol.
async fn pull_token(r: &OciRef) -> Result<Option<String>, DistError> {
    let client = oci_client(r);
    client
        .auth(
            &oci_reference(r),
            &registry_auth(|n| std::env::var(n).ok()),
            RegistryOperation::Pull,
        )
        .await
        .map_err(remote(&format!("authenticating to {}", r.registry)))
}

/// GET a registry path, with a pull token when the first answer is 401.
async fn registry_get(
    client: &reqwest::Client,
    r: &OciRef,
    url: &str,
    accept: Option<&str>,
    token: &mut Option<String>,
) -> Result<reqwest::Response, DistError> {
    let response = get(client, url, accept, token.as_deref()).await?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED || token.is_some() {
        return Ok(response);
    }
    *token = pull_token(r).await?;
    if token.is_none() {
        return Ok(response);
    }
    get(client, url, accept, token.as_deref()).await
}

/// The parts of an OCI image manifest a pull reads (the image-spec's
/// names); anything else in it is ignored.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: i64,
    #[serde(default)]
    media_type: Option<String>,
    config: Config,
    layers: Vec<Descriptor>,
}

/// A manifest's config: only its media type says what the artifact is.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    media_type: String,
}

/// A manifest's pointer to a blob.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
    #[serde(default)]
    urls: Option<Vec<String>>,
}

/// The manifest `r` names, checked: its bytes (bounded), media type,
/// digest (against the pin, and the registry's `Docker-Content-Digest`),
/// and shape (one `application/wasm` layer, a wasm config).
async fn manifest(
    client: &reqwest::Client,
    r: &OciRef,
    token: &mut Option<String>,
) -> Result<(String, Manifest), DistError> {
    let url = format!(
        "{}://{}/v2/{}/manifests/{}",
        r.scheme(),
        r.registry,
        r.repository,
        r.reference()
    );
    let response = registry_get(client, r, &url, Some(MANIFEST_MEDIA_TYPE), token).await?;
    if !response.status().is_success() {
        return Err(error_answer(response, &url).await);
    }
    let media_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned())
        .unwrap_or_default();
    let claimed = response
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if media_type != MANIFEST_MEDIA_TYPE {
        return Err(DistError::Refused(format!(
            "{r}: the registry answered with a manifest of media type `{}`; a tool is an OCI \
             image manifest ({MANIFEST_MEDIA_TYPE}) with one {LAYER_MEDIA_TYPE} layer",
            shown(&media_type, 256)
        )));
    }
    let body = read_bounded(
        response,
        MAX_MANIFEST_BYTES,
        &format!("the manifest of {r}"),
    )
    .await?;
    let digest = digest_of(&body);
    if let Some(pin) = &r.digest
        && *pin != digest
    {
        return Err(DistError::Refused(format!(
            "{r}: the manifest served is {digest}, not the pinned {pin}; refused"
        )));
    }
    if let Some(claimed) = claimed
        && claimed != digest
    {
        return Err(DistError::Refused(format!(
            "{r}: the registry says the manifest is {}, but its bytes are {digest}; refused",
            shown(&claimed, 128)
        )));
    }
    let malformed =
        |why: String| DistError::Refused(format!("{r}: the manifest is malformed: {why}; refused"));
    let manifest: Manifest = serde_json::from_slice(&body).map_err(|e| malformed(e.to_string()))?;
    if manifest.schema_version != 2 {
        return Err(malformed(format!(
            "schemaVersion is {}, not 2",
            manifest.schema_version
        )));
    }
    if manifest
        .media_type
        .as_deref()
        .is_some_and(|m| m != MANIFEST_MEDIA_TYPE)
    {
        return Err(malformed(
            "its mediaType is not an OCI image manifest".to_owned(),
        ));
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(DistError::Refused(format!(
            "{r}: the config has media type `{}`, not {CONFIG_MEDIA_TYPE}: it is not a wasm \
             artifact (a container image?); refused",
            shown(&manifest.config.media_type, 256)
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(malformed(format!(
            "it has {} layers; a tool has exactly one",
            manifest.layers.len()
        )));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(DistError::Refused(format!(
            "{r}: the layer has media type `{}`, not {LAYER_MEDIA_TYPE}; refused",
            shown(&layer.media_type, 256)
        )));
    }
    if !is_digest(&layer.digest) {
        return Err(malformed(
            "the layer digest is not sha256:<64 hex digits>".to_owned(),
        ));
    }
    if layer.urls.as_ref().is_some_and(|u| !u.is_empty()) {
        return Err(malformed(
            "the layer names URLs elsewhere (a foreign layer)".to_owned(),
        ));
    }
    if layer.size <= 0 || layer.size as u64 > MAX_COMPONENT_BYTES {
        return Err(DistError::Refused(format!(
            "{r}: the component is {} bytes by its manifest; installs take 1 to {MAX_COMPONENT_BYTES}; refused",
            layer.size
        )));
    }
    Ok((digest, manifest))
}

/// The manifest digest `r` resolves to now (the tag's current target).
pub async fn resolve(r: &OciRef) -> Result<String, DistError> {
    let client = pull_client()?;
    let mut token = None;
    Ok(manifest(&client, r, &mut token).await?.0)
}

/// Pull the component `r` names, every digest checked.
pub async fn pull(r: &OciRef) -> Result<Pulled, DistError> {
    let client = pull_client()?;
    let mut token = None;
    let (manifest_digest, manifest) = manifest(&client, r, &mut token).await?;
    let layer = &manifest.layers[0];
    let size = layer.size as u64;
    let url = format!(
        "{}://{}/v2/{}/blobs/{}",
        r.scheme(),
        r.registry,
        r.repository,
        layer.digest
    );
    let response = registry_get(&client, r, &url, None, &mut token).await?;
    if !response.status().is_success() {
        return Err(error_answer(response, &url).await);
    }
    let bytes = read_bounded(response, size, &format!("the component of {r}")).await?;
    if bytes.len() as u64 != size {
        return Err(DistError::Refused(format!(
            "{r}: the component is {} bytes, but its manifest says {size}; refused",
            bytes.len()
        )));
    }
    let digest = digest_of(&bytes);
    if digest != layer.digest {
        return Err(DistError::Refused(format!(
            "{r}: the component served is {digest}, but its manifest names {}: the registry \
             served changed bytes; refused",
            layer.digest
        )));
    }
    Ok(Pulled {
        manifest_digest,
        digest,
        bytes,
    })
}

/// Download a component from an `https://` URL, bounded, redirects kept to
/// its origin. The caller checks what it got (a digest pin or a signature).
pub async fn download(url: &str) -> Result<Vec<u8>, DistError> {
    let client = pull_client()?;
    let response = get(&client, url, None, None).await?;
    if !response.status().is_success() {
        return Err(error_answer(response, url).await);
    }
    read_bounded(
        response,
        MAX_COMPONENT_BYTES,
        &format!("the component at {url}"),
    )
    .await
}
