//! OCI registries: publishing a component as a CNCF wasm artifact (a
//! manifest whose config is `application/vnd.wasm.config.v0+json` and
//! whose one layer is `application/wasm`), and pulling one back.
//!
//! Publishing goes through `oci-client` (blob uploads, the manifest), with
//! a token fetched by [`super::token`]. Pulling reads the manifest and the
//! layer with the host's own HTTP client, and the token too: `oci-client`
//! buffers a manifest (and a token answer) of any size, follows redirects
//! to any host and sends credentials to any realm, and a registry's
//! answers are hostile input here. So a pull:
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
//! it pulls (tokens included) and refuses to publish, saying which feature
//! it lacks.

#[cfg(feature = "oci")]
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
use super::http::{error_answer, pull_client, read_bounded, send};
use super::names::is_digest;
use super::source::OciRef;
use super::token::{self, Auth};
use longhand_hands::digest_of;

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
pub use super::http::{MAX_REDIRECTS, PULL_TIMEOUT_SECS};

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
fn remote(what: &str) -> impl Fn(oci_client::errors::OciDistributionError) -> DistError + '_ {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode as C};
    move |e| {
        // A tag or repository the registry does not have is a name to fix
        // (exit 2), not a registry failing (exit 4).
        let unknown = match &e {
            E::ImageManifestNotFoundError(_) => true,
            E::RegistryError { envelope, .. } => envelope
                .errors
                .iter()
                .any(|c| matches!(c.code, C::ManifestUnknown | C::NameUnknown | C::NotFound)),
            _ => false,
        };
        if unknown {
            DistError::Usage(format!(
                "{what}: the registry has no such tag or repository ({e}); check the name \
                 and tag"
            ))
        } else {
            DistError::Remote(format!("{what}: {e}"))
        }
    }
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
    // The token is fetched here, under the rules of `token` (credentials
    // to the registry's own origin only, bounded answer), and handed to
    // `oci-client` ready-made: its own token dance would send the
    // credentials to whatever realm the registry names.
    let auth = push_auth(target, &lookup).await?;
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

#[cfg(not(feature = "oci"))]
const NO_OCI: &str = "this longhand was built without the registry client (cargo feature \
                      `oci`): build it with `cargo build --release` (all features) or add \
                      `--features oci`";

/// GET `url` with `auth`, refusing a redirect that leaves its origin.
async fn get(
    client: &reqwest::Client,
    url: &str,
    accept: Option<&str>,
    auth: &Auth,
) -> Result<reqwest::Response, DistError> {
    let mut request = client.get(url);
    if let Some(accept) = accept {
        request = request.header(http::header::ACCEPT, accept);
    }
    request = match auth {
        Auth::Anonymous => request,
        Auth::Bearer(token) => request.bearer_auth(token),
        Auth::Basic(c) => {
            let (user, password) = c.parts();
            request.basic_auth(user, Some(password))
        }
    };
    send(request, url).await
}

/// GET a registry path, answering a `401` once ([`token::answer`]).
async fn registry_get(
    client: &reqwest::Client,
    r: &OciRef,
    url: &str,
    accept: Option<&str>,
    auth: &mut Option<Auth>,
) -> Result<reqwest::Response, DistError> {
    let first = auth.clone().unwrap_or(Auth::Anonymous);
    let response = get(client, url, accept, &first).await?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED || auth.is_some() {
        return Ok(response);
    }
    let challenge = response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let answered = token::answer(
        client,
        r,
        challenge.as_deref(),
        &format!("repository:{}:pull", r.repository),
        |n| std::env::var(n).ok(),
    )
    .await?;
    if matches!(answered, Auth::Anonymous) {
        return Ok(response);
    }
    let retried = get(client, url, accept, &answered).await;
    *auth = Some(answered);
    retried
}

#[cfg(feature = "oci")]
/// What a push sends: the registry's `/v2/` asked, and answered under the
/// rules of [`token`].
async fn push_auth(
    target: &OciRef,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<RegistryAuth, DistError> {
    let client = pull_client()?;
    let url = format!("{}://{}/v2/", target.scheme(), target.registry);
    let response = get(&client, &url, None, &Auth::Anonymous).await?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(RegistryAuth::Anonymous);
    }
    let challenge = response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let scope = format!("repository:{}:pull,push", target.repository);
    Ok(
        match token::answer(&client, target, challenge.as_deref(), &scope, lookup).await? {
            Auth::Anonymous => RegistryAuth::Anonymous,
            Auth::Bearer(token) => RegistryAuth::Bearer(token),
            Auth::Basic(c) => {
                let (user, password) = c.parts();
                RegistryAuth::Basic(user.to_owned(), password.to_owned())
            }
        },
    )
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
    auth: &mut Option<Auth>,
) -> Result<(String, Manifest), DistError> {
    let url = format!(
        "{}://{}/v2/{}/manifests/{}",
        r.scheme(),
        r.registry,
        r.repository,
        r.reference()
    );
    let response = registry_get(client, r, &url, Some(MANIFEST_MEDIA_TYPE), auth).await?;
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
    let mut auth = None;
    Ok(manifest(&client, r, &mut auth).await?.0)
}

/// Largest tag list read: 1 MiB (some ten thousand tags).
const MAX_TAGS_BYTES: u64 = 1 << 20;

/// The tags of `r`'s repository (the distribution spec's `tags/list`, its
/// first page of up to 1,000), in the registry's order.
pub async fn tags(r: &OciRef) -> Result<Vec<String>, DistError> {
    #[derive(serde::Deserialize)]
    struct TagList {
        #[serde(default)]
        tags: Option<Vec<String>>,
    }
    let client = pull_client()?;
    let mut auth = None;
    let url = format!(
        "{}://{}/v2/{}/tags/list?n=1000",
        r.scheme(),
        r.registry,
        r.repository
    );
    let response = registry_get(&client, r, &url, None, &mut auth).await?;
    if !response.status().is_success() {
        return Err(error_answer(response, &url).await);
    }
    let bytes = read_bounded(response, MAX_TAGS_BYTES, &format!("the tags of {r}")).await?;
    let list: TagList = serde_json::from_slice(&bytes)
        .map_err(|e| DistError::Refused(format!("{r}: the registry's tag list is not one: {e}")))?;
    Ok(list.tags.unwrap_or_default())
}

/// Pull the component `r` names, every digest checked.
pub async fn pull(r: &OciRef) -> Result<Pulled, DistError> {
    let client = pull_client()?;
    let mut auth = None;
    let (manifest_digest, manifest) = manifest(&client, r, &mut auth).await?;
    let layer = &manifest.layers[0];
    let size = layer.size as u64;
    let url = format!(
        "{}://{}/v2/{}/blobs/{}",
        r.scheme(),
        r.registry,
        r.repository,
        layer.digest
    );
    let response = registry_get(&client, r, &url, None, &mut auth).await?;
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
    let response = get(&client, url, None, &Auth::Anonymous).await?;
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
