//! Attenuation: the one rule for "holds no more than". A delegated child
//! agent, a skill, and a parallel task's child session are each checked
//! against what their parent holds with [`covers`], so the three can never
//! drift apart again (they once compared hosts three ways).
//!
//! What is compared is a small [`Capabilities`] view: directories (path,
//! mode, symbolic links), outbound host patterns, environment names,
//! secrets, and budget slices. Each caller builds the view from what it
//! has — bound [`Grants`], a [`Frozen`] agent, a skill's front matter —
//! and words the [`Refusal`]s for its reader (the model or the operator).
//!
//! The rules, dimension by dimension:
//! - **Directories.** A child directory must lie inside one parent
//!   directory (equal or below it, by whole path components, so `/data2` is
//!   not inside `/data`) whose mode is no narrower (read-write only under
//!   read-write) and which allows symbolic links if the child's does. Paths
//!   are compared after dropping `.` and repeated or trailing `/`; a `..`
//!   is never resolved (only the file system can say where it leads once a
//!   symbolic link precedes it), so a child path holding one is refused
//!   and a parent path holding one covers nothing. Pinned grants hold none.
//! - **Hosts.** A child pattern is covered when every host and port it
//!   lets a request reach is reachable through one parent pattern, judged
//!   as `hands::net` judges a request at run time: a pattern without a
//!   port means ports 80 and 443; `*` covers any name, `*.s` any name
//!   ending in `.s` (not `s` itself) and any `*.t.s`; a name covers only
//!   itself and never a wildcard; an IP address or `localhost` is covered
//!   only by the same literal, since that is what the run-time check
//!   requires to reach a special address (a parent's `*` reaches no
//!   loopback). A pattern that does not parse (a scheme, a path) is
//!   covered by nothing.
//! - **Environment.** Each name the child passes through, the parent must.
//! - **Secrets.** Each secret the child names the parent must hold under
//!   the same name; when the child's names its host pattern and header,
//!   the parent's must cover that pattern and use the same header.
//! - **Budget.** Each limit of the child's slice must fit in what the
//!   parent has left of it; a limit the parent's budget does not name is
//!   unlimited there.
//!
//! This module reads capabilities; it must not resolve a path, read an
//! environment variable or a secret's value, or start anything.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

use super::frozen::Frozen;
use longhand_hands::sql::{DatabaseGrant, DatabaseMode};
use longhand_hands::{Access, Grants, HostPattern, SecretGrant};

/// What one side holds, as [`covers`] compares it. The union over a
/// side's components: any one grant that covers suffices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Directories.
    pub dirs: Vec<DirCap>,
    /// Outbound host patterns as written (`api.example.com:8443`,
    /// `*.example.com`, `*`).
    pub hosts: Vec<String>,
    /// Environment variable names passed through.
    pub env: Vec<String>,
    /// Secrets, by name.
    pub secrets: Vec<SecretCap>,
    /// Databases, by the variable their URL comes from.
    pub databases: Vec<DatabaseCap>,
    /// Budget: limit name (`max_steps`…) to what is left (a parent) or
    /// what is asked for (a child's slice).
    pub budget: BTreeMap<String, u64>,
}

/// One directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirCap {
    /// The path compared: the host path of a bound or pinned grant, the
    /// guest path where only that is known (a skill).
    pub path: PathBuf,
    /// How a refusal names it (the guest path).
    pub shown: String,
    /// Read-only or read-write.
    pub access: Access,
    /// Whether symbolic links may be created in it.
    pub symlinks: bool,
}

/// One secret: its name (the environment variable its value comes from,
/// never the value), and where it is sent when that is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretCap {
    /// `ENV_VAR` of `ENV_VAR@HOST_PATTERN[:HEADER]`.
    pub name: String,
    /// The host pattern and header it is sent with; `None` when the side
    /// names the secret only (a skill).
    pub sent_to: Option<(String, String)>,
}

/// One database: the environment variable its URL comes from (never the
/// URL), whether it may be written, and the inside addresses it may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseCap {
    /// `ENV_VAR` of `NAME=ENV_VAR`.
    pub var: String,
    /// Granted `mode=rw`.
    pub writes: bool,
    /// `allow=` patterns as written.
    pub allow: Vec<String>,
}

impl DatabaseCap {
    /// Read a configured grant by the parser the tool host uses, with a
    /// stand-in URL (the URL is not needed to compare). One that does not
    /// parse covers nothing and is covered by nothing.
    fn of_spec(spec: &str) -> Self {
        match DatabaseGrant::parse_form(spec) {
            Ok(g) => Self::of(&g),
            Err(_) => Self {
                var: format!("/{spec}"),
                writes: true,
                allow: Vec::new(),
            },
        }
    }

    fn of(grant: &DatabaseGrant) -> Self {
        Self {
            var: grant.var.clone(),
            writes: grant.mode == DatabaseMode::ReadWrite,
            allow: grant.allow.iter().map(ToString::to_string).collect(),
        }
    }

    /// Whether `self` (a parent's) holds all of `child`.
    fn covers(&self, child: &DatabaseCap) -> bool {
        self.var == child.var
            && (self.writes || !child.writes)
            && child.allow.iter().all(|a| self.allow.contains(a))
    }
}

/// One thing the child holds that the parent does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A directory inside no parent directory.
    DirOutside { dir: String },
    /// A directory read-write where the parent's covering ones are
    /// read-only; `granted` names one of them.
    DirReadWrite { dir: String, granted: String },
    /// A directory allowing symbolic links where no covering parent
    /// directory of a wide enough mode does.
    DirSymlinks { dir: String },
    /// A host pattern reaching somewhere the parent's do not.
    Host { pattern: String },
    /// An environment name the parent does not pass through.
    Env { name: String },
    /// A secret the parent does not hold (or sends elsewhere).
    Secret { name: String },
    /// A database the parent does not hold (or holds read-only, or with
    /// fewer addresses).
    Database { var: String },
    /// A budget slice larger than what the parent has left.
    Budget {
        limit: String,
        wanted: u64,
        left: u64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DirOutside { dir } => {
                write!(f, "directory {dir} is outside every directory granted here")
            }
            Self::DirReadWrite { dir, .. } => write!(
                f,
                "directory {dir} is granted read-write to the child but only read-only here"
            ),
            Self::DirSymlinks { dir } => write!(
                f,
                "directory {dir} lets the child create symbolic links but not here"
            ),
            Self::Host { pattern } => write!(f, "host {pattern:?} is not granted here"),
            Self::Env { name } => write!(f, "environment variable {name} is not granted here"),
            Self::Secret { name } => write!(f, "secret {name} is not held here"),
            Self::Database { var } => write!(
                f,
                "the database in {var} is not granted here as widely (mode or addresses)"
            ),
            Self::Budget {
                limit,
                wanted,
                left,
            } => write!(f, "needs {wanted} of {limit} and {left} is left"),
        }
    }
}

impl Capabilities {
    /// What bound grants hold (one entry per component).
    pub fn of_grants(grants: &[&Grants]) -> Self {
        let mut caps = Self::default();
        for g in grants {
            caps.dirs.extend(g.dirs.iter().map(|d| DirCap {
                path: d.host_path().to_owned(),
                shown: d.guest_path().to_owned(),
                access: d.access(),
                symlinks: d.symlinks(),
            }));
            caps.hosts.extend(g.hosts.iter().map(ToString::to_string));
            caps.env.extend(g.env.keys().cloned());
            caps.secrets.extend(g.secrets.iter().map(|s| SecretCap {
                name: s.name.clone(),
                sent_to: Some((s.host.to_string(), s.header.clone())),
            }));
            caps.databases
                .extend(g.databases.iter().map(DatabaseCap::of));
        }
        caps
    }

    /// What a frozen agent's tools hold, before anything is bound: the
    /// directories as pinned at start (a tool frozen before pinning has
    /// none here; its directories are checked on the bound grants), hosts,
    /// environment names and secrets as configured. No secret value is
    /// read.
    pub fn of_frozen(frozen: &Frozen) -> Self {
        let mut caps = Self::default();
        for tool in &frozen.tools {
            caps.dirs.extend(tool.dirs.iter().flatten().map(|d| DirCap {
                path: d.host_path().to_owned(),
                shown: d.guest_path().to_owned(),
                access: d.access(),
                symlinks: d.symlinks(),
            }));
            caps.hosts.extend(tool.config.allow_hosts.iter().cloned());
            caps.env.extend(tool.config.env.iter().cloned());
            caps.secrets
                .extend(tool.config.secrets.iter().map(|s| secret_of(s)));
            caps.databases.extend(
                tool.config
                    .databases
                    .iter()
                    .map(|d| DatabaseCap::of_spec(d)),
            );
        }
        caps
    }
}

/// A configured secret `ENV_VAR@HOST_PATTERN[:HEADER]` as compared, read
/// by the parser the tool host uses (so host and header split the same
/// way), with a stand-in value: the value is not needed to compare, and
/// the variable need not be set here. One that does not parse keeps its
/// raw host text, which covers nothing and is covered by nothing.
fn secret_of(spec: &str) -> SecretCap {
    match SecretGrant::parse(spec, |_| Some("-".to_owned())) {
        Ok(s) => SecretCap {
            name: s.name,
            sent_to: Some((s.host.to_string(), s.header)),
        },
        Err(_) => {
            let (name, rest) = spec.split_once('@').unwrap_or((spec, ""));
            SecretCap {
                name: name.to_owned(),
                sent_to: Some((format!("/{rest}"), String::new())),
            }
        }
    }
}

/// Whether `parent` holds everything `child` does; otherwise every
/// [`Refusal`], in the order directories, hosts, environment, secrets,
/// budget.
pub fn covers(parent: &Capabilities, child: &Capabilities) -> Result<(), Vec<Refusal>> {
    let mut refusals = Vec::new();
    for dir in &child.dirs {
        if let Some(refusal) = dir_refusal(&parent.dirs, dir) {
            refusals.push(refusal);
        }
    }
    let parent_hosts: Vec<Pattern> = parent.hosts.iter().filter_map(|h| Pattern::of(h)).collect();
    for host in &child.hosts {
        if !host_covered(host, &parent_hosts) {
            refusals.push(Refusal::Host {
                pattern: host.clone(),
            });
        }
    }
    for name in &child.env {
        if !parent.env.contains(name) {
            refusals.push(Refusal::Env { name: name.clone() });
        }
    }
    for secret in &child.secrets {
        if !parent.secrets.iter().any(|p| secret_covered(p, secret)) {
            refusals.push(Refusal::Secret {
                name: secret.name.clone(),
            });
        }
    }
    for db in &child.databases {
        if !parent.databases.iter().any(|p| p.covers(db)) {
            refusals.push(Refusal::Database {
                var: db.var.trim_start_matches('/').to_owned(),
            });
        }
    }
    for (limit, &wanted) in &child.budget {
        if let Some(&left) = parent.budget.get(limit)
            && wanted > left
        {
            refusals.push(Refusal::Budget {
                limit: limit.clone(),
                wanted,
                left,
            });
        }
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(refusals)
    }
}

/// Why no parent directory covers `dir`, or `None` when one does.
fn dir_refusal(parent: &[DirCap], dir: &DirCap) -> Option<Refusal> {
    let inside: Vec<&DirCap> = parent
        .iter()
        .filter(|p| within(&dir.path, &p.path))
        .collect();
    let Some(first) = inside.first() else {
        return Some(Refusal::DirOutside {
            dir: dir.shown.clone(),
        });
    };
    let mode_ok = |p: &DirCap| dir.access == Access::ReadOnly || p.access == Access::ReadWrite;
    if !inside.iter().any(|p| mode_ok(p)) {
        return Some(Refusal::DirReadWrite {
            dir: dir.shown.clone(),
            granted: first.shown.clone(),
        });
    }
    if !inside
        .iter()
        .any(|p| mode_ok(p) && (p.symlinks || !dir.symlinks))
    {
        return Some(Refusal::DirSymlinks {
            dir: dir.shown.clone(),
        });
    }
    None
}

/// Whether `path` is `granted` or below it, by whole components, both
/// normalised; a path that is relative or holds `..` is inside nothing
/// and covers nothing.
fn within(path: &Path, granted: &Path) -> bool {
    match (normalised(path), normalised(granted)) {
        (Some(path), Some(granted)) => path.starts_with(granted),
        _ => false,
    }
}

/// `path` without `.` components and repeated or trailing `/`, when it is
/// absolute and holds no `..`.
fn normalised(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => out.push(component),
            Component::CurDir => {}
            Component::Normal(part) => out.push(part),
            Component::ParentDir => return None,
        }
    }
    path.is_absolute().then_some(out)
}

/// Whether the parent secret `p` covers the child's `c`.
fn secret_covered(p: &SecretCap, c: &SecretCap) -> bool {
    if p.name != c.name {
        return false;
    }
    match (&p.sent_to, &c.sent_to) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some((p_host, p_header)), Some((c_host, c_header))) => {
            p_header == c_header && Pattern::of(p_host).is_some_and(|p| host_covered(c_host, &[p]))
        }
    }
}

/// A host pattern's parts, read back from its normal form (`HostPattern`
/// validates and normalises, and shows its parts only through `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    host: HostKind,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostKind {
    /// `*`.
    Any,
    /// `*.s`, stored as `.s`.
    Suffix(String),
    /// A host name, lowercase.
    Name(String),
    /// An IP address.
    Ip(IpAddr),
}

impl Pattern {
    /// The parts of `text`, or `None` when it is not a host pattern.
    fn of(text: &str) -> Option<Self> {
        let normal = HostPattern::parse(text).ok()?.to_string();
        let (host, port) = split_normalised(&normal);
        let host = if host == "*" {
            HostKind::Any
        } else if let Some(rest) = host.strip_prefix('*') {
            HostKind::Suffix(rest.to_owned())
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            HostKind::Ip(ip)
        } else {
            HostKind::Name(host.to_owned())
        };
        Some(Self { host, port })
    }

    /// The ports it matches.
    fn ports(&self) -> Vec<u16> {
        match self.port {
            Some(p) => vec![p],
            None => vec![80, 443],
        }
    }
}

/// Whether every host and port `child` reaches is reached through one of
/// `parent` (per port: different parent patterns may cover different
/// ports).
fn host_covered(child: &str, parent: &[Pattern]) -> bool {
    let Some(child) = Pattern::of(child) else {
        return false;
    };
    child.ports().into_iter().all(|port| {
        parent
            .iter()
            .any(|p| p.ports().contains(&port) && host_kind_covered(&p.host, &child.host))
    })
}

/// Whether every host `child` matches, `parent` matches and reaches at
/// run time.
fn host_kind_covered(parent: &HostKind, child: &HostKind) -> bool {
    use HostKind::{Any, Ip, Name, Suffix};
    match (parent, child) {
        // A literal address or `localhost` reaches special addresses only
        // through a pattern naming it: only the same literal covers it.
        (Ip(p), Ip(c)) => p == c,
        (_, Ip(_)) => false,
        (Name(p), Name(c)) => p == c,
        (_, Name(c)) if c == "localhost" => false,
        (Any, _) => true,
        (Suffix(s), Suffix(t)) => t.ends_with(s.as_str()),
        (Suffix(s), Name(c)) => c.ends_with(s.as_str()) && c.len() > s.len(),
        (Suffix(_) | Name(_) | Ip(_), Any) | (Name(_) | Ip(_), Suffix(_)) | (Ip(_), Name(_)) => {
            false
        }
    }
}

/// `(host, port)` of a pattern as `HostPattern`'s `Display` writes it.
fn split_normalised(pattern: &str) -> (&str, Option<u16>) {
    if let Some(rest) = pattern.strip_prefix('[')
        && let Some((ip, port)) = rest.split_once("]:")
    {
        return (ip, port.parse().ok());
    }
    if pattern.matches(':').count() > 1 {
        return (pattern, None);
    }
    match pattern.split_once(':') {
        Some((host, port)) => (host, port.parse().ok()),
        None => (pattern, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(path: &str, access: Access, symlinks: bool) -> DirCap {
        DirCap {
            path: PathBuf::from(path),
            shown: path.to_owned(),
            access,
            symlinks,
        }
    }

    fn dirs(dirs: Vec<DirCap>) -> Capabilities {
        Capabilities {
            dirs,
            ..Capabilities::default()
        }
    }

    fn hosts(hosts: &[&str]) -> Capabilities {
        Capabilities {
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            ..Capabilities::default()
        }
    }

    fn secrets(secrets: &[&str]) -> Capabilities {
        Capabilities {
            secrets: secrets.iter().map(|s| secret_of(s)).collect(),
            ..Capabilities::default()
        }
    }

    const RO: Access = Access::ReadOnly;
    const RW: Access = Access::ReadWrite;

    #[test]
    fn directories_narrow_by_path_mode_and_symlinks() {
        let parent = dirs(vec![
            dir("/data", RO, false),
            dir("/data/out", RW, false),
            dir("/links", RW, true),
        ]);
        for (child, access, symlinks) in [
            ("/data", RO, false),
            ("/data/2024", RO, false),
            ("/data/./2024/", RO, false),
            ("//data//x", RO, false),
            ("/data/out/x", RW, false),
            ("/data/out/x", RO, false),
            ("/links/a", RW, true),
            ("/links/a", RO, false),
        ] {
            let c = dirs(vec![dir(child, access, symlinks)]);
            assert_eq!(covers(&parent, &c), Ok(()), "{child} {access:?}");
        }
        let refused = |child: DirCap| covers(&parent, &dirs(vec![child])).unwrap_err();
        for outside in [
            "/data2",
            "/dat",
            "/",
            "/data/../etc",
            "/data/x/..",
            "data/x",
            "/etc",
        ] {
            assert_eq!(
                refused(dir(outside, RO, false)),
                [Refusal::DirOutside {
                    dir: outside.into()
                }],
                "{outside}"
            );
        }
        assert_eq!(
            refused(dir("/data/in", RW, false)),
            [Refusal::DirReadWrite {
                dir: "/data/in".into(),
                granted: "/data".into()
            }]
        );
        assert_eq!(
            refused(dir("/data/out/x", RW, true)),
            [Refusal::DirSymlinks {
                dir: "/data/out/x".into()
            }]
        );
        // A parent path with `..` covers nothing, even what it names.
        let odd = dirs(vec![dir("/data/../data", RW, true)]);
        assert!(covers(&odd, &dirs(vec![dir("/data", RO, false)])).is_err());
    }

    #[test]
    fn hosts_are_covered_as_patterns_per_port() {
        let ok = [
            (&["api.example.com"][..], "api.example.com"),
            (&["API.Example.com"], "api.example.COM"),
            (&["*.example.com"], "a.example.com"),
            (&["*.example.com"], "a.b.example.com"),
            (&["*.example.com"], "*.a.example.com"),
            (&["*.example.com"], "*.example.com"),
            (&["*"], "example.com"),
            (&["*"], "*.example.com"),
            (&["*"], "*"),
            (&["example.com:8443"], "example.com:8443"),
            (&["example.com:80", "example.com:443"], "example.com"),
            (&["example.com"], "example.com:443"),
            (&["10.0.0.1:9000"], "10.0.0.1:9000"),
            (&["[::1]:9000"], "[::1]:9000"),
            (&["localhost:8080"], "localhost:8080"),
        ];
        for (parent, child) in ok {
            assert_eq!(
                covers(&hosts(parent), &hosts(&[child])),
                Ok(()),
                "{parent:?} should cover {child}"
            );
        }
        let refused = [
            // A wildcard covers subdomains, not the bare domain.
            (&["*.example.com"][..], "example.com"),
            // A literal never covers a wildcard; `*.x` not `*`.
            (&["example.com"], "*.example.com"),
            (&["a.example.com"], "*.example.com"),
            (&["*.example.com"], "*"),
            (&["*.a.example.com"], "*.example.com"),
            (&["*.example.com"], "*.com"),
            (&["*.example.com"], "a.example.org"),
            (&["*.ample.com"], "a.example.com"),
            // Ports: none means 80 and 443 only.
            (&["example.com"], "example.com:22"),
            (&["example.com:443"], "example.com"),
            (&["example.com:8443"], "example.com:8444"),
            (&["*"], "example.com:22"),
            // Special addresses need the same literal.
            (&["*"], "10.0.0.1"),
            (&["*"], "localhost"),
            (&["10.0.0.1:9000"], "10.0.0.1:9001"),
            (&["10.0.0.1:9000"], "10.0.0.2:9000"),
            (&["localhost:8080"], "127.0.0.1:8080"),
            // Not a pattern: a scheme or a path is covered by nothing.
            (&["*"], "https://example.com"),
            (&["*"], "example.com/x"),
            (&[], "example.com"),
        ];
        for (parent, child) in refused {
            assert_eq!(
                covers(&hosts(parent), &hosts(&[child])),
                Err(vec![Refusal::Host {
                    pattern: child.into()
                }]),
                "{parent:?} should not cover {child}"
            );
        }
    }

    #[test]
    fn databases_are_held_by_variable_mode_and_address() {
        let dbs = |specs: &[&str]| Capabilities {
            databases: specs.iter().map(|s| DatabaseCap::of_spec(s)).collect(),
            ..Capabilities::default()
        };
        let parent = dbs(&["app=APP_URL,mode=rw,allow=127.0.0.1", "logs=LOGS_URL"]);
        for child in [
            "app=APP_URL",
            "other_name=APP_URL,mode=rw",
            "app=APP_URL,allow=127.0.0.1",
            "logs=LOGS_URL,mode=ro",
        ] {
            assert_eq!(covers(&parent, &dbs(&[child])), Ok(()), "{child}");
        }
        for (child, var) in [
            ("logs=LOGS_URL,mode=rw", "LOGS_URL"),
            ("app=OTHER_URL", "OTHER_URL"),
            ("app=APP_URL,allow=10.0.0.5", "APP_URL"),
            ("broken", "broken"),
        ] {
            assert_eq!(
                covers(&parent, &dbs(&[child])),
                Err(vec![Refusal::Database { var: var.into() }]),
                "{child}"
            );
        }
    }

    #[test]
    fn env_and_secrets_are_held_by_name_and_destination() {
        let parent = Capabilities {
            env: vec!["LANG".into()],
            ..secrets(&["TOKEN@*.example.com", "KEY@api.other.org:8443:x-key"])
        };
        let child = |env: &[&str], s: &[&str]| Capabilities {
            env: env.iter().map(|e| (*e).to_owned()).collect(),
            ..secrets(s)
        };
        for s in [
            "TOKEN@a.example.com",
            "TOKEN@*.example.com",
            "KEY@api.other.org:8443:x-key",
        ] {
            assert_eq!(covers(&parent, &child(&["LANG"], &[s])), Ok(()), "{s}");
        }
        // A skill names the secret only.
        let named = Capabilities {
            secrets: vec![SecretCap {
                name: "TOKEN".into(),
                sent_to: None,
            }],
            ..Capabilities::default()
        };
        assert_eq!(covers(&parent, &named), Ok(()));
        assert_eq!(
            covers(&child(&["HOME"], &[]), &child(&["LANG"], &[])),
            Err(vec![Refusal::Env {
                name: "LANG".into()
            }])
        );
        for s in [
            "OTHER@a.example.com",
            "TOKEN@example.com",
            "TOKEN@*",
            "TOKEN@a.example.com:8443",
            "KEY@api.other.org:8443",
            "KEY@api.other.org:8443:x-other",
            "TOKEN@https://a.example.com",
        ] {
            let name = s.split('@').next().unwrap_or_default();
            assert_eq!(
                covers(&parent, &child(&[], &[s])),
                Err(vec![Refusal::Secret { name: name.into() }]),
                "{s}"
            );
        }
        // A child naming its destination is not covered by a parent that
        // names the secret only: where it is sent is not known there.
        let destined = secrets(&["TOKEN@a.example.com"]);
        assert!(covers(&named, &destined).is_err());
    }

    #[test]
    fn budget_slices_fit_in_what_is_left() {
        let budget = |pairs: &[(&str, u64)]| Capabilities {
            budget: pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            ..Capabilities::default()
        };
        let left = budget(&[("max_steps", 4), ("max_tool_calls", 10)]);
        assert_eq!(covers(&left, &budget(&[("max_steps", 4)])), Ok(()));
        // A limit the parent does not name is unlimited there.
        assert_eq!(covers(&left, &budget(&[("max_cost_micros", 9)])), Ok(()));
        assert_eq!(
            covers(&left, &budget(&[("max_steps", 5), ("max_tool_calls", 10)])),
            Err(vec![Refusal::Budget {
                limit: "max_steps".into(),
                wanted: 5,
                left: 4
            }])
        );
    }

    #[test]
    fn every_widening_is_refused_at_once() {
        let parent = Capabilities {
            dirs: vec![dir("/data", RO, false)],
            hosts: vec!["*.example.com".into()],
            env: vec!["LANG".into()],
            secrets: vec![secret_of("TOKEN@*.example.com")],
            databases: Vec::new(),
            budget: BTreeMap::from([("max_steps".to_owned(), 3)]),
        };
        assert_eq!(covers(&parent, &parent), Ok(()));
        assert_eq!(covers(&parent, &Capabilities::default()), Ok(()));
        let child = Capabilities {
            dirs: vec![dir("/data", RW, false), dir("/data2", RO, false)],
            hosts: vec!["example.com".into()],
            env: vec!["HOME".into()],
            secrets: vec![secret_of("TOKEN@*")],
            databases: Vec::new(),
            budget: BTreeMap::from([("max_steps".to_owned(), 4)]),
        };
        let refusals = covers(&parent, &child).unwrap_err();
        assert_eq!(refusals.len(), 6, "{refusals:?}");
        let text: Vec<String> = refusals.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "directory /data is granted read-write to the child but only read-only here",
                "directory /data2 is outside every directory granted here",
                "host \"example.com\" is not granted here",
                "environment variable HOME is not granted here",
                "secret TOKEN is not held here",
                "needs 4 of max_steps and 3 is left",
            ]
        );
    }
}
