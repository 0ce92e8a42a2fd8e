//! The host key, and the seals made with it: what lets the host tell the
//! bytes it wrote (a compiled component in the cache, an install record, a
//! trusted key) from bytes that someone else put in their place.
//!
//! A seal is HMAC-SHA256 under a 32-byte key that only this user's
//! `longhand` processes read. Everything sealed is bound to what it is for
//! (a domain string) and to what names it (a digest, a tool name), so a
//! sealed thing moved to another name no longer verifies. The key file
//! must be a regular file of ours, mode 0600, in a directory no one else
//! may write; no directory grant may contain it, with or without the
//! operator's override (see `dirs.rs`): whoever reads it can seal anything.
//!
//! What it must not do: decide what an unverified thing means. It answers
//! "sealed by us or not"; the cache recompiles, the install store refuses.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Length of a seal (an HMAC-SHA256 tag), in bytes.
pub const SEAL_LEN: usize = 32;

/// Length of the key, in bytes.
const KEY_LEN: usize = 32;

/// The host key. `Debug` does not show it.
#[derive(Clone)]
pub struct HostKey {
    /// HMAC-SHA256 keyed once; each seal starts from a clone.
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostKey(..)")
    }
}

/// Why the host key cannot be used. The operator fixes the file or the
/// directory (the error says how); until then nothing sealed is trusted.
#[derive(Debug, thiserror::Error)]
#[error("host key {}: {reason}", path.display())]
pub struct KeyError {
    /// The key file.
    pub path: PathBuf,
    /// What is wrong, and what to do.
    pub reason: String,
}

impl HostKey {
    /// The key in `path`, made (32 random bytes, mode 0600, in a directory
    /// made 0700) when there is none yet. A key file that is a symlink, not
    /// ours, readable or writable by others, or not 32 bytes is refused.
    pub fn open_or_create(path: &Path) -> Result<Self, KeyError> {
        let fail = |reason: String| KeyError {
            path: path.to_owned(),
            reason,
        };
        let dir = path
            .parent()
            .ok_or_else(|| fail("it has no parent directory".to_owned()))?;
        private_dir(dir).map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        check_dir(dir).map_err(fail)?;
        match read_key(path) {
            Ok(key) => return Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e.to_string())),
        }
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key).map_err(|e| fail(format!("no randomness: {e}")))?;
        // Written whole under a temporary name, then linked into place:
        // `link` fails when another process made the key first, and then
        // its key is the one read, never a half-written file.
        let tmp = dir.join(format!(".tmp-key-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let written = (|| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options.open(&tmp)?;
            file.write_all(&key)?;
            file.sync_all()?;
            match std::fs::hard_link(&tmp, path) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        written.map_err(|e| fail(format!("cannot write it: {e}")))?;
        read_key(path).map_err(|e| fail(e.to_string()))
    }

    /// A key from bytes, for tests and for hosts that keep it elsewhere.
    pub fn from_bytes(key: &[u8; KEY_LEN]) -> Result<Self, std::io::Error> {
        // HMAC takes a key of any length; the error cannot happen, and is
        // kept a value rather than a panic.
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
            .map_err(|e| std::io::Error::other(format!("the key is unusable: {e}")))?;
        Ok(Self { mac })
    }

    fn mac(&self, domain: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        // Each part length-prefixed: ("ab", "c") and ("a", "bc") differ.
        for part in std::iter::once(domain.as_bytes()).chain(parts.iter().copied()) {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }

    /// The seal of `parts` for `domain`.
    pub fn seal(&self, domain: &str, parts: &[&[u8]]) -> [u8; SEAL_LEN] {
        self.mac(domain, parts).finalize().into_bytes().into()
    }

    /// Whether `seal` is the seal of `parts` for `domain` (compared in
    /// constant time).
    pub fn verify(&self, domain: &str, parts: &[&[u8]], seal: &[u8]) -> bool {
        self.mac(domain, parts).verify_slice(seal).is_ok()
    }
}

/// Read the key with no symlink followed at its last component, checking
/// the opened file itself (not the path again) for owner, mode and size.
fn read_key(path: &Path) -> std::io::Result<HostKey> {
    let file = open_private(path)?;
    let mut key = [0u8; KEY_LEN];
    let mut rest = Vec::new();
    let mut reader = file.take(KEY_LEN as u64 + 1);
    reader.read_exact(&mut key).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            std::io::Error::other(
                "it is shorter than a key (32 bytes); remove it and a new one is made \
                 (compiled components are recompiled; reinstall tools and re-add trusted keys)",
            )
        } else {
            e
        }
    })?;
    reader.read_to_end(&mut rest)?;
    if !rest.is_empty() {
        return Err(std::io::Error::other(
            "it is longer than a key (32 bytes); remove it and a new one is made \
             (compiled components are recompiled; reinstall tools and re-add trusted keys)",
        ));
    }
    HostKey::from_bytes(&key)
}

/// Open `path` for reading without following a symlink at its last
/// component, and refuse it unless it is a regular file owned by this user
/// that nobody else may read or write (checked on the open file).
pub(crate) fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            std::io::Error::other("it is a symbolic link; remove it (the host writes its own)")
        } else {
            e
        }
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if effective_uid().is_some_and(|uid| uid != meta.uid()) {
            return Err(std::io::Error::other(format!(
                "it belongs to uid {}, not to you; remove it",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(std::io::Error::other(format!(
                "others may read or write it (mode {:o}); `chmod 600` it, or remove it",
                meta.mode() & 0o777
            )));
        }
    }
    Ok(file)
}

/// A directory holding sealed things must be ours and writable by nobody
/// else, or someone else could replace what is in it.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta =
            std::fs::metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        if effective_uid().is_some_and(|uid| uid != meta.uid()) {
            return Err(format!(
                "{} belongs to uid {}, not to you; use a directory of your own",
                dir.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} may be written by others (mode {:o}); `chmod go-w {}`",
                dir.display(),
                meta.mode() & 0o777,
                dir.display()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Create `dir` (and its parents) with mode 0700 where it is missing.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// The effective user id (`geteuid`); `None` off Unix.
pub fn effective_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(unsafe { libc::geteuid() })
    }
    #[cfg(not(unix))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_binds_domain_and_every_part() {
        let key = HostKey::from_bytes(&[7; 32]).unwrap();
        let seal = key.seal("d", &[b"ab", b"c"]);
        assert!(key.verify("d", &[b"ab", b"c"], &seal));
        assert!(!key.verify("d", &[b"a", b"bc"], &seal));
        assert!(!key.verify("e", &[b"ab", b"c"], &seal));
        assert!(!key.verify("d", &[b"ab", b"c"], &seal[..31]));
        assert!(
            !HostKey::from_bytes(&[8; 32])
                .unwrap()
                .verify("d", &[b"ab", b"c"], &seal)
        );
    }

    #[test]
    fn the_key_is_made_once_private_and_refused_when_others_can_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k/host.key");
        let a = HostKey::open_or_create(&path).unwrap();
        let b = HostKey::open_or_create(&path).unwrap();
        assert_eq!(a.seal("d", &[]), b.seal("d", &[]));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = HostKey::open_or_create(&path).unwrap_err();
            assert!(err.to_string().contains("chmod 600"), "{err}");
            std::fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
            let err = HostKey::open_or_create(&path).unwrap_err();
            assert!(err.to_string().contains("symbolic link"), "{err}");
        }
    }
}
