//! Opening granted directories without following symbolic links.
//!
//! A directory grant names a path, but what the operator meant is the
//! directory that path named when the grant was made. A tool with write
//! access to a parent can rename that directory away and plant a symlink
//! in its place (`proj/sub -> ../../..`); a later grant of `proj/sub` that
//! follows it would hand the next tool the whole host. So:
//!
//! - [`pin`] opens the path with no symlink in *any* component and records
//!   the directory's identity (device and inode);
//! - [`open`] does the same on every call and refuses when a component has
//!   become a symlink or the identity changed, saying which.
//!
//! Linux uses one `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! call; where that is unavailable (older kernels, seccomp filters, other
//! Unix systems) the path is walked component by component with
//! `openat(O_NOFOLLOW | O_DIRECTORY)` from `/`, which is equally strict and
//! equally free of races: each step is relative to the handle of the step
//! before. Non-Unix systems fall back to `symlink_metadata` checks of each
//! component before opening (racy; documented in docs/security.md).
//!
//! [`DirSpec::resolve`] lives here rather than beside [`DirSpec`] in
//! `grants.rs`: resolving is pinning, and `grants.rs` (what a grant *is*)
//! must not import how a directory is opened, or the two files import each
//! other.
//!
//! This module opens directories only; what a guest may do inside one is
//! [`super::fs`]'s business.
//!
//! It also keeps the host's own directories out of every grant
//! ([`protect`]): a grant that contains the data directory, or contains or
//! lies inside the install store, the trust store, the compile cache or
//! the host key, is refused when it is resolved and again when a call
//! opens it. A guest with write access
//! there could replace compiled code, install records or trusted keys.
//! The operator may allow the first three explicitly; the host key never
//! (whoever reads it can seal anything).

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use super::grants::{Access, DirGrant, DirIdentity, DirSpec, GrantError};

impl DirSpec {
    /// Resolve the spec into a grant: make the host path absolute (relative
    /// paths against `base`), open it without following a symbolic link in
    /// any component, and pin the directory's identity. See
    /// [`DirGrant`] for what pinning guarantees.
    pub fn resolve(&self, base: &Path) -> Result<DirGrant, GrantError> {
        let bad = |reason: String| GrantError::Dir {
            spec: self.host_path.display().to_string(),
            reason,
        };
        if !self.guest_path.starts_with('/') {
            return Err(GrantError::Dir {
                spec: self.guest_path.clone(),
                reason: "the guest path must be absolute, e.g. /workspace".to_owned(),
            });
        }
        if self.symlinks && self.access == Access::ReadOnly {
            return Err(bad(
                "`symlinks = true` needs a read-write grant (mode = rw)".to_owned(),
            ));
        }
        let joined = if self.host_path.is_absolute() {
            self.host_path.clone()
        } else {
            let base = if base.is_absolute() {
                base.to_owned()
            } else {
                std::env::current_dir()
                    .map_err(|e| bad(format!("cannot read the current directory: {e}")))?
                    .join(base)
            };
            base.join(&self.host_path)
        };
        let (host_path, identity) = pin(&joined).map_err(bad)?;
        check_protected(&host_path).map_err(bad)?;
        Ok(DirGrant::pinned(self, host_path, identity))
    }
}

/// A directory (or file) of the host's that no grant may reach.
#[derive(Debug, Clone)]
pub struct ProtectedPath {
    /// What it is, for the error: "the data directory (LONGHAND_HOME)".
    pub what: String,
    /// Where it is; need not exist yet.
    pub path: PathBuf,
    /// Whether the operator's override may allow a grant over it. `false`
    /// for the host key.
    pub overridable: bool,
    /// Whether a grant *inside* it is refused too, not only one that
    /// contains it: `true` for the stores (a grant of `cache/components`
    /// is the cache), `false` for the data directory as a whole (a
    /// workspace the operator keeps in it reaches none of the stores,
    /// which are listed on their own).
    pub inside_too: bool,
}

/// The host's paths, as [`protect`] was given them, made real.
struct Protected {
    paths: Vec<(ProtectedPath, PathBuf)>,
    allow_override: bool,
    how_to_allow: String,
}

static PROTECTED: OnceLock<Protected> = OnceLock::new();

/// Keep `paths` out of every directory grant this process resolves or
/// opens. `allow_override` is the operator's explicit decision to grant
/// the overridable ones anyway; `how_to_allow` is what the refusal tells
/// them to do for that (the CLI: `LONGHAND_ALLOW_HOME_GRANTS=1`). Set once,
/// at start, before any grant is resolved; a second call is ignored (the
/// first one is the process's). A library host that never calls it
/// protects nothing: it has no home of its own.
pub fn protect(paths: Vec<ProtectedPath>, allow_override: bool, how_to_allow: &str) {
    let paths = paths
        .into_iter()
        .filter_map(|p| {
            let real = real_path(&p.path)?;
            Some((p, real))
        })
        .collect();
    let _ = PROTECTED.set(Protected {
        paths,
        allow_override,
        how_to_allow: how_to_allow.to_owned(),
    });
}

/// `path` with symlinks resolved as far as it exists, the rest appended
/// lexically; `None` when it cannot be made absolute.
fn real_path(path: &Path) -> Option<PathBuf> {
    let normal = normalize(path).ok()?;
    let mut existing = normal.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            out.extend(rest.iter().rev());
            return Some(out);
        }
        let name = existing.file_name()?.to_owned();
        rest.push(name);
        if !existing.pop() {
            return None;
        }
    }
}

/// Refuse `host_path` (absolute, normal, free of symlinks: what [`pin`]
/// returns) when it contains, or lies inside, one of the host's protected
/// paths. Also used for the read-only paths of command checks.
pub fn check_protected(host_path: &Path) -> Result<(), String> {
    let Some(protected) = PROTECTED.get() else {
        return Ok(());
    };
    // The grant's own path is free of symlinks; it is made real anyway so
    // that a path given through one (a command check's read-only path)
    // is judged by where it leads.
    let granted = real_path(host_path).unwrap_or_else(|| host_path.to_owned());
    for (p, real) in &protected.paths {
        let overlaps = real.starts_with(&granted) || (p.inside_too && granted.starts_with(real));
        if !overlaps {
            continue;
        }
        if p.overridable && protected.allow_override {
            tracing::warn!(
                grant = %granted.display(),
                protected = %real.display(),
                "a directory grant reaches {} (allowed by the operator)",
                p.what
            );
            continue;
        }
        let relation = if real.starts_with(&granted) {
            "contains"
        } else {
            "is inside"
        };
        let what_to_do = if p.overridable {
            format!(
                "grant a directory that does not hold it, or, if a tool really must reach it, {}",
                protected.how_to_allow
            )
        } else {
            "grant a directory that does not hold it; this one is never granted (whoever reads \
             it can forge what the host trusts): move it with LONGHAND_KEY_DIR if you must grant \
             this directory"
                .to_owned()
        };
        return Err(format!(
            "it {relation} {} ({}): a tool with access there could replace what the host \
             trusts and runs; {what_to_do}",
            p.what,
            real.display()
        ));
    }
    Ok(())
}

/// Make `path` absolute and lexically normal, open it without following
/// symlinks, and return the normal path with the directory's identity.
///
/// `..` is resolved lexically, which is sound only because no component
/// may be a symlink: a symlink anywhere fails the open that follows.
pub(crate) fn pin(path: &Path) -> Result<(PathBuf, DirIdentity), String> {
    let normal = normalize(path)?;
    let dir = open_nofollow(&normal).map_err(|e| describe_failure(&normal, &e))?;
    let identity = identity_of(&dir).map_err(|e| format!("cannot stat it: {e}"))?;
    Ok((normal, identity))
}

/// Open a granted directory for a call, checking it is still the one that
/// was pinned. The error names the grant and says what changed.
pub(crate) fn open(grant: &DirGrant) -> Result<std::fs::File, String> {
    let path = grant.host_path();
    let named = || {
        format!(
            "directory grant {} (host path {})",
            grant.guest_path(),
            path.display()
        )
    };
    // A grant frozen into a session before the home was protected (or
    // resolved in another process) is judged again here.
    check_protected(path).map_err(|why| format!("{}: {why}", named()))?;
    let dir =
        open_nofollow(path).map_err(|e| format!("{}: {}", named(), describe_failure(path, &e)))?;
    let now = identity_of(&dir).map_err(|e| format!("{}: cannot stat it: {e}", named()))?;
    if now != grant.identity() {
        return Err(format!(
            "{}: the directory was replaced since the grant was made ({} then, {} now); \
             a tool with write access to a parent directory may have moved it. Nothing was \
             run; grant the directory again if the change is intended",
            named(),
            grant.identity(),
            now
        ));
    }
    Ok(dir)
}

fn normalize(path: &Path) -> Result<PathBuf, String> {
    let absolute = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?
            .join(path)
    };
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Ok(out)
}

/// Say why opening failed; for a symlink, which component it is and where
/// it points, so the operator can decide whether that is what they meant.
fn describe_failure(path: &Path, err: &std::io::Error) -> String {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component.as_os_str());
        if let Ok(meta) = std::fs::symlink_metadata(&prefix)
            && meta.file_type().is_symlink()
        {
            let target = std::fs::read_link(&prefix)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".to_owned());
            return format!(
                "`{}` is a symbolic link (to `{target}`); grants never follow symbolic links, \
                 because a tool with write access may have planted one. Grant the real \
                 directory by a path without links if that is what you mean",
                prefix.display()
            );
        }
    }
    match err.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".to_owned(),
        std::io::ErrorKind::NotADirectory => "it is not a directory".to_owned(),
        _ => format!("cannot open it: {err}"),
    }
}

#[cfg(unix)]
fn identity_of(dir: &std::fs::File) -> std::io::Result<DirIdentity> {
    use std::os::unix::fs::MetadataExt;
    let meta = dir.metadata()?;
    if !meta.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        ));
    }
    Ok(DirIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

#[cfg(not(unix))]
fn identity_of(dir: &std::fs::File) -> std::io::Result<DirIdentity> {
    // No portable inode: pin nothing more than "a directory". The path
    // checks in `open_nofollow` are all this platform gets.
    let meta = dir.metadata()?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    Ok(DirIdentity { dev: 0, ino: 0 })
}

#[cfg(unix)]
fn open_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        match rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Ok(std::fs::File::from(fd)),
            // Kernels before 5.6, or a seccomp filter that refuses the
            // call: walk the path instead.
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut current = rustix::fs::open("/", flags, Mode::empty())?;
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                current = rustix::fs::openat(&current, name, flags, Mode::empty())?;
            }
            other => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("unexpected path component {other:?}"),
                ));
            }
        }
    }
    Ok(std::fs::File::from(current))
}

#[cfg(not(unix))]
fn open_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component.as_os_str());
        if std::fs::symlink_metadata(&prefix)?.file_type().is_symlink() {
            return Err(std::io::Error::other("symbolic link"));
        }
    }
    std::fs::File::open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn pins_normal_paths_and_refuses_links_anywhere() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir_all(real.join("sub")).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();

        let (path, _) = pin(&real.join("sub/../sub/.")).unwrap();
        assert_eq!(path, real.join("sub"));
        let err = pin(&tmp.path().join("link/sub")).unwrap_err();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert!(err.contains(&real.display().to_string()), "{err}");
        let err = pin(&tmp.path().join("missing")).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn a_replaced_or_relinked_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let sub = tmp.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let spec = DirSpec {
            host_path: sub.clone(),
            guest_path: "/w".to_owned(),
            access: Access::ReadWrite,
            symlinks: false,
        };
        let grant = spec.resolve(tmp.path()).unwrap();
        assert!(open(&grant).is_ok());

        // Renamed away and replaced by a symlink to the root.
        std::fs::rename(&sub, tmp.path().join("moved")).unwrap();
        std::os::unix::fs::symlink("/", &sub).unwrap();
        let err = open(&grant).unwrap_err();
        assert!(
            err.contains("is a symbolic link") && err.contains("/w"),
            "{err}"
        );

        // Replaced by another directory of the same name.
        std::fs::remove_file(&sub).unwrap();
        std::fs::create_dir(&sub).unwrap();
        let err = open(&grant).unwrap_err();
        assert!(err.contains("was replaced"), "{err}");

        // Moved back: it is the pinned directory again.
        std::fs::remove_dir(&sub).unwrap();
        std::fs::rename(tmp.path().join("moved"), &sub).unwrap();
        assert!(open(&grant).is_ok());
    }
}
