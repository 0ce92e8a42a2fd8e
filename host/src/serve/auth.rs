//! The bearer token: made on first start, kept in the data directory with
//! mode 0600, compared in constant time.
//!
//! The token is 32 random bytes (256 bits) as 64 hex digits. Whoever holds
//! it can do anything the API allows — start agents, approve their calls —
//! so the file is created `0600` and an existing file that others can read
//! is refused rather than used. To rotate it, delete the file and restart.
//!
//! A new token is written only once the server is sure to serve
//! ([`Token::load_or_new`] makes it, [`Token::keep`] writes it after the
//! listener is bound): a start that fails — a bad flag, a port in use —
//! leaves no token behind that nobody was shown, and the first start that
//! does serve prints the one it writes.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The token file's name in the data directory.
pub const TOKEN_FILE: &str = "serve-token";

/// Why the token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Reading, creating or writing the file failed. The operator fixes the
    /// data directory.
    #[error("{context}: {source}")]
    Io {
        /// What was done, with the path.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is readable or writable by others, or does not hold a
    /// token. The operator fixes or deletes it; the server does not start.
    #[error("{0}")]
    Unsafe(String),
}

/// The server's token and whether this start created it (then it is
/// written and printed, once).
#[derive(Clone)]
pub struct Token {
    secret: String,
    /// Made by this start.
    pub created: bool,
    /// Where it is kept.
    pub path: PathBuf,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never in a log line or a panic message.
        f.debug_struct("Token")
            .field("created", &self.created)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// The token in `dir`, created (and written) if there is none.
    pub fn load_or_create(dir: &Path) -> Result<Self, TokenError> {
        Self::load_or_new(dir)?.keep()
    }

    /// The token in `dir`, or a new one (`created`) that is not written
    /// yet: [`Token::keep`] writes it. An existing file that is unsafe is
    /// refused here, before anything else is done.
    pub fn load_or_new(dir: &Path) -> Result<Self, TokenError> {
        let path = dir.join(TOKEN_FILE);
        match read_existing(&path)? {
            Some(secret) => Ok(Self {
                secret,
                created: false,
                path,
            }),
            None => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(|e| TokenError::Io {
                    context: "reading random bytes for the token".to_owned(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                Ok(Self {
                    secret: hex::encode(bytes),
                    created: true,
                    path,
                })
            }
        }
    }

    /// Writes a new token (mode 0600, creating the data directory); an
    /// existing one is already kept. If another start wrote one since
    /// [`Token::load_or_new`] looked, that one is used (not printed: the
    /// start that wrote it did).
    pub fn keep(self) -> Result<Self, TokenError> {
        if !self.created {
            return Ok(self);
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| TokenError::Io {
                context: format!("creating the data directory {}", dir.display()),
                source,
            })?;
        }
        match write_new(&self.path, &self.secret) {
            Ok(()) => Ok(self),
            Err(TokenError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                match read_existing(&self.path)? {
                    Some(secret) => Ok(Self {
                        secret,
                        created: false,
                        path: self.path,
                    }),
                    None => Err(TokenError::Unsafe(format!(
                        "{} vanished while it was being made; start again",
                        self.path.display()
                    ))),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The token itself, to print once or to put in the page's URL.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether `presented` is the token, in time that does not depend on
    /// where they differ: both are hashed first, so even their lengths are
    /// not compared, and the hashes are compared without an early exit.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(
            &Sha256::digest(self.secret.as_bytes()),
            &Sha256::digest(presented.as_bytes()),
        )
    }
}

/// Equality of two digests without a data-dependent branch.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // Keep the compiler from turning the fold back into an early exit.
    std::hint::black_box(diff) == 0
}

fn read_existing(path: &Path) -> Result<Option<String>, TokenError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TokenError::Io {
                context: format!("reading {}", path.display()),
                source,
            });
        }
    };
    if !meta.is_file() {
        return Err(TokenError::Unsafe(format!(
            "{} is not a regular file; delete it and start again for a new token",
            path.display()
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TokenError::Unsafe(format!(
                "{} has mode {mode:o}: others may read the token; `chmod 600` it, or delete \
                 it and start again for a new token",
                path.display()
            )));
        }
    }
    let text = std::fs::read_to_string(path).map_err(|source| TokenError::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    let secret = text.trim().to_owned();
    if secret.len() < 32 || !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::Unsafe(format!(
            "{} does not hold a token (at least 32 printable characters); delete it and start \
             again for a new one",
            path.display()
        )));
    }
    Ok(Some(secret))
}

fn write_new(path: &Path, secret: &str) -> Result<(), TokenError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|source| TokenError::Io {
        context: format!("creating {}", path.display()),
        source,
    })?;
    file.write_all(format!("{secret}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| TokenError::Io {
            context: format!("writing {}", path.display()),
            source,
        })
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_made_once_private_and_matched_exactly() {
        let dir = tempfile::TempDir::new().unwrap();
        let first = Token::load_or_create(dir.path()).unwrap();
        assert!(first.created);
        assert_eq!(first.secret().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = Token::load_or_create(dir.path()).unwrap();
        assert!(!again.created);
        assert_eq!(again.secret(), first.secret());
        assert!(first.matches(first.secret()));
        assert!(!first.matches(""));
        assert!(!first.matches(&first.secret()[1..]));
        let mut flipped = first.secret().to_owned();
        flipped.replace_range(63.., if flipped.ends_with('0') { "1" } else { "0" });
        assert!(!first.matches(&flipped));
        assert!(!format!("{first:?}").contains(first.secret()));
    }

    #[test]
    fn a_new_token_is_written_only_when_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let home = dir.path().join("not-yet");
        let made = Token::load_or_new(&home).unwrap();
        assert!(made.created);
        assert!(!made.path.exists() && !home.exists());
        // Another start kept its own meanwhile: that one wins, unprinted.
        let other = Token::load_or_create(&home).unwrap();
        let kept = made.keep().unwrap();
        assert!(!kept.created);
        assert_eq!(kept.secret(), other.secret());
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::TempDir::new().unwrap();
        let token = Token::load_or_create(dir.path()).unwrap();
        std::fs::set_permissions(&token.path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Token::load_or_create(dir.path()).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }

    #[test]
    fn bearer_headers_parse() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }
}
