//! A database granted by name:
//! `NAME=ENV_VAR[,mode=ro|rw][,allow=ADDRESS]…[,superuser=yes]`.
//!
//! The environment variable holds a `postgres://` URL on the host. The URL
//! is read once, when the grant is resolved, checked, and kept as a
//! [`Secret`]; the guest only ever names the database (`app`). Nothing
//! that is printed — an error, a receipt, a `Debug` — carries the URL, the
//! user or the password: a malformed URL is reported by the variable that
//! holds it and what kind of thing is wrong, never by its text.

use std::fmt;
use std::net::IpAddr;

use longhand_pgtls::{SslMode, TlsSettings};
use tokio_postgres::config::Host;

/// A database grant that cannot be used; the operator fixes the grant or
/// the variable. Never holds the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("database grant `{spec}`: {reason}")]
pub struct DatabaseGrantError {
    /// The grant as given (a name and a variable, never the URL).
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

/// An address a database server may have although it is loopback,
/// private or link-local: `allow=127.0.0.1`, `allow=[::1]:5432`,
/// `allow=localhost:5432`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The address, or `None` for `localhost` (any loopback address the
    /// name resolves to).
    ip: Option<IpAddr>,
    /// Only this port, when given.
    port: Option<u16>,
}

impl Allowed {
    fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "allow={text} is not an address: write an IP address or localhost, with an \
                 optional port (allow=10.0.0.5, allow=[::1]:5432, allow=localhost:5432)"
            )
        };
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (ip, after) = rest.split_once(']').ok_or_else(bad)?;
            match after.strip_prefix(':') {
                Some(p) => (ip, Some(p)),
                None if after.is_empty() => (ip, None),
                None => return Err(bad()),
            }
        } else if text.matches(':').count() > 1 {
            (text, None)
        } else {
            match text.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (text, None),
            }
        };
        let port = port
            .map(|p| p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(bad))
            .transpose()?;
        let ip = if host.eq_ignore_ascii_case("localhost") {
            None
        } else {
            Some(host.parse::<IpAddr>().map_err(|_| bad())?)
        };
        Ok(Self { ip, port })
    }
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.ip, self.port) {
            (None, None) => f.write_str("localhost"),
            (None, Some(p)) => write!(f, "localhost:{p}"),
            (Some(IpAddr::V6(ip)), Some(p)) => write!(f, "[{ip}]:{p}"),
            (Some(ip), Some(p)) => write!(f, "{ip}:{p}"),
            (Some(ip), None) => write!(f, "{ip}"),
        }
    }
}

/// The URL, kept out of every `Debug` and `Display`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Url(String);

impl Url {
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

/// What a granted database lets a tool do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseMode {
    /// `query` and `schema` only (the default).
    ReadOnly,
    /// `execute` too.
    ReadWrite,
}

impl DatabaseMode {
    /// As the grant writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "ro",
            Self::ReadWrite => "rw",
        }
    }
}

/// A PostgreSQL database granted to a tool by name.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseGrant {
    /// The name the guest uses, e.g. `app`.
    pub name: String,
    /// The environment variable the URL came from, for messages.
    pub var: String,
    /// `ro` (default) or `rw`.
    pub mode: DatabaseMode,
    /// Loopback, private, link-local or metadata addresses the URL's host
    /// may resolve to: each must be named here, as for HTTP hosts.
    pub allow: Vec<Allowed>,
    /// `superuser=yes`: the URL may log in as a superuser. Default no: a
    /// superuser's read-only transaction still reaches the server's files,
    /// programs and other sessions, so such a login is refused.
    pub superuser: bool,
    /// The URL without its TLS words, for the driver. Never shown.
    pub(crate) url: Url,
    /// `sslmode` and `sslrootcert`, read by [`longhand_pgtls`].
    pub(crate) tls: TlsSettings,
    /// Strings that must never reach a guest or a log: the password, the
    /// user and the URL itself (see [`super::redact`]).
    pub(crate) hidden: Vec<String>,
}

impl fmt::Debug for DatabaseGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseGrant")
            .field("name", &self.name)
            .field("var", &self.var)
            .field("mode", &self.mode)
            .field("allow", &self.allow)
            .field("superuser", &self.superuser)
            .field("url", &"***")
            .finish()
    }
}

/// Longest database name a grant may give.
const MAX_NAME: usize = 64;

impl DatabaseGrant {
    /// Parse `NAME=ENV_VAR[,mode=ro|rw][,allow=ADDRESS]…`, reading the URL
    /// through `lookup`.
    pub fn parse(
        spec: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, DatabaseGrantError> {
        let bad = |reason: String| DatabaseGrantError {
            spec: spec.to_owned(),
            reason,
        };
        let mut parts = spec.split(',').map(str::trim);
        let head = parts.next().unwrap_or_default();
        let (name, var) = head.split_once('=').ok_or_else(|| {
            bad("expected NAME=ENV_VAR[,mode=rw][,allow=ADDRESS], e.g. app=DATABASE_URL".into())
        })?;
        if name.is_empty()
            || name.len() > MAX_NAME
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad(format!(
                "the name `{name}` must be 1 to {MAX_NAME} letters, digits, `_` or `-`"
            )));
        }
        if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(bad(format!(
                "`{var}` is not an environment variable name (letters, digits, `_`)"
            )));
        }
        let mut mode = DatabaseMode::ReadOnly;
        let mut allow = Vec::new();
        let mut superuser = false;
        for part in parts {
            match part.split_once('=') {
                Some(("mode", "ro")) => mode = DatabaseMode::ReadOnly,
                Some(("mode", "rw")) => mode = DatabaseMode::ReadWrite,
                Some(("mode", other)) => {
                    return Err(bad(format!("mode `{other}` is not `ro` or `rw`")));
                }
                Some(("superuser", "yes")) => superuser = true,
                Some(("superuser", "no")) => superuser = false,
                Some(("allow", address)) => {
                    allow.push(Allowed::parse(address).map_err(bad)?);
                }
                _ => {
                    return Err(bad(format!(
                        "`{part}` is not `mode=ro`, `mode=rw`, `allow=ADDRESS` or `superuser=yes`"
                    )));
                }
            }
        }
        let value = lookup(var).ok_or_else(|| {
            bad(format!(
                "environment variable {var} is not set; export it (a postgres:// URL) before \
                 starting longhand"
            ))
        })?;
        let (url, tls, hidden) = check_url(&value).map_err(|why| {
            bad(format!(
                "the value of {var} is not a usable PostgreSQL URL: {why} (write \
                 postgres://USER:PASSWORD@HOST:PORT/DATABASE[?sslmode=verify-full&sslrootcert=FILE])"
            ))
        })?;
        Ok(Self {
            name: name.to_owned(),
            var: var.to_owned(),
            mode,
            allow,
            superuser,
            url: Url(url),
            tls,
            hidden,
        })
    }

    /// Check a grant's form without its variable (a configuration check
    /// before any session, or a sub-agent's grant compared to its
    /// parent's): a stand-in URL takes the variable's place.
    pub fn parse_form(spec: &str) -> Result<Self, DatabaseGrantError> {
        Self::parse(spec, |_| Some("postgres://user@host/db".to_owned()))
    }

    /// The driver's configuration (host, port, user, password, database).
    pub(crate) fn config(&self) -> tokio_postgres::Config {
        // Parsed once already by `check_url`; what parsed then parses now.
        self.url
            .expose()
            .parse()
            .unwrap_or_else(|_| tokio_postgres::Config::new())
    }

    /// Whether `ip` on `port` is named by an `allow=` of this grant, which
    /// is what a loopback, private or link-local address needs.
    pub(crate) fn names(&self, ip: IpAddr, port: u16, host_is_localhost: bool) -> bool {
        self.allow.iter().any(|a| {
            a.port.is_none_or(|p| p == port)
                && match a.ip {
                    Some(allowed) => allowed == ip,
                    None => host_is_localhost && ip.is_loopback(),
                }
        })
    }
}

/// Check a URL as far as can be done without connecting; what is wrong is
/// said in kinds, never by quoting the value. Returns the URL for the
/// driver, the TLS settings and the strings to hide.
fn check_url(value: &str) -> Result<(String, TlsSettings, Vec<String>), String> {
    if !(value.starts_with("postgres://") || value.starts_with("postgresql://")) {
        return Err("it does not start with postgres:// or postgresql://".into());
    }
    let (rest, tls) = longhand_pgtls::split_url(value).map_err(|e| {
        // The TLS words' own messages name only sslmode/sslrootcert values
        // the operator wrote, never the credentials.
        e.0
    })?;
    let config: tokio_postgres::Config = rest
        .parse()
        .map_err(|_| "the driver cannot parse it (a bad port, option or %-escape)".to_owned())?;
    match config.get_hosts() {
        [Host::Tcp(_)] => {}
        [] => return Err("it names no host".into()),
        [_] => {
            return Err("it names a Unix socket; grant a TCP address (host:port) instead".into());
        }
        _ => return Err("it names more than one host; grant one".into()),
    }
    if config.get_ports().len() > 1 {
        return Err("it names more than one port".into());
    }
    if !config.get_hostaddrs().is_empty() {
        return Err(
            "it sets hostaddr; name the host only, the address is checked by the host".into(),
        );
    }
    if config.get_user().is_none_or(str::is_empty) {
        return Err("it names no user".into());
    }
    if tls.mode == SslMode::Disable && rest.contains("sslmode") {
        return Err("sslmode appears twice".into());
    }
    let mut hidden = vec![value.to_owned(), rest.clone()];
    if let Some(password) = config.get_password() {
        let password = String::from_utf8_lossy(password).into_owned();
        if !password.is_empty() {
            hidden.push(password);
        }
    }
    if let Some(user) = config.get_user() {
        hidden.push(user.to_owned());
    }
    Ok((rest, tls, hidden))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(url: &'static str) -> impl Fn(&str) -> Option<String> {
        move |name| (name == "DB").then(|| url.to_owned())
    }

    #[test]
    fn the_grant_form_parses_with_its_defaults() {
        let g = DatabaseGrant::parse("app=DB", env("postgres://u:pw@db.example.com/x")).unwrap();
        assert_eq!((g.name.as_str(), g.var.as_str()), ("app", "DB"));
        assert_eq!(g.mode, DatabaseMode::ReadOnly);
        assert!(g.allow.is_empty());
        let g = DatabaseGrant::parse(
            "app=DB, mode=rw, allow=127.0.0.1:5432",
            env("postgresql://u:pw@localhost:5432/x?sslmode=verify-full&sslrootcert=system"),
        )
        .unwrap();
        assert_eq!(g.mode, DatabaseMode::ReadWrite);
        assert!(g.names("127.0.0.1".parse().unwrap(), 5432, false));
        assert!(!g.names("127.0.0.1".parse().unwrap(), 5433, false));
        assert_eq!(g.tls.mode, SslMode::VerifyFull);
    }

    #[test]
    fn nothing_printed_about_a_grant_holds_its_url() {
        let secret = "s3cr3t-canary";
        let url = "postgres://agent:s3cr3t-canary@db.example.com:5432/app";
        let g = DatabaseGrant::parse("app=DB", |_| Some(url.to_owned())).unwrap();
        assert!(!format!("{g:?}").contains(secret));
        assert!(g.hidden.iter().any(|h| h == secret));
        // Every way a URL can be wrong is said without quoting it.
        for bad in [
            "mysql://agent:s3cr3t-canary@h/x",
            "postgres://agent:s3cr3t-canary@h:notaport/x",
            "postgres://agent:s3cr3t-canary@h1,h2/x",
            "postgres://agent:s3cr3t-canary@%2Frun%2Fpg/x",
            "postgres://agent:s3cr3t-canary@h/x?sslmode=sometimes",
            "postgres://agent:s3cr3t-canary@h/x?hostaddr=10.0.0.1",
        ] {
            let err = DatabaseGrant::parse("app=DB", |_| Some(bad.to_owned())).unwrap_err();
            let text = err.to_string();
            assert!(!text.contains(secret), "{text}");
            assert!(!text.contains("agent"), "{text}");
            assert!(text.contains("DB"), "{text}");
        }
    }

    #[test]
    fn malformed_grants_say_what_to_write() {
        let url = env("postgres://u@h/x");
        for (spec, says) in [
            ("app", "NAME=ENV_VAR"),
            ("=DB", "name"),
            ("a b=DB", "name"),
            ("app=", "environment variable name"),
            ("app=DB,mode=write", "mode `write`"),
            ("app=DB,readonly", "`readonly`"),
            ("app=NOPE", "not set"),
            ("app=DB,allow=http://x", "not an address"),
            ("app=DB,allow=*.example.com", "not an address"),
        ] {
            let err = DatabaseGrant::parse(spec, &url).unwrap_err().to_string();
            assert!(err.contains(says), "{spec}: {err}");
        }
    }
}
