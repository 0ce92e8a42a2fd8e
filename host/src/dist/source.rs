//! Where a component comes from, as `tool install` and `tool publish` are
//! given it: a path, an `https://` URL, or `oci://HOST[:PORT]/REPO:TAG
//! [@sha256:…]`. Parsing only; nothing here opens a connection.

use std::fmt;
use std::path::PathBuf;

use super::error::DistError;
use super::names::is_digest;

/// A parsed install source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A `.wasm` file on this machine.
    Path(PathBuf),
    /// An `https://` URL of the component's bytes. Installing one needs a
    /// digest pin or a trusted signature: a URL alone says nothing about
    /// what it serves.
    Https(String),
    /// An OCI registry reference.
    Oci(OciRef),
}

impl Source {
    /// Parse `text`: `oci://…` and `https://…` by scheme; `http://` is
    /// refused (nothing crosses a network in the clear, loopback registries
    /// excepted, which are `oci://`); anything else is a path.
    pub fn parse(text: &str) -> Result<Self, DistError> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return OciRef::parse(rest).map(Self::Oci);
        }
        if text.starts_with("https://") {
            if text.len() > 4096 || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(DistError::Usage(
                    "the URL is longer than 4096 bytes or holds spaces or control characters"
                        .to_owned(),
                ));
            }
            return Ok(Self::Https(text.to_owned()));
        }
        if text.starts_with("http://") {
            return Err(DistError::Usage(
                "plain http:// is refused: give an https:// URL, or oci:// for a registry"
                    .to_owned(),
            ));
        }
        if text.contains("://") {
            return Err(DistError::Usage(format!(
                "`{}` has a scheme Longhand does not install from; give a path, https://… or oci://…",
                longhand_hands::bound::cut_str(text, 256)
            )));
        }
        Ok(Self::Path(PathBuf::from(text)))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Path(p) => write!(f, "{}", p.display()),
            Self::Https(url) => f.write_str(url),
            Self::Oci(r) => write!(f, "{r}"),
        }
    }
}

/// `oci://HOST[:PORT]/REPO:TAG[@sha256:…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    /// `HOST[:PORT]` as written (an IPv6 literal in brackets).
    pub registry: String,
    /// The repository path, lowercase (`a/b-c`).
    pub repository: String,
    /// The tag; `latest` when none is written and no digest pins it.
    pub tag: Option<String>,
    /// A manifest digest pin (`@sha256:…`): the manifest fetched must hash to it.
    pub digest: Option<String>,
}

impl OciRef {
    /// Parse what follows `oci://`.
    pub fn parse(text: &str) -> Result<Self, DistError> {
        let bad = |why: &str| {
            DistError::Usage(format!(
                "`oci://{}` is not a registry reference: {why}; write oci://HOST[:PORT]/REPO:TAG[@sha256:…]",
                longhand_hands::bound::cut_str(text, 256)
            ))
        };
        if text.len() > 1024 {
            return Err(bad("it is longer than 1024 bytes"));
        }
        let (rest, digest) = match text.split_once('@') {
            Some((rest, digest)) => {
                if !is_digest(digest) {
                    return Err(bad("the digest after `@` is not sha256:<64 hex digits>"));
                }
                (rest, Some(digest.to_owned()))
            }
            None => (text, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no repository"))?;
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        {
            return Err(bad(
                "the registry host is empty or holds characters a host cannot",
            ));
        }
        // The tag follows the last `:` after the last `/`.
        let last = path.rsplit('/').next().unwrap_or(path);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => {
                let repo = &path[..path.len() - tag.len() - 1];
                (repo, Some(tag.to_owned()))
            }
            None => (path, None),
        };
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)
                    })
                    && part
                        .bytes()
                        .next()
                        .is_some_and(|b| b.is_ascii_alphanumeric())
            });
        if !repo_ok {
            return Err(bad(
                "the repository must be lowercase letters, digits, `.`, `_`, `-`, parts split by `/`",
            ));
        }
        if let Some(tag) = &tag
            && !is_tag(tag)
        {
            return Err(bad(
                "the tag must be 1-128 of letters, digits, `.`, `_`, `-`",
            ));
        }
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            (tag, _) => tag,
        };
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// The host, without a port or brackets.
    pub fn host(&self) -> &str {
        let r = self.registry.as_str();
        if let Some(inner) = r.strip_prefix('[') {
            return inner.split(']').next().unwrap_or(inner);
        }
        r.split(':').next().unwrap_or(r)
    }

    /// Whether the registry is this machine (127.0.0.1, ::1, localhost):
    /// the only registries spoken to over plain HTTP.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// `http` for a loopback registry, `https` for every other.
    pub fn scheme(&self) -> &'static str {
        if self.is_loopback() { "http" } else { "https" }
    }

    /// What the manifest is fetched by: the digest when pinned, else the tag.
    pub fn reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same reference without the digest pin (what `upgrade` resolves).
    pub fn unpinned(&self) -> Self {
        Self {
            digest: None,
            tag: self.tag.clone().or_else(|| Some("latest".to_owned())),
            ..self.clone()
        }
    }
}

/// Whether `tag` is an OCI tag: 1-128 of letters, digits, `.`, `_`, `-`,
/// not starting with `.` or `-`.
fn is_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A tag read as a version: `1`, `1.2`, `v1.2.3`, `2.0.0-rc.1`. Compared
/// by its numbers (`1.2` = `1.2.0`), then a release above its
/// pre-releases, then pre-release text.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TagVersion {
    numbers: Vec<u64>,
    release: bool,
    pre: String,
}

impl TagVersion {
    fn parse(tag: &str) -> Option<Self> {
        let bare = tag.strip_prefix('v').unwrap_or(tag);
        let (core, pre) = match bare.split_once('-') {
            Some((core, pre)) if !pre.is_empty() => (core, Some(pre)),
            Some(_) => return None,
            None => (bare, None),
        };
        let mut numbers = core
            .split('.')
            .map(|n| {
                (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| n.parse::<u64>().ok())
                    .flatten()
            })
            .collect::<Option<Vec<_>>>()?;
        while numbers.len() > 1 && numbers.last() == Some(&0) {
            numbers.pop();
        }
        Some(Self {
            numbers,
            release: pre.is_none(),
            pre: pre.unwrap_or_default().to_owned(),
        })
    }
}

/// The newest of `tags` read as versions, when it is newer than `current`
/// (itself a version): what `tool upgrade` moves to. A pre-release is a
/// candidate only when `current` is one. `None` when `current` is not a
/// version (`latest`: the tag itself is re-read) or nothing is newer.
pub fn newest_tag<'t>(current: &str, tags: &'t [String]) -> Option<&'t str> {
    let now = TagVersion::parse(current)?;
    // The registry's list is its word: a name that is no tag is skipped.
    tags.iter()
        .filter(|t| is_tag(t))
        .filter_map(|t| TagVersion::parse(t).map(|v| (v, t.as_str())))
        .filter(|(v, _)| v.release || !now.release)
        .filter(|(v, _)| *v > now)
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, t)| t)
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_parse_and_print_back() {
        let r = OciRef::parse("127.0.0.1:5000/tools/greet:v1").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "tools/greet", Some("v1"))
        );
        assert!(r.is_loopback());
        assert_eq!(r.scheme(), "http");
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/tools/greet:v1");
        let pinned = OciRef::parse(&format!("ghcr.io/a/b:v2@{D}")).unwrap();
        assert_eq!(pinned.reference(), D);
        assert_eq!(pinned.scheme(), "https");
        assert_eq!(pinned.unpinned().reference(), "v2");
        let bare = OciRef::parse("[::1]:5000/greet").unwrap();
        assert_eq!(bare.tag.as_deref(), Some("latest"));
        assert!(bare.is_loopback());
        assert!(
            !OciRef::parse("localhost.evil.com/a:b")
                .unwrap()
                .is_loopback()
        );
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        for (text, says) in [
            ("registry", "names no repository"),
            ("r/UPPER:v1", "lowercase"),
            ("r/a:v1@sha256:00", "sha256:<64 hex digits>"),
            ("r/a:bad tag", "the tag"),
            ("r//a:v1", "lowercase"),
        ] {
            let err = OciRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        assert!(matches!(
            Source::parse("http://example.com/x.wasm"),
            Err(DistError::Usage(_))
        ));
        assert_eq!(
            Source::parse("./x.wasm").unwrap(),
            Source::Path("./x.wasm".into())
        );
    }

    #[test]
    fn the_newest_version_tag_is_chosen_and_latest_is_left_alone() {
        let tags: Vec<String> = [
            "1.0",
            "1.2.0",
            "v1.10",
            "1.9.9",
            "2.0.0-rc.1",
            "latest",
            "x1",
        ]
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
        assert_eq!(newest_tag("1.0", &tags), Some("v1.10"));
        assert_eq!(newest_tag("v1.10", &tags), None, "nothing newer");
        assert_eq!(newest_tag("1.10.0", &tags), None, "1.10 = 1.10.0");
        assert_eq!(newest_tag("2.0.0-beta", &tags), Some("2.0.0-rc.1"));
        assert_eq!(newest_tag("latest", &tags), None);
        let only_old = vec!["0.9".to_owned()];
        assert_eq!(newest_tag("1.0", &only_old), None);
        // Names a registry may send that are no tags are never chosen.
        let hostile: Vec<String> = ["9.0-../../x", "9.0-a/b", &format!("9.{}", "9".repeat(200))]
            .iter()
            .map(|t| (*t).to_owned())
            .collect();
        assert_eq!(newest_tag("1.0-rc", &hostile), None);
    }
}
