//! `wasi:filesystem` for guests: wasmtime-wasi's implementation behind a
//! guard that adds what a hostile tool needs to be held to.
//!
//! wasmtime-wasi already confines every path beneath an open directory
//! handle (cap-std) and enforces read-only versus read-write. On top of
//! that, every call here:
//!
//! - gets its preopens from [`super::dirs::open`] — pinned directories,
//!   opened without following symlinks (see that module);
//! - opens files itself, non-blocking, and refuses anything that is not a
//!   regular file or a directory: a FIFO would block a host thread forever,
//!   a device or socket is not what a grant of "files" means;
//! - refuses to create symbolic links unless the grant says `symlinks`, and
//!   refuses to move or hard-link a symbolic link into a grant that does
//!   not say it (nor a directory out of a grant that does, since it may
//!   hold links): a link lands only where links are granted, however it
//!   gets there;
//! - counts every descriptor the guest makes the host hold (files,
//!   directories, directory listings) against the call's descriptor budget,
//!   and lists directories lazily, a bounded batch at a time, charged to the
//!   call's host memory budget ([`super::budget`]) — wasmtime-wasi would
//!   read a whole listing into host memory at once;
//! - counts bytes written (data however written, growth by truncation, one
//!   block per created entry) against the call's write limit and answers
//!   "no space left" past it.
//!
//! Everything else is delegated unchanged to wasmtime-wasi. Denials and the
//! limit go to the call's journal, so the receipt shows them. This module
//! must not decide which directories are granted (that is the grant), and
//! it keeps no state beyond the call.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi::filesystem::{
    Descriptor, Dir, File, FsPerms, OpenMode, WasiFilesystemCtx, WasiFilesystemCtxView,
};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{FsError, FsResult};
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream, OutputStream, StreamError};

use super::budget::{Charge, Exceeded, HostBudget};
use super::files_tape::{self, FilesTape};
use super::grants::{Access, DirGrant};
use super::receipt::{Journal, Ungranted};

/// What one created file, directory or link costs against the write limit:
/// one filesystem block, so a flood of empty files is bounded like data.
pub(crate) const ENTRY_COST: u64 = 4096;

/// The write budget of one call, shared with its file streams.
pub(crate) struct WriteQuota {
    limit: u64,
    /// The journal's counter, so the receipt reads it without this type.
    written: Arc<AtomicU64>,
    hit: AtomicBool,
    journal: Arc<Mutex<Journal>>,
}

impl WriteQuota {
    pub(crate) fn new(limit: u64, journal: Arc<Mutex<Journal>>) -> Self {
        let written = journal
            .lock()
            .map(|j| j.written.clone())
            .unwrap_or_default();
        Self {
            limit,
            written,
            hit: AtomicBool::new(false),
            journal,
        }
    }

    fn remaining(&self) -> u64 {
        self.limit
            .saturating_sub(self.written.load(Ordering::Relaxed))
    }

    /// Charge `bytes`, or refuse (and record the limit) if they do not fit.
    fn charge(&self, bytes: u64) -> Result<(), ErrorCode> {
        let fits = self
            .written
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                w.checked_add(bytes).filter(|next| *next <= self.limit)
            })
            .is_ok();
        if fits {
            return Ok(());
        }
        if !self.hit.swap(true, Ordering::Relaxed)
            && let Ok(mut journal) = self.journal.lock()
        {
            journal.limit_hit(format!(
                "write limit of {} bytes per call reached (max_write)",
                self.limit
            ));
        }
        Err(ErrorCode::InsufficientSpace)
    }
}

/// One granted directory as the guest sees it.
struct Preopen {
    dir: Dir,
    guest_path: String,
    symlinks: bool,
    /// For a directory the component asks for and the operator did not
    /// grant: what the guest is told when it reaches for it (see
    /// [`FsState::refuse_requested`]). Every use is refused.
    ungranted: Option<Arc<Ungranted>>,
}

/// An empty directory nothing can be created in (it was removed once
/// opened), behind each ungranted preopen: a `stat` of the preopen itself
/// shows nothing of the host. Opened once per process; each call gets a
/// duplicate of the handle.
fn vanished_dir() -> Result<std::fs::File, String> {
    static DIR: std::sync::OnceLock<Result<std::fs::File, String>> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let made = tempfile::TempDir::new().map_err(|e| e.to_string())?;
        let file = std::fs::File::open(made.path()).map_err(|e| e.to_string())?;
        made.close().map_err(|e| e.to_string())?;
        Ok(file)
    });
    match dir {
        Ok(file) => file.try_clone().map_err(|e| e.to_string()),
        Err(e) => Err(format!(
            "cannot make the empty directory for ungranted requests: {e}"
        )),
    }
}

/// The filesystem part of one call's state.
pub(crate) struct FsState {
    /// Empty wasmtime-wasi context: only its "may block the current
    /// thread" setting (no) is read by the delegated operations.
    ctx: WasiFilesystemCtx,
    preopens: Vec<Preopen>,
    /// Which grant each open descriptor came from, by resource index, so a
    /// per-grant rule (symlinks) applies to descriptors opened beneath it.
    origin: HashMap<u32, usize>,
    /// When recording for a fixture: the file tape, and the path beneath
    /// its grant of each open directory descriptor, by resource index.
    files: Option<FilesTape>,
    paths: HashMap<u32, String>,
    quota: Arc<WriteQuota>,
    budget: Arc<HostBudget>,
    journal: Arc<Mutex<Journal>>,
}

impl FsState {
    pub(crate) fn new(
        quota: Arc<WriteQuota>,
        budget: Arc<HostBudget>,
        journal: Arc<Mutex<Journal>>,
    ) -> Self {
        Self {
            ctx: WasiFilesystemCtx::default(),
            preopens: Vec::new(),
            origin: HashMap::new(),
            files: None,
            paths: HashMap::new(),
            quota,
            budget,
            journal,
        }
    }

    /// Open `grant` (checking it is still the pinned directory) and add it
    /// to this call's preopens.
    pub(crate) fn preopen(&mut self, grant: &DirGrant) -> Result<(), String> {
        let file = super::dirs::open(grant)?;
        let (perms, mode) = match grant.access() {
            Access::ReadOnly => (FsPerms::ReadOnly, OpenMode::READ),
            Access::ReadWrite => (FsPerms::ReadWrite, OpenMode::READ | OpenMode::WRITE),
        };
        let dir = Dir::new(file, perms, mode, false);
        if let Some(files) = &self.files {
            files.root(grant.guest_path(), dir.dir.clone());
        }
        self.preopens.push(Preopen {
            dir,
            guest_path: grant.guest_path().to_owned(),
            symlinks: grant.symlinks(),
            ungranted: None,
        });
        Ok(())
    }

    /// After the grants: a refusing preopen at each directory `requests`
    /// names that no grant covers (the grant's guest path is the requested
    /// one or above it). Calls after the grants' preopens, so the file
    /// tape's roots stay the grants, in order.
    /// `requests` are `(guest path, access, why)`, as `describe` gave them.
    pub(crate) fn refuse_requested<'r>(
        &mut self,
        requests: impl IntoIterator<Item = (&'r str, Access, &'r str)>,
    ) -> Result<(), String> {
        for (guest_path, access, why) in requests {
            let wanted = guest_path.trim_end_matches('/');
            let covered = self.preopens.iter().any(|p| {
                let have = p.guest_path.trim_end_matches('/');
                wanted == have || have.is_empty() || wanted.starts_with(&format!("{have}/"))
            });
            if covered || wanted.is_empty() {
                continue;
            }
            let (access, flag) = match access {
                Access::ReadOnly => ("read-only", "ro"),
                Access::ReadWrite => ("read-write", "rw"),
            };
            let why = if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            };
            let ungranted = Ungranted {
                guest_path: guest_path.to_owned(),
                advice: format!(
                    "{path} is not granted to this tool. The component asks for it \
                     ({access}{why}); ask the operator to grant it (in the tool's [[tools]] \
                     entry: dirs = [\"HOST_DIR:{path}:{flag}\"], or --dir \
                     HOST_DIR:{path}:{flag}) rather than looking elsewhere",
                    path = guest_path,
                ),
            };
            self.preopens.push(Preopen {
                dir: Dir::new(vanished_dir()?, FsPerms::ReadOnly, OpenMode::READ, false),
                guest_path: guest_path.to_owned(),
                symlinks: false,
                ungranted: Some(Arc::new(ungranted)),
            });
        }
        Ok(())
    }

    /// Keep what the call finds in its directories, and what it writes
    /// there, on `files` (see [`super::files_tape`]). Before any preopen:
    /// the tape's roots are the preopens, in order.
    pub(crate) fn record(&mut self, files: FilesTape) {
        debug_assert!(self.preopens.is_empty());
        self.files = Some(files);
    }

    fn deny(&self, resource: String, reason: String) {
        if let Ok(mut journal) = self.journal.lock() {
            journal.deny("filesystem", resource, reason);
        }
    }
}

/// [`HasData`] for the guarded filesystem.
pub(crate) struct GuardedFs;

impl HasData for GuardedFs {
    type Data<'a> = GuardedFsView<'a>;
}

/// The guarded filesystem's view of a call's state.
pub(crate) struct GuardedFsView<'a> {
    pub(crate) table: &'a mut ResourceTable,
    pub(crate) fs: &'a mut FsState,
}

impl GuardedFsView<'_> {
    /// wasmtime-wasi's implementation, for what needs no guard.
    fn inner(&mut self) -> WasiFilesystemCtxView<'_> {
        WasiFilesystemCtxView {
            ctx: &mut self.fs.ctx,
            table: self.table,
        }
    }

    fn dir_of(&self, fd: &Resource<Descriptor>) -> FsResult<Dir> {
        match self.table.get(fd)? {
            Descriptor::Dir(d) => Ok(d.clone()),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
    }

    /// When recording: the file tape, the grant `fd` is beneath, and
    /// `path` (relative to `fd`) as a path beneath that grant.
    fn taped(&self, fd: &Resource<Descriptor>, path: &str) -> Option<(&FilesTape, usize, String)> {
        let files = self.fs.files.as_ref()?;
        let root = *self.fs.origin.get(&fd.rep())?;
        let base = self.fs.paths.get(&fd.rep())?;
        Some((files, root, files_tape::join(base, path)?))
    }

    /// When recording: `old_path` is moved or linked to `new_path`, so what
    /// is there now is input and what lands is output.
    fn tape_move(
        &self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
    ) {
        if let Some((files, root, at)) = self.taped(fd, old_path) {
            files.taken(root, at);
        }
        if let Some((files, root, at)) = self.taped(new_fd, new_path) {
            files.written(root, at);
        }
    }

    /// Refuse any use of an ungranted preopen (see
    /// [`FsState::refuse_requested`]), noting it for the call's error.
    fn refuse_ungranted(&self, fd: &Resource<Descriptor>, path: &str) -> FsResult<()> {
        let Some(ungranted) = self.origin_of(fd).and_then(|p| p.ungranted.clone()) else {
            return Ok(());
        };
        let shown = self.shown(fd, path);
        if let Ok(mut journal) = self.fs.journal.lock() {
            journal.deny("filesystem", shown, ungranted.advice.clone());
            journal.ungranted(&ungranted);
        }
        Err(ErrorCode::Access.into())
    }

    fn origin_of(&self, fd: &Resource<Descriptor>) -> Option<&Preopen> {
        self.fs
            .origin
            .get(&fd.rep())
            .and_then(|i| self.fs.preopens.get(*i))
    }

    /// `guest/path` for messages: the grant's guest path and the path the
    /// guest gave, relative to the descriptor it used.
    fn shown(&self, fd: &Resource<Descriptor>, path: &str) -> String {
        match self.origin_of(fd) {
            Some(p) => format!("{}/…/{path}", p.guest_path.trim_end_matches('/')),
            None => path.to_owned(),
        }
    }

    /// Refuse a new write stream once the limit is reached: the guest then
    /// gets "insufficient space" as a filesystem error code, which its libc
    /// reports as ENOSPC (a failing stream reaches most guests as a bare
    /// I/O error).
    fn check_room(&self) -> FsResult<()> {
        if self.fs.quota.remaining() == 0 {
            self.fs.quota.charge(1)?;
        }
        Ok(())
    }

    fn wrap_stream(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let inner: DynOutputStream = self.table.delete(stream)?;
        let counted: DynOutputStream = Box::new(CountedStream {
            inner,
            quota: self.fs.quota.clone(),
        });
        Ok(self.table.push(counted)?)
    }
}

impl GuardedFsView<'_> {
    /// Refuse to move or hard-link `path` (under `fd`) to `new_path` (under
    /// `new_fd`) when that would put a symbolic link where the destination's
    /// grant does not allow one: the entry is a link, or it is a directory
    /// coming from a grant that allows links (it may hold some; scanning it
    /// would race with whoever else writes there).
    async fn check_landing(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        new_fd: &Resource<Descriptor>,
        new_path: &str,
        doing: &str,
    ) -> FsResult<Landing> {
        if self.origin_of(new_fd).is_some_and(|p| p.symlinks) {
            return Ok(Landing::Free);
        }
        let from_links = self.origin_of(fd).is_some_and(|p| p.symlinks);
        let handle = self.dir_of(fd)?.dir.clone();
        let target = path.to_owned();
        let kind = tokio::task::spawn_blocking(move || {
            cap_primitives::fs::stat(
                &handle,
                target.as_ref(),
                cap_primitives::fs::FollowSymlinks::No,
            )
            .map(|m| m.file_type())
        })
        .await
        .map_err(|e| FsError::trap(wasmtime::Error::msg(format!("stat task failed: {e}"))))?;
        // A missing source is the operation's own error to report.
        let Ok(kind) = kind else {
            return Ok(Landing::Recheck);
        };
        let reason = if kind.is_symlink() {
            "symbolic links may only be placed in a grant that allows them (symlinks = true)"
        } else if kind.is_dir() && from_links {
            "a directory from a grant that allows symbolic links may hold some; it may not \
             move into a grant that does not allow them"
        } else {
            return Ok(Landing::Recheck);
        };
        let shown = self.shown(new_fd, new_path);
        self.fs
            .deny(shown, format!("{doing} {}: {reason}", self.shown(fd, path)));
        Err(ErrorCode::NotPermitted.into())
    }

    /// After a move or link into a grant without symbolic links: if what
    /// landed is a link after all (the source was swapped for one between
    /// the check and the operation), remove it and refuse.
    async fn recheck_landing(
        &mut self,
        landing: Landing,
        dest: Dir,
        new_path: String,
        doing: &str,
    ) -> FsResult<()> {
        if landing == Landing::Free {
            return Ok(());
        }
        let handle = dest.dir.clone();
        let target = new_path.clone();
        let removed = tokio::task::spawn_blocking(move || {
            let meta = cap_primitives::fs::stat(
                &handle,
                target.as_ref(),
                cap_primitives::fs::FollowSymlinks::No,
            );
            match meta {
                Ok(m) if m.file_type().is_symlink() => {
                    cap_primitives::fs::remove_file(&handle, target.as_ref()).map(|()| true)
                }
                _ => Ok(false),
            }
        })
        .await
        .map_err(|e| FsError::trap(wasmtime::Error::msg(format!("stat task failed: {e}"))))??;
        if removed {
            self.fs.deny(
                new_path,
                format!(
                    "{doing} put a symbolic link where the grant does not allow them; it was \
                     removed"
                ),
            );
            return Err(ErrorCode::NotPermitted.into());
        }
        Ok(())
    }
}

impl preopens::Host for GuardedFsView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let mut out = Vec::with_capacity(self.fs.preopens.len());
        for (index, preopen) in self.fs.preopens.iter().enumerate() {
            let fd = self.table.push(Descriptor::Dir(preopen.dir.clone()))?;
            self.fs.origin.insert(fd.rep(), index);
            if self.fs.files.is_some() {
                self.fs.paths.insert(fd.rep(), String::new());
            }
            out.push((fd, preopen.guest_path.clone()));
        }
        Ok(out)
    }
}

impl types::Host for GuardedFsView<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.inner(), err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.inner(), err)
    }
}

/// Bytes between the end of `file` and `offset`: a write there leaves a
/// hole, which is charged as if written. Otherwise one byte written every
/// 4 KiB far past the end would take a disk block per byte charged.
fn hole_before(file: &File, offset: u64) -> u64 {
    let len = file.file.metadata().map(|m| m.len()).unwrap_or(0);
    offset.saturating_sub(len)
}

/// What `open_at` found at the path.
enum Opened {
    Dir(std::fs::File),
    File(std::fs::File),
    NotDir,
    /// A FIFO, socket or device, with its kind for the message.
    Special(&'static str),
}

#[cfg(unix)]
fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let ty = meta.file_type();
    if ty.is_fifo() {
        "a FIFO (named pipe)"
    } else if ty.is_socket() {
        "a socket"
    } else if ty.is_char_device() {
        "a character device"
    } else if ty.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
fn special_kind(_meta: &std::fs::Metadata) -> &'static str {
    "not a regular file"
}

/// Open `path` beneath `dir` without blocking, and keep it only if it is a
/// regular file or a directory.
fn open_checked(
    dir: &std::fs::File,
    path: &str,
    options: &cap_primitives::fs::OpenOptions,
    want_dir: bool,
) -> std::io::Result<Opened> {
    let file = match cap_primitives::fs::open(dir, path.as_ref(), options) {
        Ok(file) => file,
        // Opening a FIFO for writing with no reader, non-blocking.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
            return Ok(Opened::Special("a FIFO or device"));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Ok(Opened::Dir(file));
    }
    if want_dir {
        return Ok(Opened::NotDir);
    }
    if !meta.is_file() {
        return Ok(Opened::Special(special_kind(&meta)));
    }
    // Regular files never block; reads and writes may as well behave as
    // the guest expects.
    #[cfg(unix)]
    {
        let flags = rustix::fs::fcntl_getfl(&file)?;
        rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    }
    Ok(Opened::File(file))
}

impl HostDescriptor for GuardedFsView<'_> {
    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        self.refuse_ungranted(&fd, &path)?;
        use cap_primitives::fs::FollowSymlinks;
        let dir = self.dir_of(&fd)?;
        let origin = self.fs.origin.get(&fd.rep()).copied();

        // The `_cap_fs_ext_*` setters are cap-primitives' public hooks for
        // what `std::fs::OpenOptions` lacks (cap-fs-ext wraps exactly these).
        let mut options = cap_primitives::fs::OpenOptions::new();
        options._cap_fs_ext_maybe_dir(true);
        let mut mode = OpenMode::empty();
        let create = oflags.contains(types::OpenFlags::CREATE);
        if create {
            if oflags.contains(types::OpenFlags::EXCLUSIVE) {
                options.create_new(true);
            } else {
                options.create(true);
            }
            options.write(true);
            mode |= OpenMode::WRITE;
        }
        if oflags.contains(types::OpenFlags::TRUNCATE) {
            options.truncate(true).write(true);
            mode |= OpenMode::WRITE;
        }
        if flags.contains(types::DescriptorFlags::READ) {
            options.read(true);
            mode |= OpenMode::READ;
        }
        if flags.contains(types::DescriptorFlags::WRITE) {
            options.write(true);
            mode |= OpenMode::WRITE;
        } else {
            // As wasmtime-wasi does: open for reading so the OS accepts the
            // open; the descriptor's perms refuse writes later.
            options.read(true);
            mode |= OpenMode::READ;
        }
        options._cap_fs_ext_follow(if path_flags.contains(types::PathFlags::SYMLINK_FOLLOW) {
            FollowSymlinks::Yes
        } else {
            FollowSymlinks::No
        });
        if flags.intersects(
            types::DescriptorFlags::FILE_INTEGRITY_SYNC
                | types::DescriptorFlags::DATA_INTEGRITY_SYNC
                | types::DescriptorFlags::REQUESTED_WRITE_SYNC,
        ) {
            return Err(ErrorCode::Unsupported.into());
        }
        let want_dir = oflags.contains(types::OpenFlags::DIRECTORY);
        if want_dir
            && oflags.intersects(
                types::OpenFlags::CREATE | types::OpenFlags::EXCLUSIVE | types::OpenFlags::TRUNCATE,
            )
        {
            return Err(ErrorCode::Invalid.into());
        }
        if dir.perms.write_not_permitted() && (create || mode.contains(OpenMode::WRITE)) {
            return Err(ErrorCode::NotPermitted.into());
        }
        self.fs
            .budget
            .admit(1, "opening a file or directory")
            .map_err(over_budget)?;
        if create {
            self.fs.quota.charge(ENTRY_COST)?;
        }
        // Non-blocking, so opening a FIFO returns at once instead of waiting
        // for a writer on a host thread that nothing can stop.
        options._cap_fs_ext_nonblock(true);

        let handle = dir.dir.clone();
        let target = path.clone();
        let opened =
            tokio::task::spawn_blocking(move || open_checked(&handle, &target, &options, want_dir))
                .await
                .map_err(|e| {
                    FsError::trap(wasmtime::Error::msg(format!("open task failed: {e}")))
                })??;

        let descriptor = match opened {
            Opened::Dir(file) => Descriptor::Dir(Dir::new(file, dir.perms, mode, false)),
            Opened::File(file) => Descriptor::File(File::new(file, dir.perms, mode, false)),
            Opened::NotDir => return Err(ErrorCode::NotDirectory.into()),
            Opened::Special(kind) => {
                let shown = self.shown(&fd, &path);
                self.fs.deny(
                    shown,
                    format!("{kind}: only regular files and directories may be opened"),
                );
                return Err(ErrorCode::Access.into());
            }
        };
        if let Some((files, root, at)) = self.taped(&fd, &path) {
            match &descriptor {
                Descriptor::Dir(_) => files.dir(root, at),
                Descriptor::File(_) if create || mode.contains(OpenMode::WRITE) => {
                    files.written(root, at)
                }
                Descriptor::File(f) => files.read(root, at, &f.file),
            }
        }
        let new_path = match &descriptor {
            Descriptor::Dir(_) => self.taped(&fd, &path).map(|(_, _, at)| at),
            Descriptor::File(_) => None,
        };
        // Counted for as long as anything (the handle, a stream, a clone)
        // keeps the descriptor open.
        match &descriptor {
            Descriptor::File(f) => self.fs.budget.track(&f.file, 1),
            Descriptor::Dir(d) => self.fs.budget.track(&d.dir, 1),
        }
        let new = self.table.push(descriptor)?;
        if let Some(origin) = origin {
            self.fs.origin.insert(new.rep(), origin);
        }
        if let Some(at) = new_path {
            self.fs.paths.insert(new.rep(), at);
        }
        Ok(new)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.fs.origin.remove(&fd.rep());
        self.fs.paths.remove(&fd.rep());
        HostDescriptor::drop(&mut self.inner(), fd)
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.refuse_ungranted(&fd, &dest_path)?;
        let allowed = self.origin_of(&fd).is_some_and(|p| p.symlinks);
        if !allowed {
            let shown = self.shown(&fd, &dest_path);
            self.fs.deny(
                shown,
                "creating symbolic links is not granted (a read-write grant may allow it with \
                 symlinks = true)"
                    .to_owned(),
            );
            return Err(ErrorCode::NotPermitted.into());
        }
        self.dir_of(&fd)?;
        self.fs.quota.charge(ENTRY_COST)?;
        self.inner().symlink_at(fd, src_path, dest_path).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.refuse_ungranted(&fd, &old_path)?;
        self.refuse_ungranted(&new_descriptor, &new_path)?;
        let landing = self
            .check_landing(&fd, &old_path, &new_descriptor, &new_path, "hard-linking")
            .await?;
        self.tape_move(&fd, &old_path, &new_descriptor, &new_path);
        self.fs.quota.charge(ENTRY_COST)?;
        let dest = self.dir_of(&new_descriptor)?;
        self.inner()
            .link_at(
                fd,
                old_path_flags,
                old_path,
                new_descriptor,
                new_path.clone(),
            )
            .await?;
        self.recheck_landing(landing, dest, new_path, "hard-linking")
            .await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.refuse_ungranted(&fd, &path)?;
        self.fs.quota.charge(ENTRY_COST)?;
        if let Some((files, root, at)) = self.taped(&fd, &path) {
            files.written(root, at);
        }
        self.inner().create_directory_at(fd, path).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        if let Descriptor::File(f) = self.table.get(&fd)?
            && !f.perms.write_not_permitted()
        {
            let gap = hole_before(f, offset);
            self.fs
                .quota
                .charge((buf.len() as u64).saturating_add(gap))?;
        }
        self.inner().write(fd, buf, offset).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        if let Descriptor::File(f) = self.table.get(&fd)?
            && !f.perms.write_not_permitted()
        {
            let current = f.file.metadata().map(|m| m.len()).unwrap_or(0);
            self.fs.quota.charge(size.saturating_sub(current))?;
        }
        self.inner().set_size(fd, size).await
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.check_room()?;
        if let Descriptor::File(f) = self.table.get(&fd)?
            && !f.perms.write_not_permitted()
        {
            self.fs.quota.charge(hole_before(f, offset))?;
        }
        let stream = self.inner().write_via_stream(fd, offset)?;
        self.wrap_stream(stream)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.check_room()?;
        let stream = self.inner().append_via_stream(fd)?;
        self.wrap_stream(stream)
    }

    // Unguarded: reads, metadata and removals.

    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.inner().advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner().sync_data(fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        self.inner().get_flags(fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        self.inner().get_type(fd).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner().set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.inner().read(fd, len, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        self.refuse_ungranted(&fd, "")?;
        let dir = self.dir_of(&fd)?;
        if let Some((files, root, at)) = self.taped(&fd, "") {
            files.listed(root, at);
        }
        let budget = &self.fs.budget;
        budget
            .admit(LISTING_FDS, "listing a directory")
            .map_err(over_budget)?;
        let charge = budget
            .charge(LISTING_BYTES, "a directory listing")
            .map_err(over_budget)?;
        let handle = dir.dir.clone();
        let reader =
            tokio::task::spawn_blocking(move || cap_primitives::fs::read_base_dir(&handle))
                .await
                .map_err(|e| {
                    FsError::trap(wasmtime::Error::msg(format!("listing task failed: {e}")))
                })??;
        let held = Arc::new(());
        budget.track(&held, LISTING_FDS);
        let listing = self.table.push(Listing {
            reader: Some(reader),
            batch: VecDeque::new(),
            _held: held,
            _charge: charge,
        })?;
        // The bindings name wasmtime-wasi's listing type for this resource;
        // only this guard ever reads the entry (see `Listing`).
        Ok(Resource::new_own(listing.rep()))
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner().sync(fd).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        self.inner().stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.refuse_ungranted(&fd, &path)?;
        if let Some((files, root, at)) = self.taped(&fd, &path) {
            files.looked_up(root, at);
        }
        self.inner().stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.refuse_ungranted(&fd, &path)?;
        self.inner()
            .set_times_at(fd, path_flags, path, atim, mtim)
            .await
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        self.refuse_ungranted(&fd, &path)?;
        self.inner().readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.refuse_ungranted(&fd, &path)?;
        if let Some((files, root, at)) = self.taped(&fd, &path) {
            files.taken(root, at);
        }
        self.inner().remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.refuse_ungranted(&fd, &old_path)?;
        self.refuse_ungranted(&new_fd, &new_path)?;
        let landing = self
            .check_landing(&fd, &old_path, &new_fd, &new_path, "moving")
            .await?;
        self.tape_move(&fd, &old_path, &new_fd, &new_path);
        let dest = self.dir_of(&new_fd)?;
        self.inner()
            .rename_at(fd, old_path, new_fd, new_path.clone())
            .await?;
        self.recheck_landing(landing, dest, new_path, "moving")
            .await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.refuse_ungranted(&fd, &path)?;
        if let Some((files, root, at)) = self.taped(&fd, &path) {
            files.taken(root, at);
        }
        self.inner().unlink_file_at(fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.inner().read_via_stream(fd, offset)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner().is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner().metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.refuse_ungranted(&fd, &path)?;
        self.inner().metadata_hash_at(fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for GuardedFsView<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        let listing = self
            .table
            .get_mut(&Resource::<Listing>::new_borrow(stream.rep()))?;
        if let Some(entry) = listing.batch.pop_front() {
            return entry.map(Some);
        }
        let Some(mut reader) = listing.reader.take() else {
            return Ok(None);
        };
        let (reader, batch) = tokio::task::spawn_blocking(move || {
            let batch = read_batch(&mut reader);
            // An empty batch is the end: the reader (and its descriptors)
            // can go at once.
            ((!batch.is_empty()).then_some(reader), batch)
        })
        .await
        .map_err(|e| FsError::trap(wasmtime::Error::msg(format!("listing task failed: {e}"))))?;
        let listing = self
            .table
            .get_mut(&Resource::<Listing>::new_borrow(stream.rep()))?;
        listing.reader = reader;
        listing.batch = batch;
        match listing.batch.pop_front() {
            Some(entry) => entry.map(Some),
            None => Ok(None),
        }
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.table
            .delete(Resource::<Listing>::new_own(stream.rep()))?;
        Ok(())
    }
}

/// Descriptors a directory listing holds: cap-primitives opens the
/// directory again (its own read position) and rustix's reader once more.
const LISTING_FDS: usize = 2;

/// Entries read from the OS at once, on a blocking thread.
const LISTING_BATCH: usize = 128;

/// What one open listing may hold in host memory, charged while it is
/// open: the OS reader's buffer (rustix grows it to about 24 KiB) and a
/// batch of entries with names of up to 255 bytes.
const LISTING_BYTES: u64 = 24 * 1024 + (LISTING_BATCH as u64) * (255 + 64);

/// A directory listing, read lazily.
///
/// wasmtime-wasi's own listing reads the whole directory into host memory
/// when the guest opens it, so a guest with a tiny memory limit could hold
/// gigabytes by opening listings of a large granted directory. This one
/// holds at most [`LISTING_BATCH`] entries, is charged [`LISTING_BYTES`]
/// and [`LISTING_FDS`] descriptors while open.
///
/// The WIT bindings map `directory-entry-stream` to wasmtime-wasi's
/// `ReaddirIterator`, which has no public constructor; the resource table
/// is typed per entry, so this guard stores a `Listing` under that
/// resource's index and reads it back as a `Listing`. Only this guard's
/// `read-directory-entry` and `drop` ever see the index, and a type
/// mismatch would be a table error, not undefined behaviour.
pub(crate) struct Listing {
    /// `None` once the directory is exhausted (or while a batch is read).
    reader: Option<cap_primitives::fs::ReadDir>,
    batch: VecDeque<FsResult<types::DirectoryEntry>>,
    _held: Arc<()>,
    _charge: Charge,
}

/// The next entries of `reader`, at most [`LISTING_BATCH`]; empty at the end.
fn read_batch(
    reader: &mut cap_primitives::fs::ReadDir,
) -> VecDeque<FsResult<types::DirectoryEntry>> {
    let mut batch = VecDeque::with_capacity(LISTING_BATCH);
    for entry in reader.by_ref().take(LISTING_BATCH) {
        batch.push_back(directory_entry(entry));
    }
    batch
}

fn directory_entry(
    entry: std::io::Result<cap_primitives::fs::DirEntry>,
) -> FsResult<types::DirectoryEntry> {
    let entry = entry?;
    let kind = entry.file_type()?;
    let name = entry
        .file_name()
        .into_string()
        .map_err(|_| ErrorCode::IllegalByteSequence)?;
    Ok(types::DirectoryEntry {
        type_: descriptor_type(kind),
        name,
    })
}

fn descriptor_type(kind: cap_primitives::fs::FileType) -> types::DescriptorType {
    use types::DescriptorType as T;
    if kind.is_dir() {
        return T::Directory;
    }
    if kind.is_file() {
        return T::RegularFile;
    }
    if kind.is_symlink() {
        return T::SymbolicLink;
    }
    #[cfg(unix)]
    {
        use cap_primitives::fs::FileTypeExt;
        if kind.is_block_device() {
            return T::BlockDevice;
        }
        if kind.is_char_device() {
            return T::CharacterDevice;
        }
        if kind.is_fifo() {
            return T::Fifo;
        }
        if kind.is_socket() {
            return T::Socket;
        }
    }
    T::Unknown
}

/// The error a guest gets past its host budget: "out of memory" for bytes,
/// "quota exceeded" for descriptors (WASI has no "too many open files").
fn over_budget(exceeded: Exceeded) -> FsError {
    match exceeded {
        Exceeded::Bytes => ErrorCode::InsufficientMemory.into(),
        Exceeded::Descriptors => ErrorCode::Quota.into(),
    }
}

/// What [`GuardedFsView::check_landing`] decided: whether the destination
/// must be looked at again once the entry has landed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Landing {
    /// The destination grant allows symbolic links: anything may land.
    Free,
    /// It does not: the landed entry is checked again, against a swap
    /// between the check and the move.
    Recheck,
}

/// A file output stream whose bytes count against the call's write limit.
struct CountedStream {
    inner: DynOutputStream,
    quota: Arc<WriteQuota>,
}

fn no_space() -> StreamError {
    // An `std::io::Error` with ENOSPC, so `filesystem-error-code` tells the
    // guest "insufficient space" rather than a bare stream failure.
    #[cfg(unix)]
    let err = std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error());
    #[cfg(not(unix))]
    let err = std::io::Error::other("write limit reached");
    StreamError::LastOperationFailed(wasmtime::Error::from(err))
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CountedStream {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        if self.quota.charge(bytes.len() as u64).is_err() {
            return Err(no_space());
        }
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        let permit = self.inner.check_write()?;
        let remaining = usize::try_from(self.quota.remaining()).unwrap_or(usize::MAX);
        if remaining == 0 && permit > 0 {
            // Record the limit and fail the stream: a zero permit would
            // leave the guest waiting for room that never comes.
            let _ = self.quota.charge(1);
            return Err(no_space());
        }
        Ok(permit.min(remaining))
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi_io::poll::Pollable for CountedStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}
