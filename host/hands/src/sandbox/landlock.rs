//! Landlock through its three system calls: a ruleset built in the parent
//! from open descriptors, applied in the child between fork and exec.
//!
//! Rules name inodes, not path strings: a directory granted here stays
//! granted when the command reaches it through a bind mount at another path
//! ([`super::view`]), and nothing else is reachable, whatever the command
//! mounts or renames. The child only calls `prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`, both async-signal-safe.
//!
//! This module must not decide which paths a command gets: callers pass
//! them.

use std::path::{Path, PathBuf};

/// A path a ruleset could not be built with.
#[derive(Debug, thiserror::Error)]
#[error("cannot open {path} for the command's confinement: {source}")]
pub struct PathError {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

fn open(path: &Path) -> Result<std::fs::File, PathError> {
    std::fs::File::open(path).map_err(|source| PathError {
        path: path.to_owned(),
        source,
    })
}

#[cfg(target_os = "linux")]
pub use imp::{Ruleset, abi};

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    use super::{PathError, open};

    const CREATE_RULESET_VERSION: u32 = 1;
    const RULE_PATH_BENEATH: u32 = 1;
    const ACCESS_FS_EXECUTE: u64 = 1 << 0;
    const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
    const ACCESS_FS_READ_FILE: u64 = 1 << 2;
    const ACCESS_FS_READ_DIR: u64 = 1 << 3;
    const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
    const ACCESS_FS_IOCTL_DEV: u64 = 1 << 15;
    const ACCESS_NET_BIND_TCP: u64 = 1 << 0;
    const ACCESS_NET_CONNECT_TCP: u64 = 1 << 1;

    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
        handled_access_net: u64,
    }

    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }

    /// The ABI the kernel offers; 0 when Landlock is missing or disabled.
    pub fn abi() -> u32 {
        // SAFETY: the documented version query: no attribute pointer, size
        // 0, the VERSION flag; it reads and writes no memory.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<RulesetAttr>(),
                0usize,
                CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(v).unwrap_or(0)
    }

    /// Every filesystem access right the ABI knows.
    fn fs_rights(abi: u32) -> u64 {
        match abi {
            0 => 0,
            1 => (1 << 13) - 1,
            2 => (1 << 14) - 1,
            3 | 4 => (1 << 15) - 1,
            _ => (1 << 16) - 1,
        }
    }

    /// A built ruleset, or none where the kernel has no Landlock.
    pub struct Ruleset(Option<OwnedFd>, Vec<CString>);

    impl Ruleset {
        /// No ruleset: the command runs unconfined.
        pub fn none() -> Self {
            Self(None, Vec::new())
        }

        /// Whether a ruleset was built (the kernel has Landlock).
        pub fn active(&self) -> bool {
            self.0.is_some()
        }

        /// Also let the command read beneath `path` as the child sees it
        /// when the ruleset is applied: a filesystem that exists only in
        /// the command's namespace (its own `/proc`). A path missing there
        /// gets no rule.
        pub fn read_in_child(&mut self, path: &Path) {
            if let Ok(path) = CString::new(path.as_os_str().as_bytes()) {
                self.1.push(path);
            }
        }

        /// Read and execute beneath `read_only`, everything beneath
        /// `writable`, nothing else; TCP connect and bind denied where the
        /// ABI covers them (4 and later). A file (not a directory) gets the
        /// rights that apply to files.
        pub fn build(read_only: &[PathBuf], writable: &[PathBuf]) -> Result<Self, PathError> {
            let abi = abi();
            if abi == 0 {
                return Ok(Self::none());
            }
            let all = fs_rights(abi);
            let attr = RulesetAttr {
                handled_access_fs: all,
                handled_access_net: if abi >= 4 {
                    ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP
                } else {
                    0
                },
            };
            let size = if abi >= 4 {
                std::mem::size_of::<RulesetAttr>()
            } else {
                std::mem::size_of::<u64>()
            };
            // SAFETY: `attr` is a valid ruleset attribute of `size` bytes
            // (the first field alone before ABI 4), alive for the call.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_landlock_create_ruleset,
                    &attr as *const RulesetAttr,
                    size,
                    0u32,
                )
            };
            // `syscall` returns a C long: 64 bits here, 32 on 32-bit ARM,
            // where the conversion cannot fail.
            #[allow(irrefutable_let_patterns)]
            let Ok(fd) = i32::try_from(fd) else {
                return Ok(Self::none());
            };
            if fd < 0 {
                return Ok(Self::none());
            }
            // SAFETY: the call returned a new file descriptor we own.
            let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
            let read = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR;
            let file_rights = ACCESS_FS_EXECUTE
                | ACCESS_FS_READ_FILE
                | ACCESS_FS_WRITE_FILE
                | ACCESS_FS_TRUNCATE
                | ACCESS_FS_IOCTL_DEV;
            for (paths, rights) in [(read_only, read), (writable, all)] {
                for path in paths {
                    let file = open(path)?;
                    let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
                    // Rights that only make sense on directories are
                    // refused (EINVAL) on a file rule.
                    let allowed = if is_dir {
                        rights
                    } else {
                        rights & file_rights & all
                    };
                    let rule = PathBeneathAttr {
                        allowed_access: allowed,
                        parent_fd: file.as_raw_fd(),
                    };
                    // SAFETY: `rule` is a valid path-beneath attribute and
                    // both descriptors are open for the call.
                    let r = unsafe {
                        libc::syscall(
                            libc::SYS_landlock_add_rule,
                            ruleset.as_raw_fd(),
                            RULE_PATH_BENEATH,
                            &rule as *const PathBeneathAttr,
                            0u32,
                        )
                    };
                    if r != 0 {
                        return Err(PathError {
                            path: path.clone(),
                            source: std::io::Error::last_os_error(),
                        });
                    }
                }
            }
            Ok(Self(Some(ruleset), Vec::new()))
        }

        /// Restrict the child to the ruleset between fork and exec. Add it
        /// after every step that mounts (a restricted process may not).
        /// Keep `self` alive until the command is spawned.
        pub fn apply_in_child(&self, command: &mut tokio::process::Command) {
            let Some(fd) = self.0.as_ref().map(AsRawFd::as_raw_fd) else {
                return;
            };
            let late = self.1.clone();
            let read = ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR;
            // SAFETY: the closure runs in the child between fork and exec
            // and makes only async-signal-safe system calls (open, close,
            // the Landlock calls, prctl) on memory built before the fork:
            // no allocation, no locks; the descriptor stays open in the
            // parent until `spawn` returns.
            unsafe {
                command.pre_exec(move || {
                    for path in &late {
                        let dir = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                        if dir < 0 {
                            continue;
                        }
                        let rule = PathBeneathAttr {
                            allowed_access: read,
                            parent_fd: dir,
                        };
                        let r = libc::syscall(
                            libc::SYS_landlock_add_rule,
                            fd,
                            RULE_PATH_BENEATH,
                            &rule as *const PathBeneathAttr,
                            0u32,
                        );
                        libc::close(dir);
                        if r != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub use fallback::{Ruleset, abi};

#[cfg(not(target_os = "linux"))]
mod fallback {
    use std::path::PathBuf;

    use super::PathError;

    pub fn abi() -> u32 {
        0
    }

    pub struct Ruleset;

    impl Ruleset {
        pub fn none() -> Self {
            Self
        }

        pub fn active(&self) -> bool {
            false
        }

        pub fn read_in_child(&mut self, _: &std::path::Path) {}

        pub fn build(_: &[PathBuf], _: &[PathBuf]) -> Result<Self, PathError> {
            Ok(Self)
        }

        pub fn apply_in_child(&self, _: &mut tokio::process::Command) {}
    }
}
