//! Registry authentication: what a registry's `401` asks for, and where
//! the operator's credentials may go.
//!
//! A registry that wants a token names a token service (`WWW-Authenticate:
//! Bearer realm="…",service="…",scope="…"`), and a client following the
//! protocol blindly sends its credentials there. The realm is the
//! registry's word, and the registry is hostile input: it could name
//! another host, another port, or an address inside the operator's
//! network. So:
//!
//! - the credentials (`LONGHAND_REGISTRY_USERNAME` / `_PASSWORD`) go only
//!   to the registry's own origin (scheme, host and port), or to a token
//!   service whose origin the operator listed in
//!   `LONGHAND_REGISTRY_TOKEN_ORIGINS` (comma-separated, e.g.
//!   `https://auth.docker.io`); to any other realm the token request is
//!   anonymous, and a warning says the credentials were held back;
//! - the realm must be `https`, or `http` on loopback when the registry is
//!   on loopback too; a registry that is not on loopback may not name a
//!   loopback, private or link-local address;
//! - the token request is a pull request: same-origin redirects only,
//!   [`TOKEN_TIMEOUT_SECS`] in all, an answer of at most
//!   [`MAX_TOKEN_BYTES`].
//!
//! What it must not do: fetch anything but a token, or remember one past
//! the command.

use std::net::IpAddr;
use std::time::Duration;

use reqwest::Url;

use super::error::{DistError, shown};
use super::source::OciRef;

/// Largest token answer read: 64 KiB. Real tokens are under 4 KiB (a JWT
/// with a few scopes); an answer near the limit is not one.
pub const MAX_TOKEN_BYTES: u64 = 64 << 10;

/// Longest a token request may take, answer included: 30 seconds.
pub const TOKEN_TIMEOUT_SECS: u64 = 30;

/// The variable listing token-service origins, besides the registry's
/// own, that may receive the operator's registry credentials.
pub const TOKEN_ORIGINS_VAR: &str = "LONGHAND_REGISTRY_TOKEN_ORIGINS";

/// The operator's registry credentials. `Debug` does not show the password.
#[derive(Clone)]
pub struct Credentials {
    user: String,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// `LONGHAND_REGISTRY_USERNAME` and `LONGHAND_REGISTRY_PASSWORD`, when
    /// both are set and the user name is not empty.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        match (
            lookup("LONGHAND_REGISTRY_USERNAME"),
            lookup("LONGHAND_REGISTRY_PASSWORD"),
        ) {
            (Some(user), Some(password)) if !user.is_empty() => Some(Self { user, password }),
            _ => None,
        }
    }

    /// User name and password, for a client that sends them itself.
    pub fn parts(&self) -> (&str, &str) {
        (&self.user, &self.password)
    }
}

/// What a request to the registry carries.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Nothing: the registry did not ask, or gave no way to answer.
    Anonymous,
    /// `Authorization: Bearer …`, a token from the token service.
    Bearer(String),
    /// `Authorization: Basic …` to the registry itself (it asked for Basic).
    Basic(Credentials),
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Debug, Default, PartialEq, Eq)]
struct Challenge {
    scheme: String,
    realm: Option<String>,
    service: Option<String>,
    scope: Option<String>,
}

/// Parse the first challenge of a `WWW-Authenticate` value: a scheme, then
/// `key=value` or `key="quoted value"` parameters separated by commas.
/// Unknown parameters are ignored; a value that does not parse ends the
/// parameters.
fn parse_challenge(header: &str) -> Challenge {
    let header = header.trim();
    let (scheme, mut rest) = header
        .split_once(char::is_whitespace)
        .unwrap_or((header, ""));
    let mut challenge = Challenge {
        scheme: scheme.to_ascii_lowercase(),
        ..Challenge::default()
    };
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let value;
        if let Some(quoted) = after.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            out.push(escaped);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => out.push(c),
                }
            }
            let Some(end) = end else { break };
            value = out;
            rest = &quoted[end..];
        } else {
            let end = after.find(',').unwrap_or(after.len());
            value = after[..end].trim().to_owned();
            rest = &after[end..];
        }
        match key.as_str() {
            "realm" => challenge.realm = Some(value),
            "service" => challenge.service = Some(value),
            "scope" => challenge.scope = Some(value),
            _ => {}
        }
    }
    challenge
}

/// Scheme, host and port of a URL: what "the same origin" compares.
fn origin(url: &Url) -> (String, String, Option<u16>) {
    (
        url.scheme().to_owned(),
        url.host_str().unwrap_or_default().to_ascii_lowercase(),
        url.port_or_known_default(),
    )
}

/// `scheme://host[:port]` of a URL, as the operator would list it.
fn origin_text(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{}://{host}:{port}", url.scheme()),
        (Some(host), None) => format!("{}://{host}", url.scheme()),
        _ => url.scheme().to_owned(),
    }
}

/// Whether `host` (as a URL gives it) is loopback, or a private,
/// link-local or unspecified address: places a remote registry may not
/// send the host to.
fn inside_address(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") || host.ends_with(".localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => {
            ip.is_loopback()
                || ip.is_private()
                || ip.is_link_local()
                || ip.is_unspecified()
                || ip.is_broadcast()
        }
        Ok(IpAddr::V6(ip)) => {
            let first = ip.segments()[0];
            ip.is_loopback()
                || ip.is_unspecified()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || ip.to_ipv4_mapped().is_some_and(|v4| {
                    v4.is_loopback() || v4.is_private() || v4.is_link_local()
                })
        }
        Err(_) => false,
    }
}

/// The registry's own URL (`scheme://host[:port]/`).
fn registry_url(r: &OciRef) -> Result<Url, DistError> {
    Url::parse(&format!("{}://{}/", r.scheme(), r.registry)).map_err(|e| {
        DistError::Usage(format!(
            "`{}` is not a registry address: {e}",
            shown(&r.registry, 256)
        ))
    })
}

/// The origins the operator allowed to receive credentials, besides the
/// registry's own.
fn allowed_origins(lookup: &impl Fn(&str) -> Option<String>) -> Vec<(String, String, Option<u16>)> {
    lookup(TOKEN_ORIGINS_VAR)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|s| Url::parse(s).ok())
        .map(|u| origin(&u))
        .collect()
}

/// What to send after the registry `r` answered `401` with `header` (its
/// `WWW-Authenticate`), for `scope` (`repository:REPO:pull`) when the
/// challenge names none. `client` is the pull client (same-origin
/// redirects only).
pub async fn answer(
    client: &reqwest::Client,
    r: &OciRef,
    header: Option<&str>,
    scope: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Auth, DistError> {
    let credentials = Credentials::from_env(&lookup);
    let Some(header) = header else {
        return Ok(Auth::Anonymous);
    };
    let challenge = parse_challenge(header);
    match challenge.scheme.as_str() {
        // Basic is answered to the registry itself: the same origin.
        "basic" => Ok(credentials.map_or(Auth::Anonymous, Auth::Basic)),
        "bearer" => bearer(client, r, &challenge, scope, credentials, &lookup).await,
        _ => Ok(Auth::Anonymous),
    }
}

async fn bearer(
    client: &reqwest::Client,
    r: &OciRef,
    challenge: &Challenge,
    scope: &str,
    credentials: Option<Credentials>,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<Auth, DistError> {
    let registry = registry_url(r)?;
    let refuse = |why: String| DistError::Refused(format!("{r}: {why}; refused"));
    let realm_text = challenge
        .realm
        .as_deref()
        .ok_or_else(|| refuse("the registry asks for a token but names no realm".to_owned()))?;
    let mut realm = Url::parse(realm_text).map_err(|e| {
        refuse(format!(
            "the token realm `{}` is not a URL ({e})",
            shown(realm_text, 256)
        ))
    })?;
    let realm_host = realm.host_str().unwrap_or_default().to_owned();
    match realm.scheme() {
        "https" => {}
        "http" if r.is_loopback() && inside_address(&realm_host) => {}
        _ => {
            return Err(refuse(format!(
                "the token realm {} is not https (plain http is spoken to loopback only)",
                shown(realm.as_str(), 256)
            )));
        }
    }
    if !r.is_loopback() && inside_address(&realm_host) {
        return Err(refuse(format!(
            "the registry sends its token requests to {}, a loopback, private or link-local \
             address",
            shown(realm.as_str(), 256)
        )));
    }
    let same_origin = origin(&realm) == origin(&registry);
    let allowed = same_origin || allowed_origins(lookup).contains(&origin(&realm));
    let credentials = match credentials {
        Some(c) if allowed => Some(c),
        Some(_) => {
            tracing::warn!(
                "{r}: the registry names the token service {}, not on its own origin: the \
                 registry credentials were not sent there (asking anonymously). If you trust \
                 it, set {TOKEN_ORIGINS_VAR}={}",
                shown(realm.as_str(), 256),
                origin_text(&realm)
            );
            None
        }
        None => None,
    };
    {
        let mut query = realm.query_pairs_mut();
        if let Some(service) = &challenge.service {
            query.append_pair("service", service);
        }
        query.append_pair("scope", challenge.scope.as_deref().unwrap_or(scope));
    }
    let mut request = client
        .get(realm.clone())
        .timeout(Duration::from_secs(TOKEN_TIMEOUT_SECS));
    if let Some(c) = &credentials {
        request = request.basic_auth(&c.user, Some(&c.password));
    }
    let url = realm.to_string();
    let response = super::http::send(request, &url).await?;
    if !response.status().is_success() {
        let mut err = super::http::error_answer(response, &url).await;
        if !allowed
            && Credentials::from_env(lookup).is_some()
            && let DistError::Remote(text) = &mut err
        {
            text.push_str(&format!(
                " (your registry credentials were not sent to this token service, which is not \
                 on the registry's origin; if you trust it, set {TOKEN_ORIGINS_VAR}={})",
                origin_text(&realm)
            ));
        }
        return Err(err);
    }
    let body = super::http::read_bounded(
        response,
        MAX_TOKEN_BYTES,
        &format!("the token answer of {}", shown(&url, 256)),
    )
    .await?;
    #[derive(serde::Deserialize)]
    struct TokenAnswer {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        access_token: Option<String>,
    }
    let parsed: TokenAnswer = serde_json::from_slice(&body).map_err(|e| {
        refuse(format!(
            "the token service answered something that is not a token ({e})"
        ))
    })?;
    let token = parsed
        .token
        .filter(|t| !t.is_empty())
        .or(parsed.access_token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| refuse("the token service answered no token".to_owned()))?;
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(refuse(
            "the token holds characters a header cannot carry".to_owned(),
        ));
    }
    Ok(Auth::Bearer(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse_with_quotes_escapes_and_bare_values() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="reg \"x\"",scope=repository:a:pull"#,
        );
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.realm.as_deref(), Some("https://auth.example/token"));
        assert_eq!(c.service.as_deref(), Some(r#"reg "x""#));
        assert_eq!(c.scope.as_deref(), Some("repository:a:pull"));
        assert_eq!(parse_challenge(r#"Basic realm="r""#).scheme, "basic");
        assert_eq!(parse_challenge(r#"Bearer realm="unterminated"#).realm, None);
    }

    #[test]
    fn inside_addresses_are_named() {
        for host in [
            "localhost",
            "127.0.0.1",
            "10.1.2.3",
            "[::1]",
            "169.254.169.254",
            "[fd00::1]",
        ] {
            assert!(inside_address(host), "{host}");
        }
        for host in ["auth.docker.io", "8.8.8.8", "[2001:db8::1]"] {
            assert!(!inside_address(host), "{host}");
        }
    }
}
