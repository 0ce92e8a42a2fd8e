//! The filesystem a confined command sees: exactly its grants, at the
//! guest paths the model uses with `fs`, and the read-only system paths it
//! needs to execute — nothing else of the host.
//!
//! Built between fork and exec, in the mount namespace [`super::tree`]'s
//! [`hold_isolated`](super::tree::hold_isolated) gives the command:
//! 1. a small tmpfs is mounted over [`BASE`] and becomes the new root;
//! 2. each entry is bind-mounted into it at its guest path (its source
//!    reached through a descriptor opened in the command's namespace before
//!    the tmpfs over [`BASE`] hides anything), read-only ones remounted
//!    read-only;
//!    a system path that is a symlink (`/bin -> usr/bin`) is made the same
//!    symlink;
//! 3. `/dev` holds `null`, `zero`, `full`, `random`, `urandom` (bound from the
//!    host's), `/proc` is a new proc of the command's pid namespace (where
//!    the kernel allows one) and `/tmp` a fresh directory of the caller's;
//! 4. `pivot_root` into the new root and detach the old one: the host's
//!    tree is no longer reachable by any path.
//!
//! A `.git` directory inside a read-write grant is bound again over itself
//! read-only: a command may change a work tree, not its hooks or history.
//!
//! Mounts are the view; Landlock ([`super::landlock`]), applied after this,
//! is the wall: its rules name the same inodes, so a command that could
//! remount a read-only bind (it cannot: it keeps no capability after exec)
//! still could not write there.
//!
//! This module must not decide which paths a command gets: callers do.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// One directory (or file) of the host, seen by the command at `guest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The host path.
    pub host: PathBuf,
    /// Where the command sees it (absolute).
    pub guest: PathBuf,
    /// Whether the command may write beneath it.
    pub writable: bool,
}

/// Where the new root is assembled before `pivot_root`: any directory of
/// the host, hidden in the command's namespace only.
pub const BASE: &str = "/tmp";

/// Device files a command gets, bound from the host's.
pub const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Why a view cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A guest path that is not absolute, names `..`, or is `/` itself.
    #[error(
        "the guest path {0} cannot be used: give an absolute path below / without `..` (e.g. /workspace)"
    )]
    Guest(PathBuf),
    /// More grants and system paths than [`MAX_BINDS`].
    #[error("a command's view takes at most {MAX_BINDS} grants and system paths")]
    TooMany,
    /// A host path that cannot be opened.
    #[error("cannot open {path} for the command's view: {source}")]
    Host {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

enum Step {
    /// mkdir, an existing directory is fine.
    Dir(CString),
    /// An empty file to bind a file over.
    File(CString),
    /// A symlink `at` → `target`.
    Link { target: CString, at: CString },
    /// Bind the host path `src` (opened as source number `slot` before
    /// the view hides anything) at `dst`; when `readonly` is set, remount
    /// with those flags.
    Bind {
        src: CString,
        slot: usize,
        dst: CString,
        readonly: Option<libc::c_ulong>,
    },
    /// A new proc, where the kernel allows it.
    Proc(CString),
}

/// Everything the child needs, built before the fork: the child may not
/// allocate. Keep it alive until the command is spawned (it holds the
/// sources' descriptors).
pub struct Plan {
    base: CString,
    tmpfs: CString,
    tmpfs_options: CString,
    steps: Vec<Step>,
    dot: CString,
    root: CString,
    cwd: CString,
}

/// The most entries a view may bind: the child keeps their descriptors on
/// its stack.
pub const MAX_BINDS: usize = 128;

fn cstring(path: &Path) -> CString {
    // Paths from the OS and guest paths checked by `guest` hold no NUL.
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

/// `guest` made canonical: absolute, no `.` or `..`, not `/`.
pub fn guest(path: &Path) -> Result<PathBuf, ViewError> {
    let bad = || ViewError::Guest(path.to_owned());
    if !path.is_absolute() || path.as_os_str().as_bytes().contains(&0) {
        return Err(bad());
    }
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => out.push(part),
            Component::ParentDir | Component::Prefix(_) => return Err(bad()),
        }
    }
    if out == Path::new("/") {
        return Err(bad());
    }
    Ok(out)
}

/// The flags a read-only remount of a bind of `fd` must keep: the kernel
/// refuses to clear flags locked on the source mount (`nosuid`, `nodev`,
/// `noexec`, atime flags) from inside a user namespace.
fn kept_flags(fd: &OwnedFd) -> libc::c_ulong {
    // SAFETY: fstatvfs fills the struct for an open descriptor.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `st` outlives the call.
    if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } != 0 {
        return 0;
    }
    // The kernel's `ST_RELATIME` (linux/statfs.h); the libc crate names it
    // for glibc targets only, and the musl builds need it too.
    const ST_RELATIME: libc::c_ulong = 0x1000;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    flags
}

impl Plan {
    /// The view of `mounts` (grants) and `system` (read-only, at their own
    /// paths), with `/dev`, `/proc` and `tmp` (a host directory, seen as
    /// `/tmp`), starting in `cwd` (a guest path).
    pub fn new(
        mounts: &[Mount],
        system: &[PathBuf],
        tmp: &Path,
        cwd: &Path,
    ) -> Result<Self, ViewError> {
        struct Entry {
            host: PathBuf,
            guest: PathBuf,
            writable: bool,
            system: bool,
        }
        let mut entries = Vec::new();
        for path in system {
            entries.push(Entry {
                host: path.clone(),
                guest: guest(path)?,
                writable: false,
                system: true,
            });
        }
        for device in DEVICES {
            if Path::new(device).exists() {
                entries.push(Entry {
                    host: device.into(),
                    guest: device.into(),
                    writable: true,
                    system: false,
                });
            }
        }
        entries.push(Entry {
            host: tmp.to_owned(),
            guest: "/tmp".into(),
            writable: true,
            system: false,
        });
        for m in mounts {
            let at = guest(&m.guest)?;
            entries.push(Entry {
                host: m.host.clone(),
                guest: at.clone(),
                writable: m.writable,
                system: false,
            });
            let git = m.host.join(".git");
            if m.writable && git.is_dir() {
                entries.push(Entry {
                    host: git,
                    guest: at.join(".git"),
                    writable: false,
                    system: false,
                });
            }
        }
        // Parents before children, so a nested grant lands on its parent's
        // mount rather than under it; the order given otherwise.
        entries.sort_by_key(|e| e.guest.components().count());

        let base = PathBuf::from(BASE);
        let inside = |p: &Path| base.join(p.strip_prefix("/").unwrap_or(p));
        let mut steps = Vec::new();
        let mut made = std::collections::BTreeSet::new();
        let mut slots = 0;
        let mut dirs_to = |steps: &mut Vec<Step>, guest: &Path| {
            let mut at = PathBuf::from("/");
            let parts: Vec<_> = guest.components().skip(1).collect();
            for part in &parts[..parts.len().saturating_sub(1)] {
                at.push(part);
                if made.insert(at.clone()) {
                    steps.push(Step::Dir(cstring(&inside(&at))));
                }
            }
        };
        for e in &entries {
            dirs_to(&mut steps, &e.guest);
            let at = cstring(&inside(&e.guest));
            if e.system
                && let Ok(target) = std::fs::read_link(&e.host)
            {
                steps.push(Step::Link {
                    target: cstring(&target),
                    at,
                });
                continue;
            }
            let file = std::fs::File::open(&e.host).map_err(|source| ViewError::Host {
                path: e.host.clone(),
                source,
            })?;
            let is_dir = file.metadata().is_ok_and(|m| m.is_dir());
            let fd = OwnedFd::from(file);
            steps.push(if is_dir {
                Step::Dir(at.clone())
            } else {
                Step::File(at.clone())
            });
            if slots == MAX_BINDS {
                return Err(ViewError::TooMany);
            }
            steps.push(Step::Bind {
                src: cstring(&e.host),
                slot: slots,
                dst: at,
                readonly: (!e.writable).then(|| kept_flags(&fd)),
            });
            slots += 1;
        }
        steps.push(Step::Dir(cstring(&inside(Path::new("/proc")))));
        steps.push(Step::Proc(cstring(&inside(Path::new("/proc")))));
        Ok(Plan {
            base: cstring(&base),
            tmpfs: CString::from(c"tmpfs"),
            tmpfs_options: CString::from(c"mode=0755,size=1m"),
            steps,
            dot: CString::from(c"."),
            root: CString::from(c"/"),
            cwd: cstring(&guest(cwd)?),
        })
    }

    /// Build the view in the child, after [`super::tree::hold_isolated`]'s
    /// step and before Landlock's.
    pub fn apply_in_child(self: &Arc<Self>, command: &mut tokio::process::Command) {
        let plan = Arc::clone(self);
        // SAFETY: the closure runs in the child between fork and exec and
        // makes only system calls (mount, mkdir, open, close, symlink,
        // pivot_root, umount2, chdir) on memory built before the fork: no
        // allocation, no lock. The command holds the plan (and so the
        // sources' descriptors) until it is spawned.
        unsafe {
            command.pre_exec(move || build(&plan));
        }
    }
}

/// The errno of the failed step. Nothing else crosses back: the error
/// reaches the parent as its OS code only, and building a message here
/// would allocate.
fn last_error(_step: &'static str) -> std::io::Error {
    std::io::Error::last_os_error()
}

/// `/proc/self/fd/<fd>` and a NUL into `buf`, without allocating.
fn fd_path(fd: libc::c_int, buf: &mut [u8; 32]) {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = fd.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[PREFIX.len() + i] = digits[len - 1 - i];
    }
    buf[PREFIX.len() + len] = 0;
}

/// In the child: the steps of the module docs.
///
/// # Safety
/// Between fork and exec only.
unsafe fn build(p: &Plan) -> std::io::Result<()> {
    // SAFETY: system calls on C strings built before the fork and on this
    // stack's buffers.
    unsafe {
        // Sources are opened here, in the command's mount namespace (a
        // mount of another namespace cannot be bound), and before the
        // tmpfs over BASE hides any of them.
        let mut sources = [-1 as libc::c_int; MAX_BINDS];
        for step in &p.steps {
            if let Step::Bind { src, slot, .. } = step {
                let fd = libc::open(src.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(last_error("open a grant"));
                }
                sources[*slot] = fd;
            }
        }
        if libc::mount(
            p.tmpfs.as_ptr(),
            p.base.as_ptr(),
            p.tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            p.tmpfs_options.as_ptr().cast(),
        ) != 0
        {
            return Err(last_error("mount the view's root"));
        }
        for step in &p.steps {
            match step {
                Step::Dir(at) => {
                    if libc::mkdir(at.as_ptr(), 0o755) != 0
                        && *libc::__errno_location() != libc::EEXIST
                    {
                        return Err(last_error("make a directory of the view"));
                    }
                }
                Step::File(at) => {
                    let fd = libc::open(
                        at.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o644,
                    );
                    if fd < 0 {
                        return Err(last_error("make a file of the view"));
                    }
                    libc::close(fd);
                }
                Step::Link { target, at } => {
                    if libc::symlink(target.as_ptr(), at.as_ptr()) != 0 {
                        return Err(last_error("make a symlink of the view"));
                    }
                }
                Step::Bind {
                    slot,
                    dst,
                    readonly,
                    ..
                } => {
                    let mut path = [0u8; 32];
                    fd_path(sources[*slot], &mut path);
                    if libc::mount(
                        path.as_ptr().cast(),
                        dst.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND | libc::MS_REC,
                        std::ptr::null(),
                    ) != 0
                    {
                        return Err(last_error("bind a grant into the view"));
                    }
                    if let Some(kept) = readonly
                        && libc::mount(
                            std::ptr::null(),
                            dst.as_ptr(),
                            std::ptr::null(),
                            libc::MS_BIND
                                | libc::MS_REMOUNT
                                | libc::MS_RDONLY
                                | libc::MS_NOSUID
                                | libc::MS_NODEV
                                | kept,
                            std::ptr::null(),
                        ) != 0
                    {
                        return Err(last_error("make a read-only grant read-only"));
                    }
                }
                Step::Proc(at) => {
                    // Refused where the host's /proc has parts masked; the
                    // command then has no /proc, not the host's.
                    libc::mount(
                        c"proc".as_ptr(),
                        at.as_ptr(),
                        c"proc".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        std::ptr::null(),
                    );
                }
            }
        }
        if libc::chdir(p.base.as_ptr()) != 0 {
            return Err(last_error("enter the view"));
        }
        if libc::syscall(libc::SYS_pivot_root, p.dot.as_ptr(), p.dot.as_ptr()) != 0 {
            return Err(last_error("pivot into the view"));
        }
        // The old root is stacked under the new one at "/": detach it.
        if libc::umount2(p.dot.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(last_error("detach the host's tree"));
        }
        if libc::chdir(p.root.as_ptr()) != 0 || libc::chdir(p.cwd.as_ptr()) != 0 {
            return Err(last_error("enter the working directory"));
        }
        Ok(())
    }
}
