//! The bytes of built-in components, kept by digest so that a session
//! never depends on what a later binary embeds.
//!
//! A session freezes each component's digest. A built-in (`fs`, `http`,
//! `json`, …) is part of the binary, so a newer release may embed other
//! bytes under the same name; a pinned load of that name would then be
//! refused as changed, and a session paused by the older release could not
//! resume. So every built-in the hands load is also written here
//! (`<dir>/sha256-<hex>.wasm`, once, atomically), and a pinned load whose
//! built-in no longer matches takes the kept bytes of the pinned digest
//! instead. Kept bytes are hashed again at every read: a file that does
//! not hash to its name is refused, never run. Files and installed tools
//! are not kept here: a file is the operator's, and a changed one is
//! refused at resume; installed tools have their own store.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::component::digest_of;

/// The most a kept component may take (a component is far smaller).
const MAX_KEPT_BYTES: u64 = 128 * 1024 * 1024;

/// A directory of components by digest.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    dir: PathBuf,
}

impl Kept {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Kept { dir }
    }

    /// Where the bytes of `digest` are kept; `None` for anything that is
    /// not `sha256:` and 64 lower-case hex digits (no other name is ever
    /// read or written).
    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        let well_formed = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        well_formed.then(|| self.dir.join(format!("sha256-{hex}.wasm")))
    }

    /// Keep `bytes` under `digest` unless they are kept already. A failure
    /// only loses the fallback, so it is logged, not returned.
    pub(crate) fn keep(&self, digest: &str, bytes: &[u8]) {
        let Some(path) = self.path(digest) else {
            return;
        };
        if path.exists() {
            return;
        }
        if let Err(e) = write_atomically(&self.dir, &path, bytes) {
            tracing::warn!(
                "could not keep the bytes of {digest} in {}: {e}",
                self.dir.display()
            );
        }
    }

    /// The kept bytes of `digest`: `None` when none are kept, `Err` (why)
    /// when the file is there but is not those bytes.
    pub(crate) fn get(&self, digest: &str) -> Option<Result<Vec<u8>, String>> {
        let path = self.path(digest)?;
        let file = std::fs::File::open(&path).ok()?;
        Some(read_verified(file, &path, digest))
    }
}

fn read_verified(file: std::fs::File, path: &Path, digest: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_KEPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_KEPT_BYTES {
        return Err(format!(
            "{} is larger than any component ({MAX_KEPT_BYTES} bytes)",
            path.display()
        ));
    }
    let actual = digest_of(&bytes);
    if actual != digest {
        return Err(format!(
            "{} holds {actual}, not {digest}: it was changed after it was kept; \
             delete it (the session then needs the release that froze it)",
            path.display()
        ));
    }
    Ok(bytes)
}

/// Write `bytes` to `path` through a temporary file in `dir` and a rename,
/// so a reader sees all of it or nothing.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_kept_once_and_read_back_only_when_they_hash_to_their_name() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::new(dir.path().join("components"));
        let bytes = b"\0asm component bytes".to_vec();
        let digest = digest_of(&bytes);
        assert!(kept.get(&digest).is_none(), "nothing kept yet");
        kept.keep(&digest, &bytes);
        assert_eq!(kept.get(&digest).unwrap().unwrap(), bytes);

        // Changed on disk: refused, naming what it holds.
        let path = kept.path(&digest).unwrap();
        std::fs::write(&path, b"other bytes").unwrap();
        let err = kept.get(&digest).unwrap().unwrap_err();
        assert!(err.contains("changed after it was kept"), "{err}");
        // Kept once: a second keep does not overwrite what is there.
        kept.keep(&digest, &bytes);
        assert!(kept.get(&digest).unwrap().is_err());

        // Names that are not a digest are never paths.
        for bad in [
            "sha256:../../etc/passwd",
            "sha256:ABCDEF",
            "md5:00",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(kept.path(bad).is_none(), "{bad}");
            assert!(kept.get(bad).is_none(), "{bad}");
        }
    }
}
