//! Programs an operator grants a tool (`programs = ["cargo"]`,
//! `--program cargo`): each name resolved to one file when the grant is
//! made, its SHA-256 taken, and the file checked again before every run.
//!
//! A name without `/` is looked up on the host's `PATH` (as a shell would);
//! an absolute path is taken as written. The file the name leads to
//! (symlinks followed: `cargo` is often a link to `rustup`) is what is
//! hashed, shown to the command and run. A program that changed on disk
//! since it was granted is refused, naming both hashes: a session frozen
//! with one `cargo` does not run another.
//!
//! This module only resolves and checks; running is [`super::process`].
//! Whether a program lies in what the host protects (its home) is the
//! grant's question ([`super::grants::GrantSpec::resolve`]).

use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// A granted program, resolved and pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramGrant {
    /// As the operator wrote it: `cargo` or `/usr/bin/git`. A command
    /// names the program by this, or by [`ProgramGrant::path`].
    pub name: String,
    /// Where the name was found (`/root/.cargo/bin/cargo`): the name the
    /// program is started under, which some programs read (rustup's
    /// proxies choose the tool by it).
    pub path: PathBuf,
    /// The file run: `path` with every symlink resolved.
    pub file: PathBuf,
    /// `sha256:<hex>` of the file when the grant was made.
    pub sha256: String,
    /// The file's identity then; a file with the same identity is not
    /// hashed again before a run.
    pub identity: FileIdentity,
}

/// What identifies a file's contents without reading them: a write
/// changes `mtime` and `ctime`, a replacement changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }
}

/// Why a program cannot be granted, or can no longer be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// The name is empty, relative with a `/`, or holds a NUL.
    #[error(
        "program `{0}`: give a program name found on PATH (`cargo`) or an absolute path (`/usr/bin/git`)"
    )]
    Malformed(String),
    /// No file on `PATH` by that name.
    #[error("program `{name}` is not on PATH ({path}); give its absolute path")]
    NotOnPath {
        /// The name.
        name: String,
        /// The `PATH` searched.
        path: String,
    },
    /// The file cannot be used.
    #[error("program `{name}` ({path}): {reason}")]
    Unusable {
        /// The name.
        name: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file's contents are not the ones granted.
    #[error(
        "program `{name}` ({path}) changed on disk since it was granted (it was {was}, it is {now}); \
         nothing was run. Grant it again (a new session) if the change is intended"
    )]
    Changed {
        /// The name.
        name: String,
        /// The file.
        path: PathBuf,
        /// The granted hash.
        was: String,
        /// The hash now.
        now: String,
    },
}

/// Largest program file hashed: beyond it, a "program" is a mistake (a
/// disk image), and hashing it would stall the start.
const MAX_PROGRAM_BYTES: u64 = 2 << 30;

impl ProgramGrant {
    /// Resolve `name` (see the module docs), with `path_var` the `PATH` to
    /// search, and pin it.
    pub fn resolve(name: &str, path_var: Option<&str>) -> Result<Self, ProgramError> {
        check_name(name)?;
        let path = if name.contains('/') {
            PathBuf::from(name)
        } else {
            let search = path_var.unwrap_or_default();
            std::env::split_paths(search)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(name))
                .find(|candidate| is_executable_file(candidate))
                .ok_or_else(|| ProgramError::NotOnPath {
                    name: name.to_owned(),
                    path: search.to_owned(),
                })?
        };
        let unusable = |reason: String| ProgramError::Unusable {
            name: name.to_owned(),
            path: path.clone(),
            reason,
        };
        let file = std::fs::canonicalize(&path).map_err(|e| unusable(e.to_string()))?;
        if !is_executable_file(&file) {
            return Err(unusable(
                "not an executable regular file (check its mode: chmod +x)".to_owned(),
            ));
        }
        let (sha256, identity) = hash(&file).map_err(|e| unusable(e.to_string()))?;
        Ok(Self {
            name: name.to_owned(),
            path,
            file,
            sha256,
            identity,
        })
    }

    /// Whether a command's `argv[0]` names this program: by the name
    /// granted, the path it was found at, or the file run.
    pub fn answers_to(&self, argv0: &str) -> bool {
        argv0 == self.name || Path::new(argv0) == self.path || Path::new(argv0) == self.file
    }

    /// Check the file still holds what was granted: by identity when it
    /// is unchanged, by hash when it is not.
    pub fn verify(&self) -> Result<(), ProgramError> {
        let meta = std::fs::metadata(&self.file).map_err(|e| ProgramError::Unusable {
            name: self.name.clone(),
            path: self.file.clone(),
            reason: format!("{e} (it was there when it was granted)"),
        })?;
        if FileIdentity::of(&meta) == self.identity {
            return Ok(());
        }
        let (now, _) = hash(&self.file).map_err(|e| ProgramError::Unusable {
            name: self.name.clone(),
            path: self.file.clone(),
            reason: e.to_string(),
        })?;
        if now == self.sha256 {
            return Ok(());
        }
        Err(ProgramError::Changed {
            name: self.name.clone(),
            path: self.file.clone(),
            was: self.sha256.clone(),
            now,
        })
    }

    /// The name a command runs it under: the last part of the path it was
    /// found at (`cargo`, even when the file is `rustup`).
    pub fn arg0(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.name.clone())
    }
}

/// Whether `name` can name a program at all (a name for `PATH`, or an
/// absolute path), without looking for it: what a configuration check can
/// say before the environment it will run in exists.
pub fn check_name(name: &str) -> Result<(), ProgramError> {
    let malformed = name.is_empty()
        || name.contains('\0')
        || (name.contains('/') && !Path::new(name).is_absolute());
    if malformed {
        return Err(ProgramError::Malformed(name.to_owned()));
    }
    Ok(())
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `sha256:<hex>` of the file and its identity, read from one open file.
fn hash(file: &Path) -> std::io::Result<(String, FileIdentity)> {
    let mut f = std::fs::File::open(file)?;
    let meta = f.metadata()?;
    if meta.len() > MAX_PROGRAM_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} GiB: not a program",
            MAX_PROGRAM_BYTES >> 30
        )));
    }
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok((
        format!("sha256:{}", hex::encode(hasher.finalize())),
        FileIdentity::of(&meta),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_on_path_and_paths_as_written() {
        let sh = ProgramGrant::resolve("sh", Some("/nonexistent:/bin:/usr/bin")).expect("sh");
        assert!(sh.path.ends_with("sh"), "{sh:?}");
        assert!(sh.sha256.starts_with("sha256:") && sh.sha256.len() == 71);
        assert!(sh.answers_to("sh") && sh.answers_to(sh.path.to_str().unwrap()));
        assert!(!sh.answers_to("bash") || sh.file.ends_with("bash"));
        sh.verify().expect("unchanged");
        let abs = ProgramGrant::resolve("/bin/sh", None).expect("/bin/sh");
        assert_eq!(abs.sha256, sh.sha256);
        for bad in ["", "bin/sh", "a\0b"] {
            assert!(
                matches!(
                    ProgramGrant::resolve(bad, Some("/bin")),
                    Err(ProgramError::Malformed(_))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            ProgramGrant::resolve("no-such-program-longhand", Some("/bin:/usr/bin")),
            Err(ProgramError::NotOnPath { .. })
        ));
        // Relative PATH entries are not searched: they would depend on
        // where the harness was started.
        assert!(ProgramGrant::resolve("sh", Some("bin:.")).is_err());
        assert!(ProgramGrant::resolve("/etc/passwd", None).is_err());
    }

    #[test]
    fn a_changed_program_is_refused_and_an_unchanged_rewrite_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tool");
        std::fs::write(&file, "#!/bin/sh\necho one\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let grant = ProgramGrant::resolve(file.to_str().unwrap(), None).unwrap();
        // Touched, same bytes: the hash decides, and it is the same.
        std::fs::write(&file, "#!/bin/sh\necho one\n").unwrap();
        grant.verify().expect("same bytes");
        std::fs::write(&file, "#!/bin/sh\necho two\n").unwrap();
        match grant.verify() {
            Err(ProgramError::Changed { was, now, .. }) => assert_ne!(was, now),
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(&file).unwrap();
        assert!(matches!(grant.verify(), Err(ProgramError::Unusable { .. })));
    }
}
