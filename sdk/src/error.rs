//! [`ToolError`], the Rust face of the WIT `tool-error` variant.
//!
//! This module owns the mapping from Rust failures (I/O errors above all) to
//! the four cases the host and the model understand. It must not decide
//! anything about traps: a tool that returns a `ToolError` has *handled* the
//! problem, and the model gets the message as a value it can act on.

use std::fmt;
use std::io;

use crate::bindings::longhand::tool::types as wit;

/// Why a tool call did not produce output.
///
/// The variant tells the model who acts next: [`InvalidInput`](Self::InvalidInput)
/// means "fix the input and retry", [`NotFound`](Self::NotFound) means "look
/// elsewhere", [`AccessDenied`](Self::AccessDenied) means "ask the operator for
/// a grant" and [`Failed`](Self::Failed) means the tool itself could not do the
/// job. Every message is read by a model, so say what was wrong *and* what
/// would be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The input did not fit; the message names the field and what was wrong.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The named file, key or tool does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The tool tried to use something it was not granted.
    #[error("access denied to {resource}: {reason}")]
    AccessDenied {
        /// The path, host or variable that was refused.
        resource: String,
        /// Why it was refused.
        reason: String,
    },
    /// The tool ran and failed; the message says why.
    #[error("failed: {0}")]
    Failed(String),
}

impl ToolError {
    /// The input did not fit. Name the field: "`start_line` must be at least 1".
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }

    /// The named thing (file, key, tool) does not exist.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound(what.into())
    }

    /// The tool was refused `resource` (a path, host or variable) for `reason`.
    pub fn access_denied(resource: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::AccessDenied {
            resource: resource.into(),
            reason: reason.into(),
        }
    }

    /// The tool ran and could not do the job.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// Classifies an I/O error that happened while using `resource`.
    ///
    /// Inside the sandbox a path that escapes a granted directory (`..`), or
    /// a write to a read-only grant, surfaces as `PermissionDenied` or
    /// `ReadOnlyFilesystem`; both become [`AccessDenied`](Self::AccessDenied)
    /// so the model knows to ask for a grant rather than retry. A missing
    /// path becomes [`NotFound`](Self::NotFound) — and so does an absolute
    /// path under no granted directory, which, as the contract says, is
    /// simply not there. Errors that only a
    /// different input can fix (a directory where a file was expected, a bad
    /// file name) become [`InvalidInput`](Self::InvalidInput). Everything else
    /// is [`Failed`](Self::Failed).
    pub fn from_io(resource: impl fmt::Display, error: &io::Error) -> Self {
        use io::ErrorKind as K;
        match error.kind() {
            K::NotFound => Self::NotFound(resource.to_string()),
            // WASI does not say which of the two it was.
            K::PermissionDenied => Self::access_denied(
                resource.to_string(),
                "not granted to this tool: the path is outside its directories, \
                 or its directory is granted read-only",
            ),
            K::ReadOnlyFilesystem => {
                Self::access_denied(resource.to_string(), "the directory is granted read-only")
            }
            K::IsADirectory => Self::InvalidInput(format!("{resource} is a directory")),
            K::NotADirectory => Self::InvalidInput(format!(
                "{resource}: a component of the path is not a directory"
            )),
            K::InvalidInput | K::InvalidFilename => {
                Self::InvalidInput(format!("{resource}: {error}"))
            }
            _ => Self::Failed(format!("{resource}: {error}")),
        }
    }
}

/// Attaches the resource name to I/O errors: `fs::read(&p).for_resource(&p)?`.
pub trait IoResultExt<T> {
    /// Converts the error with [`ToolError::from_io`], naming `resource`.
    fn for_resource(self, resource: impl fmt::Display) -> Result<T, ToolError>;
}

impl<T> IoResultExt<T> for io::Result<T> {
    fn for_resource(self, resource: impl fmt::Display) -> Result<T, ToolError> {
        self.map_err(|error| ToolError::from_io(resource, &error))
    }
}

impl From<ToolError> for wit::ToolError {
    fn from(error: ToolError) -> Self {
        match error {
            ToolError::InvalidInput(m) => Self::InvalidInput(m),
            ToolError::NotFound(m) => Self::NotFound(m),
            ToolError::AccessDenied { resource, reason } => {
                Self::AccessDenied(wit::Denied { resource, reason })
            }
            ToolError::Failed(m) => Self::Failed(m),
        }
    }
}

impl From<wit::ToolError> for ToolError {
    fn from(error: wit::ToolError) -> Self {
        match error {
            wit::ToolError::InvalidInput(m) => Self::InvalidInput(m),
            wit::ToolError::NotFound(m) => Self::NotFound(m),
            wit::ToolError::AccessDenied(d) => Self::AccessDenied {
                resource: d.resource,
                reason: d.reason,
            },
            wit::ToolError::Failed(m) => Self::Failed(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_map_to_who_acts() {
        let e = |kind| ToolError::from_io("/workspace/a", &io::Error::from(kind));
        assert_eq!(
            e(io::ErrorKind::NotFound),
            ToolError::not_found("/workspace/a")
        );
        assert!(matches!(
            e(io::ErrorKind::PermissionDenied),
            ToolError::AccessDenied { resource, .. } if resource == "/workspace/a"
        ));
        assert!(matches!(
            e(io::ErrorKind::ReadOnlyFilesystem),
            ToolError::AccessDenied { .. }
        ));
        assert!(matches!(
            e(io::ErrorKind::IsADirectory),
            ToolError::InvalidInput(_)
        ));
        assert!(
            matches!(e(io::ErrorKind::Other), ToolError::Failed(m) if m.starts_with("/workspace/a: "))
        );
    }
}
