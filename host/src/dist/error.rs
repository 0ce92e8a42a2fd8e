//! The one error type of distribution ([`DistError`]), and how foreign
//! text is quoted in it ([`shown`]).

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

/// Foreign text (a registry's header or error body, a URL) as an error
/// quotes it: cut to `max` bytes, control characters shown as `?`, so it
/// cannot break the line it is printed on.
pub(crate) fn shown(text: &str, max: usize) -> String {
    longhand_hands::bound::cut_str(text, max)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
