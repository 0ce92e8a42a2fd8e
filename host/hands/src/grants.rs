//! Grants: what the operator lets one tool component use.
//!
//! Everything here is *deny by default*: [`Grants::default()`] gives a tool no
//! directory, no host, no environment variable and no secret, and the
//! [`Limits::default()`] values below. A grant is a typed value validated once
//! ([`Grants::validate`]) before any call is made with it; the capability
//! modules in [`super::caps`] turn a validated grant into per-call state.
//!
//! Both front ends write grants in their own syntax — `longhand tool call`
//! flags and `[[tools]]` tables in `agent.toml` — and both produce one
//! [`GrantSpec`], which [`GrantSpec::resolve`] alone turns into `Grants`:
//! one set of checks, errors and defaults, and every limit settable from
//! both.
//!
//! This module owns parsing and validation only. It never opens a socket;
//! directories are opened (to pin them) by [`super::dirs`].

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Access to a granted directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories. The default. (`ro` in agent.toml.)
    #[default]
    #[serde(alias = "ro")]
    ReadOnly,
    /// Also create, write, rename and delete inside the directory. (`rw`.)
    #[serde(alias = "rw")]
    ReadWrite,
}

/// A directory grant as the operator wrote it, before it is resolved.
///
/// Two spellings exist on the command line: the short form
/// `HOST_PATH[:GUEST_PATH][:ro|:rw]` ([`DirSpec::parse`]) and the long form
/// `src=PATH,dst=GUEST_PATH,mode=ro|rw[,symlinks=true]`
/// ([`DirSpec::parse_mount`]), which is the only one that can grant a path
/// containing `:`. [`DirSpec::resolve`] turns a spec into a [`DirGrant`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirSpec {
    /// Directory on the host; relative paths are resolved against the base
    /// given to [`DirSpec::resolve`].
    #[serde(rename = "host")]
    pub host_path: PathBuf,
    /// Where the guest sees it. Default [`DEFAULT_GUEST_DIR`].
    #[serde(rename = "guest", default = "default_guest_dir")]
    pub guest_path: String,
    /// Default [`Access::ReadOnly`].
    #[serde(rename = "mode", default)]
    pub access: Access,
    /// Whether the tool may create symbolic links inside the directory
    /// (read-write grants only). Default `false`: a link a tool plants
    /// could redirect a later grant or a person's tools elsewhere.
    #[serde(default)]
    pub symlinks: bool,
}

fn default_guest_dir() -> String {
    DEFAULT_GUEST_DIR.to_owned()
}

impl DirSpec {
    /// Parse the short form `HOST_PATH[:GUEST_PATH][:ro|:rw]`.
    ///
    /// Without a guest path the directory appears as `/workspace`; without
    /// an access suffix it is read-only. Because `:` separates the parts, a
    /// spec is refused when it could name two different grants — when
    /// another split of it at a `:` (or the whole spec) also names a path
    /// that exists under `base` — and when it does not parse but the whole
    /// spec is an existing path: both get advice to use the long form.
    pub fn parse(spec: &str, base: &Path) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::Dir {
            spec: spec.to_owned(),
            reason,
        };
        let exists = |candidate: &str| {
            !candidate.is_empty() && std::fs::symlink_metadata(base.join(candidate)).is_ok()
        };
        let long_form = |what: &str| {
            format!(
                "{what}; use the long form, which has no ambiguity: \
                 --mount src=PATH,dst=/workspace,mode=ro (or dirs = [{{ host = \"PATH\", \
                 guest = \"/workspace\", mode = \"read-only\" }}] in agent.toml)"
            )
        };
        let parsed = match Self::parse_short(spec) {
            Ok(parsed) => parsed,
            Err(reason) if spec.contains(':') && exists(spec) => {
                return Err(bad(long_form(&format!(
                    "{reason}, but `{spec}` is itself an existing path: a path containing `:` \
                     cannot be granted in the short form"
                ))));
            }
            Err(reason) => return Err(bad(reason)),
        };
        let chosen = parsed.host_path.to_string_lossy().into_owned();
        let other = spec
            .match_indices(':')
            .map(|(i, _)| &spec[..i])
            .chain(std::iter::once(spec))
            .find(|candidate| *candidate != chosen && exists(candidate));
        if let Some(other) = other {
            return Err(bad(long_form(&format!(
                "ambiguous: it reads as host path `{chosen}`, but `{other}` also exists"
            ))));
        }
        Ok(parsed)
    }

    fn parse_short(spec: &str) -> Result<Self, String> {
        let mut parts: Vec<&str> = spec.split(':').collect();
        let mut access = Access::ReadOnly;
        if parts.len() > 1 {
            match parts.last().copied() {
                Some("ro") => {
                    parts.pop();
                }
                Some("rw") => {
                    access = Access::ReadWrite;
                    parts.pop();
                }
                _ => {}
            }
        }
        let (host, guest) = match parts.as_slice() {
            [host] => (*host, DEFAULT_GUEST_DIR),
            [host, guest] => (*host, *guest),
            _ => return Err("expected HOST_PATH[:GUEST_PATH][:ro|:rw]".to_owned()),
        };
        if host.is_empty() {
            return Err("the host path is empty".to_owned());
        }
        if !guest.starts_with('/') {
            return Err(format!(
                "the guest path `{guest}` is not absolute (expected HOST_PATH[:GUEST_PATH][:ro|:rw])"
            ));
        }
        Ok(Self {
            host_path: PathBuf::from(host),
            guest_path: guest.to_owned(),
            access,
            symlinks: false,
        })
    }

    /// Parse the long form `src=PATH,dst=GUEST_PATH,mode=ro|rw[,symlinks=true|false]`.
    ///
    /// `src` (alias `source`) is required; `dst` (alias `target`) defaults to
    /// `/workspace`, `mode` to `ro`, `symlinks` to `false`. A value holding
    /// `,` or `"` is written in double quotes, with `""` for a quote:
    /// `src="/data/a,b",mode=rw`.
    pub fn parse_mount(spec: &str) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::Dir {
            spec: spec.to_owned(),
            reason,
        };
        let mut out = Self {
            host_path: PathBuf::new(),
            guest_path: DEFAULT_GUEST_DIR.to_owned(),
            access: Access::ReadOnly,
            symlinks: false,
        };
        let mut seen = std::collections::BTreeSet::new();
        for (key, value) in split_fields(spec).map_err(&bad)? {
            let canonical = match key.as_str() {
                "src" | "source" => "src",
                "dst" | "target" | "destination" => "dst",
                "mode" => "mode",
                "symlinks" => "symlinks",
                other => {
                    return Err(bad(format!(
                        "unknown field `{other}`; expected src, dst, mode, symlinks"
                    )));
                }
            };
            if !seen.insert(canonical) {
                return Err(bad(format!("`{canonical}` is given twice")));
            }
            match canonical {
                "src" => out.host_path = PathBuf::from(value),
                "dst" => out.guest_path = value,
                "mode" => {
                    out.access = match value.as_str() {
                        "ro" | "read-only" => Access::ReadOnly,
                        "rw" | "read-write" => Access::ReadWrite,
                        other => return Err(bad(format!("mode `{other}` is not ro or rw"))),
                    }
                }
                _ => {
                    out.symlinks = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        other => {
                            return Err(bad(format!("symlinks `{other}` is not true or false")));
                        }
                    }
                }
            }
        }
        if out.host_path.as_os_str().is_empty() {
            return Err(bad("`src=PATH` is required".to_owned()));
        }
        Ok(out)
    }
}

/// Split `key=value,key="quoted, value"` into pairs.
fn split_fields(spec: &str) -> Result<Vec<(String, String)>, String> {
    let mut fields = Vec::new();
    let mut chars = spec.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() || key.contains(',') {
            return Err("expected comma-separated key=value fields, e.g. \
                        src=./data,dst=/workspace,mode=rw"
                .to_owned());
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        value.push('"');
                    }
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("unclosed quote in the value of `{key}`")),
                }
            }
            match chars.next() {
                None | Some(',') => {}
                Some(c) => return Err(format!("unexpected `{c}` after the quoted `{key}`")),
            }
        } else {
            for c in chars.by_ref() {
                if c == ',' {
                    break;
                }
                value.push(c);
            }
        }
        fields.push((key, value));
        if chars.peek().is_none() {
            return Ok(fields);
        }
    }
}

/// Identity of a directory: device and inode on Unix. Two paths with the
/// same identity are the same directory, whatever was renamed in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirIdentity {
    /// Device id (`st_dev`).
    pub dev: u64,
    /// Inode number (`st_ino`).
    pub ino: u64,
}

impl fmt::Display for DirIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device {} inode {}", self.dev, self.ino)
    }
}

/// A host directory mapped into the guest: resolved and pinned.
///
/// A grant is the directory the operator meant when the grant was made, not
/// whatever its path names later. [`DirSpec::resolve`] (or
/// [`DirGrant::new`]) opens the path component by component **without
/// following symbolic links** and records the directory's identity; every
/// call opens it the same way again and refuses the call, naming the grant
/// and what changed, if a component became a symlink or the directory was
/// replaced. A session freezes its resolved grants, identity included, into
/// its first event.
///
/// Inside the directory the guest sees `guest_path` and nothing above it:
/// `..`, absolute paths and symlinks pointing outside fail with "not
/// permitted" (cap-std resolves every path beneath the opened handle). A
/// hard link the *operator* made to a file outside cannot be told apart from
/// the file itself; see docs/security.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirGrant {
    host_path: PathBuf,
    guest_path: String,
    #[serde(default)]
    access: Access,
    #[serde(default)]
    symlinks: bool,
    identity: DirIdentity,
}

impl DirGrant {
    /// Resolve and pin `host_path` (relative to the current directory),
    /// mapped to `guest_path` with `access`; no symlink creation.
    pub fn new(
        host_path: impl Into<PathBuf>,
        guest_path: &str,
        access: Access,
    ) -> Result<Self, GrantError> {
        DirSpec {
            host_path: host_path.into(),
            guest_path: guest_path.to_owned(),
            access,
            symlinks: false,
        }
        .resolve(Path::new("."))
    }

    /// The grant `spec` names, once its directory is pinned at `host_path`
    /// with `identity` ([`DirSpec::resolve`], in `dirs.rs`, the only caller).
    pub(crate) fn pinned(spec: &DirSpec, host_path: PathBuf, identity: DirIdentity) -> Self {
        DirGrant {
            host_path,
            guest_path: spec.guest_path.clone(),
            access: spec.access,
            symlinks: spec.symlinks,
            identity,
        }
    }

    /// The absolute host path, free of symbolic links when pinned.
    pub fn host_path(&self) -> &Path {
        &self.host_path
    }

    /// Where the guest sees it.
    pub fn guest_path(&self) -> &str {
        &self.guest_path
    }

    /// Read-only or read-write.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether the tool may create symbolic links in it.
    pub fn symlinks(&self) -> bool {
        self.symlinks
    }

    /// The identity pinned when the grant was resolved.
    pub fn identity(&self) -> DirIdentity {
        self.identity
    }
}

/// Guest path used when a directory grant does not name one.
pub const DEFAULT_GUEST_DIR: &str = "/workspace";

/// An outbound host pattern: `host[:port]`, where host may start with `*.`
/// to match any subdomain (but not the bare domain), or be `*` alone.
///
/// Without a port the pattern matches ports 80 and 443 only, so granting
/// `api.example.com` does not open `api.example.com:22`.
///
/// Matching a pattern is necessary but not sufficient: a host whose address
/// resolves to loopback, private, link-local or cloud-metadata space is still
/// denied unless the pattern names that address literally (see
/// [`HostPattern::names_ip`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostPattern {
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// `*`: any host name. Private addresses still need a literal grant.
    Any,
    /// `*.example.com`: stored as `.example.com`.
    Suffix(String),
    /// An exact lowercase host name.
    Exact(String),
    /// A literal IP address.
    Ip(IpAddr),
}

impl HostPattern {
    /// Parse `host[:port]`, `*.domain[:port]`, `[v6]:port` or `*`.
    pub fn parse(spec: &str) -> Result<Self, GrantError> {
        let bad = |reason: &str| GrantError::Host {
            spec: spec.to_owned(),
            reason: reason.to_owned(),
        };
        let spec_trim = spec.trim();
        if spec_trim.is_empty() {
            return Err(bad("the pattern is empty"));
        }
        if spec_trim.contains("://") || spec_trim.contains('/') {
            return Err(bad(
                "give a host, not a URL: e.g. api.example.com or api.example.com:8443",
            ));
        }
        let (host, port) = split_host_port(spec_trim).map_err(|r| bad(&r))?;
        let host = host.to_ascii_lowercase();
        let matcher = if host == "*" {
            HostMatch::Any
        } else if let Some(rest) = host.strip_prefix("*.") {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad("a wildcard must look like *.example.com"));
            }
            HostMatch::Suffix(format!(".{rest}"))
        } else if host.contains('*') {
            return Err(bad("`*` is allowed only as a leading `*.`"));
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            HostMatch::Ip(ip)
        } else {
            if !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            {
                return Err(bad(
                    "a host name may hold only letters, digits, `-` and `.`",
                ));
            }
            HostMatch::Exact(host)
        };
        Ok(Self {
            host: matcher,
            port,
        })
    }

    /// Whether a request to `host:port` matches this pattern by name.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        };
        if !port_ok {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match &self.host {
            HostMatch::Any => true,
            HostMatch::Suffix(suffix) => {
                host.ends_with(suffix.as_str()) && host.len() > suffix.len()
            }
            HostMatch::Exact(name) => host == name,
            HostMatch::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
        }
    }

    /// Whether this pattern names `ip` literally, which is what it takes to
    /// reach a loopback, private or link-local address.
    pub fn names_ip(&self, ip: IpAddr) -> bool {
        matches!(&self.host, HostMatch::Ip(granted) if *granted == ip)
    }

    /// Whether this pattern names `localhost` literally; a grant for
    /// `localhost:PORT` may then reach loopback addresses on that port.
    pub fn names_localhost(&self) -> bool {
        matches!(&self.host, HostMatch::Exact(name) if name == "localhost")
    }
}

fn split_host_port(spec: &str) -> Result<(&str, Option<u16>), String> {
    let parse_port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("`{p}` is not a port number (1-65535)"))
    };
    if let Some(rest) = spec.strip_prefix('[') {
        let (ip, after) = rest
            .split_once(']')
            .ok_or_else(|| "missing `]` after an IPv6 address".to_owned())?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((ip, Some(parse_port(p)?))),
            None if after.is_empty() => Ok((ip, None)),
            None => Err("unexpected text after `]`".to_owned()),
        };
    }
    if spec.matches(':').count() > 1 {
        // A bare IPv6 address without port.
        return Ok((spec, None));
    }
    match spec.split_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(port)?))),
        None => Ok((spec, None)),
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Any => write!(f, "*")?,
            HostMatch::Suffix(s) => write!(f, "*{s}")?,
            HostMatch::Exact(h) => write!(f, "{h}")?,
            HostMatch::Ip(IpAddr::V6(ip)) if self.port.is_some() => write!(f, "[{ip}]")?,
            HostMatch::Ip(ip) => write!(f, "{ip}")?,
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

impl TryFrom<String> for HostPattern {
    type Error = GrantError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<HostPattern> for String {
    fn from(value: HostPattern) -> Self {
        value.to_string()
    }
}

/// A secret value. Its `Debug` and `Display` never show the value, and it is
/// not serializable, so it cannot end up in a log, an event or an error.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that injects it into a request.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A credential the host adds to the guest's outgoing requests to matching
/// hosts. The guest never sees the value.
///
/// The header defaults to `Authorization` with the value `Bearer <secret>`;
/// any other header carries the bare secret. Over plain `http://` the secret
/// is added only for loopback destinations, so it never crosses a network in
/// clear text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretGrant {
    /// Where the value came from (an environment variable name), for receipts.
    pub name: String,
    /// The value. Never shown.
    pub value: Secret,
    /// Requests to hosts matching this pattern get the header.
    pub host: HostPattern,
    /// Header name; default `authorization`.
    pub header: String,
}

impl SecretGrant {
    /// Parse the CLI form `ENV_VAR@HOST_PATTERN[:HEADER]`, reading the value
    /// from the process environment through `lookup`.
    ///
    /// Because a port is also written with `:`, the header is recognised as
    /// a last `:`-separated part that is not a number.
    pub fn parse(spec: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::Secret {
            spec: spec.to_owned(),
            reason,
        };
        let (var, rest) = spec
            .split_once('@')
            .ok_or_else(|| bad("expected ENV_VAR@HOST_PATTERN[:HEADER]".to_owned()))?;
        if var.is_empty() {
            return Err(bad("the environment variable name is empty".to_owned()));
        }
        let (host, header) = match rest.rsplit_once(':') {
            Some((h, hdr)) if !hdr.is_empty() && !hdr.bytes().all(|c| c.is_ascii_digit()) => {
                (h, hdr.to_ascii_lowercase())
            }
            _ => (rest, DEFAULT_SECRET_HEADER.to_owned()),
        };
        if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(bad(format!("`{header}` is not a valid header name")));
        }
        let host = HostPattern::parse(host).map_err(|e| bad(e.to_string()))?;
        let value = lookup(var).ok_or_else(|| {
            bad(format!(
                "environment variable {var} is not set; export it before starting longhand"
            ))
        })?;
        if value.is_empty() {
            return Err(bad(format!("environment variable {var} is empty")));
        }
        Ok(Self {
            name: var.to_owned(),
            value: Secret::new(value),
            host,
            header,
        })
    }

    /// The header value sent: `Bearer <secret>` for `authorization`, the
    /// bare secret otherwise.
    pub(crate) fn header_value(&self) -> String {
        if self.header == DEFAULT_SECRET_HEADER {
            format!("Bearer {}", self.value.expose())
        } else {
            self.value.expose().to_owned()
        }
    }
}

/// Header a secret goes into when the grant names none.
pub const DEFAULT_SECRET_HEADER: &str = "authorization";

/// Resource limits of one call. Hitting any of them ends the call with
/// [`super::CallError::Limit`]; the host process carries on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Linear memory, summed over the component's memories. Default 256 MiB.
    pub memory_bytes: u64,
    /// Wall-clock time of the whole call, including host I/O. Default 30 s.
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// Fuel (roughly, wasm instructions). Default 20 billion, about ten
    /// seconds of pure computation.
    pub fuel: u64,
    /// Bytes of output returned to the caller. Default 1 MiB.
    pub max_output_bytes: u64,
    /// Bytes of one HTTP response body the guest may read. Default 8 MiB.
    pub max_http_response_bytes: u64,
    /// Bytes of stdout and of stderr kept each; the rest is dropped and
    /// counted. Default 64 KiB.
    pub max_stdio_bytes: u64,
    /// Outbound HTTP requests per call. Default 64.
    pub max_http_requests: u32,
    /// Bytes the call may write into granted directories: file data
    /// (however it is written), growth by truncation, and one 4 KiB block
    /// for each file, directory or link it creates. Past it the guest gets
    /// "no space left" and the receipt names the limit. Default 256 MiB.
    pub max_write_bytes: u64,
    /// Bytes of host memory the call may make the host hold for it
    /// (`host_memory`): directory listings, buffered body data, header maps
    /// and other handles (see `docs/security.md`, "What a guest can make the
    /// host spend"). Past it the guest gets an error and the receipt names
    /// the limit. Default `None`: 4 × `memory_bytes`
    /// ([`Limits::host_memory_bytes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_host_bytes: Option<u64>,
    /// Address space of each process a granted program starts
    /// (`RLIMIT_AS`; compilers and runtimes reserve far more than they
    /// touch). Default 8 GiB.
    pub command_memory_bytes: u64,
    /// Processes a command may have at once, threads included. Default 256.
    pub processes: u64,
}

impl Limits {
    /// The host memory budget in force: [`Limits::max_host_bytes`], or
    /// 4 × the memory limit when unset.
    pub fn host_memory_bytes(&self) -> u64 {
        self.max_host_bytes.unwrap_or_else(|| {
            self.memory_bytes
                .saturating_mul(super::budget::HOST_MEMORY_PER_GUEST_MEMORY)
        })
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            timeout: Duration::from_secs(30),
            fuel: 20_000_000_000,
            max_output_bytes: 1 << 20,
            max_http_response_bytes: 8 << 20,
            max_stdio_bytes: 64 << 10,
            max_http_requests: 64,
            max_write_bytes: 256 << 20,
            max_host_bytes: None,
            command_memory_bytes: 8 << 30,
            processes: 256,
        }
    }
}

/// Upper bound on [`Limits::memory_bytes`]: the pooling allocator reserves
/// this much address space per memory slot.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;

mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// Everything one component may use. `Default` is nothing at all.
///
/// Operator input (flags, `agent.toml`) becomes a `Grants` only through
/// [`GrantSpec::resolve`]; building one by hand is for embedders and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// When set, calls are refused unless the component's digest
    /// (`sha256:<hex>`) equals it: a changed binary does not inherit grants.
    /// Default `None` (the grant applies to whatever was loaded with it).
    pub component_digest: Option<String>,
    /// Directories mapped in. Default none.
    pub dirs: Vec<DirGrant>,
    /// Outbound hosts. Default none: every request is denied.
    pub hosts: Vec<HostPattern>,
    /// Environment variables the guest sees, name to value. Default none.
    pub env: BTreeMap<String, String>,
    /// Credentials added to outgoing requests by the host. Default none.
    pub secrets: Vec<SecretGrant>,
    /// Native programs a component may run through `longhand:tool/process`,
    /// resolved and hashed. Default none: it can run nothing.
    pub programs: Vec<super::programs::ProgramGrant>,
    /// Host directories a granted program sees read-only at their own
    /// paths, beyond the system's (a toolchain: `~/.rustup`). Default none.
    pub toolchains: Vec<PathBuf>,
    /// Databases the host connects to for the guest, by name (see
    /// [`super::sql`]). Default none.
    pub databases: Vec<super::sql::grant::DatabaseGrant>,
    /// Resource limits. Default [`Limits::default()`].
    pub limits: Limits,
}

impl Grants {
    /// Check the grants hang together before any call uses them.
    pub fn validate(&self) -> Result<(), GrantError> {
        let mut names = std::collections::BTreeSet::new();
        for db in &self.databases {
            if !names.insert(db.name.as_str()) {
                return Err(GrantError::Database(
                    super::sql::grant::DatabaseGrantError {
                        spec: db.name.clone(),
                        reason: "two databases are granted under this name".to_owned(),
                    },
                ));
            }
        }
        let mut guest_paths = std::collections::BTreeSet::new();
        for dir in &self.dirs {
            if !dir.guest_path.starts_with('/') {
                return Err(GrantError::Dir {
                    spec: dir.guest_path.clone(),
                    reason: "the guest path must be absolute, e.g. /workspace".to_owned(),
                });
            }
            if dir.guest_path.split('/').any(|c| c == ".." || c == ".") {
                return Err(GrantError::Dir {
                    spec: dir.guest_path.clone(),
                    reason: "the guest path may not contain `.` or `..`".to_owned(),
                });
            }
            if !guest_paths.insert(dir.guest_path.trim_end_matches('/')) {
                return Err(GrantError::Dir {
                    spec: dir.guest_path.clone(),
                    reason: "two directories are mapped to the same guest path".to_owned(),
                });
            }
            // The host side was opened and pinned when the grant was
            // resolved; every call checks it again (`super::dirs::open`).
        }
        // A link made where links are granted must not appear where they
        // are not: no grant allowing symlinks may contain, or lie inside,
        // one that does not.
        for linked in self.dirs.iter().filter(|d| d.symlinks) {
            for plain in self.dirs.iter().filter(|d| !d.symlinks) {
                if linked.host_path.starts_with(&plain.host_path)
                    || plain.host_path.starts_with(&linked.host_path)
                {
                    return Err(GrantError::Dir {
                        spec: linked.guest_path.clone(),
                        reason: format!(
                            "it allows symbolic links and overlaps {} ({}), which does not; \
                             a link made in one would appear in the other. Grant them \
                             without overlap, or allow symlinks in both",
                            plain.guest_path,
                            plain.host_path.display()
                        ),
                    });
                }
            }
        }
        for name in self.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(GrantError::Env {
                    name: name.clone(),
                    reason: "not a valid variable name".to_owned(),
                });
            }
        }
        for secret in &self.secrets {
            // A secret passed through as a plain variable would reach the
            // guest; refuse the combination rather than guess.
            if self.env.contains_key(&secret.name) {
                return Err(GrantError::Env {
                    name: secret.name.clone(),
                    reason:
                        "it is granted as a secret; a secret cannot also be an environment variable"
                            .to_owned(),
                });
            }
            if self.env.values().any(|v| v.contains(secret.value.expose())) {
                return Err(GrantError::Env {
                    name: secret.name.clone(),
                    reason: "an environment variable granted to the tool holds this secret's value"
                        .to_owned(),
                });
            }
        }
        for path in &self.toolchains {
            let refuse = |reason: String| GrantError::Toolchain {
                path: path.clone(),
                reason,
            };
            if !path.is_absolute() || path.parent().is_none() {
                return Err(refuse(
                    "give an absolute directory below / (a toolchain, e.g. /opt/rust)".into(),
                ));
            }
        }
        let l = &self.limits;
        if l.processes == 0 || l.command_memory_bytes == 0 {
            return Err(GrantError::Limit(
                "processes and command memory must be above zero".to_owned(),
            ));
        }
        if l.memory_bytes == 0 || l.memory_bytes > MAX_MEMORY_BYTES {
            return Err(GrantError::Limit(format!(
                "memory must be between 1 byte and {} MiB",
                MAX_MEMORY_BYTES >> 20
            )));
        }
        if l.timeout.is_zero() {
            return Err(GrantError::Limit("timeout must be above zero".to_owned()));
        }
        if l.fuel == 0 {
            return Err(GrantError::Limit("fuel must be above zero".to_owned()));
        }
        Ok(())
    }
}

/// One tool's grant as the operator wrote it, before it is resolved: the
/// one shape both front ends produce. `longhand tool call` builds it from
/// flags (`--dir`, `--mount`, `--allow-host`, `--env`, `--secret`,
/// `--memory`, …) and `agent.toml` from a `[[tools]]` table; only the
/// syntax differs. [`GrantSpec::resolve`] is the one way from operator text
/// to [`Grants`], so the same grant gets the same validation, the same
/// errors and the same defaults whichever way it was written.
///
/// `Default` grants nothing and leaves every limit at its default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantSpec {
    /// Pin the component's digest (`sha256:` and 64 lowercase hex digits).
    /// Default `None`: not pinned.
    pub digest: Option<String>,
    /// Directories, parsed but not resolved (relative host paths are
    /// resolved against the base given to [`GrantSpec::resolve`]). Default
    /// none.
    pub dirs: Vec<DirSpec>,
    /// Outbound host patterns as written (see [`HostPattern::parse`]).
    /// Default none.
    pub hosts: Vec<String>,
    /// Names of environment variables passed through with their values.
    /// Default none.
    pub env: Vec<String>,
    /// Secrets as written, `ENV_VAR@HOST_PATTERN[:HEADER]` (see
    /// [`SecretGrant::parse`]). Default none.
    pub secrets: Vec<String>,
    /// Programs as written: names looked up on `PATH`, or absolute paths
    /// (see [`super::programs::ProgramGrant::resolve`]). Default none.
    pub programs: Vec<String>,
    /// Toolchain directories granted programs see read-only (relative
    /// paths against the base given to [`GrantSpec::resolve`], `~/` against
    /// `HOME`). Default none.
    pub toolchains: Vec<PathBuf>,
    /// Databases as written, `NAME=ENV_VAR[,mode=rw][,allow=ADDRESS]` (see
    /// [`super::sql::grant::DatabaseGrant::parse`]). Default none.
    pub databases: Vec<String>,
    /// Limits; every one unset takes its [`Limits::default()`] value.
    pub limits: LimitSpec,
}

/// The per-call limits an operator may set, in the units they are written
/// in (`--memory 64`, `memory_mib = 64`). `None` is the default of the
/// matching [`Limits`] field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitSpec {
    /// Linear memory in MiB, 1 to [`MAX_MEMORY_BYTES`] (4096 MiB). Default
    /// 256.
    pub memory_mib: Option<u64>,
    /// Wall-clock time of one call, above zero. Default 30 s.
    pub timeout: Option<Duration>,
    /// Fuel, above zero. Default 20 billion.
    pub fuel: Option<u64>,
    /// Bytes of output. Default 1 MiB.
    pub max_output: Option<u64>,
    /// Bytes one call may write into granted directories. Default 256 MiB.
    pub max_write: Option<u64>,
    /// Host memory one call may make the host hold, in MiB, 1 to
    /// [`MAX_HOST_MEMORY_BYTES`] (16384 MiB). Default 4 × `memory_mib`.
    pub host_memory_mib: Option<u64>,
    /// Address space of each process a granted program starts, in MiB.
    /// Default 8192.
    pub command_memory_mib: Option<u64>,
    /// Processes a command may have at once. Default 256.
    pub processes: Option<u64>,
}

/// Upper bound on [`Limits::max_host_bytes`]: 16 GiB.
pub const MAX_HOST_MEMORY_BYTES: u64 = 16 << 30;

impl LimitSpec {
    /// The limits, defaults filled in. A value out of range is refused
    /// here, naming it, rather than clamped: `memory_mib = 99999999999999`
    /// is a typo, not a request for the most memory there is.
    pub fn resolve(&self) -> Result<Limits, GrantError> {
        let d = Limits::default();
        let max_mib = MAX_MEMORY_BYTES >> 20;
        let memory_bytes = match self.memory_mib {
            None => d.memory_bytes,
            Some(mib) => mib
                .checked_mul(1 << 20)
                .filter(|bytes| (1..=MAX_MEMORY_BYTES).contains(bytes))
                .ok_or_else(|| {
                    GrantError::Limit(format!(
                        "memory {mib} MiB is out of range: give 1 to {max_mib} MiB"
                    ))
                })?,
        };
        let max_host_bytes = match self.host_memory_mib {
            None => None,
            Some(mib) => Some(
                mib.checked_mul(1 << 20)
                    .filter(|bytes| (1..=MAX_HOST_MEMORY_BYTES).contains(bytes))
                    .ok_or_else(|| {
                        GrantError::Limit(format!(
                            "host memory {mib} MiB is out of range: give 1 to {} MiB",
                            MAX_HOST_MEMORY_BYTES >> 20
                        ))
                    })?,
            ),
        };
        let limits = Limits {
            memory_bytes,
            max_host_bytes,
            timeout: self.timeout.unwrap_or(d.timeout),
            fuel: self.fuel.unwrap_or(d.fuel),
            max_output_bytes: self.max_output.unwrap_or(d.max_output_bytes),
            max_write_bytes: self.max_write.unwrap_or(d.max_write_bytes),
            command_memory_bytes: match self.command_memory_mib {
                None => d.command_memory_bytes,
                Some(mib) => mib.checked_mul(1 << 20).filter(|b| *b > 0).ok_or_else(|| {
                    GrantError::Limit(format!(
                        "command memory {mib} MiB is out of range: give 1 MiB or more"
                    ))
                })?,
            },
            processes: match self.processes {
                None => d.processes,
                Some(n @ 1..=65_536) => n,
                Some(n) => {
                    return Err(GrantError::Limit(format!(
                        "processes {n} is out of range: give 1 to 65536"
                    )));
                }
            },
            ..d
        };
        // The remaining ranges are `Grants::validate`'s, checked once there
        // for every way a `Limits` is made.
        Ok(limits)
    }
}

impl GrantSpec {
    /// Resolve into validated [`Grants`]: pin each directory (relative host
    /// paths against `base`), parse host patterns and secrets, read env and
    /// secret values through `lookup`, fill in default limits, then
    /// [`Grants::validate`]. The first problem found is returned; nothing
    /// is partly granted.
    pub fn resolve(
        &self,
        base: &Path,
        lookup: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<Grants, GrantError> {
        if let Some(digest) = &self.digest {
            check_digest(digest)?;
        }
        let dirs = self
            .dirs
            .iter()
            .map(|d| d.resolve(base))
            .collect::<Result<_, _>>()?;
        let hosts = self
            .hosts
            .iter()
            .map(|h| HostPattern::parse(h))
            .collect::<Result<_, _>>()?;
        let mut env = BTreeMap::new();
        for name in &self.env {
            let value = lookup(name).ok_or_else(|| GrantError::Env {
                name: name.clone(),
                reason: "the variable is not set (or not UTF-8) in this environment".to_owned(),
            })?;
            env.insert(name.clone(), value);
        }
        let secrets = self
            .secrets
            .iter()
            .map(|s| SecretGrant::parse(s, lookup))
            .collect::<Result<_, _>>()?;
        // Fail closed: a program is never run less confined than
        // documented, so a grant of programs on a kernel that cannot
        // confine them is refused here, at start, naming what is missing.
        if !self.programs.is_empty() {
            super::sandbox::confined::available().map_err(GrantError::Unconfinable)?;
        }
        let path_var = lookup("PATH");
        let programs = self
            .programs
            .iter()
            .map(|name| super::programs::ProgramGrant::resolve(name, path_var.as_deref()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(GrantError::Program)?;
        // Whether a program or toolchain lies in the host's home is checked
        // before every run (`super::process`), as a directory grant is at
        // every open.
        let toolchains = self
            .toolchains
            .iter()
            .map(|t| {
                // `~/x`: the home of whoever runs the agent (rustup puts a
                // toolchain in ~/.rustup).
                let path = match t.strip_prefix("~") {
                    Ok(rest) => match lookup("HOME") {
                        Some(home) => Path::new(&home).join(rest),
                        None => {
                            return Err(GrantError::Toolchain {
                                path: t.clone(),
                                reason: "`~` needs HOME, which is not set".into(),
                            });
                        }
                    },
                    Err(_) => base.join(t),
                };
                std::fs::canonicalize(&path).map_err(|e| GrantError::Toolchain {
                    path,
                    reason: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        let databases = self
            .databases
            .iter()
            .map(|d| super::sql::grant::DatabaseGrant::parse(d, lookup))
            .collect::<Result<_, _>>()?;
        let grants = Grants {
            component_digest: self.digest.clone(),
            dirs,
            hosts,
            env,
            secrets,
            programs,
            toolchains,
            databases,
            limits: self.limits.resolve()?,
        };
        grants.validate()?;
        Ok(grants)
    }
}

/// A digest pin must be one a component can have: a typo would otherwise
/// only show as every call being refused.
fn check_digest(digest: &str) -> Result<(), GrantError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Ok(());
    }
    Err(GrantError::Digest {
        spec: digest.to_owned(),
        reason: "expected `sha256:` and 64 lowercase hex digits, as `longhand tool describe` \
                 prints it"
            .to_owned(),
    })
}

/// A grant that cannot be used. The caller fixes its configuration; retrying
/// the same grant fails the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// A directory grant is malformed or names a path that is not a directory.
    #[error("directory grant `{spec}`: {reason}")]
    Dir {
        /// The grant as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A host pattern does not parse.
    #[error("host pattern `{spec}`: {reason}")]
    Host {
        /// The pattern as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A secret grant does not parse or its value is missing.
    #[error("secret grant `{spec}`: {reason}")]
    Secret {
        /// The grant as given (never the value).
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A database grant does not parse, or its URL is missing or unusable.
    #[error(transparent)]
    Database(#[from] super::sql::grant::DatabaseGrantError),
    /// An environment variable grant is not usable.
    #[error("environment grant `{name}`: {reason}")]
    Env {
        /// The variable name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A limit is out of range.
    #[error("limit: {0}")]
    Limit(String),
    /// A program cannot be granted.
    #[error(transparent)]
    Program(super::programs::ProgramError),
    /// Programs are granted, and this host cannot confine them.
    #[error("programs are granted, but they cannot be confined here, so none is run: {0}")]
    Unconfinable(String),
    /// A toolchain directory cannot be granted.
    #[error("toolchain `{}`: {reason}", path.display())]
    Toolchain {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A digest pin cannot be any component's digest.
    #[error("digest `{spec}`: {reason}")]
    Digest {
        /// The pin as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_specs_parse_with_defaults() {
        let nowhere = Path::new("/nonexistent-longhand-base");
        let d = DirSpec::parse("/tmp/x", nowhere).unwrap();
        assert_eq!(d.guest_path, "/workspace");
        assert_eq!(d.access, Access::ReadOnly);
        let d = DirSpec::parse("/tmp/x:/data:rw", nowhere).unwrap();
        assert_eq!(
            (d.guest_path.as_str(), d.access),
            ("/data", Access::ReadWrite)
        );
        let d = DirSpec::parse("./src:rw", nowhere).unwrap();
        assert_eq!(
            (d.guest_path.as_str(), d.access),
            ("/workspace", Access::ReadWrite)
        );
        assert!(DirSpec::parse("a:b:c:d", nowhere).is_err());
        assert!(DirSpec::parse("a:relative", nowhere).is_err());
    }

    #[test]
    fn ambiguous_short_forms_are_refused_with_advice() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("data")).unwrap();
        std::fs::create_dir(tmp.path().join("data:rw")).unwrap();
        std::fs::create_dir(tmp.path().join("a:b")).unwrap();
        let err = DirSpec::parse("data:rw", tmp.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ambiguous") && err.contains("--mount"),
            "{err}"
        );
        let err = DirSpec::parse("a:b", tmp.path()).unwrap_err().to_string();
        assert!(err.contains("cannot be granted in the short form"), "{err}");
        // Unambiguous short forms still work.
        let d = DirSpec::parse("data:/d:rw", tmp.path()).unwrap();
        assert_eq!(d.host_path, PathBuf::from("data"));
    }

    #[test]
    fn mount_specs_parse_with_quotes_and_defaults() {
        let d = DirSpec::parse_mount("src=/tmp/a:b,dst=/data,mode=rw,symlinks=true").unwrap();
        assert_eq!(d.host_path, PathBuf::from("/tmp/a:b"));
        assert_eq!(d.guest_path, "/data");
        assert_eq!(d.access, Access::ReadWrite);
        assert!(d.symlinks);
        let d = DirSpec::parse_mount(r#"src="/tmp/x,""y""",mode=ro"#).unwrap();
        assert_eq!(d.host_path, PathBuf::from(r#"/tmp/x,"y""#));
        assert_eq!(d.guest_path, "/workspace");
        for bad in [
            "",
            "dst=/x",
            "src=/x,mode=rwx",
            "src=/x,src=/y",
            "src=/x,color=red",
            r#"src="/x"#,
            "src=/x,symlinks=yes",
        ] {
            assert!(DirSpec::parse_mount(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn host_patterns_match_names_ports_and_wildcards() {
        let p = HostPattern::parse("api.example.com").unwrap();
        assert!(p.matches("api.example.com", 443));
        assert!(p.matches("API.example.com.", 80));
        assert!(!p.matches("api.example.com", 22));
        assert!(!p.matches("evil-api.example.com", 443));

        let w = HostPattern::parse("*.example.com:8443").unwrap();
        assert!(w.matches("a.b.example.com", 8443));
        assert!(!w.matches("example.com", 8443));
        assert!(!w.matches("a.example.com", 443));
        assert!(!w.matches("example.com.evil.net", 8443));

        let ip = HostPattern::parse("127.0.0.1:9000").unwrap();
        assert!(ip.matches("127.0.0.1", 9000));
        assert!(ip.names_ip("127.0.0.1".parse().unwrap()));

        let v6 = HostPattern::parse("[::1]:9000").unwrap();
        assert!(v6.matches("[::1]", 9000));
        assert_eq!(v6.to_string(), "[::1]:9000");

        for bad in [
            "",
            "http://x.com",
            "a*.com",
            "*.",
            "x.com:0",
            "x.com:http",
            "a b",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn secret_specs_parse_header_and_port() {
        let env = |_: &str| Some("s3cret".to_owned());
        let s = SecretGrant::parse("TOKEN@api.example.com", env).unwrap();
        assert_eq!(s.header, "authorization");
        assert_eq!(s.header_value(), "Bearer s3cret");
        let s = SecretGrant::parse("TOKEN@127.0.0.1:8080", env).unwrap();
        assert_eq!(s.header, "authorization");
        assert!(s.host.matches("127.0.0.1", 8080));
        let s = SecretGrant::parse("TOKEN@127.0.0.1:8080:X-Api-Key", env).unwrap();
        assert_eq!(s.header, "x-api-key");
        assert_eq!(s.header_value(), "s3cret");
        assert!(SecretGrant::parse("TOKEN@x.com", |_| None).is_err());
        assert!(format!("{s:?}").contains("***"));
        assert!(!format!("{s:?}").contains("s3cret"));
    }

    #[test]
    fn secrets_cannot_be_passed_as_env() {
        let mut g = Grants::default();
        g.secrets
            .push(SecretGrant::parse("TOKEN@x.com", |_| Some("v".to_owned())).unwrap());
        g.env.insert("TOKEN".to_owned(), "v".to_owned());
        assert!(g.validate().is_err());
    }
}
