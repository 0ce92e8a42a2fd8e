//! Distribution and trust (issue 18, part 3): publishing a tool component
//! to an OCI registry, installing one from a registry, an HTTPS URL or a
//! file, signatures, the trust store, `longhand.lock`, upgrades reviewed
//! against what the installed version asks for.
//!
//! What it owns: the bytes between a source and the install store
//! (`$LONGHAND_HOME/tools`), and every check on them before the hands see
//! them: sizes, media types, digests, signatures. What it must not do: run
//! a component (the hands load, precompile and describe it, the same way
//! as any other), read agent files (the CLI hands it names and digests), or
//! touch sessions.
//!
//! Everything a registry, a URL or a file says is hostile input: bounded
//! before it is buffered ([`registry::MAX_MANIFEST_BYTES`],
//! [`registry::MAX_COMPONENT_BYTES`]), checked against the digest that
//! named it, refused with an error that says what was wrong.

pub mod lock;
pub mod registry;
pub mod review;
pub mod sign;
pub mod source;
pub mod store;

pub use source::{OciRef, Source};

/// Why a distribution step refused or failed. Each variant says who acts:
/// [`DistError::Refused`] is the operator's decision to make (trust a key,
/// approve an upgrade, pin a digest); [`DistError::Usage`] is a command
/// line or file to fix; [`DistError::Remote`] is the registry or network
/// (retrying later may work); [`DistError::Io`] is the local disk.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// The input (a source, a name, a key file) is wrong; nothing was done.
    #[error("{0}")]
    Usage(String),
    /// What was fetched or found is not what may be installed or run: a
    /// digest that does not match, a missing or untrusted signature, a
    /// hostile registry answer, an upgrade that asks for more.
    #[error("{0}")]
    Refused(String),
    /// The registry or server could not be reached or answered an error.
    #[error("{0}")]
    Remote(String),
    /// Reading or writing the install store, the trust store or a lock.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl DistError {
    /// An [`DistError::Io`] naming `what`.
    pub(crate) fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Self {
        let context = what.to_string();
        move |source| Self::Io { context, source }
    }
}

/// `sha256:<64 lowercase hex>`, the only digest form accepted anywhere a
/// digest is read from the outside.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A name a tool may be installed under: 1-24 of `a-z`, `0-9` and `-`,
/// starting with a letter or digit. It becomes a file name and the prefix
/// the model sees (`NAME__TOOL`, at most 24 characters), so no `_`.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 24
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Foreign text (a registry's header or error body, a URL) as an error
/// quotes it: cut to `max` bytes, control characters shown as `?`, so it
/// cannot break the line it is printed on.
pub(crate) fn shown(text: &str, max: usize) -> String {
    crate::hands::bound::cut_str(text, max)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
